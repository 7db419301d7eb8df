#include "common/net/metrics_http.h"

#include <array>
#include <list>
#include <mutex>

#include <fmt/format.h>

#include "common/logging.h"
#include "common/net/connection.h"
#include "common/prometheus.h"

namespace dgld::net {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

namespace {

struct RequestLine {
  std::string method, target, version;
};

// "GET /metrics HTTP/1.1" (a trailing \r removed); nothing for anything else.
bool parse_request_line(std::string line, RequestLine& out) {
  if (!line.empty() && line.back() == '\r') line.pop_back();
  const size_t a = line.find(' ');
  const size_t b = a == std::string::npos ? a : line.find(' ', a + 1);
  if (a == std::string::npos || b == std::string::npos || line.find(' ', b + 1) != std::string::npos) return false;
  out.method = line.substr(0, a);
  out.target = line.substr(a + 1, b - a - 1);
  out.version = line.substr(b + 1);
  if (out.method.empty() || out.method.size() > 16 || out.target.empty()) return false;
  for (char c : out.method) {
    if (c < 'A' || c > 'Z') return false;
  }
  return out.version.rfind("HTTP/1.", 0) == 0 && out.version.size() == 8;
}

// Could `head` (possibly incomplete) start an HTTP request? Binary garbage
// (a dgld frame, TLS) is refused at its first byte instead of at the deadline.
bool plausible_start(const std::string& head) {
  for (size_t i = 0; i < head.size() && i < 17; ++i) {
    if (head[i] == ' ') return i > 0;
    if (head[i] < 'A' || head[i] > 'Z') return false;
  }
  return head.size() < 17;
}

HttpAnswer reply(int status, const char* reason, const std::string& content_type, const std::string& body,
                 const std::string& extra_headers = "") {
  HttpAnswer a;
  a.status = status;
  a.bytes = fmt::format("HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\n{}Connection: close\r\n\r\n",
                        status, reason, content_type, body.size(), extra_headers) + body;
  return a;
}

HttpAnswer text_reply(int status, const char* reason, const std::string& message,
                      const std::string& extra_headers = "") {
  return reply(status, reason, "text/plain; charset=utf-8", message + "\n", extra_headers);
}

}  // namespace

HttpAnswer answer_http_request(const std::string& head, const MetricsHttpServer::Render& render) {
  RequestLine r;
  if (!parse_request_line(head.substr(0, head.find('\n')), r)) {
    return text_reply(400, "Bad Request", "not an HTTP/1.x request line");
  }
  if (r.method != "GET") {
    return text_reply(405, "Method Not Allowed", "only GET /metrics is served", "Allow: GET\r\n");
  }
  const std::string path = r.target.substr(0, r.target.find('?'));
  if (path != "/metrics") return text_reply(404, "Not Found", "only /metrics is served here");
  if (!render) return text_reply(503, "Service Unavailable", "stopping");
  return reply(200, "OK", prom::kContentType, render());
}

struct HttpSession;

struct MetricsHttpServer::State {
  explicit State(asio::io_context& io_, Render r, MetricsHttpOptions o)
      : io(io_), acceptor(asio::make_strand(io_)), render(std::move(r)), opts(std::move(o)) {}
  asio::io_context& io;
  tcp::acceptor acceptor;
  std::mutex render_mu;  // held while rendering; stop() takes it, so render is not called after stop()
  Render render;
  bool stopped = false;
  MetricsHttpOptions opts;
  std::atomic<size_t> active{0};
  std::atomic<uint64_t> served{0}, not_found{0}, bad_method{0}, bad_request{0}, timed_out{0}, over_limit{0};
  std::mutex sessions_mu;
  std::list<std::weak_ptr<HttpSession>> sessions;

  std::string render_now(bool& ok) {
    std::lock_guard lock(render_mu);
    ok = !stopped;
    return ok ? render() : std::string();
  }
};

// One connection: read the head, answer, close; all on the socket's strand.
struct HttpSession : std::enable_shared_from_this<HttpSession> {
  HttpSession(tcp::socket s, std::shared_ptr<MetricsHttpServer::State> st)
      : socket(std::move(s)), timer(socket.get_executor()), state(std::move(st)) {}
  tcp::socket socket;
  asio::steady_timer timer;
  std::shared_ptr<MetricsHttpServer::State> state;
  std::string in, out;
  std::array<char, 2048> buf{};
  bool answered = false, closed = false;

  void start() {
    timer.expires_after(state->opts.deadline);
    timer.async_wait([self = shared_from_this()](const boost::system::error_code& ec) {
      if (ec || self->closed) return;
      if (!self->answered) ++self->state->timed_out;
      logger("net")->debug("{}: closed a connection whose request or answer took over {} ms", self->state->opts.name,
                           self->state->opts.deadline.count());
      self->close();
    });
    read();
  }

  void read() {
    socket.async_read_some(asio::buffer(buf), [self = shared_from_this()](const boost::system::error_code& ec, size_t n) {
      if (ec || self->closed) return self->close();
      self->in.append(self->buf.data(), n);
      self->consider();
    });
  }

