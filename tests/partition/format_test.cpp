// Array files (writer, mmap reader, checksums) and the range partition book.
#include <catch2/catch.hpp>

#include <fstream>
#include <numeric>

#include "common/partition/array_file.h"
#include "common/partition/partition_book.h"
#include "common/process_memory.h"
#include "tests/partition/test_util.h"

namespace dgld {
namespace {
namespace fs = std::filesystem;
using testing::TempDir;

void flip_byte(const fs::path& p, uint64_t offset) {
  std::fstream f(p, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(static_cast<std::streamoff>(offset));
  char c = 0;
  f.read(&c, 1);
  c = static_cast<char>(c ^ 0x5a);
  f.seekp(static_cast<std::streamoff>(offset));
  f.write(&c, 1);
}

// Writes a file with int64 [1000], float32 [10, 3], an empty uint8 array and int32 [5].
fs::path write_sample(const TempDir& dir) {
  const fs::path p = dir / "sample.dgld";
  std::vector<ArraySpec> specs = {{"ids", DType::int64, {1000}},
                                  {"_N/features", DType::float32, {10, 3}},
                                  {"empty", DType::uint8, {0}},
                                  {"small", DType::int32, {5}}};
  auto w = ArrayFileWriter::create(p, ArrayFileKind::node_features, specs);
  REQUIRE(w.is_ok());
  std::vector<int64_t> ids(1000);
  std::iota(ids.begin(), ids.end(), 7);
  // Written in two pieces to exercise appends within one array.
  REQUIRE((*w)->append(ids.data(), 400 * sizeof(int64_t)).is_ok());
  REQUIRE((*w)->append(ids.data() + 400, 600 * sizeof(int64_t)).is_ok());
  std::vector<float> feats(30);
  for (int i = 0; i < 30; ++i) feats[i] = 0.5f * static_cast<float>(i);
  REQUIRE((*w)->write_array(std::span<const float>(feats)).is_ok());
  std::vector<int32_t> small = {-1, 2, -3, 4, -5};
  REQUIRE((*w)->write_array(std::span<const int32_t>(small)).is_ok());
  REQUIRE((*w)->finish().is_ok());
  return p;
}

TEST_CASE("checksums are CRC-32 (ISO-HDLC) as documented") {
  CHECK(crc32_update(0, "123456789", 9) == 0xCBF43926u);
  // Continuing a CRC over pieces equals one pass.
  CHECK(crc32_update(crc32_update(0, "1234", 4), "56789", 5) == 0xCBF43926u);
}

TEST_CASE("release_pages drops a mapped array's pages from memory and the data reads back the same") {
  TempDir dir;
  const fs::path p = dir / "big.dgld";
  const int64_t n = int64_t{4} << 20;  // 32 MiB of int64
  {
    auto w = ArrayFileWriter::create(p, ArrayFileKind::node_features, {{"ids", DType::int64, {n}}});
    REQUIRE(w.is_ok());
    std::vector<int64_t> ids(static_cast<size_t>(n));
    std::iota(ids.begin(), ids.end(), 3);
    REQUIRE((*w)->write_array(std::span<const int64_t>(ids)).is_ok());
    REQUIRE((*w)->finish().is_ok());
  }
  auto f = MappedArrayFile::open(p, ArrayFileKind::node_features, false);
  REQUIRE(f.is_ok());
  auto ids = (*f)->get<int64_t>("ids", n);
  REQUIRE(ids.is_ok());
  const auto sum = [&] { return std::accumulate(ids->begin(), ids->end(), int64_t{0}); };
  const int64_t expected = n * 3 + n * (n - 1) / 2;
  REQUIRE(sum() == expected);  // every page touched: resident
  // File pages count as RssFile, or as RssShmem where the temporary
  // directory is a tmpfs.
  const auto mapped = [] {
    const ProcessMemory m = read_process_memory();
    return m.file < 0 || m.shmem < 0 ? int64_t{-1} : m.file + m.shmem;
  };
  const int64_t before = mapped();
  CHECK((*f)->release_pages(ids->data(), ids->size_bytes()));
  const int64_t after = mapped();
  INFO("RssFile + RssShmem " << before << " -> " << after);
  if (before >= 0) CHECK(before - after >= (int64_t{30} << 20));
  CHECK(sum() == expected);  // faulted back in from the page cache
  // A range outside the mapping is left alone.
  std::vector<int64_t> heap(1024, 5);
  CHECK_FALSE((*f)->release_pages(heap.data(), heap.size() * sizeof(int64_t)));
  CHECK(heap[0] == 5);
}

TEST_CASE("array file round trip keeps names, shapes, data and alignment") {
  TempDir dir;
  const fs::path p = write_sample(dir);
  auto f = MappedArrayFile::open(p, ArrayFileKind::node_features, true);
  REQUIRE(f.is_ok());
  REQUIRE((*f)->arrays().size() == 4);
  for (const auto& e : (*f)->arrays()) {
    CHECK(e.offset % kArrayAlignment == 0);
    CHECK(reinterpret_cast<uintptr_t>(e.data) % kArrayAlignment == 0);
  }
  auto ids = (*f)->get<int64_t>("ids", 1000);
  REQUIRE(ids.is_ok());
  CHECK((*ids)[0] == 7);
  CHECK((*ids)[999] == 1006);
  auto feats = (*f)->get<float>("_N/features");
  REQUIRE(feats.is_ok());
  // A row count is checked only on one-dimensional arrays: a [10, 3] array
  // asked for as 10 elements is refused.
  CHECK((*f)->get<float>("_N/features", 10).status().code() == StatusCode::corruption);
  CHECK((*feats).size() == 30);
  CHECK((*feats)[29] == Approx(14.5f));
  CHECK((*f)->find("_N/features")->shape == std::vector<int64_t>{10, 3});
  auto empty = (*f)->get<uint8_t>("empty", 0);
  REQUIRE(empty.is_ok());
  CHECK(empty->empty());
  auto small = (*f)->get<int32_t>("small");
  REQUIRE(small.is_ok());
  CHECK((*small)[4] == -5);
  // Wrong dtype, wrong row count and a missing name are errors, not crashes.
  CHECK((*f)->get<float>("ids").status().code() == StatusCode::corruption);
  CHECK((*f)->get<int64_t>("ids", 999).status().code() == StatusCode::corruption);
  CHECK((*f)->get<int64_t>("nope").status().code() == StatusCode::not_found);
  // A different expected kind is rejected.
  CHECK(MappedArrayFile::open(p, ArrayFileKind::partition_graph, false).status().code() == StatusCode::corruption);
}

TEST_CASE("array file corruption is detected") {
  TempDir dir;
  const fs::path p = write_sample(dir);
  uint64_t feat_offset = 0;
  {
    auto f = MappedArrayFile::open(p, ArrayFileKind::node_features, true);
    REQUIRE(f.is_ok());
    feat_offset = (*f)->find("_N/features")->offset;
  }

  SECTION("a flipped data byte fails the array checksum, only when verifying") {
    flip_byte(p, feat_offset + 5);
    CHECK(MappedArrayFile::open(p, ArrayFileKind::node_features, false).is_ok());
    auto f = MappedArrayFile::open(p, ArrayFileKind::node_features, true);
    REQUIRE_FALSE(f.is_ok());
    CHECK(f.status().code() == StatusCode::corruption);
    CHECK_THAT(f.status().message(), Catch::Contains("_N/features"));
  }
  SECTION("a flipped table byte fails the header checksum") {
    flip_byte(p, 64 + 10);
    auto f = MappedArrayFile::open(p, ArrayFileKind::node_features, false);
    REQUIRE_FALSE(f.is_ok());
    CHECK_THAT(f.status().message(), Catch::Contains("header checksum"));
  }
  SECTION("bad magic") {
    flip_byte(p, 0);
    CHECK_THAT(MappedArrayFile::open(p, ArrayFileKind::node_features, false).status().message(),
               Catch::Contains("magic"));
  }
  SECTION("a truncated file") {
    fs::resize_file(p, fs::file_size(p) - 64);
    CHECK_THAT(MappedArrayFile::open(p, ArrayFileKind::node_features, false).status().message(),
               Catch::Contains("truncated"));
  }
  SECTION("a file shorter than a header") {
    fs::resize_file(p, 10);
    CHECK(MappedArrayFile::open(p, ArrayFileKind::node_features, false).status().code() == StatusCode::corruption);
  }
  SECTION("a missing file names its path") {
    CHECK_THAT(MappedArrayFile::open(dir / "missing.dgld", ArrayFileKind::node_features, false).status().message(),
               Catch::Contains("missing.dgld"));
  }
}

TEST_CASE("array file writer is all or nothing") {
  TempDir dir;
  const fs::path p = dir / "a.dgld";
  {
    auto w = ArrayFileWriter::create(p, ArrayFileKind::partition_graph, {{"x", DType::int64, {4}}});
    REQUIRE(w.is_ok());
    int64_t v[3] = {1, 2, 3};
    REQUIRE((*w)->append(v, sizeof(v)).is_ok());
    // Overflowing the last array and finishing early are errors.
    int64_t two[2] = {4, 5};
    CHECK_FALSE((*w)->append(two, sizeof(two)).is_ok());
    CHECK_FALSE((*w)->finish().is_ok());
  }
  // Destroyed without finishing: neither the file nor a temporary is left.
  CHECK(fs::is_empty(dir.path()));
  CHECK_FALSE(ArrayFileWriter::create(p, ArrayFileKind::partition_graph,
                                      {{"x", DType::int64, {1}}, {"x", DType::int64, {1}}})
                  .is_ok());
  CHECK_FALSE(ArrayFileWriter::create(p, ArrayFileKind::partition_graph, {{std::string(64, 'n'), DType::int64, {1}}})
                  .is_ok());
  // A file with no arrays is valid (edge feature files of graphs without edge data).
  auto w = ArrayFileWriter::create(p, ArrayFileKind::edge_features, {});
  REQUIRE(w.is_ok());
  REQUIRE((*w)->finish().is_ok());
  auto f = MappedArrayFile::open(p, ArrayFileKind::edge_features, true);
  REQUIRE(f.is_ok());
  CHECK((*f)->arrays().empty());
}

TEST_CASE("range partition book maps ids to owners and local ids") {
  RangePartitionBook book({{0, 10}, {10, 10}, {10, 25}}, {{0, 100}, {100, 150}, {150, 151}});
  CHECK(book.num_partitions() == 3);
  CHECK(book.num_nodes() == 25);
  CHECK(book.num_edges() == 151);
  CHECK(book.node_partition(0) == 0);
  CHECK(book.node_partition(9) == 0);
  CHECK(book.node_partition(10) == 2);  // partition 1 is empty
  CHECK(book.node_partition(24) == 2);
  CHECK(book.node_partition(25) == -1);
  CHECK(book.node_partition(-1) == -1);
  CHECK(book.node_local_id(12) == 2);
  CHECK(book.node_local_id(25) == -1);
  CHECK(book.node_global_id(2, 2) == 12);
  CHECK(book.edge_partition(100) == 1);
  CHECK(book.edge_partition(150) == 2);
  CHECK(book.edge_local_id(149) == 49);
  CHECK(book.node_range(2) == IdRange{10, 25});

  PartitionConfig c;
  c.graph_name = std::string("book-test");
  c.num_nodes = 4;
  c.num_edges = 2;
  c.part_method = "random";
  c.num_parts = 2;
  c.node_map = {{0, 1}, {1, 4}};
  c.edge_map = {{0, 2}, {2, 2}};
  c.parts = {{"a", "b", "c"}, {"a", "b", "c"}};
  auto b = RangePartitionBook::from_config(c);
  REQUIRE(b.is_ok());
  CHECK(b->node_partition(3) == 1);
  c.node_map = {{0, 1}, {2, 4}};  // a gap
  CHECK_FALSE(RangePartitionBook::from_config(c).is_ok());
}

TEST_CASE("typed id space gives each type's ranges and the per-type ids a partition owns") {
  // Two types over three partitions (partition 1 holds no node of type 1).
  TypedIdSpace space({{{0, 4}, {10, 12}, {20, 21}}, {{4, 10}, {12, 12}, {21, 30}}});
  REQUIRE(space.num_types() == 2);
  CHECK(space.ranges(1) == std::vector<IdRange>{{4, 10}, {12, 12}, {21, 30}});
  CHECK(space.count(0) == 7);
  CHECK(space.count(1) == 15);
  CHECK(space.type_wise_range(0, 0) == IdRange{0, 4});
  CHECK(space.type_wise_range(0, 1) == IdRange{4, 6});
  CHECK(space.type_wise_range(0, 2) == IdRange{6, 7});
  CHECK(space.type_wise_range(1, 1) == IdRange{6, 6});  // empty
  CHECK(space.type_wise_range(1, 2) == IdRange{6, 15});
  // Every per-type id of a partition's range maps into that partition's homogeneous range, and back.
  for (int t = 0; t < 2; ++t) {
    for (int p = 0; p < 3; ++p) {
      const IdRange r = space.type_wise_range(t, p);
      for (int64_t id = r.start; id < r.end; ++id) {
        const int64_t h = space.to_homogeneous(t, id);
        CHECK(h >= space.range(t, p).start);
        CHECK(h < space.range(t, p).end);
        int type = -1;
        CHECK(space.to_type_wise(h, p, &type) == id);
        CHECK(type == t);
      }
    }
  }
}

}  // namespace
}  // namespace dgld
