// sampler-worker: makes mini-batches for one trainer (docs/architecture.md).
#include <unistd.h>

#include <iostream>

#include "common/logging.h"
#include "common/memory.h"
#include "common/stop_signals.h"
#include "daemons/sampler_worker/sampler_worker.h"

using namespace dgld;

int main(int argc, char** argv) {
  // Batches' row buffers are large: keep freed ones for reuse (as trainer-host does).
  tune_allocator_for_large_buffers();
  auto parsed = sampler::parse_sampler_worker_options(argc, argv);
  if (parsed.exit_code >= 0) return parsed.exit_code;
  if (Status st = setup_logging(parsed.options.log); !st.is_ok()) {
    std::cerr << "sampler-worker: " << st.message() << "\n";
    return 2;
  }
  StopSignals signals;

  auto worker = sampler::SamplerWorker::create(parsed.options);
  if (!worker.is_ok()) {
    logger("sampler")->error("{}", worker.status().message());
    return 1;
  }
  if (parsed.options.ready_fd >= 0) {
    const std::string line = std::to_string((*worker)->port()) + "\n";
    if (::write(parsed.options.ready_fd, line.data(), line.size()) != static_cast<ssize_t>(line.size())) {
      logger("sampler")->warn("--ready-fd {}: could not report the port", parsed.options.ready_fd);
    }
    ::close(parsed.options.ready_fd);
  }
  signals.watch([&](const std::string& sig) { (*worker)->stop("received " + sig); });
  Status st = (*worker)->wait();
  signals.unwatch();
  worker->reset();  // leaves the cluster
  return st.is_ok() ? 0 : 1;
}
