#include "client/cluster.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include "client/local_partition.h"
#include "common/logging.h"
#include "common/net/io_threads.h"

namespace dgld::client {

Result<ClusterOptions> join_options(const JoinFlags& f) {
  if (f.role == Role::sampler && f.group < 0) {
    return invalid_argument("a sampler joins for a trainer: its trainer's rank (group) must be >= 0");
  }
  if (f.connect_timeout.count() <= 0 || f.call_timeout.count() <= 0) {
    return invalid_argument(fmt::format("join timeouts must be positive (connect {} ms, call {} ms)",
                                        f.connect_timeout.count(), f.call_timeout.count()));
  }
  ClusterOptions co;
  co.ip_config = f.ip_config;
  co.part_config = f.part_config;
  co.role = f.role;
  co.machine_id = f.machine_id;
  co.num_servers = f.num_servers;
  co.requested_rank = f.rank;
  co.group = f.group;
  co.num_trainers = f.num_trainers;
  co.job_id = f.job_id;
  co.connect_timeout = f.connect_timeout;
  co.call_timeout = f.call_timeout;
  co.attach_timeout = f.connect_timeout;
  if (f.secret) {
    co.secret = f.secret;
  } else {
    DGLD_ASSIGN_OR_RETURN(co.secret, net::secret_from_flag_or_env(f.secret_file));
  }
  return co;
}

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

namespace {

std::shared_ptr<spdlog::logger> log() {
  static auto l = logger("trainer");
  return l;
}

const char* role_name(Role r) { return r == Role::trainer ? "trainer" : "sampler"; }

// IPv4 addresses `host` resolves to (itself when it is a literal).
std::vector<std::string> resolve_ipv4(const std::string& host) {
  in_addr a{};
  if (inet_pton(AF_INET, host.c_str(), &a) == 1) return {host};
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  std::vector<std::string> out;
  if (getaddrinfo(host.c_str(), nullptr, &hints, &res) != 0) return out;
  for (addrinfo* p = res; p; p = p->ai_next) {
    char buf[INET_ADDRSTRLEN] = {};
    const auto* sin = reinterpret_cast<const sockaddr_in*>(p->ai_addr);
    if (inet_ntop(AF_INET, &sin->sin_addr, buf, sizeof buf)) out.emplace_back(buf);
  }
  freeaddrinfo(res);
  return out;
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

}  // namespace

Result<std::vector<std::string>> local_ipv4_addresses() {
  ifaddrs* ifs = nullptr;
  if (getifaddrs(&ifs) != 0)
    return io_error(std::string("getifaddrs failed: ") + std::strerror(errno));
  std::set<std::string> out;
  for (ifaddrs* p = ifs; p; p = p->ifa_next) {
    if (!p->ifa_addr || p->ifa_addr->sa_family != AF_INET) continue;
    char buf[INET_ADDRSTRLEN] = {};
    const auto* sin = reinterpret_cast<const sockaddr_in*>(p->ifa_addr);
    if (inet_ntop(AF_INET, &sin->sin_addr, buf, sizeof buf)) out.insert(buf);
  }
  freeifaddrs(ifs);
  return std::vector<std::string>(out.begin(), out.end());
}

Result<int> detect_machine_id(const std::vector<MachineAddress>& machines,
                              const std::vector<std::string>& local_addresses,
                              const std::string& source) {
  const std::set<std::string> local(local_addresses.begin(), local_addresses.end());
  std::vector<int> matches;
  for (size_t m = 0; m < machines.size(); ++m) {
    for (const auto& a : resolve_ipv4(machines[m].host)) {
      if (local.count(a)) {
        matches.push_back(static_cast<int>(m));
        break;
      }
    }
  }
  if (matches.empty()) {
    return invalid_argument("no machine of " + source + " is this host: none of its " +
                            std::to_string(machines.size()) + " lines names a local address (" +
                            join(local_addresses) + "); pass --machine-id");
  }
  if (matches.size() > 1) {
    // One box simulating several machines (DGL's tests, custom launchers):
    // DGL's client takes the first line that is this host; so does dgld,
    // saying so, since a trainer meant for another line must say which.
    std::string lines;
    for (int m : matches) {
      lines += (lines.empty() ? "" : ", ") + std::string("machine ") + std::to_string(m) + " (line " +
               std::to_string(machines[m].line) + ", " + machines[m].host + ":" +
               std::to_string(machines[m].base_port) + ")";
    }
    log()->warn("several machines of {} are this host: {}; taking machine {}, the first (DGL's rule); pass "
                "--machine-id (DGLD_MACHINE_ID) to be another",
                source, lines, matches[0]);
  }
  return matches[0];
}

struct Cluster::Heartbeat {
  std::mutex mu;
  std::condition_variable cv;
  bool stop = false;
  bool left = false;
  Status health;
  std::thread thread;
};

Result<std::unique_ptr<Cluster>> Cluster::connect(const ClusterOptions& options) {
  std::unique_ptr<Cluster> c(new Cluster());
  DGLD_RETURN_IF_ERROR(c->start(options));
  return c;
}

Status Cluster::start(const ClusterOptions& options) {
  options_ = options;
  hb_ = std::make_unique<Heartbeat>();
  if (options.num_servers < 1) {
    return invalid_argument("num_servers must be >= 1, got " + std::to_string(options.num_servers));
  }
  DGLD_ASSIGN_OR_RETURN(config_, load_part_config(options.part_config));
  DGLD_ASSIGN_OR_RETURN(machines_, load_ip_config(options.ip_config));
  if (static_cast<int>(machines_.size()) != config_.num_parts) {
    return invalid_argument(
        options.ip_config.string() + " lists " + std::to_string(machines_.size()) +
        " machines but " + options.part_config.string() +
        " has num_parts=" + std::to_string(config_.num_parts) + " (one machine per partition)");
  }
  DGLD_ASSIGN_OR_RETURN(auto book, RangePartitionBook::from_config(config_));
  book_ = std::make_unique<RangePartitionBook>(std::move(book));
  if (options.machine_id >= 0) {
    if (options.machine_id >= num_machines()) {
      return invalid_argument("machine id " + std::to_string(options.machine_id) + " is not in " +
                              options.ip_config.string() + " (" + std::to_string(num_machines()) +
                              " machines)");
    }
    machine_id_ = options.machine_id;
  } else {
    DGLD_ASSIGN_OR_RETURN(auto addrs, local_ipv4_addresses());
    DGLD_ASSIGN_OR_RETURN(machine_id_,
                          detect_machine_id(machines_, addrs, options.ip_config.string()));
  }
  job_id_ =
      options.job_id.empty() ? default_job_id(config_, machines_[machine_id_]) : options.job_id;
  DGLD_ASSIGN_OR_RETURN(
      local_, LocalPartition::open(config_, machine_id_, job_id_, options.attach_timeout));

  io_ = std::make_unique<net::IoThreads>(std::max(1, options.io_threads));
  const auto deadline = Clock::now() + options.connect_timeout;
  servers_.resize(machines_.size());
  for (int m = 0; m < num_machines(); ++m) {
    for (int j = 0; j < options.num_servers; ++j) {
      const int port = machines_[m].base_port + j;
      const int id = m * options.num_servers + j;
      if (port > 65535)
        return invalid_argument("server " + std::to_string(id) + ": port " + std::to_string(port) +
                                " is out of range");
      auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now());
      auto conn =
          ServerConnection::connect(io_->context(), machines_[m].host, static_cast<uint16_t>(port),
                                    id, std::max(left, milliseconds(1)), options.call_timeout, options.secret,
                                    net::TrafficTag{traffic_, m});
      if (!conn.is_ok()) {
        return conn.status().with_context("machine " + std::to_string(m) + " (" +
                                          options.ip_config.string() + " line " +
                                          std::to_string(machines_[m].line) + ")");
      }
      servers_[m].push_back(std::move(*conn));
    }
  }
  std::mt19937_64 rng(options.balance_seed ? options.balance_seed : std::random_device{}());
  for (int m = 0; m < num_machines(); ++m) {
    pick_.push_back(static_cast<int>(rng() % static_cast<uint64_t>(options.num_servers)));
  }

