#include "daemons/trainer_host/builtin_layers.h"

#include <functional>
#include <memory>

#include "daemons/trainer_host/model_impl.h"

namespace dgld::trainer {

Result<torch::Tensor> builtin_layer_forward(const std::string& kind, int64_t in_dim, int64_t out_dim, int64_t heads,
                                            const std::map<std::string, torch::Tensor>& params,
                                            const ops::BlockGraphPtr& g, const torch::Tensor& h) {
  std::shared_ptr<torch::nn::Module> layer;
  std::function<torch::Tensor()> run;
  if (kind == "sage") {
    auto l = SageConv(in_dim, out_dim, Kernels::fused);
    layer = l.ptr();
    run = [l, g, h]() mutable { return l->forward(g, h); };
  } else if (kind == "gcn") {
    auto l = GraphConv(in_dim, out_dim, Kernels::fused);
    layer = l.ptr();
    run = [l, g, h]() mutable { return l->forward(g, h); };
  } else if (kind == "gat") {
    auto l = GatConv(in_dim, out_dim, heads, Kernels::fused);
    layer = l.ptr();
    run = [l, g, h]() mutable { return l->forward(g, h); };
  } else {
    return invalid_argument("unknown layer kind '" + kind + "' (sage, gcn or gat)");
  }
  torch::NoGradGuard no_grad;
  for (auto& p : layer->named_parameters()) {
    auto it = params.find(p.key());
    if (it == params.end()) return invalid_argument("no value for parameter '" + p.key() + "'");
    p.value().copy_(it->second.view_as(p.value()));
  }
  return run();
}

}  // namespace dgld::trainer
