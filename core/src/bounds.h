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

// A typed view of `shape` elements of `esz` bytes from `byte_offset` lies within a buffer of
// `buffer_bytes`; on success `view_bytes` is its size. Refuses a non-positive shape and any size
// that does not fit in 64 bits (no product or sum is formed that could wrap).
constexpr bool view_in_bounds(uint64_t byte_offset, const int64_t shape[2], uint64_t esz, uint64_t buffer_bytes,
                              uint64_t& view_bytes) noexcept {
  if (shape[0] <= 0 || shape[1] <= 0 || esz == 0) return false;
  const uint64_t rows = static_cast<uint64_t>(shape[0]), cols = static_cast<uint64_t>(shape[1]);
  if (cols > UINT64_MAX / esz) return false;
  const uint64_t row_bytes = cols * esz;
  if (rows > UINT64_MAX / row_bytes) return false;
  view_bytes = rows * row_bytes;
  return byte_offset <= buffer_bytes && view_bytes <= buffer_bytes - byte_offset;
}

}  // namespace rwin::detail
