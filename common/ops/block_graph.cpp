#include "common/ops/block_graph.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include <ATen/ATen.h>

#include "common/ops/torch_library.h"
#include "common/sampling/block.h"

namespace dgld::ops {

Status validate_csr(const torch::Tensor& indptr, const torch::Tensor& indices, int64_t num_src) {
  if (!indptr.defined() || indptr.dim() != 1 || indptr.scalar_type() != torch::kInt64) {
    return invalid_argument("block indptr must be a 1-d int64 tensor");
  }
  if (!indices.defined() || indices.dim() != 1 || indices.scalar_type() != torch::kInt64) {
    return invalid_argument("block indices must be a 1-d int64 tensor");
  }
  if (indptr.size(0) < 1) return invalid_argument("block indptr is empty (it needs num_dst + 1 entries)");
  const int64_t nd = indptr.size(0) - 1, ne = indices.size(0);
  // num_src < nd is allowed (a typed graph's relation, e.g. author -> paper,
  // can have more dst than src nodes): gspmm / gsddmm do not need
  // dst <= src; the kernels that read dst v as src v check it themselves.
  if (num_src < 0) return invalid_argument(fmt::format("block has {} src nodes", num_src));
  const auto ip = indptr.contiguous();
  const auto ix = indices.contiguous();
  const int64_t* p = ip.data_ptr<int64_t>();
  const int64_t* x = ix.data_ptr<int64_t>();
  if (p[0] != 0 || p[nd] != ne) {
    return invalid_argument(fmt::format("block indptr runs {}..{} for {} edges", p[0], p[nd], ne));
  }
  for (int64_t v = 0; v < nd; ++v) {
    if (p[v + 1] < p[v]) return invalid_argument(fmt::format("block indptr decreases at dst {}", v));
  }
  for (int64_t k = 0; k < ne; ++k) {
    if (x[k] < 0 || x[k] >= num_src) {
      return invalid_argument(fmt::format("block edge {} has src index {} of {}", k, x[k], num_src));
    }
  }
  return Status::ok();
}

Result<c10::intrusive_ptr<BlockGraph>> BlockGraph::create(torch::Tensor indptr, torch::Tensor indices,
                                                          int64_t num_src) {
  (void)torch_library_namespace();  // links the TorchScript registrations in
  DGLD_RETURN_IF_ERROR(validate_csr(indptr, indices, num_src));
  return c10::make_intrusive<BlockGraph>(Checked{}, indptr.contiguous(), indices.contiguous(), num_src);
}

BlockGraph::BlockGraph(torch::Tensor indptr, torch::Tensor indices, int64_t num_src) {
  const Status st = validate_csr(indptr, indices, num_src);
  TORCH_CHECK(st.is_ok(), "dgld.Block: ", st.message());
  indptr_ = indptr.contiguous();
  indices_ = indices.contiguous();
  num_src_ = num_src;
  num_dst_ = indptr_.size(0) - 1;
}

BlockGraph::BlockGraph(Checked, torch::Tensor indptr, torch::Tensor indices, int64_t num_src)
    : num_src_(num_src), num_dst_(indptr.size(0) - 1), indptr_(std::move(indptr)), indices_(std::move(indices)) {}

const torch::Tensor& BlockGraph::edge_dst() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!edge_dst_.defined()) {
    edge_dst_ = torch::empty({num_edges()}, torch::kInt64);
    const int64_t* p = indptr_.data_ptr<int64_t>();
    int64_t* d = edge_dst_.data_ptr<int64_t>();
    for (int64_t v = 0; v < num_dst_; ++v) {
      for (int64_t k = p[v]; k < p[v + 1]; ++k) d[k] = v;
    }
  }
  return edge_dst_;
}

torch::Tensor BlockGraph::in_degrees() const {
  return indptr_.narrow(0, 1, num_dst_) - indptr_.narrow(0, 0, num_dst_);
}

torch::Tensor BlockGraph::out_degrees() {
  const auto& r = reverse();
  return r.rev_indptr.narrow(0, 1, num_src_) - r.rev_indptr.narrow(0, 0, num_src_);
}

bool BlockGraph::has_reverse() const {
  std::lock_guard<std::mutex> lock(mu_);
  return reverse_.rev_indptr.defined();
}

const BlockGraph::Reverse& BlockGraph::reverse() {
  std::lock_guard<std::mutex> lock(mu_);
  if (reverse_.rev_indptr.defined()) return reverse_;
  // Counting sort of the edges by src: positions within a src keep the
  // dst-major order, so each src's out-edges come in increasing dst.
  const int64_t ne = num_edges();
  Reverse r;
  r.rev_indptr = torch::zeros({num_src_ + 1}, torch::kInt64);
  r.rev_dst = torch::empty({ne}, torch::kInt64);
  r.rev_eid = torch::empty({ne}, torch::kInt64);
  const int64_t* p = indptr_.data_ptr<int64_t>();
  const int64_t* src = indices_.data_ptr<int64_t>();
  int64_t* rp = r.rev_indptr.data_ptr<int64_t>();
  int64_t* rd = r.rev_dst.data_ptr<int64_t>();
  int64_t* re = r.rev_eid.data_ptr<int64_t>();
  for (int64_t k = 0; k < ne; ++k) ++rp[src[k] + 1];
  for (int64_t u = 0; u < num_src_; ++u) rp[u + 1] += rp[u];
  std::vector<int64_t> next(rp, rp + num_src_);
  for (int64_t v = 0; v < num_dst_; ++v) {
    for (int64_t k = p[v]; k < p[v + 1]; ++k) {
      const int64_t at = next[static_cast<size_t>(src[k])]++;
      rd[at] = v;
      re[at] = k;
    }
  }
  reverse_ = std::move(r);
  return reverse_;
}

