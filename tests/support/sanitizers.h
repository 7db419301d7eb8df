#pragma once
// Whether this build runs under AddressSanitizer (-Dsanitize_address_undefined=true),
// for the few test checks whose figures ASan itself changes: time (compute is
// 2-3x slower) and resident memory (freed blocks wait in a quarantine).

#include <cstdlib>
#include <string>

namespace dgld::testing {

#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kAddressSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool kAddressSanitizer = true;
#else
inline constexpr bool kAddressSanitizer = false;
#endif
#else
inline constexpr bool kAddressSanitizer = false;
#endif

// ASAN_OPTIONS as inherited, with `more` ("name=value[:...]") added; later
// options win, so these override the inherited ones of the same name.
inline std::string asan_options_with(const std::string& more) {
  const char* inherited = std::getenv("ASAN_OPTIONS");
  if (inherited == nullptr || *inherited == '\0') return more;
  return std::string(inherited) + ":" + more;
}

}  // namespace dgld::testing
