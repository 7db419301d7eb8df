// dgld._C.GraphServer: a graph-server running in this process (the library
// the graph-server daemon is made of, daemons/graph_server/server.h), for
// DGL's standalone mode (the script's one partition served in-process on a
// private loopback port, dgld/distributed/dist_context.py) and DGL's
// DistGraphServer, which custom launchers run in their own processes
// (dgld/distributed/dist_graph_server.py).
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "common/net/auth.h"
#include "common/shm/cleanup.h"
#include "daemons/graph_server/server.h"
#include "python/src/binding.h"

namespace dgld::python {

namespace {

// Owns the server and a thread that waits for it to stop (a Shutdown
// request from the job's last client, stop(), or an error).
class LocalGraphServer {
 public:
  explicit LocalGraphServer(const graph_server::GraphServerOptions& o) {
    Result<std::unique_ptr<graph_server::GraphServer>> s = [&] {
      py::gil_scoped_release release;
      return graph_server::GraphServer::create(o);
    }();
    check(s.status());
    server_ = std::move(s).value();
    waiter_ = std::thread([this] {
      Status st = server_->wait();
      std::lock_guard lock(mu_);
      result_ = st;
      done_ = true;
      cv_.notify_all();
    });
  }

  ~LocalGraphServer() {
    py::gil_scoped_release release;
    stop("the Python object was released");
    if (waiter_.joinable()) waiter_.join();
    server_.reset();
    // The segments this server made (its partition, the DistTensors): gone
    // with it, as when the daemon exits.
    shm::unlink_all_registered_segments();
  }

  uint16_t port() const { return server_->port(); }

  // Blocks until the server stops (Ctrl-C stops it and raises
  // KeyboardInterrupt); raises the error it stopped with, if any.
  void serve() {
    try {
      wait_interruptibly([this](std::chrono::milliseconds step) {
        std::unique_lock lock(mu_);
        return cv_.wait_for(lock, step, [this] { return done_; });
      });
    } catch (py::error_already_set&) {
      stop("interrupted");
      throw;
    }
    std::lock_guard lock(mu_);
    check(result_);
  }

  bool stopped() {
    std::lock_guard lock(mu_);
    return done_;
  }

  void stop(const std::string& reason) {
    if (server_ && !stopped()) server_->stop(reason);
  }

 private:
  std::unique_ptr<graph_server::GraphServer> server_;
  std::thread waiter_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  Status result_;
};

}  // namespace

void bind_servers(py::module_& m) {
  py::class_<graph_server::GraphServerOptions>(m, "GraphServerOptions")
      .def(py::init<>())
      .def_property(
          "part_config", [](const graph_server::GraphServerOptions& o) { return o.part_config.string(); },
          [](graph_server::GraphServerOptions& o, const std::string& p) { o.part_config = p; })
      .def_property(
          "ip_config", [](const graph_server::GraphServerOptions& o) { return o.ip_config.string(); },
          [](graph_server::GraphServerOptions& o, const std::string& p) { o.ip_config = p; })
      .def_readwrite("server_id", &graph_server::GraphServerOptions::server_id)
      .def_readwrite("num_servers", &graph_server::GraphServerOptions::num_servers)
      .def_readwrite("num_clients", &graph_server::GraphServerOptions::num_clients)
      .def_readwrite("num_samplers", &graph_server::GraphServerOptions::num_samplers)
      .def_readwrite("num_threads", &graph_server::GraphServerOptions::num_threads)
      .def_readwrite("job_id", &graph_server::GraphServerOptions::job_id)
      .def_readwrite("exit_when_clients_leave", &graph_server::GraphServerOptions::exit_when_clients_leave)
      .def_property(
          "client_wait_s", [](const graph_server::GraphServerOptions& o) { return o.client_wait.count() / 1000.0; },
          [](graph_server::GraphServerOptions& o, double s) {
            o.client_wait = std::chrono::milliseconds(static_cast<int64_t>(s * 1000));
          })
      .def("set_secret_file", [](graph_server::GraphServerOptions& o, const std::string& path) {
        auto secret = net::load_secret_file(path);
        check(secret.status());
        o.secret = std::move(secret).value();
      });
  py::class_<LocalGraphServer>(m, "GraphServer")
      .def(py::init<const graph_server::GraphServerOptions&>(), py::arg("options"))
      .def_property_readonly("port", &LocalGraphServer::port)
      .def("serve", &LocalGraphServer::serve)
      .def("stopped", &LocalGraphServer::stopped)
      .def("stop", &LocalGraphServer::stop, py::arg("reason") = "stopped by its owner",
           py::call_guard<py::gil_scoped_release>());
  m.def("write_new_secret_file", [](const std::string& path) { check(net::write_new_secret_file(path)); });
}

}  // namespace dgld::python