namespace {

// The type of every edge as int64 (etypes: int32 or int64, contiguous).
template <typename T>
int64_t etype_at(const torch::Tensor& etypes, int64_t k) {
  return static_cast<int64_t>(etypes.data_ptr<T>()[k]);
}

}  // namespace

Status BlockGraph::set_etypes(torch::Tensor etypes, int64_t num_etypes) {
  if (!etypes.defined() || etypes.dim() != 1 ||
      (etypes.scalar_type() != torch::kInt32 && etypes.scalar_type() != torch::kInt64)) {
    return invalid_argument("block edge types must be a 1-d int32 or int64 tensor");
  }
  if (!etypes.device().is_cpu()) return invalid_argument("block edge types must be on the CPU");
  const int64_t ne = num_edges();
  if (etypes.size(0) != ne) {
    return invalid_argument(fmt::format("block has {} edge types for {} edges", etypes.size(0), ne));
  }
  if (num_etypes < 0) return invalid_argument(fmt::format("number of edge types must be >= 0, got {}", num_etypes));
  etypes = etypes.contiguous();
  const bool i32 = etypes.scalar_type() == torch::kInt32;
  int64_t max_type = -1;
  for (int64_t k = 0; k < ne; ++k) {
    const int64_t t = i32 ? etype_at<int32_t>(etypes, k) : etype_at<int64_t>(etypes, k);
    if (t < 0) return invalid_argument(fmt::format("block edge {} has negative edge type {}", k, t));
    if (num_etypes > 0 && t >= num_etypes) {
      return invalid_argument(fmt::format("block edge {} has edge type {}, outside [0, {})", k, t, num_etypes));
    }
    max_type = std::max(max_type, t);
  }
  std::lock_guard<std::mutex> lock(mu_);
  etypes_ = std::move(etypes);
  num_etypes_ = num_etypes > 0 ? num_etypes : max_type + 1;
  relations_.clear();
  return Status::ok();
}

bool BlockGraph::has_etypes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return etypes_.defined();
}

int64_t BlockGraph::num_etypes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return etypes_.defined() ? num_etypes_ : 0;
}

torch::Tensor BlockGraph::etypes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return etypes_;
}

bool BlockGraph::has_relations() const {
  std::lock_guard<std::mutex> lock(mu_);
  return !relations_.empty();
}

c10::intrusive_ptr<BlockGraph> BlockGraph::relation(int64_t r) {
  std::lock_guard<std::mutex> lock(mu_);
  TORCH_CHECK(etypes_.defined(), "dgld.Block: relation(", r, ") of a block without edge types");
  TORCH_CHECK(r >= 0 && r < num_etypes_, "dgld.Block: relation ", r, " of a block with ", num_etypes_,
              " edge types");
  if (!relations_.empty()) return relations_[static_cast<size_t>(r)];
  // Counting sort of the edges by (type, dst). Walking the edges in
  // dst-major order, the edges of one type come in increasing dst, so one
  // cursor per type places them; a first pass counts them per (type, dst).
  const int64_t nr = num_etypes_, nd = num_dst_, ne = num_edges();
  const bool i32 = etypes_.scalar_type() == torch::kInt32;
  const int64_t* p = indptr_.data_ptr<int64_t>();
  const int64_t* src = indices_.data_ptr<int64_t>();
  std::vector<int64_t> type(static_cast<size_t>(ne));
  for (int64_t k = 0; k < ne; ++k) type[k] = i32 ? etype_at<int32_t>(etypes_, k) : etype_at<int64_t>(etypes_, k);
  std::vector<torch::Tensor> indptrs, indices;
  std::vector<int64_t*> ip(static_cast<size_t>(nr));
  indptrs.reserve(static_cast<size_t>(nr));
  for (int64_t t = 0; t < nr; ++t) {
    indptrs.push_back(torch::zeros({nd + 1}, torch::kInt64));
    ip[t] = indptrs.back().data_ptr<int64_t>();
  }
  for (int64_t v = 0; v < nd; ++v) {
    for (int64_t k = p[v]; k < p[v + 1]; ++k) ++ip[type[k]][v + 1];
  }
  std::vector<int64_t*> ix(static_cast<size_t>(nr));
  std::vector<int64_t> cursor(static_cast<size_t>(nr), 0);
  indices.reserve(static_cast<size_t>(nr));
  for (int64_t t = 0; t < nr; ++t) {
    for (int64_t v = 0; v < nd; ++v) ip[t][v + 1] += ip[t][v];
    indices.push_back(torch::empty({ip[t][nd]}, torch::kInt64));
    ix[t] = indices.back().data_ptr<int64_t>();
  }
  for (int64_t k = 0; k < ne; ++k) ix[type[k]][cursor[type[k]]++] = src[k];
  relations_.reserve(static_cast<size_t>(nr));
  for (int64_t t = 0; t < nr; ++t) {
    relations_.push_back(c10::make_intrusive<BlockGraph>(Checked{}, std::move(indptrs[t]), std::move(indices[t]),
                                                         num_src_));
  }
  return relations_[static_cast<size_t>(r)];
}

