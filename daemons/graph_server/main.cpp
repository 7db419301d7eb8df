// graph-server: serves one machine's partition (docs/architecture.md).
#include <iostream>

#include "common/logging.h"
#include "common/memory.h"
#include "common/stop_signals.h"
#include "common/shm/cleanup.h"
#include "daemons/graph_server/server.h"

using namespace dgld;

int main(int argc, char** argv) {
  tune_allocator_for_large_buffers();
  auto parsed = graph_server::parse_graph_server_options(argc, argv);
  if (parsed.exit_code >= 0) return parsed.exit_code;
  if (Status st = setup_logging(parsed.options.log); !st.is_ok()) {
    std::cerr << "graph-server: " << st.message() << "\n";
    return 2;
  }
  // SIGINT/SIGTERM are taken by a waiting thread; fatal signals and exit() unlink shm.
  StopSignals signals;
  shm::install_shm_cleanup_handlers(false);

  auto server = graph_server::GraphServer::create(parsed.options);
  if (!server.is_ok()) {
    logger("graph")->error("{}", server.status().message());
    shm::unlink_all_registered_segments();
    return 1;
  }
  signals.watch([&](const std::string& sig) { (*server)->stop("received " + sig); });
  Status st = (*server)->wait();
  signals.unwatch();
  server->reset();
  shm::unlink_all_registered_segments();
  return st.is_ok() ? 0 : 1;
}
