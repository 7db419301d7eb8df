// dgld._C.RendezvousServer / RendezvousClient: the trainers' authenticated
// rendezvous store (client/rendezvous_store.h) for Python trainers, whose
// torch.distributed.init_process_group meets through it
// (dgld/distributed/rendezvous.py). Values cross as bytes; every call that
// may wait releases the GIL.
#include <chrono>

#include "client/rendezvous_store.h"
#include "common/net/auth.h"
#include "python/src/binding.h"

namespace dgld::python {

namespace {

using client::Bytes;
using client::RendezvousClient;
using client::RendezvousServer;

net::SecretPtr rendezvous_secret(const std::string& file) {
  if (file.empty()) return nullptr;
  return unwrap(net::load_secret_file(file));
}
Bytes bytes_from_py(const py::bytes& b) {
  const std::string s = b;
  return Bytes(s.begin(), s.end());
}
py::bytes bytes_to_py(const Bytes& b) { return py::bytes(reinterpret_cast<const char*>(b.data()), b.size()); }
std::chrono::milliseconds millis_of(double seconds) { return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000)); }

// The proof trainer `from` sends trainer `to` (net::pair_proof).
net::AuthMac pair_proof_of(const std::string& secret_file, const py::bytes& session, int from, int to) {
  if (secret_file.empty()) check(invalid_argument("a Gloo pair's proof needs the job's secret file"));
  return net::pair_proof(*rendezvous_secret(secret_file), bytes_from_py(session), from, to);
}

// Runs `f` without the GIL and raises its error.
template <typename F>
auto without_gil(F&& f) {
  py::gil_scoped_release release;
  return f();
}

}  // namespace

void bind_rendezvous(py::module_& m) {
  // The Gloo pairs' proofs (net::pair_proof): what a trainer sends a peer,
  // and whether what a peer sent verifies.
  m.attr("pair_proof_session_key") = net::kPairProofSessionKey;
  m.def(
      "pair_proof",
      [](const std::string& secret_file, const py::bytes& session, int from, int to) {
        const net::AuthMac mac = pair_proof_of(secret_file, session, from, to);
        return py::bytes(reinterpret_cast<const char*>(mac.data()), mac.size());
      },
      py::arg("secret_file"), py::arg("session"), py::arg("sender"), py::arg("receiver"));
  m.def(
      "pair_proof_matches",
      [](const std::string& secret_file, const py::bytes& session, int from, int to, const py::bytes& received) {
        return net::mac_matches(bytes_from_py(received), pair_proof_of(secret_file, session, from, to));
      },
      py::arg("secret_file"), py::arg("session"), py::arg("sender"), py::arg("receiver"), py::arg("received"));

  py::class_<RendezvousServer>(m, "RendezvousServer")
      .def_static(
          "start",
          [](const std::string& host, int port, const std::string& secret_file) {
            auto secret = rendezvous_secret(secret_file);
            return unwrap(without_gil([&] { return RendezvousServer::start(host, static_cast<uint16_t>(port), secret); }));
          },
          py::arg("host"), py::arg("port"), py::arg("secret_file") = "")
      .def_property_readonly("port", &RendezvousServer::port)
      .def_property_readonly("refused", &RendezvousServer::refused);

  py::class_<RendezvousClient>(m, "RendezvousClient")
      .def_static(
          "connect",
          [](const std::string& host, int port, const std::string& secret_file, double timeout_s) {
            auto secret = rendezvous_secret(secret_file);
            return unwrap(without_gil(
                [&] { return RendezvousClient::connect(host, static_cast<uint16_t>(port), secret, millis_of(timeout_s)); }));
          },
          py::arg("host"), py::arg("port"), py::arg("secret_file") = "", py::arg("timeout_s") = 60.0)
      .def("set_timeout", [](RendezvousClient& c, double s) { c.set_timeout(millis_of(s)); })
      .def("set",
           [](RendezvousClient& c, const std::string& key, const py::bytes& value) {
             Bytes v = bytes_from_py(value);
             check(without_gil([&] { return c.set(key, v); }));
           })
      .def("get",
           [](RendezvousClient& c, const std::string& key) {
             return bytes_to_py(unwrap(without_gil([&] { return c.get(key); })));
           })
      .def("add",
           [](RendezvousClient& c, const std::string& key, int64_t delta) {
             return unwrap(without_gil([&] { return c.add(key, delta); }));
           })
      .def("compare_set",
           [](RendezvousClient& c, const std::string& key, const py::bytes& expected, const py::bytes& desired) {
             Bytes e = bytes_from_py(expected), d = bytes_from_py(desired);
             return bytes_to_py(unwrap(without_gil([&] { return c.compare_set(key, e, d); })));
           })
      .def("check",
           [](RendezvousClient& c, const std::vector<std::string>& keys) {
             return unwrap(without_gil([&] { return c.check(keys); }));
           })
      .def("delete_key",
           [](RendezvousClient& c, const std::string& key) {
             return unwrap(without_gil([&] { return c.remove(key); }));
           })
      .def("num_keys", [](RendezvousClient& c) { return unwrap(without_gil([&] { return c.num_keys(); })); })
      .def("wait", [](RendezvousClient& c, const std::vector<std::string>& keys, double timeout_s) {
        check(without_gil([&] { return c.wait(keys, millis_of(timeout_s)); }));
      });
}

}  // namespace dgld::python
