// Fault injection with SIGSTOP: a trainer frozen for longer than the
// heartbeat deadline is dropped by the coordinator, its peer reports it, and
// the job stops: every trainer exits with an error, nothing hangs, and the
// servers are ready for the next job.
#include <catch2/catch.hpp>

#include <signal.h>

#include <fmt/format.h>

#include "client/server_api.h"
#include "common/net/io_threads.h"
#include "tests/fault/fault_util.h"
#include "tests/support/dist_job.h"

using namespace dgld;
using namespace dgld::testing;
using namespace std::chrono_literals;

TEST_CASE("fault: a trainer stopped (SIGSTOP) past the heartbeat deadline is reported by its peers and the job "
          "stops", "[fault][sigstop]") {
  // Heartbeats every 200 ms, dropped after 2 s of silence; collectives give up after 8 s.
  DistJob job;
  const std::vector<std::string> flags = {"--eval-every", "-1", "--collective-timeout-s", "8"};
  job.start_trainer(0, 1000, flags);
  job.start_trainer(1, 1000, flags);
  for (auto& t : job.trainers) {
    INFO("trainer log:\n" << t.log());
    REQUIRE(t.wait_for_log("Epoch 00001 | Loss", 90s));
  }
  Process& frozen = job.trainers[1];
  Process& peer = job.trainers[0];
  frozen.signal(SIGSTOP);
  const auto t_stop = std::chrono::steady_clock::now();
  // The coordinator drops it, and its peer hears of it through its heartbeats.
  const std::string who = fmt::format("trainer 1 (client");
  CHECK(job.servers[0].wait_for_log("dropping " + who, 5s));
  const double dropped_after = seconds_since(t_stop);
  CHECK(peer.wait_for_log("dropped " + who, 5s));
  const double reported_after = seconds_since(t_stop);
  // The peer gives up the collective it waits in for the dropped trainer at
  // once, not when the collective's deadline passes or trainer 1 runs again.
  const auto peer_rc = peer.wait(1500ms);
  const double peer_exited_after = seconds_since(t_stop);
  CHECK(peer_rc.has_value());
  CHECK(peer_exited_after < 4.0);
  // Frozen for twice the heartbeat deadline, then it runs again.
  std::this_thread::sleep_until(t_stop + 4s);
  frozen.signal(SIGCONT);

  // Both trainers stop with an error (no hang), whatever the thawed one was doing.
  for (Process* t : {&peer, &frozen}) {
    const auto rc = t->wait(20s);
    INFO("trainer log:\n" << t->log());
    REQUIRE(rc.has_value());
    CHECK(*rc == 1);
  }
  const double stopped_after = seconds_since(t_stop);
  INFO("coordinator log:\n" << job.servers[0].log());
  // Each says why: the peer that trainer 1 was dropped, trainer 1 that it was.
  const std::string peer_error = trainer_exit_error(peer.log()), frozen_error = trainer_exit_error(frozen.log());
  CHECK_THAT(peer_error, Catch::Contains("dropped " + who));
  CHECK_THAT(frozen_error, Catch::Contains("the coordinator dropped this client: " + who));
  WARN(fmt::format("SIGSTOP of trainer 1: dropped by the coordinator after {:.2f} s, reported by trainer 0 after "
                   "{:.2f} s, trainer 0 exited after {:.2f} s, both exited 1 within {:.2f} s (SIGCONT at 4 s).\n"
                   "trainer 0: {}\ntrainer 1: {}",
                   dropped_after, reported_after, peer_exited_after, stopped_after, peer_error.substr(peer_error.find("] error ") + 8),
                   frozen_error.substr(frozen_error.find("] error ") + 8)));
  // The servers forgot the failed job: a client registers as rank 0 of a new one.
  net::IoThreads io(1);
  auto conn = client::ServerConnection::connect(io.context(), "127.0.0.1", job.server_port(0), 0, 5s, 5s);
  REQUIRE(conn.is_ok());
  auto reg = (*conn)->register_client(client::Role::trainer, 0);
  REQUIRE(reg.is_ok());
  CHECK(reg->rank == 0);
  CHECK((*conn)->leave(reg->client_id).is_ok());
  CHECK(job.servers[0].running());
  CHECK(job.servers[1].running());
}
