// Registers the block type and the kernels with LibTorch's dispatcher, so
// that Python (torch.classes.dgld.Block, torch.ops.dgld.*) and TorchScript
// models can call them; trainer-host runs scripted models that do.
//
//   torch.classes.dgld.Block(indptr, indices, num_src)
//   torch.ops.dgld.copy_u_reduce(block, h, reduce="sum"|"mean", self_loop=False)
//   torch.ops.dgld.copy_u_reduce_with_dst(block, h, reduce="mean") -> (aggregate, h[:num_dst])
//   torch.ops.dgld.gat_aggregate(block, z, attn_l, attn_r, negative_slope=0.2)
//   torch.ops.dgld.gspmm(block, op, reduce, lhs, rhs, lhs_target="u", rhs_target="e")
//   torch.ops.dgld.gsddmm(block, op, lhs, rhs, lhs_target="u", rhs_target="v")
//   torch.ops.dgld.dropout(x, p, training, relu=False, bias=None)
#include "common/ops/torch_library.h"

#include <torch/custom_class.h>
#include <torch/library.h>

#include "common/ops/dropout.h"
#include "common/ops/gspmm.h"
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
  const Reduce r = parse_reduce(reduce);
  return reference_kernels() ? copy_u_reduce_reference(g, h, r, self_loop) : copy_u_reduce(g, h, r, self_loop);
}

std::tuple<torch::Tensor, torch::Tensor> copy_u_reduce_with_dst_op(const BlockGraphPtr& g, const torch::Tensor& h,
                                                                   const std::string& reduce) {
  const Reduce r = parse_reduce(reduce);
  if (reference_kernels()) return {copy_u_reduce_reference(g, h, r, false), h.narrow(0, 0, g->num_dst_nodes())};
  auto [agg, dst] = copy_u_reduce_with_dst(g, h, r);
  return {agg, dst};
}

torch::Tensor gat_aggregate_op(const BlockGraphPtr& g, const torch::Tensor& z, const torch::Tensor& attn_l,
                               const torch::Tensor& attn_r, double negative_slope) {
  return reference_kernels() ? gat_aggregate_reference(g, z, attn_l, attn_r, negative_slope)
                             : gat_aggregate(g, z, attn_l, attn_r, negative_slope);
}

// The value of a parsed name, or c10::Error "<fn>: <what is wrong>".
template <typename T>
T parsed(Result<T> r, const char* fn) {
  TORCH_CHECK(r.is_ok(), fn, ": ", r.status().message());
  return std::move(r).value();
}

torch::Tensor gspmm_op(const BlockGraphPtr& g, const std::string& op, const std::string& reduce,
                       const c10::optional<torch::Tensor>& lhs, const c10::optional<torch::Tensor>& rhs,
                       const std::string& lhs_target, const std::string& rhs_target) {
  return gspmm(g, parsed(parse_binary_op(op), "gspmm"), parsed(parse_spmm_reduce(reduce), "gspmm"),
               lhs.value_or(torch::Tensor()), rhs.value_or(torch::Tensor()),
               parsed(parse_target(lhs_target, "lhs_target"), "gspmm"),
               parsed(parse_target(rhs_target, "rhs_target"), "gspmm"));
}

torch::Tensor gsddmm_op(const BlockGraphPtr& g, const std::string& op, const c10::optional<torch::Tensor>& lhs,
                        const c10::optional<torch::Tensor>& rhs, const std::string& lhs_target,
                        const std::string& rhs_target) {
  return gsddmm(g, parsed(parse_binary_op(op), "gsddmm"), lhs.value_or(torch::Tensor()),
                rhs.value_or(torch::Tensor()), parsed(parse_target(lhs_target, "lhs_target"), "gsddmm"),
                parsed(parse_target(rhs_target, "rhs_target"), "gsddmm"));
}

}  // namespace

const char* torch_library_namespace() { return "dgld"; }

}  // namespace dgld::ops

namespace {

using dgld::ops::BlockGraph;
using BlockPtr = c10::intrusive_ptr<BlockGraph>;

c10::Dict<std::string, torch::Tensor> node_data(const std::map<std::string, torch::Tensor>& data,
                                                const torch::Tensor& ids) {
  c10::Dict<std::string, torch::Tensor> d;
  if (ids.defined()) d.insert("_ID", ids);
  for (const auto& [k, v] : data) d.insert(k, v);
  return d;
}

torch::Tensor ids_or_empty(const torch::Tensor& ids) { return ids.defined() ? ids : torch::empty({0}, torch::kInt64); }

}  // namespace

