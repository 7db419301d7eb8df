#include "tests/cluster/switch.h"

#include <fcntl.h>
#include <net/if.h>
#include <linux/if_tun.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <deque>
#include <fstream>
#include <unordered_map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/file_util.h"
#include "common/net/asio.h"
#include "common/random.h"

namespace dgld::emu {

namespace asio = boost::asio;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

Status validate_switch_options(const SwitchOptions& o) {
  if (o.ports < 2 || o.ports > 64) return invalid_argument(fmt::format("--ports {}: expected 2 to 64", o.ports));
  if (o.tap_prefix.empty() || o.tap_prefix.size() + 2 >= IFNAMSIZ) {
    return invalid_argument(fmt::format("--tap-prefix '{}': expected 1 to {} characters", o.tap_prefix, IFNAMSIZ - 3));
  }
  if (o.mtu < 576 || o.mtu > 65000) return invalid_argument(fmt::format("--mtu {}: expected 576 to 65000", o.mtu));
  if (!(o.rate_bps >= 0) || !std::isfinite(o.rate_bps)) {
    return invalid_argument(fmt::format("--rate {}: expected a rate >= 0 bit/s", o.rate_bps));
  }
  if (!(o.delay_us >= 0 && o.delay_us <= 10e6)) {
    return invalid_argument(fmt::format("--delay-us {}: expected 0 to 10000000", o.delay_us));
  }
  if (!(o.loss >= 0 && o.loss < 1)) return invalid_argument(fmt::format("--loss {}: expected 0 <= loss < 1", o.loss));
  if (o.queue_bytes < 2 * o.mtu) {
    return invalid_argument(fmt::format("--queue-kb: {} bytes cannot hold two {}-byte frames", o.queue_bytes, o.mtu));
  }
  return Status::ok();
}

namespace {

struct Frame {
  Clock::time_point at;
  std::vector<uint8_t> bytes;
};

uint64_t mac_of(const uint8_t* p) {
  uint64_t m = 0;
  for (int i = 0; i < 6; ++i) m = (m << 8) | p[i];
  return m;
}

}  // namespace

struct Switch::Impl {
  struct Port {
    std::string name;
    std::unique_ptr<asio::posix::stream_descriptor> fd;
    std::unique_ptr<asio::steady_timer> timer;
    std::deque<Frame> queue;  // deliveries in time order
    Clock::time_point busy_until{};
    bool timer_armed = false;
    SplitMix64 rng{0};
    PortStats stats;
    uint64_t loss_threshold = 0;  // frames from or to this port: lost when their draw is below this
  };

  SwitchOptions o;
  asio::io_context ioc;
  asio::steady_timer stats_timer{ioc};
  std::vector<Port> ports;
  std::unordered_map<uint64_t, int> where;  // learnt MAC -> port
  std::vector<std::vector<uint8_t>> spare;  // frame buffers to reuse
  std::vector<uint8_t> rbuf = std::vector<uint8_t>(65536);
  Clock::duration delay{};
  static constexpr auto kSlack = 20us;  // deliveries this close to now go with the current batch

  std::vector<uint8_t> take_buffer(size_t n) {
    std::vector<uint8_t> b;
    if (!spare.empty()) {
      b = std::move(spare.back());
      spare.pop_back();
    }
    b.assign(rbuf.begin(), rbuf.begin() + static_cast<std::ptrdiff_t>(n));
    return b;
  }

  void watch(int p) {
    ports[static_cast<size_t>(p)].fd->async_wait(asio::posix::stream_descriptor::wait_read,
                                                 [this, p](const boost::system::error_code& ec) {
                                                   if (!ec) drain(p);
                                                 });
  }

  // Reads what port p's machine sent (at most a batch, then yields to the others).
  void drain(int p) {
    Port& in = ports[static_cast<size_t>(p)];
    for (int i = 0; i < 64; ++i) {
      const ssize_t n = ::read(in.fd->native_handle(), rbuf.data(), rbuf.size());
      if (n < 0) {
        if (errno == EINTR) continue;
        break;  // EAGAIN: drained (other errors: the device went; keep waiting)
      }
      if (n < 14) continue;
      const auto now = Clock::now();
      in.stats.in_frames++;
      in.stats.in_bytes += static_cast<uint64_t>(n);
      const uint64_t dst = mac_of(rbuf.data()), src = mac_of(rbuf.data() + 6);
      if (!(rbuf[6] & 1)) where[src] = p;
      const auto it = (rbuf[0] & 1) ? where.end() : where.find(dst);
      if (it != where.end()) {
        if (it->second != p) forward(p, it->second, static_cast<size_t>(n), now);
      } else {
        for (int q = 0; q < static_cast<int>(ports.size()); ++q) {
          if (q != p) forward(p, q, static_cast<size_t>(n), now);
        }
      }
    }
    watch(p);
  }

  void forward(int p, int q, size_t n, Clock::time_point now) {
    Port& out = ports[static_cast<size_t>(q)];
    const uint64_t loss_threshold = std::max(ports[static_cast<size_t>(p)].loss_threshold, out.loss_threshold);
    if (loss_threshold && out.rng.next() < loss_threshold) {
      out.stats.lost++;
      return;
    }
    auto start = now + delay;
    if (o.rate_bps > 0) {
      const auto backlog = out.busy_until > start ? out.busy_until - start : Clock::duration::zero();
      const auto backlog_bytes = static_cast<int64_t>(std::chrono::duration<double>(backlog).count() * o.rate_bps / 8);
      if (backlog_bytes + static_cast<int64_t>(n) > o.queue_bytes) {
        out.stats.queue_drops++;
        return;
      }
      out.stats.max_queue_bytes = std::max(out.stats.max_queue_bytes, backlog_bytes + static_cast<int64_t>(n));
      start = std::max(start, out.busy_until);
      out.busy_until = start + std::chrono::duration_cast<Clock::duration>(
                                   std::chrono::duration<double>(static_cast<double>(n) * 8 / o.rate_bps));
      start = out.busy_until;
    }
    out.queue.push_back(Frame{start, take_buffer(n)});
    if (!out.timer_armed) arm(q);
  }

