#include "launcher/launch/agent_impl.h"

namespace dgld::launch::agent_side {

void Agent::pump(std::chrono::milliseconds timeout) {
  std::vector<pollfd> fds;
  if (!stdin_closed_) fds.push_back({0, POLLIN, 0});
  fds.push_back({sigfd_, POLLIN, 0});
  std::vector<Child*> owners;
  for (auto& c : children_) {
    if (c->proc.stdout_fd() >= 0) {
      fds.push_back({c->proc.stdout_fd(), POLLIN, 0});
      owners.push_back(c.get());
    }
  }
  const int n = ::poll(fds.data(), fds.size(), static_cast<int>(timeout.count()));
  if (n <= 0) return;
  size_t k = 0;
  if (!stdin_closed_) {
    if (fds[k].revents) read_stdin();
    ++k;
  }
  if (fds[k].revents) read_signals();
  ++k;
  for (size_t i = 0; i < owners.size(); ++i, ++k) {
    if (fds[k].revents) read_child(*owners[i]);
  }
}

void Agent::read_stdin() {
  char buf[65536];
  const ssize_t n = ::read(0, buf, sizeof buf);
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
  if (n <= 0) {
    stdin_closed_ = true;
    request_stop("dgl-launch's connection closed (the launcher or its ssh session ended)");
    return;
  }
  last_input_ = Clock::now();
  in_buf_.append(buf, static_cast<size_t>(n));
  size_t nl;
  while ((nl = in_buf_.find('\n')) != std::string::npos) {
    std::string line = in_buf_.substr(0, nl);
    in_buf_.erase(0, nl + 1);
    if (!stop_reason_) on_line(line);
  }
}

void Agent::read_signals() {
  signalfd_siginfo si;
  while (::read(sigfd_, &si, sizeof si) == static_cast<ssize_t>(sizeof si)) {
    if (si.ssi_signo != SIGCHLD) request_stop(std::string("received SIG") + sigabbrev_np(static_cast<int>(si.ssi_signo)));
  }
}

void Agent::read_child(Child& c) {
  char buf[65536];
  const ssize_t n = ::read(c.proc.stdout_fd(), buf, sizeof buf);
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
  if (n <= 0) {
    c.proc.close_stdout();
    flush_child(c, true);
    return;
  }
  c.buf.append(buf, static_cast<size_t>(n));
  flush_child(c, false);
}

void Agent::flush_child(Child& c, bool all) {
  size_t start = 0, nl;
  while ((nl = c.buf.find('\n', start)) != std::string::npos || (c.buf.size() - start > 65536)) {
    const size_t end = nl == std::string::npos ? start + 65536 : nl;
    send_output(c, c.buf.substr(start, end - start));
    start = nl == std::string::npos ? end : end + 1;
  }
  c.buf.erase(0, start);
  if (all && !c.buf.empty()) {
    send_output(c, c.buf);
    c.buf.clear();
  }
}

void Agent::pump_until(Clock::time_point deadline) {
  while (any_running() && Clock::now() < deadline) {
    pump(20ms);
    reap();
  }
}

}  // namespace dgld::launch::agent_side
