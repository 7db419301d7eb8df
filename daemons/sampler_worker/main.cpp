// sampler-worker: makes mini-batches for one trainer (docs/architecture.md).
#include <csignal>
#include <iostream>
#include <thread>

#include "common/logging.h"
#include "daemons/sampler_worker/sampler_worker.h"

using namespace dgld;

int main(int argc, char** argv) {
  auto parsed = sampler::parse_sampler_worker_options(argc, argv);
  if (parsed.exit_code >= 0) return parsed.exit_code;
  if (Status st = setup_logging(parsed.options.log); !st.is_ok()) {
    std::cerr << "sampler-worker: " << st.message() << "\n";
    return 2;
  }
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  std::signal(SIGPIPE, SIG_IGN);

  auto worker = sampler::SamplerWorker::create(parsed.options);
  if (!worker.is_ok()) {
    logger("sampler")->error("{}", worker.status().message());
    return 1;
  }
  std::thread signal_waiter([&] {
    int sig = 0;
    sigwait(&stop_signals, &sig);
    if (sig != 0) (*worker)->stop(std::string("received ") + (sig == SIGINT ? "SIGINT" : "SIGTERM"));
  });
  Status st = (*worker)->wait();
  pthread_kill(signal_waiter.native_handle(), SIGTERM);
  signal_waiter.join();
  worker->reset();  // leaves the cluster
  return st.is_ok() ? 0 : 1;
}
