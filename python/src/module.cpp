// dgld._C: the Python binding of dgld's client library (docs/python.md).
// The Python package (python/dgld/) builds DGL's API on these few types:
//   Client      one process's membership of a job (client::Cluster)
//   DistTensor  pull / push rows by global id (client::DistTensor)
//   DataLoader  mini-batches made by C++ threads or sampler-workers
//               (client::DistDataLoader), blocks as torch.classes.dgld.Block
//   PartitionBook  which partition owns which id, type <-> homogeneous ids
//               (common/partition's RangePartitionBook)
//   CheckpointStore  checkpoints sealed and checked as trainer-host's
//               (common/checkpoint_store.h)
// Tensors cross without copies where the memory allows; every call that may
// wait (a pull, a barrier, the next batch) releases the GIL, and waits that
// can be long check for Ctrl-C every 100 ms. A dgld error becomes an
// exception of dgld.DGLError's family (python/dgld/_errors.py) carrying the
// library's message.
//
// Sources: binding.h (errors, tensor conversions), client.cpp, dist_tensor.cpp,
// loaders.cpp, partition.cpp, partition_book.cpp, checkpoint.cpp, servers.cpp, rendezvous.cpp, torch_kernels.cpp; this file makes the module
// of them. The tests' hooks are a module of their own (test_hooks.cpp).
#include "common/cli.h"
#include "common/logging.h"
#include "common/net/frame.h"
#include "common/memory.h"
#include "python/src/binding.h"
#include "dgld_version.h"

using namespace dgld::python;

PYBIND11_MODULE(_C, m) {
  m.doc() = "dgld's client library (the dgld package builds DGL's API on it)";
  // The one version (meson.build's project version) the programs' --version report, and the
  // wire protocol's (common/net/frame.h): dgld.__version__, dgld.protocol_version.
  m.attr("__version__") = DGLD_VERSION;
  m.attr("protocol_version") = static_cast<int>(dgld::net::kProtocolVersion);
  m.attr("version_string") = dgld::version_string();
  // A training script's tensors, as the daemons' buffers, stay in the heap
  // (common/memory.h): set when dgld is imported, before its first batch.
  dgld::tune_allocator_for_large_buffers();
  register_status_translator();
  bind_client(m);
  bind_dist_tensor(m);
  bind_loaders(m);
  bind_partition(m);
  bind_partition_book(m);
  bind_checkpoint(m);
  bind_servers(m);
  bind_rendezvous(m);
  // LibTorch's kernels dgld replaces (torch_kernels.cpp); whether it did.
  m.attr("torch_kernels") = install_torch_kernels();
  m.def("set_log_level", [](const std::string& level) {
    dgld::LogOptions lo;
    lo.level = level;
    lo.program = "dgld-python";
    check(setup_logging(lo));
  });
}
