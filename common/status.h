#pragma once
// Errors as values at every boundary (file, network, user input).
// A Status is a code plus a human-readable message that names what failed
// (file and line, field, peer). Result<T> holds either a value or a non-ok Status.

#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace dgld {

enum class StatusCode {
  ok = 0,
  invalid_argument,  // bad user input: flags, config files, malformed data
  not_found,         // a named thing (file, tensor, peer) does not exist
  io_error,          // read/write/mmap failed
  timeout,           // a deadline expired
  closed,            // a connection closed or a peer died
  protocol_error,    // bytes on the wire that do not follow the protocol
  corruption,        // stored data fails its checksum or invariants
  already_exists,
  resource_exhausted,  // a cap was hit (frame size, memory, connections)
  internal,
};

const char* status_code_name(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status ok() { return {}; }
  bool is_ok() const { return code_ == StatusCode::ok; }
  explicit operator bool() const { return is_ok(); }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "<code>: <message>", or "ok".
  std::string to_string() const;
  // Returns a copy whose message is "<context>: <message>".
  Status with_context(const std::string& context) const;

 private:
  StatusCode code_ = StatusCode::ok;
  std::string message_;
};

inline Status invalid_argument(std::string m) { return {StatusCode::invalid_argument, std::move(m)}; }
inline Status not_found(std::string m) { return {StatusCode::not_found, std::move(m)}; }
inline Status io_error(std::string m) { return {StatusCode::io_error, std::move(m)}; }
inline Status timeout_error(std::string m) { return {StatusCode::timeout, std::move(m)}; }
inline Status closed_error(std::string m) { return {StatusCode::closed, std::move(m)}; }
inline Status protocol_error(std::string m) { return {StatusCode::protocol_error, std::move(m)}; }
inline Status corruption(std::string m) { return {StatusCode::corruption, std::move(m)}; }
inline Status resource_exhausted(std::string m) { return {StatusCode::resource_exhausted, std::move(m)}; }
inline Status internal_error(std::string m) { return {StatusCode::internal, std::move(m)}; }

// A value or an error. Access to value() on an error is a programming bug.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {}  // NOLINT: must not be ok

  bool is_ok() const { return std::holds_alternative<T>(v_); }
  explicit operator bool() const { return is_ok(); }
  const Status& status() const {
    static const Status ok_status;
    return is_ok() ? ok_status : std::get<Status>(v_);
  }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace dgld

// Propagate a non-ok Status from an expression returning Status.
#define DGLD_RETURN_IF_ERROR(expr)              \
  do {                                          \
    ::dgld::Status _dgld_st = (expr);           \
    if (!_dgld_st.is_ok()) return _dgld_st;     \
  } while (0)

#define DGLD_CONCAT_INNER(a, b) a##b
#define DGLD_CONCAT(a, b) DGLD_CONCAT_INNER(a, b)
// `DGLD_ASSIGN_OR_RETURN(auto x, f());` binds the value or returns the error.
#define DGLD_ASSIGN_OR_RETURN(lhs, expr) \
  DGLD_ASSIGN_OR_RETURN_IMPL(DGLD_CONCAT(_dgld_res_, __LINE__), lhs, expr)
#define DGLD_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                               \
  if (!tmp.is_ok()) return tmp.status();           \
  lhs = std::move(tmp).value()
