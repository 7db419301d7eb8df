// The trainers' group formation (daemons/trainer_host/dist_collectives.h) in
// one process, two ranks on loopback threads: it forms through dgld's
// authenticated store and every pair proves the secret; a stranger who
// takes rank 0's Gloo listening port while rank 1 is late (as a port scanner
// would) makes the first try fail on both ranks, and the second try forms
// the group, which then allreduces correctly.
// LibTorch first: its glog CHECK macros must not replace Catch2's.
#include "daemons/trainer_host/dist_collectives.h"

#include <catch2/catch.hpp>

#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <future>
#include <set>
#include <sstream>
#include <thread>

#include <boost/asio.hpp>

#include "tests/support/process.h"

using namespace dgld;
using namespace dgld::trainer;
using namespace dgld::trainer::dist;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

net::SecretPtr test_secret() { return std::make_shared<const net::Secret>(std::vector<uint8_t>(32, 9)); }

// TCP ports this process listens on (its sockets' inodes in /proc/net/tcp).
std::set<int> own_listening_ports() {
  std::set<std::string> inodes;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/proc/self/fd", ec)) {
    const auto target = fs::read_symlink(e.path(), ec).string();
    if (target.rfind("socket:[", 0) == 0) inodes.insert(target.substr(8, target.size() - 9));
  }
  std::set<int> ports;
  std::ifstream tcp("/proc/net/tcp");
  std::string line;
  std::getline(tcp, line);
  while (std::getline(tcp, line)) {
    std::istringstream in(line);
    std::string sl, local, remote, state, queues, tr, retr, uid, timeout, inode;
    in >> sl >> local >> remote >> state >> queues >> tr >> retr >> uid >> timeout >> inode;
    if (state == "0A" && inodes.count(inode)) ports.insert(std::stoi(local.substr(local.find(':') + 1), nullptr, 16));
  }
  return ports;
}

Result<std::unique_ptr<Collectives>> join(int rank, int port) {
  return Collectives::create("127.0.0.1", port, "127.0.0.1", rank, 2, 20s, test_secret());
}

void check_allreduce(Collectives& a, Collectives& b) {
  auto ta = torch::full({3}, 1.0f), tb = torch::full({3}, 2.0f);
  auto fa = std::async(std::launch::async, [&] { return a.allreduce(ta, Reduce::sum, "test"); });
  REQUIRE(b.allreduce(tb, Reduce::sum, "test").is_ok());
  REQUIRE(fa.get().is_ok());
  CHECK(ta.data_ptr<float>()[0] == 3.0f);
  CHECK(tb.data_ptr<float>()[2] == 3.0f);
}

}  // namespace

TEST_CASE("collectives: the group forms through the authenticated store", "[collectives]") {
  const int port = testing::free_port_range(1);
  auto r1 = std::async(std::launch::async, [&] { return join(1, port); });
  auto c0 = join(0, port);
  auto c1 = r1.get();
  INFO(c0.status().to_string() << " / " << c1.status().to_string());
  REQUIRE(c0.is_ok());
  REQUIRE(c1.is_ok());
  check_allreduce(**c0, **c1);
}

TEST_CASE("collectives: a stranger on a Gloo port while the group forms costs one try, not the job",
          "[collectives]") {
  const int port = testing::free_port_range(1);
  // The stranger: watches this process's listening ports and takes the first
  // one that is not the store's (rank 0's Gloo pair, waiting for rank 1),
  // sends it random bytes and holds it.
  std::atomic<bool> stop{false};
  std::atomic<int> taken{0};
  std::thread stranger([&] {
    boost::asio::io_context io;
    boost::asio::ip::tcp::socket s(io);
    while (!stop && taken == 0) {
      for (int p : own_listening_ports()) {
        if (p == port) continue;
        boost::system::error_code ec;
        s.connect({boost::asio::ip::make_address("127.0.0.1"), static_cast<uint16_t>(p)}, ec);
        if (ec) {
          s.close();
          continue;
        }
        std::vector<uint8_t> junk(4096);
        for (size_t i = 0; i < junk.size(); ++i) junk[i] = static_cast<uint8_t>(i * 131 + 7);
        boost::asio::write(s, boost::asio::buffer(junk), ec);
        taken = p;
        break;
      }
      std::this_thread::sleep_for(1ms);
    }
    while (!stop) std::this_thread::sleep_for(10ms);
  });
  auto r1 = std::async(std::launch::async, [&] {
    while (taken == 0) std::this_thread::sleep_for(5ms);  // late: the stranger is first
    return join(1, port);
  });
  auto c0 = join(0, port);
  auto c1 = r1.get();
  stop = true;
  stranger.join();
  INFO(c0.status().to_string() << " / " << c1.status().to_string());
  CHECK(taken != 0);
  REQUIRE(c0.is_ok());
  REQUIRE(c1.is_ok());
  check_allreduce(**c0, **c1);
}

TEST_CASE("collectives: a point-to-point exchange stops waiting once the cluster's health fails", "[collectives]") {
  // Checkpoint copies use Gloo's send and receive, which have no future for
  // await_healthy: the exchange watches the health itself and aborts them.
  const int port = testing::free_port_range(1);
  auto r1 = std::async(std::launch::async, [&] { return join(1, port); });
  auto c0 = join(0, port);
  auto c1 = r1.get();
  REQUIRE(c0.is_ok());
  REQUIRE(c1.is_ok());
  const auto t0 = std::chrono::steady_clock::now();
  (*c0)->watch(
      [t0]() -> Status {
        if (std::chrono::steady_clock::now() - t0 < 500ms) return Status::ok();
        return closed_error("the coordinator dropped trainer 1");
      },
      [] { return Status::ok(); });
  // Rank 1 never sends: without the watch rank 0 would wait the 20 s deadline.
  std::vector<TrainingBackend::Transfer> sends, recvs;
  recvs.push_back({1, torch::zeros({16}, torch::kUInt8)});
  const Status st = (*c0)->exchange(sends, recvs, "copying a checkpoint");
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  INFO(st.to_string());
  CHECK_FALSE(st.is_ok());
  CHECK_THAT(st.message(), Catch::Contains("the coordinator dropped trainer 1") &&
                               Catch::Contains("copying a checkpoint (given up while waiting for it)"));
  CHECK(waited < 2.0);
  WARN("exchange given up " << waited << " s after it began (health failing from 0.5 s, checked every 0.2 s)");
}
