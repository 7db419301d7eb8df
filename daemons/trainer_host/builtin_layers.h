#pragma once
// trainer-host's built-in layers one at a time, for code outside the
// trainer: the Python package's tests compare dgld.nn's layers against them
// (python/src/test_hooks.cpp). The models themselves stay behind the private
// model_impl.h.

#include <cstdint>
#include <map>
#include <string>

#include "common/ops/block_graph.h"
#include "common/status.h"

namespace dgld::trainer {

// Layer `kind` ("sage", "gcn" or "gat"; `heads` for gat) of in_dim -> out_dim
// with every parameter taken from `params` (by the name the layer registers
// it under) applied to h on block g, without autograd. invalid_argument for
// an unknown kind or a missing parameter.
Result<torch::Tensor> builtin_layer_forward(const std::string& kind, int64_t in_dim, int64_t out_dim, int64_t heads,
                                            const std::map<std::string, torch::Tensor>& params,
                                            const ops::BlockGraphPtr& g, const torch::Tensor& h);

}  // namespace dgld::trainer
