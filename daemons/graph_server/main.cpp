// graph-server: serves one machine's partition (docs/architecture.md).
#include <csignal>
#include <iostream>
#include <thread>

#include "common/logging.h"
#include "common/memory.h"
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
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  shm::install_shm_cleanup_handlers(false);
  std::signal(SIGPIPE, SIG_IGN);  // a vanished peer is an error on that connection only

  auto server = graph_server::GraphServer::create(parsed.options);
  if (!server.is_ok()) {
    logger("graph")->error("{}", server.status().message());
    shm::unlink_all_registered_segments();
    return 1;
  }
  std::thread signal_waiter([&] {
    int sig = 0;
    sigwait(&stop_signals, &sig);
    if (sig != 0) (*server)->stop(std::string("received ") + (sig == SIGINT ? "SIGINT" : "SIGTERM"));
  });
  Status st = (*server)->wait();
  // Wake the signal thread if no signal came (stop() is idempotent), then tear down.
  pthread_kill(signal_waiter.native_handle(), SIGTERM);
  signal_waiter.join();
  server->reset();
  shm::unlink_all_registered_segments();
  return st.is_ok() ? 0 : 1;
}
