// Registers the block type and the kernels with LibTorch's dispatcher, so
// that Python (torch.classes.dgld.Block, torch.ops.dgld.*) and TorchScript
// models can call them; trainer-host runs scripted models that do.
//
//   torch.classes.dgld.Block(indptr, indices, num_src)
//   torch.ops.dgld.copy_u_reduce(block, h, reduce="sum"|"mean", self_loop=False)
//   torch.ops.dgld.gat_aggregate(block, z, attn_l, attn_r, negative_slope=0.2)
#include "common/ops/torch_library.h"

#include <torch/custom_class.h>
#include <torch/library.h>

#include "common/ops/message_passing.h"

namespace dgld::ops {
namespace {

Reduce parse_reduce(const std::string& r) {
  if (r == "sum") return Reduce::sum;
  if (r == "mean") return Reduce::mean;
  TORCH_CHECK(false, "dgld.copy_u_reduce: reduce must be 'sum' or 'mean', got '", r, "'");
}

torch::Tensor copy_u_reduce_op(const BlockGraphPtr& g, const torch::Tensor& h, const std::string& reduce,
                               bool self_loop) {
  return copy_u_reduce(g, h, parse_reduce(reduce), self_loop);
}

torch::Tensor gat_aggregate_op(const BlockGraphPtr& g, const torch::Tensor& z, const torch::Tensor& attn_l,
                               const torch::Tensor& attn_r, double negative_slope) {
  return gat_aggregate(g, z, attn_l, attn_r, negative_slope);
}

}  // namespace

const char* torch_library_namespace() { return "dgld"; }

}  // namespace dgld::ops

TORCH_LIBRARY(dgld, m) {
  using dgld::ops::BlockGraph;
  m.class_<BlockGraph>("Block")
      .def(torch::init<torch::Tensor, torch::Tensor, int64_t>())
      .def("num_src_nodes", &BlockGraph::num_src_nodes)
      .def("num_dst_nodes", &BlockGraph::num_dst_nodes)
      .def("num_edges", &BlockGraph::num_edges)
      .def("indptr", [](const c10::intrusive_ptr<BlockGraph>& self) { return self->indptr(); })
      .def("indices", [](const c10::intrusive_ptr<BlockGraph>& self) { return self->indices(); })
      // (src, dst) of every edge in block-local ids, DGL's block.edges().
      .def("edges",
           [](const c10::intrusive_ptr<BlockGraph>& self) {
             return std::make_tuple(self->indices(), self->edge_dst());
           })
      .def("in_degrees", [](const c10::intrusive_ptr<BlockGraph>& self) { return self->in_degrees(); })
      .def("out_degrees", [](const c10::intrusive_ptr<BlockGraph>& self) { return self->out_degrees(); })
      // Global ids of the src / dst nodes (empty when the block has none).
      .def("src_ids",
           [](const c10::intrusive_ptr<BlockGraph>& self) {
             return self->src_ids.defined() ? self->src_ids : torch::empty({0}, torch::kInt64);
           })
      .def("dst_ids", [](const c10::intrusive_ptr<BlockGraph>& self) {
        return self->dst_ids.defined() ? self->dst_ids : torch::empty({0}, torch::kInt64);
      });
  m.def("copy_u_reduce(__torch__.torch.classes.dgld.Block block, Tensor h, str reduce=\"sum\", "
        "bool self_loop=False) -> Tensor",
        &dgld::ops::copy_u_reduce_op);
  m.def("gat_aggregate(__torch__.torch.classes.dgld.Block block, Tensor z, Tensor attn_l, Tensor attn_r, "
        "float negative_slope=0.2) -> Tensor",
        &dgld::ops::gat_aggregate_op);
}
