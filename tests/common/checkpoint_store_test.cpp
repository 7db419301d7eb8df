#include "common/checkpoint_store.h"

#include <fstream>
#include <string>

#include <catch2/catch.hpp>

#include "common/file_util.h"
#include "tests/support/process.h"

using namespace dgld;
namespace fs = std::filesystem;

namespace {

// Writes `bytes` as the payload of `p` and seals it.
void save(const CheckpointStore& s, CheckpointPosition p, const std::string& bytes) {
  const fs::path tmp = s.temp_payload_path(p);
  REQUIRE(write_file_atomic(tmp, bytes).is_ok());
  REQUIRE(s.seal(p, tmp, {{"what", bytes.substr(0, 8)}}).is_ok());
}

}  // namespace

TEST_CASE("checkpoint store: a sealed position verifies; its JSON records the payload") {
  testing::TempDir dir("dgld-ckpt-store");
  CheckpointStore s(dir.path(), 3);
  REQUIRE(s.prepare().is_ok());
  CHECK(s.dir() == dir.path() / "rank-3");
  save(s, {2, 40}, std::string(100000, 'x'));
  auto meta = s.verify({2, 40});
  REQUIRE(meta.is_ok());
  CHECK((*meta)["rank"] == 3);
  CHECK((*meta)["position"]["epoch"] == 2);
  CHECK((*meta)["position"]["step"] == 40);
  CHECK((*meta)["payload"]["bytes"] == 100000);
  CHECK((*meta)["payload"]["file"] == "ckpt-2-40.pt");
  CHECK((*meta)["what"] == "xxxxxxxx");
  CHECK(s.valid() == std::vector<CheckpointPosition>{{2, 40}});
  CHECK_FALSE(fs::exists(s.temp_payload_path({2, 40})));
}

TEST_CASE("checkpoint store: a truncated or altered payload, or a broken JSON, is refused with path and reason") {
  testing::TempDir dir("dgld-ckpt-store");
  CheckpointStore s(dir.path(), 0);
  REQUIRE(s.prepare().is_ok());
  save(s, {1, 0}, "first epoch's state");
  save(s, {2, 0}, std::string(5000, 'y'));
  REQUIRE(s.valid().size() == 2);

  SECTION("truncated") {
    fs::resize_file(s.payload_path({2, 0}), 1000);
    std::vector<RefusedCheckpoint> refused;
    CHECK(s.valid(&refused) == std::vector<CheckpointPosition>{{1, 0}});
    REQUIRE(refused.size() == 1);
    CHECK(refused[0].path == s.payload_path({2, 0}));
    CHECK_THAT(refused[0].reason, Catch::Contains("1000 bytes, but ckpt-2-0.json records 5000 (truncated"));
  }
  SECTION("one byte altered") {
    {
      std::fstream f(s.payload_path({2, 0}), std::ios::in | std::ios::out | std::ios::binary);
      f.seekp(2500);
      f.put('z');
    }
    auto r = s.verify({2, 0});
    REQUIRE_FALSE(r.is_ok());
    CHECK(r.status().code() == StatusCode::corruption);
    CHECK_THAT(r.status().message(), Catch::Contains("ckpt-2-0.pt: CRC-32"));
    CHECK_THAT(r.status().message(), Catch::Contains("(the file was altered)"));
  }
  SECTION("payload missing") {
    fs::remove(s.payload_path({2, 0}));
    auto r = s.verify({2, 0});
    REQUIRE_FALSE(r.is_ok());
    CHECK_THAT(r.status().message(), Catch::Contains("ckpt-2-0.pt"));
  }
  SECTION("JSON cut short") {
    std::ofstream(s.meta_path({2, 0})) << "{\"position\": {\"ep";
    auto r = s.verify({2, 0});
    REQUIRE_FALSE(r.is_ok());
    CHECK_THAT(r.status().message(), Catch::Contains("ckpt-2-0.json: not valid JSON"));
  }
  SECTION("another rank's files copied in") {
    CheckpointStore other(dir.path(), 1);
    REQUIRE(other.prepare().is_ok());
    fs::copy_file(s.meta_path({2, 0}), other.meta_path({2, 0}));
    fs::copy_file(s.payload_path({2, 0}), other.payload_path({2, 0}));
    auto r = other.verify({2, 0});
    REQUIRE_FALSE(r.is_ok());
    CHECK_THAT(r.status().message(), Catch::Contains("it does not describe rank 1 at the end of epoch 1"));
  }
  SECTION("a payload without its JSON (a crash between the two) is not a position") {
    fs::remove(s.meta_path({2, 0}));
    CHECK(s.valid() == std::vector<CheckpointPosition>{{1, 0}});
  }
}

