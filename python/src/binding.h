#pragma once
// What the sources of dgld._C (python/src/) share, and dgld._test_hooks
// (helpers.cpp only): a dgld Status as a C++
// exception that module.cpp's translator turns into dgld.DGLError's family
// (python/dgld/_errors.py), the conversions between torch tensors and dgld's
// ids and dtypes, and each source's registration function.

#include <torch/csrc/jit/python/pybind_utils.h>
#include <torch/extension.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "common/dtype.h"
#include "common/ops/block_graph.h"
#include "common/part_config.h"
#include "common/status.h"

namespace py = pybind11;

namespace dgld {
struct TensorView;
}

namespace dgld::python {

// ------------------------------------------------------------------ errors

struct StatusError : std::exception {
  StatusCode code;
  std::string message;
  explicit StatusError(const Status& st) : code(st.code()), message(st.message()) {}
  const char* what() const noexcept override { return message.c_str(); }
};

inline void check(const Status& st) {
  if (!st.is_ok()) throw StatusError(st);
}

template <typename T>
T unwrap(Result<T>&& r) {
  if (!r.is_ok()) throw StatusError(r.status());
  return std::move(r).value();
}

// The class of dgld._errors that a status code raises.
const char* error_class(StatusCode code);
// Makes a module's StatusError arrive in Python as that class (each extension
// module registers it in its init).
void register_status_translator();

// ------------------------------------------------------------------ tensors

std::optional<DType> dtype_of_scalar(at::ScalarType t);
at::ScalarType scalar_of(DType t);
// ids as a contiguous int64 CPU tensor (converted when given otherwise).
torch::Tensor as_ids(const torch::Tensor& ids, const char* what);
std::span<const int64_t> span_of(const torch::Tensor& ids);
// A tensor owning the vector's memory (no copy).
torch::Tensor tensor_of(std::vector<int64_t>&& v);
// A copy of a partition file's tensor (its mapping is read-only).
torch::Tensor copy_of(const TensorView& t);
// A block as torch.classes.dgld.Block (loaders.cpp: _C only, it needs common/ops).
py::object to_python(const ops::BlockGraphPtr& g);

// Every partition's held-out edges of the config's link split (the files
// must all be on this machine); read_link_split's error naming the file
// otherwise.
Result<std::vector<std::pair<int64_t, int64_t>>> held_out_pairs(const PartitionConfig& config);

// ------------------------------------------------------------------ the module's parts

void bind_client(py::module_& m);       // client.cpp: ClientOptions, Client
void bind_dist_tensor(py::module_& m);  // dist_tensor.cpp: DistTensor
void bind_loaders(py::module_& m);      // loaders.cpp: make_block, DataLoader, EdgeDataLoader
void bind_partition(py::module_& m);    // partition.cpp: partition_graph, load_partition
void bind_partition_book(py::module_& m);  // partition_book.cpp: PartitionBook
void bind_checkpoint(py::module_& m);
void bind_rendezvous(py::module_& m);  // rendezvous.cpp: RendezvousServer, RendezvousClient
void bind_servers(py::module_& m);      // servers.cpp: GraphServer (in this process), GraphServerOptions   // checkpoint.cpp: CheckpointStore, the position exchange, progress_line
bool install_torch_kernels();            // torch_kernels.cpp: faster LibTorch kernels in place of its own (false: DGLD_TORCH_KERNELS=0)

// Waits `step` at a time with the GIL released until `ready` says so,
// checking for a pending signal (Ctrl-C) in between: every wait of the
// binding that may be long.
template <typename Ready>
void wait_interruptibly(Ready&& ready, std::chrono::milliseconds step = std::chrono::milliseconds(100)) {
  for (;;) {
    bool done = false;
    {
      py::gil_scoped_release release;
      done = ready(step);
    }
    if (done) return;
    if (PyErr_CheckSignals() != 0) throw py::error_already_set();
  }
}

}  // namespace dgld::python