  void consider() {
    const size_t cap = state->opts.max_request_bytes;
    if (!plausible_start(in)) return respond(text_reply(400, "Bad Request", "not an HTTP request"));
    const size_t eol = in.find('\n');
    if (eol != std::string::npos) {
      RequestLine r;
      if (!parse_request_line(in.substr(0, eol), r)) {
        return respond(text_reply(400, "Bad Request", "not an HTTP/1.x request line"));
      }
      // The head ends at the first empty line.
      size_t end = in.find("\n\r\n", eol);
      if (end == std::string::npos) end = in.find("\n\n", eol);
      if (end != std::string::npos && end < cap) {
        bool ok = true;
        const MetricsHttpServer::Render render = [this, &ok] { return state->render_now(ok); };
        HttpAnswer a = answer_http_request(in.substr(0, end + 1), render);
        if (!ok) a = text_reply(503, "Service Unavailable", "stopping");
        return respond(std::move(a));
      }
    }
    if (in.size() >= cap) {
      return respond(text_reply(431, "Request Header Fields Too Large",
                                fmt::format("the request's head is over {} bytes", cap)));
    }
    read();
  }

  void respond(HttpAnswer a) {
    answered = true;
    switch (a.status) {
      case 200: ++state->served; break;
      case 404: ++state->not_found; break;
      case 405: ++state->bad_method; break;
      case 400: case 431: ++state->bad_request; break;
      default: break;
    }
    out = std::move(a.bytes);
    asio::async_write(socket, asio::buffer(out), [self = shared_from_this()](const boost::system::error_code&, size_t) {
      self->close();
    });
  }

  void close() {
    if (closed) return;
    closed = true;
    timer.cancel();
    boost::system::error_code ec;
    socket.shutdown(tcp::socket::shutdown_both, ec);
    socket.close(ec);
    --state->active;
  }
};

namespace {

// Accepts connections until the acceptor is closed (stop()); holds the state,
// never the MetricsHttpServer, which may be gone by then.
void accept_next(const std::shared_ptr<MetricsHttpServer::State>& st) {
  st->acceptor.async_accept(asio::make_strand(st->io), [st](const boost::system::error_code& ec, tcp::socket s) {
    if (ec == asio::error::operation_aborted || !st->acceptor.is_open()) return;
    if (ec) {
      logger("net")->warn("{}: accept failed: {}", st->opts.name, ec.message());
      return accept_next(st);
    }
    if (st->active.load() >= st->opts.max_connections) {
      ++st->over_limit;
      boost::system::error_code ignored;
      s.close(ignored);
      return accept_next(st);
    }
    ++st->active;
    auto session = std::make_shared<HttpSession>(std::move(s), st);
    {
      std::lock_guard lock(st->sessions_mu);
      st->sessions.remove_if([](const auto& w) { return w.expired(); });
      st->sessions.push_back(session);
    }
    session->start();
    accept_next(st);
  });
}

}  // namespace

MetricsHttpServer::MetricsHttpServer(asio::io_context& io, Render render, MetricsHttpOptions opts)
    : io_(io), state_(std::make_shared<State>(io, std::move(render), std::move(opts))) {}

MetricsHttpServer::~MetricsHttpServer() { stop(); }

Status MetricsHttpServer::listen(const std::string& host, uint16_t port) {
  const std::string where = host + ":" + std::to_string(port);
  const std::string what = state_->opts.name + ": cannot listen on " + where + " (--metrics-port): ";
  boost::system::error_code ec;
  tcp::resolver resolver(io_);
  auto results = resolver.resolve(host, std::to_string(port), tcp::resolver::passive, ec);
  if (ec || results.empty()) return invalid_argument(what + "cannot resolve it: " + ec.message());
  auto& a = state_->acceptor;
  const tcp::endpoint ep = results.begin()->endpoint();
  a.open(ep.protocol(), ec);
  if (!ec) a.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) a.bind(ep, ec);
  if (!ec) a.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    a.close();
    const std::string hint = ec == asio::error::address_in_use ? " (another process holds it: pick another port)" : "";
    return io_error(what + ec.message() + hint);
  }
  port_ = a.local_endpoint().port();
  asio::post(a.get_executor(), [st = state_] { accept_next(st); });
  return Status::ok();
}

void MetricsHttpServer::stop() {
  auto st = state_;
  {
    std::lock_guard lock(st->render_mu);
    if (st->stopped) return;
    st->stopped = true;
  }
  asio::post(st->acceptor.get_executor(), [st] {
    boost::system::error_code ec;
    st->acceptor.close(ec);
  });
  std::lock_guard lock(st->sessions_mu);
  for (const auto& w : st->sessions) {
    if (auto s = w.lock()) asio::post(s->socket.get_executor(), [s] { s->close(); });
  }
}

MetricsHttpCounts MetricsHttpServer::counts() const {
  const auto& s = *state_;
  return {s.served.load(), s.not_found.load(), s.bad_method.load(), s.bad_request.load(), s.timed_out.load(),
          s.over_limit.load()};
}

}  // namespace dgld::net
