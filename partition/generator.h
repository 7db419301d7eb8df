#pragma once
// Built-in deterministic graph generators (--generate NAME:key=value,...).
//
// sbm: degree-corrected stochastic block model. Node v has block (= label) b(v) and
// a power-law weight theta(v); it draws about avg_degree*theta(v)/2 edges whose other
// end is, with probability p_in, a theta-weighted node of its own block, else a
// theta-weighted node of any block. Edges are made undirected and stored in both
// directions, without self loops or duplicates. Features are
// centroid[b(v)] * centroid_scale + N(0, 1) noise, so an MLP alone is weak while
// neighbour averaging is strong. Everything is a function of the seed (independent
// of thread count); edge ids are positions in the generated in-edge CSC.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "partition/graph_data.h"

namespace dgld {

struct SbmParams {
  int64_t nodes = 10000;
  double avg_degree = 20;      // mean in-degree (= out-degree) of the symmetric graph
  int classes = 10;
  int feat_dim = 16;
  double p_in = 0.8;           // probability that an edge stays inside its block
  double gamma = 2.5;          // power-law exponent of the degree weights
  double centroid_scale = 0.12;
  double train = 0.2, val = 0.05, test = 0.1;
  uint64_t seed = 1;
};

// Parses "sbm:nodes=1000,avg_degree=10,...". Unknown keys are an error.
Result<SbmParams> parse_generator_spec(const std::string& spec);
// "nodes=... classes=..." for logs.
std::string describe_sbm(const SbmParams& p);

std::unique_ptr<GraphSource> make_sbm_source(const SbmParams& params);

// The class centroids, [classes * feat_dim] (unit gaussian entries).
std::vector<float> sbm_centroids(const SbmParams& p);
// Row `v` of the features (feat_dim floats): `centroid` (the row of v's class in
// sbm_centroids) * centroid_scale + unit gaussian noise.
void sbm_feature_row(const SbmParams& p, const float* centroid, int64_t v, float* out);

}  // namespace dgld
