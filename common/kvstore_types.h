#pragma once
// What graph-servers and their clients agree on about the KVStore besides
// the wire format (schemas/kvstore.fbs, cluster.fbs): who a client is, how a
// tensor's rows are partitioned, how a new tensor is initialised.

#include <cstdint>
#include <string>
#include <vector>

#include "common/dtype.h"

namespace dgld {

enum class Role { trainer = 0, sampler = 1 };
enum class Policy { node = 0, edge = 1 };
enum class Init { zeros = 0, uniform = 1, normal = 2 };

// The node tensor every main graph-server publishes (int64 [num_nodes]): each
// node's id in the input graph, before the partitioner relabelled it (DGL's
// orig_nids). ndata("orig_id").
inline constexpr const char* kOrigIdTensor = "_N/orig_id";

struct CreateTensor {
  std::string name;
  DType dtype = DType::float32;
  std::vector<int64_t> shape;  // global
  Policy policy = Policy::node;
  Init init = Init::zeros;
  double init_a = 0, init_b = 1;
  uint64_t seed = 0;
  bool persistent = false;
};

}  // namespace dgld
