// A memcpy without glibc's 4K-aliasing cliff, for CPU copies between windows of processes that
// share memory (UCX direct mode, the core's shared-memory fast path).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace rwin::common {

// glibc's memcpy switches to `rep movsb` from its threshold (4 KiB with AVX2, 8 KiB with AVX-512
// in glibc 2.36), which some x86 cores (Zen 3, /work/shared/perf-baselines.md) run ~20x slower
// when dst sits 1..63 bytes past src modulo a page (4K aliasing). Copy such pairs in pieces just
// below the lowest threshold: the vector loop has no cliff, and pieces this large cost nothing
// measurable where there is no cliff (bench/RESULTS.md, "Misaligned buffers").
// More than 16 bytes: glibc's memcpy, pairs that 4K-alias cut into pieces. Out of line, so the
// inline small path stays small (and GCC's -Warray-bounds does not judge this path against a
// caller's 16-byte object, where only the small path can run).
[[gnu::noinline]] inline void copy_large(void* dst, const void* src, size_t n) noexcept {
  constexpr size_t kPiece = 4096 - 64;
  const uintptr_t skew = (reinterpret_cast<uintptr_t>(dst) - reinterpret_cast<uintptr_t>(src)) & 4095;
  if (n <= kPiece || skew == 0 || skew >= 64) {
    std::memcpy(dst, src, n);
    return;
  }
  auto* d = static_cast<char*>(dst);
  const auto* s = static_cast<const char*>(src);
  for (size_t off = 0; off < n; off += kPiece) std::memcpy(d + off, s + off, n - off < kPiece ? n - off : kPiece);
}

inline void copy(void* dst, const void* src, size_t n) noexcept {
  auto* d = static_cast<char*>(dst);
  const auto* s = static_cast<const char*>(src);
  // Up to 16 bytes (a signal-sized put): two overlapping loads, then two stores, inline; a call
  // into libc's memcpy costs as much as the copy. Both loads come first, so overlap is safe.
  if (n > 16) return copy_large(dst, src, n);
  if (n >= 8) {
    uint64_t a, b;
    std::memcpy(&a, s, 8);
    std::memcpy(&b, s + n - 8, 8);
    std::memcpy(d, &a, 8);
    std::memcpy(d + n - 8, &b, 8);
  } else if (n >= 4) {
    uint32_t a, b;
    std::memcpy(&a, s, 4);
    std::memcpy(&b, s + n - 4, 4);
    std::memcpy(d, &a, 4);
    std::memcpy(d + n - 4, &b, 4);
  } else {
    for (size_t i = 0; i < n; ++i) d[i] = s[i];
  }
}

}  // namespace rwin::common
