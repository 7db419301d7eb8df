#include "partition/npy.h"

#include <charconv>
#include <cstring>
#include <fstream>
#include <string_view>

#include "common/file_util.h"

namespace dgld {
namespace fs = std::filesystem;

namespace {

struct NpyDict {
  std::string descr;
  bool fortran = false, has_descr = false, has_order = false, has_shape = false;
  std::vector<int64_t> shape;
};

// Parses the header dict: {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }.
bool parse_npy_dict(std::string_view s, NpyDict* d, std::string* why) {
  size_t p = 0;
  auto ws = [&] {
    while (p < s.size() && (s[p] == ' ' || s[p] == '\n' || s[p] == '\t')) ++p;
  };
  auto str = [&](std::string* out) {
    if (p >= s.size() || (s[p] != '\'' && s[p] != '"')) return false;
    const char q = s[p++];
    const size_t end = s.find(q, p);
    if (end == std::string_view::npos) return false;
    *out = std::string(s.substr(p, end - p));
    p = end + 1;
    return true;
  };
  ws();
  if (p >= s.size() || s[p++] != '{') return *why = "expected '{'", false;
  for (;;) {
    ws();
    if (p < s.size() && s[p] == '}') break;
    std::string key;
    if (!str(&key)) return *why = "expected a quoted key", false;
    ws();
    if (p >= s.size() || s[p++] != ':') return *why = "expected ':' after '" + key + "'", false;
    ws();
    if (key == "descr") {
      if (!str(&d->descr)) return *why = "'descr' is not a string (structured dtypes are not supported)", false;
      d->has_descr = true;
    } else if (key == "fortran_order") {
      if (s.substr(p, 4) == "True") {
        d->fortran = true;
        p += 4;
      } else if (s.substr(p, 5) == "False") {
        p += 5;
      } else {
        return *why = "'fortran_order' is not True or False", false;
      }
      d->has_order = true;
    } else if (key == "shape") {
      if (p >= s.size() || s[p++] != '(') return *why = "'shape' is not a tuple", false;
      for (;;) {
        ws();
        if (p < s.size() && s[p] == ')') break;
        int64_t v = 0;
        auto [next, ec] = std::from_chars(s.data() + p, s.data() + s.size(), v);
        if (ec != std::errc() || v < 0) return *why = "'shape' holds something other than sizes", false;
        p = next - s.data();
        if (p < s.size() && s[p] == 'L') ++p;  // Python 2
        d->shape.push_back(v);
        ws();
        if (p < s.size() && s[p] == ',') ++p;
      }
      ++p;
      d->has_shape = true;
    } else {
      return *why = "unknown key '" + key + "'", false;
    }
    ws();
    if (p < s.size() && s[p] == ',') {
      ++p;
      continue;
    }
    ws();
    if (p < s.size() && s[p] == '}') break;
    return *why = "expected ',' or '}' after '" + key + "'", false;
  }
  if (!d->has_descr) return *why = "no 'descr'", false;
  if (!d->has_order) return *why = "no 'fortran_order'", false;
  if (!d->has_shape) return *why = "no 'shape'", false;
  return true;
}

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + (shape.size() == 1 ? ",)" : ")");
}

}  // namespace

