#include "common/checkpoint_store.h"

#include <fstream>
#include <string>

#include <catch2/catch.hpp>

#include "common/checksum.h"
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

namespace {

// The summed table of offers: held[h][r] = what rank h offers of rank r.
std::vector<int64_t> offers(const std::vector<std::vector<std::vector<CheckpointPosition>>>& held) {
  std::vector<int64_t> table;
  for (const auto& row : held) {
    const auto offer = checkpoint_offer(row);
    REQUIRE(offer.size() == held.size() * kCheckpointExchange);
    table.insert(table.end(), offer.begin(), offer.end());
  }
  return table;
}

}  // namespace

TEST_CASE("checkpoint store: the exchange of offers (rows summed over the ranks) agrees as agreed_position") {
  using P = CheckpointPosition;
  // Rank 0 holds (3, 0) and (2, 40), rank 1 only (2, 40): each fills its row.
  const auto r0 = checkpoint_offer({{P{3, 0}, P{2, 40}}, {}});
  CHECK(r0[2] == 0);  // an empty slot
  CHECK(r0[kCheckpointExchange] == 0);  // nothing of rank 1
  auto agreed = agreed_from_offers(offers({{{P{3, 0}, P{2, 40}}, {}}, {{}, {P{2, 40}}}}), 2, "ckpt",
                                   "--checkpoint-dir");
  REQUIRE(agreed.is_ok());
  CHECK(agreed->position == P{2, 40});
  CHECK(agreed->source == std::vector<int>{0, 1});
  CHECK(agreed->transfers().empty());
  // Nothing anywhere: no position, not an error.
  auto none = agreed_from_offers(std::vector<int64_t>(4 * kCheckpointExchange, 0), 2, "ckpt", "--checkpoint-dir");
  REQUIRE(none.is_ok());
  CHECK_FALSE(none->position.has_value());
  CHECK(none->transfers().empty());
  // Positions but none in common: each rank's newest named.
  auto apart = agreed_from_offers(offers({{{P{3, 0}, P{2, 40}}, {}}, {{}, {}}}), 2, "ckpt", "--checkpoint-dir");
  REQUIRE(apart.status().code() == StatusCode::not_found);
  CHECK(apart.status().message() ==
        "no checkpoint in ckpt is held intact by every trainer (rank 0: the end of epoch 2; rank 1: none): a trainer "
        "whose machine was replaced needs its files replicated on a machine still there (--checkpoint-replicas of "
        "at least 1) or --checkpoint-dir on storage every machine shares");
  CHECK(agreed_from_offers(std::vector<int64_t>(2 * kCheckpointExchange, 0), 2, "ckpt", "--checkpoint-dir")
            .status()
            .code() == StatusCode::invalid_argument);
}

TEST_CASE("checkpoint store: a rank's files held only as another's replica count; the plan says who sends them") {
  using P = CheckpointPosition;
  // Three ranks. Rank 1's machine was replaced: it holds nothing of its own.
  // Rank 2 holds rank 1's replicas at (3, 0) and (2, 0); rank 0 holds rank 2's.
  auto plan = agreed_from_offers(offers({{{P{3, 0}, P{2, 0}}, {}, {P{3, 0}, P{2, 0}}},
                                         {{}, {}, {}},
                                         {{}, {P{3, 0}, P{2, 0}}, {P{3, 0}, P{2, 0}}}}),
                                 3, "ckpt", "--checkpoint-dir");
  REQUIRE(plan.is_ok());
  CHECK(plan->position == P{3, 0});
  CHECK(plan->source == std::vector<int>{0, 2, 2});
  CHECK(plan->transfers() == std::vector<std::pair<int, int>>{{1, 2}});
  // Rank 1's newest only in a replica, rank 0 without (3, 0): the newest all have is (2, 0).
  auto older = agreed_from_offers(offers({{{P{2, 0}}, {P{3, 0}, P{2, 0}}}, {{}, {P{2, 0}}}}), 2, "ckpt", "-d");
  REQUIRE(older.is_ok());
  CHECK(older->position == P{2, 0});
  CHECK(older->source == std::vector<int>{0, 1});  // its own copy first
  // Rank 1's files only on rank 0 and on nobody else: rank 0 sends them.
  auto only = agreed_from_offers(offers({{{P{5, 0}}, {P{5, 0}}}, {{}, {}}}), 2, "ckpt", "-d");
  REQUIRE(only.is_ok());
  CHECK(only->transfers() == std::vector<std::pair<int, int>>{{1, 0}});
  // Two machines lost at once with one replica each: the message names what is held anywhere.
  auto lost = agreed_from_offers(offers({{{P{5, 0}}, {}, {}}, {{}, {}, {}}, {{}, {}, {}}}), 3, "ckpt", "replicas",
                                 "replicas=");
  REQUIRE(lost.status().code() == StatusCode::not_found);
  CHECK_THAT(lost.status().message(),
             Catch::Contains("(rank 0: the end of epoch 4; rank 1: none; rank 2: none)") &&
                 Catch::Contains("(replicas= of at least 1)"));
}

