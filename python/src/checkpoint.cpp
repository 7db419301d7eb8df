// dgld._C.CheckpointStore: common/checkpoint_store.h for Python's
// dgld.distributed.Checkpointer, so that a Python trainer's checkpoints are
// sealed, checked, agreed on and pruned by the same code as trainer-host's.
// Positions cross as (epoch, step) tuples, JSON as text.
#include "common/checkpoint_store.h"
#include "python/src/binding.h"

namespace dgld::python {

namespace {

using Position = std::pair<int64_t, int64_t>;

CheckpointPosition from_tuple(const Position& p) { return {p.first, p.second}; }
Position to_tuple(const CheckpointPosition& p) { return {p.epoch, p.step}; }

}  // namespace

void bind_checkpoint(py::module_& m) {
  py::class_<CheckpointStore>(m, "CheckpointStore")
      .def(py::init<std::string, int>(), py::arg("root"), py::arg("rank"))
      // Rank `rank`'s replicas as this machine holds them (<root>/replica/rank-<rank>).
      .def_static(
          "replica", [](const std::string& root, int rank) { return CheckpointStore::replica(root, rank); },
          py::arg("root"), py::arg("rank"))
      .def("prepare", [](const CheckpointStore& s) { check(s.prepare()); })
      .def_property_readonly("dir", [](const CheckpointStore& s) { return s.dir().string(); })
      .def("payload_path", [](const CheckpointStore& s, Position p) { return s.payload_path(from_tuple(p)).string(); })
      .def("meta_path", [](const CheckpointStore& s, Position p) { return s.meta_path(from_tuple(p)).string(); })
      .def("temp_payload_path",
           [](const CheckpointStore& s, Position p) { return s.temp_payload_path(from_tuple(p)).string(); })
      .def(
          "seal",
          [](const CheckpointStore& s, Position p, const std::string& written, const std::string& meta_json) {
            nlohmann::json meta;
            try {
              meta = nlohmann::json::parse(meta_json);
            } catch (const std::exception& e) {
              check(invalid_argument(std::string("checkpoint metadata is not JSON: ") + e.what()));
            }
            py::gil_scoped_release release;
            check(s.seal(from_tuple(p), written, std::move(meta)));
          },
          py::arg("position"), py::arg("written"), py::arg("meta_json"))
      // ([positions held intact, newest first], [(path, reason) of each refused one])
      .def("valid",
           [](const CheckpointStore& s) {
             std::vector<RefusedCheckpoint> refused;
             std::vector<CheckpointPosition> held;
             {
               py::gil_scoped_release release;
               held = s.valid(&refused);
             }
             std::vector<Position> out;
             for (const auto& p : held) out.push_back(to_tuple(p));
             std::vector<std::pair<std::string, std::string>> bad;
             for (const auto& r : refused) bad.emplace_back(r.path.string(), r.reason);
             return std::make_pair(out, bad);
           })
      .def("verify",
           [](const CheckpointStore& s, Position p) {
             auto meta = [&] {
               py::gil_scoped_release release;
               return s.verify(from_tuple(p));
             }();
             return unwrap(std::move(meta)).dump();
           })
      // (payload bytes, JSON bytes) of a verified position, to send to another trainer.
      .def("read",
           [](const CheckpointStore& s, Position p) {
             auto files = [&] {
               py::gil_scoped_release release;
               return s.read(from_tuple(p));
             }();
             auto f = unwrap(std::move(files));
             return std::make_pair(py::bytes(f.payload), py::bytes(f.meta));
           })
      // Places received files as position p here and verifies them (removed
      // and refused, naming `sender`, when they do not verify).
      .def(
          "adopt",
          [](const CheckpointStore& s, Position p, const py::bytes& payload, const py::bytes& meta,
             const std::string& sender) {
            CheckpointStore::Files f{std::string(payload), std::string(meta)};
            py::gil_scoped_release release;
            check(s.adopt(from_tuple(p), f, sender));
          },
          py::arg("position"), py::arg("payload"), py::arg("meta"), py::arg("sender"))
      .def("prune", [](const CheckpointStore& s, Position p) { s.prune(from_tuple(p)); });
  m.def("replica_holders", &replica_holders, py::arg("machine_of_rank"), py::arg("rank"), py::arg("k"));
  m.def("replicas_held_by", &replicas_held_by, py::arg("machine_of_rank"), py::arg("rank"), py::arg("k"));
  // The exchange that agrees on a position (checkpoint_store.h): this rank's
  // row of the table from held[r] (the positions it holds of rank r), and
  // from the summed table (position or None when no rank holds one, [the
  // rank that has each rank's files]); NotFound naming each rank's newest
  // anywhere when none is common.
  m.def("checkpoint_offer", [](const std::vector<std::vector<Position>>& held) {
    std::vector<std::vector<CheckpointPosition>> positions(held.size());
    for (size_t r = 0; r < held.size(); ++r) {
      for (const auto& p : held[r]) positions[r].push_back(from_tuple(p));
    }
    return checkpoint_offer(positions);
  });
  m.def(
      "agreed_from_offers",
      [](const std::vector<int64_t>& table, int world, const std::string& dir, const std::string& dir_option,
         const std::string& replicas_option) -> std::pair<std::optional<Position>, std::vector<int>> {
        auto plan = unwrap(agreed_from_offers(table, world, dir, dir_option, replicas_option));
        if (!plan.position) return {std::nullopt, {}};
        return {to_tuple(*plan.position), plan.source};
      },
      py::arg("table"), py::arg("world"), py::arg("dir"), py::arg("dir_option"),
      py::arg("replicas_option") = "--checkpoint-replicas");
  m.def("position_str", [](Position p) { return from_tuple(p).str(); });
  m.def("progress_line", [](const std::string& event, Position p) { return progress_line(event, from_tuple(p)); });
}

}  // namespace dgld::python
