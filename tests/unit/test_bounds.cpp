// Overflow-safe bounds (core/src/bounds.h) against a reference computed in 128 bits, on random
// and extreme offsets/shapes: the check must never accept what the exact arithmetic refuses.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <random>

#include "bounds.h"

namespace {

using rwin::detail::range_in_bounds;
using rwin::detail::signal_byte_offset;
using rwin::detail::slice_in_bounds;
using rwin::detail::view_in_bounds;

__extension__ typedef __int128 i128;  // the exact reference (GCC/Clang extension, hence __extension__)
__extension__ typedef unsigned __int128 u128;

bool reference_range(int64_t off, int64_t ext, int64_t limit) {
  const i128 o = off, e = ext, l = limit;
  return o >= 0 && e >= 0 && o + e <= l;
}

TEST(Bounds, RangeMatchesThe128BitReferenceOnRandomAndExtremeValues) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  const int64_t extremes[] = {kMin, kMin + 1, -2, -1, 0, 1, 2, 3, 7, 8, 1 << 20, kMax / 8, kMax / 2,
                              kMax - 8, kMax - 2, kMax - 1, kMax};
  int checked = 0;
  for (int64_t o : extremes) {
    for (int64_t e : extremes) {
      for (int64_t l : {int64_t{0}, int64_t{1}, int64_t{4}, int64_t{1000}, kMax / 2, kMax}) {
        ASSERT_EQ(range_in_bounds(o, e, l), reference_range(o, e, l)) << o << " + " << e << " <= " << l;
        ++checked;
      }
    }
  }
  std::mt19937_64 rng(12345);  // fixed seed: deterministic
  auto pick = [&]() -> int64_t {
    switch (rng() % 4) {
      case 0: return static_cast<int64_t>(rng());                         // anything
      case 1: return static_cast<int64_t>(rng() % 4096) - 16;             // small, some negative
      case 2: return kMax - static_cast<int64_t>(rng() % 4096);           // near the top
      default: return static_cast<int64_t>(rng() >> (rng() % 64));        // every magnitude
    }
  };
  for (int i = 0; i < 100000; ++i) {
    const int64_t o = pick(), e = pick();
    const int64_t l = std::max<int64_t>(0, pick());
    ASSERT_EQ(range_in_bounds(o, e, l), reference_range(o, e, l)) << o << " + " << e << " <= " << l;
    ++checked;
  }
  EXPECT_GE(checked, 100000);
}

TEST(Bounds, SlicesOfTheIssueAreRefused) {
  const int64_t window[2] = {4, 1024};
  const int64_t a_off[2] = {std::numeric_limits<int64_t>::max(), 0}, a_shape[2] = {1, 1};
  const int64_t b_off[2] = {0, std::numeric_limits<int64_t>::max() - 2}, b_shape[2] = {1, 4};
  const int64_t ok_off[2] = {3, 1020}, ok_shape[2] = {1, 4};
  const int64_t past_off[2] = {3, 1021};
  EXPECT_FALSE(slice_in_bounds(a_off, a_shape, window));
  EXPECT_FALSE(slice_in_bounds(b_off, b_shape, window));
  EXPECT_TRUE(slice_in_bounds(ok_off, ok_shape, window));
  EXPECT_FALSE(slice_in_bounds(past_off, ok_shape, window));
}

TEST(Bounds, SignalWordOffsetsNeverWrap) {
  uint64_t off = 0;
  EXPECT_TRUE(signal_byte_offset(0, off) && off == 0);
  EXPECT_TRUE(signal_byte_offset(5, off) && off == 40);
  EXPECT_FALSE(signal_byte_offset(-1, off));
  // 2^61 + 1 words would wrap to byte offset 8 (word 1) in 64-bit arithmetic.
  EXPECT_FALSE(signal_byte_offset((int64_t{1} << 61) + 1, off));
  EXPECT_FALSE(signal_byte_offset(std::numeric_limits<int64_t>::max(), off));
  EXPECT_TRUE(signal_byte_offset(static_cast<int64_t>(UINT64_MAX / 8), off));
}

bool reference_view(uint64_t off, int64_t rows, int64_t cols, uint64_t esz, uint64_t buffer, uint64_t& bytes) {
  if (rows <= 0 || cols <= 0 || esz == 0) return false;
  const u128 b = static_cast<u128>(rows) * static_cast<u128>(cols) * esz;
  if (b > UINT64_MAX) return false;
  bytes = static_cast<uint64_t>(b);
  return static_cast<u128>(off) + b <= buffer;
}

TEST(Bounds, ViewsMatchThe128BitReferenceOnRandomAndExtremeValues) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  std::mt19937_64 rng(777);
  auto pick = [&]() -> int64_t {
    switch (rng() % 4) {
      case 0: return static_cast<int64_t>(rng());
      case 1: return static_cast<int64_t>(rng() % 4096) - 16;
      case 2: return kMax - static_cast<int64_t>(rng() % 4096);
      default: return static_cast<int64_t>(rng() >> (rng() % 64));
    }
  };
  int accepted = 0;
  for (int i = 0; i < 200000; ++i) {
    const int64_t shape[2] = {pick(), pick()};
    const uint64_t esz = uint64_t{1} << (rng() % 4);
    const uint64_t off = static_cast<uint64_t>(pick());
    const uint64_t buffer = static_cast<uint64_t>(std::max<int64_t>(0, pick()));
    uint64_t got = 0, want = 0;
    const bool ok = view_in_bounds(off, shape, esz, buffer, got);
    ASSERT_EQ(ok, reference_view(off, shape[0], shape[1], esz, buffer, want))
        << off << " + " << shape[0] << "x" << shape[1] << "x" << esz << " <= " << buffer;
    if (ok) {
      ASSERT_EQ(got, want);
      ++accepted;
    }
  }
  // Small cases that must pass exactly at the edge.
  const int64_t s44[2] = {4, 4};
  uint64_t b = 0;
  EXPECT_TRUE(view_in_bounds(64, s44, 4, 128, b) && b == 64);
  EXPECT_FALSE(view_in_bounds(68, s44, 4, 128, b));
  const int64_t huge[2] = {int64_t{1} << 32, int64_t{1} << 31};  // 2^63 elements x 2 bytes wraps to 0
  EXPECT_FALSE(view_in_bounds(0, huge, 2, UINT64_MAX, b));
  EXPECT_GT(accepted, 0);
}

}  // namespace