TEST_CASE("checkpoint store: replicas go to the next machines in order, the same trainer index there") {
  // Machines 0, 1, 2 with two trainers each: ranks 0,1 | 2,3 | 4,5.
  const std::vector<int> two_each = {0, 0, 1, 1, 2, 2};
  CHECK(replica_holders(two_each, 0, 1) == std::vector<int>{2});
  CHECK(replica_holders(two_each, 1, 1) == std::vector<int>{3});
  CHECK(replica_holders(two_each, 5, 1) == std::vector<int>{1});  // wraps to machine 0
  CHECK(replica_holders(two_each, 4, 2) == std::vector<int>{0, 2});
  CHECK(replica_holders(two_each, 4, 5) == std::vector<int>{0, 2});  // only two other machines
  CHECK(replica_holders(two_each, 4, 0).empty());
  CHECK(replicas_held_by(two_each, 2, 1) == std::vector<int>{0});
  CHECK(replicas_held_by(two_each, 2, 2) == std::vector<int>{0, 4});
  // One machine: nowhere else to go.
  CHECK(replica_holders({0, 0}, 0, 1).empty());
  // Machine 1 without trainers is skipped; machine 2 has one trainer for machine 0's two.
  const std::vector<int> uneven = {0, 0, 2};
  CHECK(replica_holders(uneven, 0, 1) == std::vector<int>{2});
  CHECK(replica_holders(uneven, 1, 1) == std::vector<int>{2});
  CHECK(replica_holders(uneven, 2, 1) == std::vector<int>{0});
  CHECK(replicas_held_by(uneven, 2, 1) == std::vector<int>{0, 1});
}

TEST_CASE("checkpoint store: a replica is adopted only when it verifies, and pruned like the own files") {
  testing::TempDir dir("dgld-ckpt-store");
  CheckpointStore own(dir.path() / "machine-0", 1);
  REQUIRE(own.prepare().is_ok());
  save(own, {1, 0}, "epoch 0's state");
  save(own, {2, 0}, std::string(5000, 'y'));
  const auto replica = CheckpointStore::replica(dir.path() / "machine-1", 1);
  CHECK(replica.dir() == dir.path() / "machine-1" / "replica" / "rank-1");
  auto files = own.read({2, 0});
  REQUIRE(files.is_ok());
  CHECK(files->payload == std::string(5000, 'y'));
  REQUIRE(replica.adopt({2, 0}, *files, "rank 1 (machine 0)").is_ok());
  CHECK(replica.valid() == std::vector<CheckpointPosition>{{2, 0}});

  SECTION("altered on the way: refused, naming the sender, and nothing left") {
    auto bad = *own.read({1, 0});
    bad.payload[3] ^= 1;
    const auto st = replica.adopt({1, 0}, bad, "rank 1 (machine 0)");
    REQUIRE(st.code() == StatusCode::corruption);
    CHECK_THAT(st.message(), Catch::Contains("the copy of rank 1's checkpoint of the end of epoch 0 from rank 1 "
                                             "(machine 0) is refused") &&
                                 Catch::Contains("(the file was altered)"));
    CHECK_FALSE(fs::exists(replica.payload_path({1, 0})));
    CHECK_FALSE(fs::exists(replica.meta_path({1, 0})));
  }
  SECTION("another rank's files are not this rank's replica") {
    const auto st = CheckpointStore::replica(dir.path() / "machine-1", 2).adopt({2, 0}, *files, "rank 2");
    CHECK_THAT(st.message(), Catch::Contains("it does not describe rank 2"));
  }
  SECTION("a machine that lost its disk gets its files back from the replica") {
    fs::remove_all(own.dir());
    CHECK(own.valid().empty());
    REQUIRE(own.adopt({2, 0}, *replica.read({2, 0}), "rank 0's replica").is_ok());
    CHECK(own.valid() == std::vector<CheckpointPosition>{{2, 0}});
  }
  SECTION("pruned as the own files") {
    for (int64_t e : {3, 4}) {
      save(own, {e, 0}, "epoch " + std::to_string(e));
      REQUIRE(replica.adopt({e, 0}, *own.read({e, 0}), "rank 1").is_ok());
      replica.prune({e, 0});
    }
    CHECK(replica.valid() == std::vector<CheckpointPosition>{{4, 0}, {3, 0}});
  }
}

namespace {

// The journal's first mark.bytes, checked, as its lines joined again.
Result<std::string> history_text(const CheckpointStore& s, HistoryMark mark) {
  std::string out;
  DGLD_RETURN_IF_ERROR(s.read_history(mark, [&](std::string_view line) {
    out.append(line).push_back('\n');
    return Status::ok();
  }));
  return out;
}

// Appends `text` to the journal and seals `p` with the new mark.
HistoryMark save_with_history(const CheckpointStore& s, CheckpointPosition p, HistoryMark at, const std::string& text) {
  auto mark = s.append_history(at, text);
  REQUIRE(mark.is_ok());
  const fs::path tmp = s.temp_payload_path(p);
  REQUIRE(write_file_atomic(tmp, "state at " + p.str()).is_ok());
  REQUIRE(s.seal(p, tmp, {{"history", mark->to_json()}}).is_ok());
  return *mark;
}

}  // namespace