Status BlockGraph::set_edge_order(torch::Tensor eids) {
  if (!eids.defined()) {
    std::lock_guard<std::mutex> lock(mu_);
    edge_order_ = torch::Tensor();
    return Status::ok();
  }
  if (eids.dim() != 1 || eids.scalar_type() != torch::kInt64) {
    return invalid_argument(fmt::format("block edge order must be a 1-d int64 tensor, got {}-d {}", eids.dim(),
                                        std::string(c10::toString(eids.scalar_type()))));
  }
  if (!eids.device().is_cpu()) return invalid_argument("block edge order must be on the CPU");
  const int64_t ne = num_edges();
  if (eids.size(0) != ne) {
    return invalid_argument(fmt::format("block edge order has {} entries for {} edges", eids.size(0), ne));
  }
  eids = eids.contiguous();
  const int64_t* id = eids.data_ptr<int64_t>();
  std::vector<bool> seen(static_cast<size_t>(ne), false);
  for (int64_t p = 0; p < ne; ++p) {
    if (id[p] < 0 || id[p] >= ne) {
      return invalid_argument(fmt::format("block edge order: position {} has edge id {}, outside [0, {})", p, id[p], ne));
    }
    if (seen[static_cast<size_t>(id[p])]) {
      return invalid_argument(
          fmt::format("block edge order is not a permutation: edge id {} appears twice (again at position {})", id[p], p));
    }
    seen[static_cast<size_t>(id[p])] = true;
  }
  std::lock_guard<std::mutex> lock(mu_);
  edge_order_ = std::move(eids);
  return Status::ok();
}

torch::Tensor BlockGraph::edge_order() const {
  std::lock_guard<std::mutex> lock(mu_);
  return edge_order_;
}

namespace {
torch::Tensor int64_tensor(const std::vector<int64_t>& v) {
  auto t = torch::empty({static_cast<int64_t>(v.size())}, torch::kInt64);
  if (!v.empty()) std::memcpy(t.data_ptr<int64_t>(), v.data(), v.size() * sizeof(int64_t));
  return t;
}

// The vector's buffer becomes the tensor's (no copy); the tensor frees it.
torch::Tensor int64_tensor(std::vector<int64_t>&& v) {
  if (v.empty()) return torch::empty({0}, torch::kInt64);
  auto* owned = new std::vector<int64_t>(std::move(v));
  return torch::from_blob(owned->data(), {static_cast<int64_t>(owned->size())},
                          [owned](void*) { delete owned; }, torch::kInt64);
}

template <typename B>
Result<BlockGraphPtr> block_graph_of(B&& block, bool with_ids, int64_t num_etypes) {
  const int64_t nd = block.num_dst(), ns = block.num_src();
  if (static_cast<int64_t>(block.indptr.size()) != nd + 1) {
    return invalid_argument(fmt::format("block indptr has {} entries for {} dst nodes", block.indptr.size(), nd));
  }
  DGLD_ASSIGN_OR_RETURN(auto g, BlockGraph::create(int64_tensor(std::forward<B>(block).indptr),
                                                   int64_tensor(std::forward<B>(block).indices), ns));
  if (with_ids) {
    g->src_ids = int64_tensor(std::forward<B>(block).src_nodes);
    g->dst_ids = int64_tensor(std::forward<B>(block).dst_nodes);
    g->edge_ids = int64_tensor(std::forward<B>(block).eids);
  }
  if (!block.etypes.empty() || num_etypes > 0) {
    auto t = torch::empty({static_cast<int64_t>(block.etypes.size())}, torch::kInt32);
    if (!block.etypes.empty()) {
      std::memcpy(t.data_ptr<int32_t>(), block.etypes.data(), block.etypes.size() * sizeof(int32_t));
    }
    DGLD_RETURN_IF_ERROR(g->set_etypes(std::move(t), num_etypes));
  }
  return g;
}
}  // namespace

Result<BlockGraphPtr> block_graph_from(const Block& block, bool with_ids, int64_t num_etypes) {
  return block_graph_of(block, with_ids, num_etypes);
}

Result<BlockGraphPtr> block_graph_from(Block&& block, bool with_ids, int64_t num_etypes) {
  return block_graph_of(std::move(block), with_ids, num_etypes);
}

}  // namespace dgld::ops
