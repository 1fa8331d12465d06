// Overflow-safe bounds checks on user offsets and shapes (no sum is formed that could wrap).
#pragma once

#include <cstdint>

namespace rwin::detail {

// [offset, offset + extent) lies within [0, limit), for any int64 inputs (limit >= 0).
constexpr bool range_in_bounds(int64_t offset, int64_t extent, int64_t limit) noexcept {
  return offset >= 0 && extent >= 0 && offset <= limit && extent <= limit - offset;
}

// A 2-D slice (offsets + shape) lies within a window of `window` shape.
constexpr bool slice_in_bounds(const int64_t offsets[2], const int64_t shape[2], const int64_t window[2]) noexcept {
  return range_in_bounds(offsets[0], shape[0], window[0]) && range_in_bounds(offsets[1], shape[1], window[1]);
}

// The byte offset of signal word `index`, or false when `index` is negative or its offset would
// not fit in 64 bits (a wrapped offset could name a real word).
constexpr bool signal_byte_offset(int64_t index, uint64_t& out) noexcept {
  if (index < 0 || static_cast<uint64_t>(index) > UINT64_MAX / 8) return false;
  out = static_cast<uint64_t>(index) * 8;
  return true;
}

}  // namespace rwin::detail