  DGLD_ASSIGN_OR_RETURN(reg_,
                        main_server(0).register_client(options.role, machine_id_, options.group,
                                                       options.requested_rank,
                                                       options.role == Role::trainer ? options.num_trainers : 0));
  for (int m = 0; m < num_machines(); ++m) {
    for (int j = 0; j < options.num_servers; ++j) {
      if (m == 0 && j == 0) continue;
      if (Status st = server(m, j).hello(reg_.client_id, options.role, machine_id_); !st.is_ok()) {
        return st.with_context("hello to server " + std::to_string(m * options.num_servers + j) +
                               " of machine " + std::to_string(m));
      }
    }
  }
  const int expected = options.role == Role::trainer ? reg_.expected_clients : 0;
  if (options.num_trainers > 0 && expected > 0 && options.num_trainers != expected) {
    return invalid_argument("num_trainers is " + std::to_string(options.num_trainers) +
                            " but the coordinator (" + main_server(0).peer() + ") expects " +
                            std::to_string(expected) + " trainers");
  }
  num_trainers_ = options.num_trainers > 0 ? options.num_trainers
                  : expected > 0           ? expected
                                           : num_machines();
  log()->info("{} {} (client {}) on machine {} connected to {} servers of {} machines",
              role_name(options.role), reg_.rank, reg_.client_id, machine_id_,
              num_machines() * options.num_servers, num_machines());
  hb_->thread = std::thread([this] { heartbeat_loop(); });
  return Status::ok();
}

Cluster::~Cluster() {
  if (hb_) {
    if (reg_.client_id >= 0) {
      if (Status st = leave(); !st.is_ok()) log()->warn("{}", st.to_string());
    }
    {
      std::lock_guard lock(hb_->mu);
      hb_->stop = true;
    }
    hb_->cv.notify_all();
    if (hb_->thread.joinable()) hb_->thread.join();
  }
  servers_.clear();
  local_.reset();
  io_.reset();
}

void Cluster::close_connections() {
  for (auto& machine : servers_) {
    for (auto& server : machine) server->rpc().close();
  }
  reg_.client_id = -1;  // nothing left to leave through
}

void Cluster::set_health(Status st) {
  std::lock_guard lock(hb_->mu);
  if (hb_->health.is_ok()) {
    log()->error("{}", st.to_string());
    hb_->health = std::move(st);
  }
}

void Cluster::heartbeat_loop() {
  const milliseconds interval =
      reg_.heartbeat_interval.count() > 0 ? reg_.heartbeat_interval : milliseconds(1000);
  std::unique_lock lock(hb_->mu);
  while (!hb_->stop) {
    hb_->cv.wait_for(lock, interval, [&] { return hb_->stop; });
    if (hb_->stop) break;
    lock.unlock();
    heartbeat_once();
    lock.lock();
  }
}

void Cluster::heartbeat_once() {
  auto dropped = main_server(0).heartbeat(reg_.client_id);
  if (!dropped.is_ok()) {
    set_health(dropped.status().with_context("heartbeat to the coordinator " + main_server(0).peer()));
  } else if (!dropped->empty()) {
    set_health(closed_error("the coordinator " + main_server(0).peer() + " dropped " + join(*dropped)));
  }
}

Status Cluster::health() const {
  std::lock_guard lock(hb_->mu);
  return hb_->health;
}

Status Cluster::barrier(const std::string& name, milliseconds timeout) {
  if (Status st = health(); !st.is_ok()) return st.with_context("barrier '" + name + "'");
  return main_server(0).barrier(reg_.client_id, options_.role, name, timeout);
}

Status Cluster::check_servers(milliseconds timeout) {
  std::mutex mu;
  std::vector<std::string> down;
  std::vector<std::thread> pings;
  for (int m = 0; m < num_machines(); ++m) {
    for (int j = 0; j < options_.num_servers; ++j) {
      pings.emplace_back([&, m, j] {
        if (Status st = server(m, j).ping(timeout); !st.is_ok()) {
          const auto& a = machines_[static_cast<size_t>(m)];
          std::lock_guard lock(mu);
          down.push_back("graph-server " + std::to_string(m * options_.num_servers + j) + " (machine " +
                         std::to_string(m) + ", " + a.host + ":" + std::to_string(a.base_port + j) +
                         ") does not answer: " + st.message());
        }
      });
    }
  }
  for (auto& t : pings) t.join();
  if (down.empty()) return Status::ok();
  std::sort(down.begin(), down.end());
  std::string all;
  for (const auto& d : down) all += (all.empty() ? "" : "; ") + d;
  return closed_error(all);
}

Status Cluster::diagnose(milliseconds timeout) {
  Status s = check_servers(timeout);
  // With every server answering, a heartbeat now rather than the last one's
  // news (this process may have been stopped, and dropped meanwhile).
  bool left = false;
  {
    std::lock_guard lock(hb_->mu);
    left = hb_->left;
  }
  if (s.is_ok() && !left) heartbeat_once();
  Status h = health();
  if (h.is_ok()) return s;
  if (s.is_ok()) return h;
  return Status(h.code(), h.message() + "; " + s.message());
}

Status Cluster::leave() {
  {
    std::lock_guard lock(hb_->mu);
    if (hb_->left) return Status::ok();
    hb_->left = true;
    hb_->stop = true;
  }
  hb_->cv.notify_all();
  if (hb_->thread.joinable()) hb_->thread.join();
  return main_server(0).leave(reg_.client_id).with_context("leave");
}

Status Cluster::shutdown_servers(const std::string& reason) {
  Status first = leave();
  auto note = [&](Status st) {
    if (first.is_ok() && !st.is_ok()) first = std::move(st);
  };
  for (int m = num_machines() - 1; m >= 0; --m) {
    for (int j = options_.num_servers - 1; j >= 0; --j) {
      note(server(m, j).shutdown(reason).with_context(
          "shutdown of server " + std::to_string(m * options_.num_servers + j)));
    }
  }
  return first;
}

}  // namespace dgld::client

namespace dgld::client {

Status Cluster::for_each_machine(const std::vector<int>& machines,
                                 const std::function<Status(int)>& fn) {
  if (machines.empty()) return Status::ok();
  std::vector<Status> results(machines.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i + 1 < machines.size(); ++i) {
    threads.emplace_back([&, i] { results[i] = fn(machines[i]); });
  }
  results.back() = fn(machines.back());
  for (auto& t : threads) t.join();
  for (auto& st : results) {
    if (!st.is_ok()) return st;
  }
  return Status::ok();
}

}  // namespace dgld::client
