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
      .def("prune", [](const CheckpointStore& s, Position p) { s.prune(from_tuple(p)); });
  m.def(
      "agreed_position",
      [](const std::vector<std::vector<Position>>& per_rank) -> std::optional<Position> {
        std::vector<std::vector<CheckpointPosition>> all;
        for (const auto& v : per_rank) {
          all.emplace_back();
          for (const auto& p : v) all.back().push_back(from_tuple(p));
        }
        auto agreed = agreed_position(all);
        if (!agreed) return std::nullopt;
        return to_tuple(*agreed);
      },
      "The newest position every rank holds (each rank's valid() list), None when there is none.");
  m.def("checkpoint_exchange", [] { return kCheckpointExchange; });
  m.def("encode_position", [](Position p) { return from_tuple(p).encode(); });
  m.def("decode_position", [](int64_t v) { return to_tuple(CheckpointPosition::decode(v)); });
  m.def("position_str", [](Position p) { return from_tuple(p).str(); });
  m.def("progress_line", [](const std::string& event, Position p) { return progress_line(event, from_tuple(p)); });
}

}  // namespace dgld::python
