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

#include "common/copy.h"
#include "transport/transport.h"

namespace rwin::transport::ucx_direct {

// Copies with the aliasing-safe copy of common/copy.h (4K-aliasing pairs split below glibc's
// rep-movsb threshold; bench/RESULTS.md, "Misaligned buffers").
using rwin::common::copy;

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
