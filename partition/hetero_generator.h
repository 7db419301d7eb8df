#pragma once
// hsbm: a typed stochastic block model (--generate hsbm:key=value,...) in which the
// relations carry the class signal and the target type's own features are weak.
//
// Node types, in this order: paper (the target: features, labels, masks), author
// (no features), venue (no features), topic (features of paper's dimension, pure
// noise). Every paper has a class, every author a home class, every venue a class
// (venue v: v mod classes). Relations (edge types), in this order:
//   author:writes:paper        each paper gets ~writes_per_paper distinct authors,
//                              each of its class with probability p_in, else any
//   paper:cites:paper          each paper cites ~cites_per_paper distinct other papers,
//                              each of its class with probability p_in, else any
//   paper:published_in:venue   exactly one venue per paper, of its class with
//                              probability p_in, else any
//   paper:has_topic:topic      ~topics_per_paper distinct topics, uniformly (no signal)
// A paper's number of edges of a relation is drawn around the mean (uniform in
// [mean/2, 3*mean/2), rounded at random). Paper features are
// centroid[class] * centroid_scale + N(0, 1). Original edge ids: the relations'
// edges concatenated in relation order, each relation's edges by paper. Everything
// is a function of the seed only.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "partition/graph_data.h"

namespace dgld {

struct HsbmParams {
  int64_t papers = 20000, authors = 10000, venues = 64, topics = 200;
  int classes = 8;
  int feat_dim = 32;
  double writes_per_paper = 3, cites_per_paper = 5, topics_per_paper = 2;
  double p_in = 0.8;
  double centroid_scale = 0.18;  // MLP on paper features alone ~0.33-0.39 at the defaults
  double train = 0.2, val = 0.05, test = 0.1;
  uint64_t seed = 1;
};

// The node types and relations hsbm generates, in order.
inline constexpr const char* kHsbmNtypes[] = {"paper", "author", "venue", "topic"};

// Parses "hsbm:papers=1000,classes=4,...". Unknown keys and bad values are errors
// naming the key.
Result<HsbmParams> parse_hsbm_spec(const std::string& spec);
// "papers=... authors=... ..." for logs.
std::string describe_hsbm(const HsbmParams& p);

// add_reverse: --add-reverse (hetero_input.h).
std::unique_ptr<GraphSource> make_hsbm_source(const HsbmParams& params, bool add_reverse = false);

}  // namespace dgld