TEST_CASE("checkpoint store: the history journal is appended to, checked, and copied a piece at a time") {
  testing::TempDir dir("dgld-ckpt-store");
  CheckpointStore own(dir.path() / "machine-0", 0);
  REQUIRE(own.prepare().is_ok());
  const HistoryMark m1 = save_with_history(own, {1, 0}, {}, "epoch 0\n");
  const HistoryMark m2 = save_with_history(own, {2, 0}, m1, "epoch 1\n");
  CHECK(m2.bytes == 16);
  REQUIRE(own.read_history(m1).is_ok());
  CHECK(*history_text(own, m1) == "epoch 0\n");
  CHECK(*history_text(own, m2) == "epoch 0\nepoch 1\n");
  CHECK(own.valid() == std::vector<CheckpointPosition>{{2, 0}, {1, 0}});

  SECTION("an append after an older mark cuts what followed it (a run resumed from there)") {
    const HistoryMark m2b = save_with_history(own, {2, 0}, m1, "epoch 1 again\n");
    CHECK(*history_text(own, m2b) == "epoch 0\nepoch 1 again\n");
    CHECK(fs::file_size(own.history_path()) == m2b.bytes);
  }
  SECTION("an altered journal is refused by valid() and read_history, naming it") {
    {
      std::fstream f(own.history_path(), std::ios::in | std::ios::out | std::ios::binary);
      f.seekp(10);
      f.put('X');
    }
    std::vector<RefusedCheckpoint> refused;
    CHECK(own.valid(&refused) == std::vector<CheckpointPosition>{{1, 0}});  // its 8 bytes are intact
    REQUIRE(refused.size() == 1);
    CHECK_THAT(refused[0].reason, Catch::Contains("ckpt-2-0.json") && Catch::Contains(own.history_path().string()) &&
                                      Catch::Contains("CRC-32 of its first 16 bytes"));
    CHECK(own.read_history(m2).code() == StatusCode::corruption);
    CHECK(history_text(own, m2).status().code() == StatusCode::corruption);
  }
  SECTION("lines longer than a read's 1 MiB piece come whole; a mark inside a line is refused") {
    const std::string long_line(3 << 20, 'z');
    const HistoryMark m3 = save_with_history(own, {3, 0}, m2, long_line + "\nshort\n");
    CHECK(*history_text(own, m3) == "epoch 0\nepoch 1\n" + long_line + "\nshort\n");
    const HistoryMark inside{m3.bytes - 2, crc32_update(0, history_text(own, m3)->data(), m3.bytes - 2)};
    CHECK_THAT(own.read_history(inside).message(), Catch::Contains("end inside a line"));
  }
  SECTION("a cut journal fails verify itself") {
    fs::resize_file(own.history_path(), 12);
    const auto meta = own.verify({2, 0});
    CHECK_THAT(meta.status().message(), Catch::Contains("12 bytes, but ckpt-2-0.json records a history of 16"));
    CHECK(own.verify({1, 0}).is_ok());
  }
  SECTION("a replica gets the whole journal, then only the bytes it lacks") {
    const auto replica = CheckpointStore::replica(dir.path() / "machine-1", 0);
    auto first = own.read({1, 0});
    REQUIRE(first.is_ok());
    CHECK(first->history == "epoch 0\n");
    HistoryMark held;
    REQUIRE(replica.adopt({1, 0}, *first, "rank 0", &held).is_ok());
    CHECK(held == m1);
    auto second = own.read({2, 0}, held);
    REQUIRE(second.is_ok());
    CHECK(second->history == "epoch 1\n");
    CHECK(second->history_from == m1);
    REQUIRE(replica.adopt({2, 0}, *second, "rank 0", &held).is_ok());
    CHECK(held == m2);
    CHECK(replica.valid() == std::vector<CheckpointPosition>{{2, 0}, {1, 0}});
    CHECK(*history_text(replica, m2) == "epoch 0\nepoch 1\n");

    // A receiver's mark that is not a prefix of the sender's journal: the whole journal instead.
    auto whole = own.read({2, 0}, HistoryMark{8, 12345});
    REQUIRE(whole.is_ok());
    CHECK(whole->history == "epoch 0\nepoch 1\n");
    CHECK(whole->history_from == HistoryMark{});

    // A piece that does not end at the JSON's mark is refused, and nothing of it is kept.
    auto bad = *own.read({2, 0}, m1);
    bad.history[2] ^= 1;
    const auto st = replica.adopt({2, 0}, bad, "rank 0 (machine 0)");
    CHECK_THAT(st.message(), Catch::Contains("from rank 0 (machine 0) is refused: its history (8 bytes from byte 8"));
    // A piece that starts past the end of the receiver's journal is refused too.
    fs::resize_file(replica.history_path(), 4);
    const auto past = replica.adopt({2, 0}, *own.read({2, 0}, m1), "rank 0");
    CHECK_THAT(past.message(), Catch::Contains("4 bytes, but the history to continue has 8"));
  }
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
