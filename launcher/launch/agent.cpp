#include "launcher/launch/agent.h"

#include <cstdio>

#include "launcher/launch/agent_impl.h"

namespace dgld::launch {
namespace agent_side {

int Agent::run() {
  sigset_t set;
  sigemptyset(&set);
  for (int s : {SIGCHLD, SIGTERM, SIGINT, SIGHUP}) sigaddset(&set, s);
  ::sigprocmask(SIG_BLOCK, &set, nullptr);
  sigfd_ = ::signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
  ::signal(SIGPIPE, SIG_IGN);
  emit({{"ev", "hello"}, {"version", version_string()}, {"pid", ::getpid()}, {"machine", machine_}});
  last_input_ = Clock::now();
  while (!stop_reason_) {
    pump(50ms);
    if (Clock::now() - last_input_ > silence_timeout_) {
      request_stop(fmt::format("nothing from dgl-launch for {} s (its machine or the network is gone?)",
                               silence_timeout_.count()));
    }
    reap();
    probe_servers();
    drain_groups();
  }
  stop(*stop_reason_);
  return 0;
}

void Agent::emit(const json& j) {
  if (out_broken_) return;
  if (!write_all(1, encode_line(j) + "\n")) {
    out_broken_ = true;
    request_stop("cannot write to dgl-launch (its connection closed)");
  }
}

void Agent::on_line(const std::string& line) {
  auto j = decode_line(line);
  if (!j.is_ok()) {
    log()->warn("ignoring a line from dgl-launch: {}", j.status().message());
    return;
  }
  const std::string op = j->value("op", "");
  try {
    if (op == "ping") {
      emit({{"ev", "pong"}});  // liveness, both ways: the launcher notes when it last heard from this agent
    } else if (op == "prepare") {
      prepare(*j);
    } else if (op == "check") {
      check();
    } else if (op == "start") {
      start(j->at("group").get<std::string>());
    } else if (op == "fetch") {
      fetch(j->at("path").get<std::string>());
    } else if (op == "stop") {
      request_stop("dgl-launch asked: " + j->value("reason", std::string("stop")));
    } else {
      fail("protocol", "unknown op '" + op + "'");
    }
  } catch (const json::exception& e) {
    fail("protocol", "malformed '" + op + "' message: " + e.what());
  }
}

}  // namespace agent_side

using agent_side::Agent;
using agent_side::SweepResult;
using agent_side::sweep_job;

namespace {
// Logging and the identity checks both agent modes share; an error message or "".
std::string setup_agent(const std::string& job_id, int machine, LogOptions& lo) {
  lo.role = "agent/m" + std::to_string(machine);
  if (Status st = setup_logging(lo); !st.is_ok()) return st.message();
  if (machine < 0) return "--machine is required";
  if (Status st = validate_job_id(job_id); !st.is_ok()) return st.message();
  return "";
}
}  // namespace

int run_machine_agent(const std::string& job_id, int machine, int silence_timeout_s, const LogOptions& log) {
  LogOptions lo = log;
  if (auto err = setup_agent(job_id, machine, lo); !err.empty()) {
    std::fprintf(stderr, "dgl-launch --machine-agent: %s\n", err.c_str());
    return 2;
  }
  Agent agent(job_id, machine, silence_timeout_s, lo);
  return agent.run();
}

int run_agent_cleanup(const std::string& job_id, int machine, int grace_ms, bool keep_shm, const LogOptions& log) {
  LogOptions lo = log;
  if (auto err = setup_agent(job_id, machine, lo); !err.empty()) {
    std::fprintf(stderr, "dgl-launch --machine-agent --cleanup: %s\n", err.c_str());
    return 2;
  }
  const SweepResult r = sweep_job(job_id, machine, std::chrono::milliseconds(grace_ms), keep_shm);
  const std::string line = encode_line({{"ev", "cleaned"}, {"killed", r.killed}, {"shm_removed", r.shm_removed}}) + "\n";
  return write_all(1, line) ? 0 : 1;
}

}  // namespace dgld::launch