  void arm(int q) {
    Port& out = ports[static_cast<size_t>(q)];
    out.timer_armed = true;
    out.timer->expires_at(out.queue.front().at);
    out.timer->async_wait([this, q](const boost::system::error_code& ec) {
      ports[static_cast<size_t>(q)].timer_armed = false;
      if (!ec) deliver(q);
    });
  }

  void deliver(int q) {
    Port& out = ports[static_cast<size_t>(q)];
    const auto until = Clock::now() + kSlack;
    while (!out.queue.empty() && out.queue.front().at <= until) {
      Frame& f = out.queue.front();
      ssize_t w;
      do {
        w = ::write(out.fd->native_handle(), f.bytes.data(), f.bytes.size());
      } while (w < 0 && errno == EINTR);
      if (w == static_cast<ssize_t>(f.bytes.size())) {
        out.stats.out_frames++;
        out.stats.out_bytes += f.bytes.size();
      } else {
        out.stats.write_errors++;
      }
      if (spare.size() < 4096) spare.push_back(std::move(f.bytes));
      out.queue.pop_front();
    }
    if (!out.queue.empty()) arm(q);
  }

  void write_stats() {
    if (o.stats_file.empty()) return;
    (void)write_file_atomic(o.stats_file, stats_json());
  }

  void tick() {
    stats_timer.expires_after(1s);
    stats_timer.async_wait([this](const boost::system::error_code& ec) {
      if (ec) return;
      write_stats();
      read_loss_file();
      tick();
    });
  }

  // Every port's loss as --loss, but for those the loss file names.
  void read_loss_file() {
    if (o.loss_file.empty()) return;
    std::vector<double> loss(ports.size(), o.loss);
    std::ifstream in(o.loss_file);
    size_t port = 0;
    double l = 0;
    while (in >> port >> l) {
      if (port < loss.size() && l >= 0 && l < 1) loss[port] = l;
    }
    for (size_t i = 0; i < ports.size(); ++i) ports[i].loss_threshold = static_cast<uint64_t>(std::ldexp(loss[i], 64));
  }

  std::string stats_json() const {
    nlohmann::json j;
    j["rate_bps"] = o.rate_bps;
    j["delay_us"] = o.delay_us;
    j["loss"] = o.loss;
    j["queue_bytes"] = o.queue_bytes;
    auto& arr = j["ports"] = nlohmann::json::array();
    for (const Port& p : ports) {
      const PortStats& s = p.stats;
      arr.push_back({{"tap", p.name},
                     {"in_frames", s.in_frames},
                     {"in_bytes", s.in_bytes},
                     {"out_frames", s.out_frames},
                     {"out_bytes", s.out_bytes},
                     {"lost", s.lost},
                     {"queue_drops", s.queue_drops},
                     {"write_errors", s.write_errors},
                     {"max_queue_bytes", s.max_queue_bytes}});
    }
    return j.dump(1) + "\n";
  }
};

Result<std::unique_ptr<Switch>> Switch::create(const SwitchOptions& options) {
  DGLD_RETURN_IF_ERROR(validate_switch_options(options));
  auto impl = std::make_unique<Impl>();
  impl->o = options;
  impl->delay = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double, std::micro>(options.delay_us));
  impl->ports.resize(static_cast<size_t>(options.ports));
  for (int i = 0; i < options.ports; ++i) {
    Impl::Port& p = impl->ports[static_cast<size_t>(i)];
    p.name = options.tap_prefix + std::to_string(i);
    p.rng = SplitMix64(derive_seed(options.seed, static_cast<uint64_t>(i)));
    p.loss_threshold = static_cast<uint64_t>(std::ldexp(options.loss, 64));
    const int fd = ::open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return io_error(fmt::format("/dev/net/tun: {}", std::strerror(errno)));
    ifreq ifr{};
    ifr.ifr_flags = IFF_TAP | IFF_NO_PI;
    std::strncpy(ifr.ifr_name, p.name.c_str(), IFNAMSIZ - 1);
    if (::ioctl(fd, TUNSETIFF, &ifr) != 0) {
      const int e = errno;
      ::close(fd);
      return io_error(fmt::format("creating TAP device {}: {}", p.name, std::strerror(e)));
    }
    p.fd = std::make_unique<asio::posix::stream_descriptor>(impl->ioc, fd);
    p.timer = std::make_unique<asio::steady_timer>(impl->ioc);
  }
  return std::unique_ptr<Switch>(new Switch(std::move(impl)));
}

Switch::Switch(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Switch::~Switch() = default;

void Switch::run() {
  for (int p = 0; p < impl_->o.ports; ++p) impl_->watch(p);
  impl_->tick();
  impl_->ioc.run();
  impl_->write_stats();
}

void Switch::stop() { impl_->ioc.stop(); }

std::vector<PortStats> Switch::stats() const {
  std::vector<PortStats> out;
  for (const auto& p : impl_->ports) out.push_back(p.stats);
  return out;
}

std::string Switch::stats_json() const { return impl_->stats_json(); }

}  // namespace dgld::emu