Result<NpyHeader> read_npy_header(const fs::path& path) {
  const std::string file = path.string();
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::error_code ec;
    if (!fs::exists(path, ec)) return not_found("missing " + file);
    return io_error("cannot open " + file + ": " + errno_string());
  }
  unsigned char pre[12] = {};
  in.read(reinterpret_cast<char*>(pre), 10);
  if (in.gcount() != 10 || std::memcmp(pre, "\x93NUMPY", 6) != 0) {
    return invalid_argument(file + ": not a .npy file (no \\x93NUMPY magic)");
  }
  const int major = pre[6], minor = pre[7];
  if (major < 1 || major > 3) {
    return invalid_argument(file + ": .npy format version " + std::to_string(major) + "." + std::to_string(minor) +
                            " is not supported (1.0, 2.0 and 3.0 are)");
  }
  uint64_t len = 0, offset = 10;
  if (major == 1) {
    len = pre[8] | (static_cast<uint64_t>(pre[9]) << 8);
  } else {
    in.read(reinterpret_cast<char*>(pre + 10), 2);
    if (in.gcount() != 2) return invalid_argument(file + ": truncated .npy header");
    len = pre[8] | (static_cast<uint64_t>(pre[9]) << 8) | (static_cast<uint64_t>(pre[10]) << 16) |
          (static_cast<uint64_t>(pre[11]) << 24);
    offset = 12;
  }
  if (len > (1 << 20)) return invalid_argument(file + ": .npy header of " + std::to_string(len) + " bytes is too long");
  std::string dict(len, '\0');
  in.read(dict.data(), static_cast<std::streamsize>(len));
  if (static_cast<uint64_t>(in.gcount()) != len) return invalid_argument(file + ": truncated .npy header");
  NpyDict d;
  std::string why;
  if (!parse_npy_dict(dict, &d, &why)) return invalid_argument(file + ": bad .npy header: " + why);
  NpyHeader h;
  h.descr = d.descr;
  h.data_offset = offset + len;
  if (d.descr == "<f4") {
    h.dtype = DType::float32;
  } else if (d.descr == "<i8") {
    h.dtype = DType::int64;
  } else if (d.descr == "|u1" || d.descr == "<u1" || d.descr == "u1" || d.descr == "|b1" || d.descr == "b1") {
    h.dtype = DType::uint8;
  } else {
    return invalid_argument(file + ": dtype '" + d.descr +
                            "' is not supported (expected '<f4' float32, '<i8' int64, '|u1' uint8 or '|b1' bool)");
  }
  if (d.fortran) return invalid_argument(file + ": fortran_order True is not supported (save a C-order array)");
  if (d.shape.size() != 1 && d.shape.size() != 2) {
    return invalid_argument(file + ": shape " + shape_string(d.shape) + ": expected 1 or 2 dimensions");
  }
  h.ndim = static_cast<int>(d.shape.size());
  h.rows = d.shape[0];
  h.cols = h.ndim == 2 ? d.shape[1] : 1;
  if (h.cols < 1) return invalid_argument(file + ": shape " + shape_string(d.shape) + " has no columns");
  std::error_code ec;
  const uintmax_t size = fs::file_size(path, ec);
  if (ec) return io_error("cannot stat " + file + ": " + ec.message());
  const uint64_t bytes = static_cast<uint64_t>(h.rows) * h.cols * dtype_size(h.dtype);
  if (size != h.data_offset + bytes) {
    return invalid_argument(file + ": has " + std::to_string(size - std::min<uint64_t>(size, h.data_offset)) +
                            " bytes of data, the header's shape " + shape_string(d.shape) + " of '" + d.descr +
                            "' needs " + std::to_string(bytes));
  }
  return h;
}

Result<NodeDataChunk> read_npy(const fs::path& path) {
  DGLD_ASSIGN_OR_RETURN(NpyHeader h, read_npy_header(path));
  NodeDataChunk c;
  c.dtype = h.dtype;
  c.rows = h.rows;
  c.cols = h.cols;
  c.data.resize(static_cast<size_t>(h.rows * h.cols) * dtype_size(h.dtype));
  std::ifstream in(path, std::ios::binary);
  in.seekg(static_cast<std::streamoff>(h.data_offset));
  in.read(reinterpret_cast<char*>(c.data.data()), static_cast<std::streamsize>(c.data.size()));
  if (!in || static_cast<size_t>(in.gcount()) != c.data.size()) return io_error("cannot read " + path.string());
  return c;
}

Status write_npy(const fs::path& path, const char* descr, int64_t rows, int64_t cols, bool matrix, const void* data,
                 size_t bytes) {
  std::vector<int64_t> shape{rows};
  if (matrix) shape.push_back(cols);
  AtomicFile f;
  DGLD_RETURN_IF_ERROR(f.open(path));
  DGLD_RETURN_IF_ERROR(f.write(npy_header(descr, shape)));
  DGLD_RETURN_IF_ERROR(f.write(std::string_view(static_cast<const char*>(data), bytes)));
  return f.commit();
}

}  // namespace dgld
