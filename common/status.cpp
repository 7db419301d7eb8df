#include "common/status.h"

namespace dgld {

const char* status_code_name(StatusCode code) {
  switch (code) {
    case StatusCode::ok: return "ok";
    case StatusCode::invalid_argument: return "invalid argument";
    case StatusCode::not_found: return "not found";
    case StatusCode::io_error: return "I/O error";
    case StatusCode::timeout: return "timeout";
    case StatusCode::closed: return "closed";
    case StatusCode::protocol_error: return "protocol error";
    case StatusCode::corruption: return "corruption";
    case StatusCode::already_exists: return "already exists";
    case StatusCode::resource_exhausted: return "resource exhausted";
    case StatusCode::internal: return "internal error";
  }
  return "unknown";
}

std::string Status::to_string() const {
  if (is_ok()) return "ok";
  return std::string(status_code_name(code_)) + ": " + message_;
}

Status Status::with_context(const std::string& context) const {
  if (is_ok()) return *this;
  return Status(code_, context + ": " + message_);
}

}  // namespace dgld
