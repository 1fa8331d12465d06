// Strict parsing of the integers rwin reads from environment variables and command lines.
// strtoul and friends skip leading spaces, accept '+', wrap a '-' sign around and stop quietly at
// junk; these accept exactly the documented form and report why anything else is refused, so the
// caller can name the variable, the text and the accepted form in its message.
#pragma once

#include <charconv>
#include <cstdint>
#include <string>
#include <string_view>

namespace rwin::common {

// Form accepted by parse_size, for messages.
inline constexpr const char* kSizeForm =
    "decimal digits with an optional K, KiB, M, MiB, G or GiB suffix (binary: K = 1024), e.g. 1048576, 512K, 4MiB";

// Digits only ([0-9]+): no sign, no spaces, no base prefix. Returns "" and sets `out` on success,
// else a short reason ("empty", "not a decimal number", "above 18446744073709551615").
inline std::string parse_u64(std::string_view text, uint64_t& out) {
  if (text.empty()) return "empty";
  // from_chars on an unsigned type already refuses '-', '+' and spaces; the digit check keeps the
  // rule explicit and independent of the library's reading of the standard.
  for (char c : text) {
    if (c < '0' || c > '9') return "not a decimal number (digits only, no sign or spaces)";
  }
  uint64_t v = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec == std::errc::result_out_of_range) return "above " + std::to_string(UINT64_MAX);
  if (ec != std::errc() || ptr != text.data() + text.size()) return "not a decimal number";
  out = v;
  return {};
}

// parse_u64 then lo <= value <= hi.
inline std::string parse_u64_in(std::string_view text, uint64_t lo, uint64_t hi, uint64_t& out) {
  uint64_t v = 0;
  std::string why = parse_u64(text, v);
  if (!why.empty()) return why;
  if (v < lo || v > hi) return "outside [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
  out = v;
  return {};
}

// A non-negative int in [lo, hi] (lo >= 0): the rank, size, port, count knobs.
inline std::string parse_int_in(std::string_view text, int lo, int hi, int& out) {
  uint64_t v = 0;
  std::string why = parse_u64_in(text, lo < 0 ? 0 : static_cast<uint64_t>(lo), hi < 0 ? 0 : static_cast<uint64_t>(hi), v);
  if (!why.empty()) return why;
  out = static_cast<int>(v);
  return {};
}

// Digits then an optional binary suffix (kSizeForm); the product must fit in 64 bits.
inline std::string parse_size(std::string_view text, uint64_t& out) {
  size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  if (digits == 0) return text.empty() ? "empty" : "does not start with a decimal digit";
  const std::string_view suffix = text.substr(digits);
  uint64_t mult = 0;
  if (suffix.empty()) mult = 1;
  else if (suffix == "K" || suffix == "k" || suffix == "KiB") mult = uint64_t{1} << 10;
  else if (suffix == "M" || suffix == "m" || suffix == "MiB") mult = uint64_t{1} << 20;
  else if (suffix == "G" || suffix == "g" || suffix == "GiB") mult = uint64_t{1} << 30;
  else return "unknown suffix '" + std::string(suffix) + "'";
  uint64_t v = 0;
  std::string why = parse_u64(text.substr(0, digits), v);
  if (!why.empty()) return why;
  uint64_t bytes = 0;
  if (__builtin_mul_overflow(v, mult, &bytes)) return "above " + std::to_string(UINT64_MAX) + " bytes";
  out = bytes;
  return {};
}

}  // namespace rwin::common

// Its first home: bootstrap/ and core/ call these as rwin::bootstrap::parse_size etc.
namespace rwin::bootstrap {
using common::kSizeForm;
using common::parse_int_in;
using common::parse_size;
using common::parse_u64;
using common::parse_u64_in;
}  // namespace rwin::bootstrap