TORCH_LIBRARY(dgld, m) {
  // DGL's block API as far as a layer or a training script reads it.
  m.class_<BlockGraph>("Block")
      .def(torch::init<torch::Tensor, torch::Tensor, int64_t>())
      .def("num_src_nodes", &BlockGraph::num_src_nodes)
      .def("num_dst_nodes", &BlockGraph::num_dst_nodes)
      .def("number_of_src_nodes", &BlockGraph::num_src_nodes)
      .def("number_of_dst_nodes", &BlockGraph::num_dst_nodes)
      .def("num_edges", &BlockGraph::num_edges)
      .def("number_of_edges", &BlockGraph::num_edges)
      .def("indptr", [](const BlockPtr& self) { return self->indptr(); })
      .def("indices", [](const BlockPtr& self) { return self->indices(); })
      // (src, dst) of every edge in block-local ids, DGL's block.edges().
      .def("edges", [](const BlockPtr& self) { return std::make_tuple(self->indices(), self->edge_dst()); })
      .def("in_degrees", [](const BlockPtr& self) { return self->in_degrees(); })
      .def("out_degrees", [](const BlockPtr& self) { return self->out_degrees(); })
      // Global ids of the src / dst nodes (empty when the block has none).
      .def("src_ids", [](const BlockPtr& self) { return ids_or_empty(self->src_ids); })
      // The type id of every edge, parallel to indices() (CSR order); empty
      // for a block without edge types.
      .def("etypes", [](const BlockPtr& self) { return ids_or_empty(self->etypes()).to(torch::kInt64); })
      .def("num_etypes", &BlockGraph::num_etypes)
      // The block restricted to the edges of type r (BlockGraph::relation).
      .def("relation", [](const BlockPtr& self, int64_t r) { return self->relation(r); })
      .def("dst_ids", [](const BlockPtr& self) { return ids_or_empty(self->dst_ids); })
      // Blocks live on the CPU: block.to(device) is the block itself.
      .def("to", [](const BlockPtr& self, c10::Device device) {
        TORCH_CHECK(device.is_cpu(), "dgld blocks live on the CPU, not ", device);
        return self;
      })
      // Edge ids of the CSR positions (BlockGraph::set_edge_order); the
      // getter returns an empty tensor for the identity.
      .def("set_edge_order",
           [](const BlockPtr& self, torch::Tensor eids) {
             const dgld::Status st = self->set_edge_order(std::move(eids));
             TORCH_CHECK(st.is_ok(), "dgld.Block.set_edge_order: ", st.message());
           })
      .def("edge_order", [](const BlockPtr& self) { return ids_or_empty(self->edge_order()); })
      .def_property("srcdata", [](const BlockPtr& self) { return node_data(self->src_data, self->src_ids); })
      .def_property("dstdata", [](const BlockPtr& self) { return node_data(self->dst_data, self->dst_ids); })
      .def_property("edata", [](const BlockPtr& self) { return node_data({}, self->edge_ids); });
  m.def("copy_u_reduce(__torch__.torch.classes.dgld.Block block, Tensor h, str reduce=\"sum\", "
        "bool self_loop=False) -> Tensor",
        &dgld::ops::copy_u_reduce_op);
  m.def("copy_u_reduce_with_dst(__torch__.torch.classes.dgld.Block block, Tensor h, str reduce=\"mean\") -> "
        "(Tensor, Tensor)",
        &dgld::ops::copy_u_reduce_with_dst_op);
  m.def("gat_aggregate(__torch__.torch.classes.dgld.Block block, Tensor z, Tensor attn_l, Tensor attn_r, "
        "float negative_slope=0.2) -> Tensor",
        &dgld::ops::gat_aggregate_op);
  m.def("gspmm(__torch__.torch.classes.dgld.Block block, str op, str reduce, Tensor? lhs, Tensor? rhs, "
        "str lhs_target=\"u\", str rhs_target=\"e\") -> Tensor",
        &dgld::ops::gspmm_op);
  m.def("gsddmm(__torch__.torch.classes.dgld.Block block, str op, Tensor? lhs, Tensor? rhs, "
        "str lhs_target=\"u\", str rhs_target=\"v\") -> Tensor",
        &dgld::ops::gsddmm_op);
  m.def("dropout(Tensor x, float p, bool training, bool relu=False, Tensor? bias=None) -> Tensor", &dgld::ops::dropout);
  m.def("set_reference_kernels(bool on) -> ()", [](bool on) { dgld::ops::set_reference_kernels(on); });
  m.def("project_before_aggregating(__torch__.torch.classes.dgld.Block block, int in_dim, int out_dim, "
        "bool input_needs_grad, bool self_loop=False) -> bool",
        [](const BlockPtr& block, int64_t in_dim, int64_t out_dim, bool input_needs_grad, bool self_loop) {
          return dgld::ops::project_before_aggregating(*block, in_dim, out_dim, input_needs_grad, self_loop);
        });
}
