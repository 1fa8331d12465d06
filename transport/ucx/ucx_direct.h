// "direct" peers of the UCX transport: a peer whose window UCX mapped into this process
// (ucp_rkey_ptr succeeds: posix/sysv shared memory on the same host) is reached with plain CPU
// loads, stores and atomics on that mapping, as OpenSHMEM's shmem_ptr does, instead of through
// ucp_put/get/atomic_op_nbx. UCX does the same copies and atomics underneath; skipping its
// request machinery is what makes an 8-byte put a few nanoseconds. Everything completes before
// apply() returns, and a later atomic instruction is ordered after earlier stores (x86-TSO; the
// __atomic builtins are sequentially consistent), so writes are ordered before notifies without
// a flush.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "transport/transport.h"

namespace rwin::transport::ucx_direct {

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

// Performs `w` on `target`, the mapped address of w.remote_addr. Fetching ops leave the old value in
// w.local (when given).
inline void apply(const Work& w, void* target) noexcept {
  switch (w.op) {
    case Op::Write:
      copy(target, w.local, w.bytes);
      return;
    case Op::Read:
      copy(w.local, target, w.bytes);
      return;
    case Op::Flush:
      // Every op already happened; the fence orders them before whatever the caller does next.
      std::atomic_thread_fence(std::memory_order_seq_cst);
      return;
    default:
      break;
  }
  std::atomic_ref<uint64_t> word(*static_cast<uint64_t*>(target));
  uint64_t old = 0;
  switch (w.op) {
    case Op::AtomicAdd:
    case Op::FetchAdd:
      old = word.fetch_add(w.operand, std::memory_order_seq_cst);
      break;
    case Op::Swap:
      old = word.exchange(w.operand, std::memory_order_seq_cst);
      break;
    case Op::CompareSwap:
      old = w.compare;
      word.compare_exchange_strong(old, w.operand, std::memory_order_seq_cst);  // old = what was there
      break;
    default:
      return;
  }
  if (w.op != Op::AtomicAdd && w.local != nullptr) std::memcpy(w.local, &old, 8);
}

}  // namespace rwin::transport::ucx_direct
