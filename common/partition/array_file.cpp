#include "common/partition/array_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bit>
#include <cstdint>
#include <cstring>
#include <random>
#include <set>
#include <utility>

#include "common/file_util.h"

namespace dgld {
namespace {

static_assert(std::endian::native == std::endian::little, "dgld array files are little-endian");

constexpr char kMagic[8] = {'D', 'G', 'L', 'D', 'A', 'R', 'R', 'Y'};
constexpr size_t kPrefixBytes = 64;
constexpr size_t kEntryBytes = 128;
constexpr size_t kBufferBytes = 8 << 20;

// On-disk layout; see docs/partition-format.md.
struct FileHeader {
  char magic[8];
  uint32_t version;
  uint32_t kind;
  uint32_t header_bytes;
  uint32_t num_arrays;
  uint64_t file_bytes;
  uint32_t header_crc;
  uint32_t reserved0;
  uint8_t reserved[24];
};
static_assert(sizeof(FileHeader) == kPrefixBytes);

struct TableEntry {
  char name[64];
  uint32_t dtype;
  uint32_t ndim;
  int64_t shape[kMaxArrayDims];
  uint64_t offset;
  uint64_t length;
  uint32_t crc;
  uint32_t reserved;
};
static_assert(sizeof(TableEntry) == kEntryBytes);

uint64_t align_up(uint64_t v) { return (v + kArrayAlignment - 1) / kArrayAlignment * kArrayAlignment; }

Status write_all_at(int fd, const void* data, size_t size, uint64_t offset, const std::filesystem::path& p) {
  const char* c = static_cast<const char*>(data);
  while (size > 0) {
    ssize_t n = ::pwrite(fd, c, size, static_cast<off_t>(offset));
    if (n < 0) {
      if (errno == EINTR) continue;
      return io_error("cannot write " + p.string() + ": " + errno_string());
    }
    c += n;
    size -= static_cast<size_t>(n);
    offset += static_cast<uint64_t>(n);
  }
  return Status::ok();
}

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

}  // namespace

// File dtype codes. Only the element types every DType revision has are listed, so
// this table does not follow DType's numbering (which belongs to shared memory).
constexpr std::pair<DType, uint32_t> kFileCodes[] = {
    {DType::uint8, 2}, {DType::int32, 3}, {DType::int64, 4}, {DType::float32, 5}, {DType::float64, 6}};

uint32_t dtype_file_code(DType t) {
  for (const auto& [dt, code] : kFileCodes) {
    if (dt == t) return code;
  }
  return 0;
}

Result<DType> dtype_from_file_code(uint32_t code) {
  for (const auto& [dt, c] : kFileCodes) {
    if (c == code) return dt;
  }
  return corruption("unknown dtype code " + std::to_string(code));
}

size_t ArraySpec::num_bytes() const {
  size_t n = dtype_size(dtype);
  for (int64_t d : shape) n *= static_cast<size_t>(d);
  return n;
}

// ---------------------------------------------------------------- writer

Result<std::unique_ptr<ArrayFileWriter>> ArrayFileWriter::create(const std::filesystem::path& path,
                                                                  ArrayFileKind kind,
                                                                  std::vector<ArraySpec> specs) {
  std::set<std::string> names;
  for (const auto& s : specs) {
    if (s.name.empty() || s.name.size() > kMaxArrayName) {
      return invalid_argument(path.string() + ": array name '" + s.name + "' must have 1.." +
                              std::to_string(kMaxArrayName) + " bytes");
    }
    if (!names.insert(s.name).second) {
      return invalid_argument(path.string() + ": duplicate array name '" + s.name + "'");
    }
    if (s.shape.empty() || s.shape.size() > kMaxArrayDims || dtype_file_code(s.dtype) == 0) {
      return invalid_argument(path.string() + ": array '" + s.name + "' has a bad shape or dtype");
    }
    for (int64_t d : s.shape) {
      if (d < 0) return invalid_argument(path.string() + ": array '" + s.name + "' has a negative dim");
    }
  }
  std::unique_ptr<ArrayFileWriter> w(new ArrayFileWriter());
  w->path_ = path;
  w->kind_ = kind;
  w->specs_ = std::move(specs);
  w->header_bytes_ = align_up(kPrefixBytes + kEntryBytes * w->specs_.size());
  uint64_t off = w->header_bytes_;
  for (const auto& s : w->specs_) {
    w->offsets_.push_back(off);
    off = align_up(off + s.num_bytes());
  }
  w->file_bytes_ = off;
  w->crcs_.assign(w->specs_.size(), 0);
  w->file_pos_ = w->header_bytes_;
  std::random_device rd;
  w->tmp_path_ = path;
  w->tmp_path_ += ".tmp." + std::to_string(::getpid()) + "." + std::to_string(rd());
  w->fd_ = ::open(w->tmp_path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (w->fd_ < 0) return io_error("cannot create " + w->tmp_path_.string() + ": " + errno_string());
  w->buffer_.reserve(kBufferBytes);
  // Zero-length arrays at the front are complete already.
  Status st = w->append(nullptr, 0);
  if (!st.is_ok()) return st;
  return w;
}

ArrayFileWriter::~ArrayFileWriter() {
  if (fd_ >= 0) ::close(fd_);
  if (!finished_ && !tmp_path_.empty()) ::unlink(tmp_path_.c_str());
}

// Starts writeback of every 64 MiB as it is written, so the disk works while
// the rest is computed and the final fsync has little left to wait for.
void ArrayFileWriter::wrote(uint64_t bytes) {
  constexpr uint64_t kWritebackBytes = 64 << 20;
  file_pos_ += bytes;
  if (file_pos_ - writeback_from_ < kWritebackBytes) return;
  // Only a hint: an error here shows up again, and is reported, at fsync.
  (void)::sync_file_range(fd_, static_cast<off_t>(writeback_from_), static_cast<off_t>(file_pos_ - writeback_from_),
                          SYNC_FILE_RANGE_WRITE);
  writeback_from_ = file_pos_;
}

Status ArrayFileWriter::flush_buffer() {
  if (buffer_.empty()) return Status::ok();
  DGLD_RETURN_IF_ERROR(write_all_at(fd_, buffer_.data(), buffer_.size(), file_pos_, tmp_path_));
  wrote(buffer_.size());
  buffer_.clear();
  return Status::ok();
}

Status ArrayFileWriter::append(const void* data, size_t size) {
  if (size > 0) {
    if (current_ >= specs_.size()) {
      return internal_error(path_.string() + ": append past the last array");
    }
    const uint64_t left = specs_[current_].num_bytes() - written_in_current_;
    if (size > left) {
      return internal_error(path_.string() + ": append of " + std::to_string(size) +
                            " bytes overflows array '" + specs_[current_].name + "' (" +
                            std::to_string(left) + " bytes left)");
    }
    crcs_[current_] = crc32_update(crcs_[current_], data, size);
    written_in_current_ += size;
    const char* c = static_cast<const char*>(data);
    if (size >= kBufferBytes) {
      DGLD_RETURN_IF_ERROR(flush_buffer());
      DGLD_RETURN_IF_ERROR(write_all_at(fd_, c, size, file_pos_, tmp_path_));
      wrote(size);
    } else {
      if (buffer_.size() + size > kBufferBytes) DGLD_RETURN_IF_ERROR(flush_buffer());
      buffer_.insert(buffer_.end(), c, c + size);
    }
  }
  // Close every array that is now complete, padding to the next offset.
  while (current_ < specs_.size() && written_in_current_ == specs_[current_].num_bytes()) {
    const uint64_t end = offsets_[current_] + written_in_current_;
    const uint64_t next = current_ + 1 < specs_.size() ? offsets_[current_ + 1] : file_bytes_;
    buffer_.insert(buffer_.end(), next - end, '\0');
    ++current_;
    written_in_current_ = 0;
  }
  return Status::ok();
}

Status ArrayFileWriter::finish() {
  if (current_ != specs_.size()) {
    return internal_error(path_.string() + ": array '" + specs_[current_].name + "' is incomplete (" +
                          std::to_string(written_in_current_) + " of " +
                          std::to_string(specs_[current_].num_bytes()) + " bytes)");
  }
  DGLD_RETURN_IF_ERROR(flush_buffer());
  std::vector<char> header(header_bytes_, '\0');
  FileHeader h{};
  std::memcpy(h.magic, kMagic, sizeof(kMagic));
  h.version = kArrayFileVersion;
  h.kind = static_cast<uint32_t>(kind_);
  h.header_bytes = static_cast<uint32_t>(header_bytes_);
  h.num_arrays = static_cast<uint32_t>(specs_.size());
  h.file_bytes = file_bytes_;
  for (size_t i = 0; i < specs_.size(); ++i) {
    TableEntry e{};
    std::memcpy(e.name, specs_[i].name.data(), specs_[i].name.size());
    e.dtype = dtype_file_code(specs_[i].dtype);
    e.ndim = static_cast<uint32_t>(specs_[i].shape.size());
    for (size_t d = 0; d < specs_[i].shape.size(); ++d) e.shape[d] = specs_[i].shape[d];
    e.offset = offsets_[i];
    e.length = specs_[i].num_bytes();
    e.crc = crcs_[i];
    std::memcpy(header.data() + kPrefixBytes + i * kEntryBytes, &e, sizeof(e));
  }
  std::memcpy(header.data(), &h, sizeof(h));
  h.header_crc = crc32_update(0, header.data(), header.size());
  std::memcpy(header.data(), &h, sizeof(h));
  DGLD_RETURN_IF_ERROR(write_all_at(fd_, header.data(), header.size(), 0, tmp_path_));
  if (::fsync(fd_) != 0) return io_error("cannot fsync " + tmp_path_.string() + ": " + errno_string());
  int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) return io_error("cannot close " + tmp_path_.string() + ": " + errno_string());
  if (::rename(tmp_path_.c_str(), path_.c_str()) != 0) {
    return io_error("cannot rename " + tmp_path_.string() + " to " + path_.string() + ": " + errno_string());
  }
  finished_ = true;
  return Status::ok();
}

// ---------------------------------------------------------------- reader

MappedArrayFile::~MappedArrayFile() {
  if (base_ != nullptr) ::munmap(base_, size_);
}

bool MappedArrayFile::release_pages(const void* p, size_t n) const {
  const auto begin = reinterpret_cast<uintptr_t>(p), base = reinterpret_cast<uintptr_t>(base_);
  if (base_ == nullptr || n == 0 || begin < base || begin - base > size_ || n > size_ - (begin - base)) return false;
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t first = (begin + page - 1) / page * page, last = (begin + n) / page * page;
  // The mapping is read-only and shared: dropping its pages loses nothing.
  if (first < last) ::madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
  return true;
}

Result<std::unique_ptr<MappedArrayFile>> MappedArrayFile::open(const std::filesystem::path& path,
                                                               ArrayFileKind expected_kind,
                                                               bool verify_checksums) {
  const std::string p = path.string();
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return io_error("cannot open " + p + ": " + errno_string());
  struct stat sb {};
  if (::fstat(fd, &sb) != 0) {
    Status st = io_error("cannot stat " + p + ": " + errno_string());
    ::close(fd);
    return st;
  }
  std::unique_ptr<MappedArrayFile> f(new MappedArrayFile());
  f->path_ = path;
  f->size_ = static_cast<size_t>(sb.st_size);
  if (f->size_ < kPrefixBytes) {
    ::close(fd);
    return corruption(p + ": file is " + std::to_string(f->size_) + " bytes, too short for a header");
  }
  void* base = ::mmap(nullptr, f->size_, PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);
  if (base == MAP_FAILED) return io_error("cannot mmap " + p + ": " + errno_string());
  f->base_ = base;
  const auto* bytes = static_cast<const std::byte*>(base);

  FileHeader h;
  std::memcpy(&h, bytes, sizeof(h));
  if (std::memcmp(h.magic, kMagic, sizeof(kMagic)) != 0) {
    return corruption(p + ": bad magic (not a dgld array file)");
  }
  if (h.version != kArrayFileVersion) {
    return corruption(p + ": format version " + std::to_string(h.version) + " is not supported (supports " +
                      std::to_string(kArrayFileVersion) + ")");
  }
  if (h.kind != static_cast<uint32_t>(expected_kind)) {
    return corruption(p + ": file kind " + std::to_string(h.kind) + ", expected " +
                      std::to_string(static_cast<uint32_t>(expected_kind)));
  }
  const uint64_t table_end = kPrefixBytes + uint64_t{h.num_arrays} * kEntryBytes;
  if (h.header_bytes % kArrayAlignment != 0 || h.header_bytes < table_end || h.header_bytes > f->size_) {
    return corruption(p + ": bad header size " + std::to_string(h.header_bytes));
  }
  if (h.file_bytes != f->size_) {
    return corruption(p + ": file is " + std::to_string(f->size_) + " bytes, header says " +
                      std::to_string(h.file_bytes) + " (truncated or extended)");
  }
  {
    std::vector<char> copy(reinterpret_cast<const char*>(bytes), reinterpret_cast<const char*>(bytes) + h.header_bytes);
    FileHeader z = h;
    z.header_crc = 0;
    std::memcpy(copy.data(), &z, sizeof(z));
    const uint32_t crc = crc32_update(0, copy.data(), copy.size());
    if (crc != h.header_crc) return corruption(p + ": header checksum mismatch");
  }
  uint64_t prev_end = h.header_bytes;
  std::set<std::string> names;
  for (uint32_t i = 0; i < h.num_arrays; ++i) {
    TableEntry t;
    std::memcpy(&t, bytes + kPrefixBytes + i * kEntryBytes, sizeof(t));
    const std::string where = p + ": array #" + std::to_string(i);
    if (std::memchr(t.name, '\0', sizeof(t.name)) == nullptr) return corruption(where + ": name not terminated");
    ArrayEntry e;
    e.name = t.name;
    auto dt = dtype_from_file_code(t.dtype);
    if (!dt.is_ok()) return corruption(where + " '" + e.name + "': " + dt.status().message());
    e.dtype = *dt;
    if (t.ndim < 1 || t.ndim > kMaxArrayDims) return corruption(where + " '" + e.name + "': bad ndim");
    uint64_t expect = dtype_size(e.dtype);
    // The product of the non-zero dims too: with a zero dim the byte count is
    // 0 whatever the others are, but readers multiply trailing dims (row sizes).
    uint64_t nonzero = expect;
    for (uint32_t d = 0; d < t.ndim; ++d) {
      if (t.shape[d] < 0) return corruption(where + " '" + e.name + "': negative dim");
      e.shape.push_back(t.shape[d]);
      if (__builtin_mul_overflow(expect, static_cast<uint64_t>(t.shape[d]), &expect) ||
          (t.shape[d] > 0 && __builtin_mul_overflow(nonzero, static_cast<uint64_t>(t.shape[d]), &nonzero)) ||
          nonzero > static_cast<uint64_t>(INT64_MAX)) {
        return corruption(where + " '" + e.name + "': shape overflows");
      }
    }
    e.offset = t.offset;
    e.length = t.length;
    e.crc = t.crc;
    if (e.length != expect) {
      return corruption(where + " '" + e.name + "': length " + std::to_string(e.length) + " does not match shape " +
                        shape_string(e.shape) + " of " + dtype_name(e.dtype));
    }
    if (e.offset % kArrayAlignment != 0 || e.offset < prev_end || e.offset > f->size_ ||
        e.length > f->size_ - e.offset) {
      return corruption(where + " '" + e.name + "': offset " + std::to_string(e.offset) + " length " +
                        std::to_string(e.length) + " is misaligned, overlapping or out of the file");
    }
    if (!names.insert(e.name).second) return corruption(where + ": duplicate name '" + e.name + "'");
    prev_end = e.offset + e.length;
    e.data = bytes + e.offset;
    if (verify_checksums) {
      if (crc32_update(0, e.data, e.length) != e.crc) {
        return corruption(p + ": checksum mismatch in array '" + e.name + "'");
      }
      // Reading it made every page resident; what is used later faults back
      // from the page cache (a graph-server copies its features to shared
      // memory and would otherwise hold them twice at its peak).
      f->release_pages(e.data, e.length);
    }
    f->arrays_.push_back(std::move(e));
  }
  if (verify_checksums) {
    // Padding (after the table, between arrays, at the end) must be zero.
    uint64_t pos = table_end;
    auto check_zero = [&](uint64_t end) -> Status {
      for (; pos < end; ++pos) {
        if (bytes[pos] != std::byte{0}) return corruption(p + ": non-zero padding byte at offset " + std::to_string(pos));
      }
      return Status::ok();
    };
    for (const auto& e : f->arrays_) {
      DGLD_RETURN_IF_ERROR(check_zero(e.offset));
      pos = e.offset + e.length;
    }
    DGLD_RETURN_IF_ERROR(check_zero(f->size_));
  }
  return f;
}

const ArrayEntry* MappedArrayFile::find(std::string_view name) const {
  for (const auto& e : arrays_) {
    if (e.name == name) return &e;
  }
  return nullptr;
}

Result<const ArrayEntry*> MappedArrayFile::get_entry(std::string_view name, DType dtype, int64_t expect_rows) const {
  const ArrayEntry* e = find(name);
  if (e == nullptr) return not_found(path_.string() + ": no array '" + std::string(name) + "'");
  if (e->dtype != dtype) {
    return corruption(path_.string() + ": array '" + e->name + "' is " + dtype_name(e->dtype) + ", expected " +
                      dtype_name(dtype));
  }
  if (expect_rows >= 0 && (e->shape.size() != 1 || e->shape[0] != expect_rows)) {
    // One-dimensional: [n, 0] has n rows but no elements to read.
    return corruption(path_.string() + ": array '" + e->name + "' has shape " + shape_string(e->shape) +
                      ", expected [" + std::to_string(expect_rows) + "]");
  }
  return e;
}

}  // namespace dgld