TEST_CASE("checkpoint store: prune keeps the committed position and the one before; leftovers go") {
  testing::TempDir dir("dgld-ckpt-store");
  CheckpointStore s(dir.path(), 0);
  REQUIRE(s.prepare().is_ok());
  for (int64_t step : {10, 20, 30}) save(s, {0, step}, "s" + std::to_string(step));
  save(s, {0, 50}, "written by a run that died before the others wrote it");
  std::ofstream(s.dir() / "ckpt-0-60.pt.tmp.12345") << "half";
  s.prune({0, 30});
  CHECK(s.valid() == std::vector<CheckpointPosition>{{0, 30}, {0, 20}});
  CHECK_FALSE(fs::exists(s.dir() / "ckpt-0-60.pt.tmp.12345"));
  CHECK_FALSE(fs::exists(s.payload_path({0, 10})));
  CHECK_FALSE(fs::exists(s.payload_path({0, 50})));
  // Sealing a position again replaces it.
  save(s, {0, 30}, "again");
  auto meta = s.verify({0, 30});
  REQUIRE(meta.is_ok());
  CHECK((*meta)["payload"]["bytes"] == 5);
}

TEST_CASE("checkpoint store: the exchange of offers (rows summed over the ranks) agrees as agreed_position") {
  using P = CheckpointPosition;
  // Rank 0 holds (3, 0) and (2, 40), rank 1 only (2, 40): each fills its row.
  std::vector<int64_t> table(2 * kCheckpointExchange, 0);
  const auto r0 = checkpoint_offer({P{3, 0}, P{2, 40}}), r1 = checkpoint_offer({P{2, 40}});
  REQUIRE(r0.size() == static_cast<size_t>(kCheckpointExchange));
  CHECK(r0[2] == 0);  // an empty slot
  std::copy(r0.begin(), r0.end(), table.begin());
  std::copy(r1.begin(), r1.end(), table.begin() + kCheckpointExchange);
  auto agreed = agreed_from_offers(table, 2, "ckpt", "--checkpoint-dir");
  REQUIRE(agreed.is_ok());
  CHECK(*agreed == P{2, 40});
  // Nothing anywhere: no position, not an error.
  auto none = agreed_from_offers(std::vector<int64_t>(2 * kCheckpointExchange, 0), 2, "ckpt", "--checkpoint-dir");
  REQUIRE(none.is_ok());
  CHECK_FALSE(none->has_value());
  // Positions but none in common: each rank's newest named.
  std::fill(table.begin() + kCheckpointExchange, table.end(), 0);
  auto apart = agreed_from_offers(table, 2, "ckpt", "--checkpoint-dir");
  REQUIRE(apart.status().code() == StatusCode::not_found);
  CHECK(apart.status().message() ==
        "no checkpoint in ckpt is held intact by every trainer (rank 0: the end of epoch 2; rank 1: none): a trainer "
        "whose machine was replaced needs --checkpoint-dir on storage every machine shares");
  CHECK(agreed_from_offers(table, 3, "ckpt", "--checkpoint-dir").status().code() == StatusCode::invalid_argument);
}

TEST_CASE("checkpoint store: the ranks agree on the newest position all of them hold") {
  using P = CheckpointPosition;
  CHECK(agreed_position({{P{3, 0}, P{2, 0}}, {P{3, 0}, P{2, 0}}}) == P{3, 0});
  CHECK(agreed_position({{P{3, 0}, P{2, 0}}, {P{2, 0}}}) == P{2, 0});  // rank 1's newest refused
  CHECK(agreed_position({{P{4, 0}, P{3, 0}}, {P{3, 0}, P{2, 0}}, {P{4, 0}, P{3, 0}}}) == P{3, 0});
  CHECK_FALSE(agreed_position({{P{3, 0}}, {}}).has_value());  // a replaced machine without shared storage
  CHECK_FALSE(agreed_position({}).has_value());
  CHECK(P{1, 5} < P{2, 0});
  CHECK(P::decode(P{7, 123}.encode()) == P{7, 123});
  CHECK(P{3, 0}.str() == "the end of epoch 2");
  CHECK(P{3, 40}.str() == "epoch 3 step 40");
}

TEST_CASE("checkpoint store: progress lines round-trip and hide in other output") {
  const std::string line = progress_line("checkpoint", {4, 17});
  auto e = parse_progress_line("machine-1 | " + line);
  REQUIRE(e.has_value());
  CHECK(e->event == "checkpoint");
  CHECK(e->position == CheckpointPosition{4, 17});
  CHECK_FALSE(parse_progress_line("Epoch 00004 | Loss 0.5").has_value());
  CHECK_FALSE(parse_progress_line("dgld-progress {broken").has_value());
}
