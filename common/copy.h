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
inline void copy(void* dst, const void* src, size_t n) noexcept {
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

}  // namespace rwin::common
