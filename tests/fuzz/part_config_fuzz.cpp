// Fuzz target: the partition config parser (common/part_config.h) and the
// partition book built from it. Beyond "no crash": an accepted config passes
// validate_part_config, survives a round trip through part_config_to_json,
// and its RangePartitionBook maps every range boundary to the right owner
// and local id.

#include <string>

#include "common/part_config.h"
#include "common/partition/partition_book.h"
#include "tests/fuzz/fuzz_target.h"

using namespace dgld;

namespace {

void check_book(const std::vector<IdRange>& ranges, int64_t total, bool nodes, const RangePartitionBook& book) {
  auto owner = [&](int64_t id) { return nodes ? book.node_partition(id) : book.edge_partition(id); };
  auto local = [&](int64_t id) { return nodes ? book.node_local_id(id) : book.edge_local_id(id); };
  FUZZ_CHECK(owner(-1) == -1 && owner(total) == -1 && local(-1) == -1 && local(total) == -1,
             "an id outside [0, total) has an owner");
  for (size_t p = 0; p < ranges.size() && p < 4096; ++p) {
    const IdRange& r = ranges[p];
    if (r.size() == 0) continue;
    for (int64_t id : {r.start, r.end - 1, r.start + r.size() / 2}) {
      FUZZ_CHECK(owner(id) == static_cast<int>(p), "wrong owner for a boundary id");
      FUZZ_CHECK(local(id) == id - r.start, "wrong local id");
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto c = parse_part_config(text, "g.json", "/nonexistent");
  if (!c.is_ok()) {
    FUZZ_CHECK(c.status().message().rfind("g.json", 0) == 0, "an error that does not name the file");
    return 0;
  }
  FUZZ_CHECK(validate_part_config(*c, "g.json").is_ok(), "parsed a config that does not validate");
  const std::string json = part_config_to_json(*c);
  auto again = parse_part_config(json, "again.json", "/nonexistent");
  FUZZ_CHECK(again.is_ok(), "the config written back does not parse");
  FUZZ_CHECK(again->graph_name == c->graph_name && again->num_nodes == c->num_nodes &&
                 again->num_edges == c->num_edges && again->num_parts == c->num_parts &&
                 again->halo_hops == c->halo_hops && again->node_map == c->node_map &&
                 again->edge_map == c->edge_map && again->ntype == c->ntype && again->etype == c->etype &&
                 again->num_trainers_per_machine == c->num_trainers_per_machine,
             "the config written back parses differently");
  auto book = RangePartitionBook::from_config(*c);
  FUZZ_CHECK(book.is_ok(), "a valid config has no partition book");
  FUZZ_CHECK(book->num_partitions() == c->num_parts && book->num_nodes() == c->num_nodes &&
                 book->num_edges() == c->num_edges,
             "partition book totals");
  check_book(c->node_map, c->num_nodes, true, *book);
  check_book(c->edge_map, c->num_edges, false, *book);
  return 0;
}
