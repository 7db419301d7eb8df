// The helpers every source of dgld._C and dgld._test_hooks uses (binding.h):
// the error class of a status code, tensor <-> dgld conversions, held-out
// link-split edges. Nothing here uses common/ops (see test_hooks.cpp).
#include "python/src/binding.h"

#include <cstring>
#include <memory>

#include "common/partition/link_split.h"
#include "common/partition/partition.h"

namespace dgld::python {

void register_status_translator() {
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const StatusError& e) {
      py::object cls = py::module_::import("dgld._errors").attr(error_class(e.code));
      PyErr_SetString(cls.ptr(), e.message.c_str());
    }
  });
}

const char* error_class(StatusCode code) {
  switch (code) {
    case StatusCode::invalid_argument: return "InvalidArgument";
    case StatusCode::not_found: return "NotFound";
    case StatusCode::io_error: return "IOError";
    case StatusCode::timeout: return "Timeout";
    case StatusCode::closed: return "Closed";
    case StatusCode::protocol_error: return "ProtocolError";
    case StatusCode::corruption: return "Corruption";
    case StatusCode::already_exists: return "AlreadyExists";
    case StatusCode::resource_exhausted: return "ResourceExhausted";
    default: return "DGLError";
  }
}

std::optional<DType> dtype_of_scalar(at::ScalarType t) {
  switch (t) {
    case at::kChar: return DType::int8;
    case at::kByte: return DType::uint8;
    case at::kBool: return DType::uint8;
    case at::kInt: return DType::int32;
    case at::kLong: return DType::int64;
    case at::kFloat: return DType::float32;
    case at::kDouble: return DType::float64;
    default: return std::nullopt;
  }
}

at::ScalarType scalar_of(DType t) {
  switch (t) {
    case DType::int8: return at::kChar;
    case DType::uint8: return at::kByte;
    case DType::int32: return at::kInt;
    case DType::int64: return at::kLong;
    case DType::float32: return at::kFloat;
    case DType::float64: return at::kDouble;
  }
  return at::kByte;
}

torch::Tensor as_ids(const torch::Tensor& ids, const char* what) {
  if (!ids.defined()) throw StatusError(invalid_argument(std::string(what) + ": no ids given"));
  if (ids.dim() > 1) {
    throw StatusError(invalid_argument(std::string(what) + ": ids must be a 1-d tensor, got " +
                                       std::to_string(ids.dim()) + " dimensions"));
  }
  if (ids.is_floating_point() || ids.is_complex()) {
    throw StatusError(invalid_argument(std::string(what) + ": ids must be integers, got " +
                                       std::string(c10::toString(ids.scalar_type()))));
  }
  return ids.reshape({-1}).to(torch::kInt64).contiguous();
}

std::span<const int64_t> span_of(const torch::Tensor& ids) {
  return {ids.data_ptr<int64_t>(), static_cast<size_t>(ids.numel())};
}

torch::Tensor tensor_of(std::vector<int64_t>&& v) {
  auto* owned = new std::vector<int64_t>(std::move(v));
  if (owned->empty()) {
    delete owned;
    return torch::empty({0}, torch::kInt64);
  }
  return torch::from_blob(owned->data(), {static_cast<int64_t>(owned->size())},
                          [owned](void*) { delete owned; }, torch::kInt64);
}

torch::Tensor copy_of(const TensorView& t) {
  auto out = torch::empty(t.shape, torch::TensorOptions().dtype(scalar_of(t.dtype)));
  if (t.num_bytes > 0) std::memcpy(out.data_ptr(), t.data, t.num_bytes);
  return out;
}

Result<std::vector<std::pair<int64_t, int64_t>>> held_out_pairs(const PartitionConfig& config) {
  std::vector<std::pair<int64_t, int64_t>> out;
  for (int p = 0; p < config.num_parts; ++p) {
    DGLD_ASSIGN_OR_RETURN(LinkSplitPart part, read_link_split(config, p));
    for (const LinkEdges* e : {&part.valid, &part.test}) {
      for (size_t i = 0; i < e->src.size(); ++i) out.emplace_back(e->src[i], e->dst[i]);
    }
  }
  return out;
}

}  // namespace dgld::python
