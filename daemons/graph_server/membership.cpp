#include "daemons/graph_server/membership.h"

#include <set>

#include "common/logging.h"

namespace dgld::graph_server {

const char* role_name(ClientRole r) { return r == ClientRole::trainer ? "trainer" : "sampler"; }

std::string ClientRecord::describe() const {
  return std::string(role_name(role)) + " " + std::to_string(rank) + " (client " + std::to_string(client_id) +
         ", pid " + std::to_string(pid) + " on " + (host.empty() ? "?" : host) + ", machine " +
         std::to_string(machine_id) + ")";
}

int Membership::expected(ClientRole role) const {
  if (role != ClientRole::trainer) return opts_.expected_samplers;
  return opts_.expected_trainers > 0 ? opts_.expected_trainers : announced_trainers_;
}

int Membership::active_count_locked(ClientRole role) const {
  int n = 0;
  for (const auto& [id, c] : clients_) n += (c.role == role && !c.left);
  return n;
}

Result<ClientRecord> Membership::register_client(ClientRole role, int machine_id, int64_t pid,
                                                 const std::string& host, int group, int requested_rank,
                                                 int job_trainers) {
  std::lock_guard lock(mu_);
  if (!opts_.one_job && active_count_locked(ClientRole::trainer) + active_count_locked(ClientRole::sampler) == 0 &&
      (!clients_.empty() || !dropped_.empty())) {
    // Everyone of the last job has left or was dropped: this client starts a
    // new one (long-lived servers serve job after job), with no history.
    logger("cluster")->info("a new job begins: forgetting {} client(s) and {} drop(s) of the last one",
                            clients_.size(), dropped_.size());
    clients_.clear();
    dropped_.clear();
    dropped_trainers_.clear();
    first_drop_by_role_.clear();
    dropped_by_id_.clear();
    barriers_.clear();
    announced_trainers_ = 0;
  }
  if (role == ClientRole::trainer && job_trainers > 0) announced_trainers_ = std::max(announced_trainers_, job_trainers);
  // Ranks of clients still in the job; a rank that left may be taken again,
  // except by a one-job server's clients.
  std::set<int> taken;
  for (const auto& [id, c] : clients_) {
    if (c.role == role && (!c.left || opts_.one_job)) taken.insert(c.rank);
  }
  int rank = requested_rank;
  if (rank >= 0) {
    if (taken.count(rank)) {
      return invalid_argument(std::string(role_name(role)) + " rank " + std::to_string(rank) +
                              " is already registered (two clients were given the same rank)");
    }
  } else {
    rank = 0;
    while (taken.count(rank)) ++rank;
  }
  int limit = expected(role);
  if (limit > 0 && rank >= limit) {
    return invalid_argument(std::string(role_name(role)) + " rank " + std::to_string(rank) +
                            " is beyond the " + std::to_string(limit) + " the coordinator expects");
  }
  ClientRecord c;
  c.client_id = next_id_++;
  c.role = role;
  c.rank = rank;
  c.machine_id = machine_id;
  c.pid = pid;
  c.host = host;
  c.group = group;
  c.last_seen = Clock::now();
  clients_[c.client_id] = c;
  logger("cluster")->info("registered {}", c.describe());
  return c;
}

Status Membership::heartbeat(int client_id) {
  std::lock_guard lock(mu_);
  auto it = clients_.find(client_id);
  if (it == clients_.end()) {
    if (auto d = dropped_by_id_.find(client_id); d != dropped_by_id_.end()) {
      return closed_error("the coordinator dropped this client: " + d->second);
    }
    return not_found("client " + std::to_string(client_id) + " is not registered");
  }
  it->second.last_seen = Clock::now();
  return Status::ok();
}

void Membership::barrier(int client_id, ClientRole role, const std::string& name, Clock::time_point deadline,
                         BarrierDone done) {
  std::vector<std::function<void()>> fire;
  {
    std::lock_guard lock(mu_);
    auto it = clients_.find(client_id);
    if (it == clients_.end()) {
      fire.push_back([done] { done(not_found("barrier from an unregistered client"), 0); });
    } else if (auto d = first_drop_by_role_.find(static_cast<int>(role)); d != first_drop_by_role_.end()) {
      fire.push_back([done, why = d->second] { done(closed_error("barrier cannot complete: " + why), 0); });
    } else {
      it->second.last_seen = Clock::now();
      auto& b = barriers_[{static_cast<int>(role), name}];
      if (b.waiters.empty()) b.deadline = deadline;
      b.deadline = std::min(b.deadline, deadline);
      b.waiters[client_id] = std::move(done);
      try_complete_locked(role, name, fire);
    }
  }
  for (auto& f : fire) f();
}

void Membership::try_complete_locked(ClientRole role, const std::string& name,
                                     std::vector<std::function<void()>>& fire) {
  auto key = std::make_pair(static_cast<int>(role), name);
  auto it = barriers_.find(key);
  if (it == barriers_.end()) return;
  int need = std::max(expected(role), active_count_locked(role));
  int arrived = static_cast<int>(it->second.waiters.size());
  if (arrived < need) return;
  for (auto& [id, done] : it->second.waiters) fire.push_back([done = std::move(done), arrived] { done(Status::ok(), arrived); });
  barriers_.erase(it);
}

Status Membership::leave(int client_id) {
  std::vector<std::function<void()>> fire;
  {
    std::lock_guard lock(mu_);
    auto it = clients_.find(client_id);
    if (it == clients_.end()) return not_found("client " + std::to_string(client_id) + " is not registered");
    it->second.left = true;
    logger("cluster")->info("{} left", it->second.describe());
    // Barriers of its role may now be complete without it.
    std::vector<std::string> names;
    for (const auto& [key, b] : barriers_) {
      if (key.first == static_cast<int>(it->second.role)) names.push_back(key.second);
    }
    for (const auto& n : names) try_complete_locked(it->second.role, n, fire);
  }
  for (auto& f : fire) f();
  return Status::ok();
}

void Membership::drop_locked(ClientRecord& c, const std::string& why, std::vector<std::function<void()>>& fire) {
  const std::string what = c.describe() + " " + why;
  logger("cluster")->error("dropping {}", what);
  dropped_.push_back(what);
  if (c.role == ClientRole::trainer) dropped_trainers_.push_back(what);
  first_drop_by_role_.emplace(static_cast<int>(c.role), what);
  dropped_by_id_[c.client_id] = what;
  const ClientRole role = c.role;
  const int id = c.client_id;
  clients_.erase(id);
  for (auto it = barriers_.begin(); it != barriers_.end();) {
    if (it->first.first != static_cast<int>(role)) {
      ++it;
      continue;
    }
    for (auto& [wid, done] : it->second.waiters) {
      fire.push_back([done = std::move(done), what] { done(closed_error("barrier cannot complete: " + what), 0); });
    }
    it = barriers_.erase(it);
  }
}

void Membership::connection_lost(int client_id, const std::string& why) {
  std::vector<std::function<void()>> fire;
  {
    std::lock_guard lock(mu_);
    auto it = clients_.find(client_id);
    if (it == clients_.end() || it->second.left) return;
    drop_locked(it->second, "lost its connection to the coordinator (" + why + ")", fire);
  }
  for (auto& f : fire) f();
}

void Membership::sweep(Clock::time_point now) {
  std::vector<std::function<void()>> fire;
  {
    std::lock_guard lock(mu_);
    std::vector<int> stale;
    for (auto& [id, c] : clients_) {
      if (!c.left && now - c.last_seen > opts_.heartbeat_timeout) stale.push_back(id);
    }
    for (int id : stale) {
      auto it = clients_.find(id);
      if (it == clients_.end()) continue;
      auto silent = std::chrono::duration_cast<std::chrono::milliseconds>(now - it->second.last_seen);
      drop_locked(it->second, "sent no heartbeat for " + std::to_string(silent.count()) + " ms (timeout " +
                                  std::to_string(opts_.heartbeat_timeout.count()) + " ms)", fire);
    }
    for (auto it = barriers_.begin(); it != barriers_.end();) {
      if (now < it->second.deadline) {
        ++it;
        continue;
      }
      std::string missing;
      for (const auto& [id, c] : clients_) {
        if (static_cast<int>(c.role) == it->first.first && !c.left && !it->second.waiters.count(id)) {
          missing += (missing.empty() ? "" : ", ") + c.describe();
        }
      }
      int need = std::max(expected(static_cast<ClientRole>(it->first.first)),
                          active_count_locked(static_cast<ClientRole>(it->first.first)));
      std::string msg = "barrier '" + it->first.second + "' timed out with " +
                        std::to_string(it->second.waiters.size()) + " of " + std::to_string(need) + " arrived";
      if (!missing.empty()) msg += "; not arrived: " + missing;
      for (auto& [wid, done] : it->second.waiters) fire.push_back([done = std::move(done), msg] { done(timeout_error(msg), 0); });
      it = barriers_.erase(it);
    }
  }
  for (auto& f : fire) f();
}

std::optional<ClientRecord> Membership::find(int client_id) const {
  std::lock_guard lock(mu_);
  auto it = clients_.find(client_id);
  if (it == clients_.end()) return std::nullopt;
  return it->second;
}

std::vector<std::string> Membership::dropped() const {
  std::lock_guard lock(mu_);
  return dropped_;
}

std::vector<std::string> Membership::dropped_trainers() const {
  std::lock_guard lock(mu_);
  return dropped_trainers_;
}

int Membership::num_active() const {
  std::lock_guard lock(mu_);
  return active_count_locked(ClientRole::trainer) + active_count_locked(ClientRole::sampler);
}

}  // namespace dgld::graph_server
