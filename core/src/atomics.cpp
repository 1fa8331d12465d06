// Fetching atomics (issue 25, item 4): fetch_add, compare_swap, swap and atomic_fetch on one
// int32/int64/uint32/uint64 element of a peer's window, returning the old value. Three paths, one
// rule (docs/CONTRACT.md "Atomics on one word: CPU or NIC, never both"):
//   - the peer's memory is mapped here and the transport's atomics are CPU atomics (UCX direct):
//     one CPU atomic on the element's 8-byte word;
//   - 64-bit elements otherwise: one remote atomic (FetchAdd, CompareSwap, Swap; a load is a
//     FetchAdd of 0), its old value returned into a scratch word;
//   - 32-bit elements otherwise: a compare-and-swap loop on the 8-byte word holding the element,
//     the other half written back as seen (as int32 notify does): IB and UCX atomics are 64-bit.
#include <atomic>
#include <limits>

#include "context_impl.h"
#include "ops.h"

namespace rwin {

using namespace detail;  // the core's internal types (context_impl.h, ops.h)
using transport::Op;
using transport::Work;

namespace {

constexpr size_t kFetchResultWord = 2;  // scratch word for a fetching atomic's old value (ops.h)

enum class Fetch { Add, Cas, Swap, Load };

const char* fetch_name(Fetch k) {
  switch (k) {
    case Fetch::Add: return "fetch_add";
    case Fetch::Cas: return "compare_swap";
    case Fetch::Swap: return "swap";
    case Fetch::Load: return "atomic_fetch";
  }
  return "?";
}

// The element's old bits as the API returns them: int32 sign-extended, uint32 zero-extended.
int64_t widen(DType t, uint64_t bits) {
  if (t == DType::I32) return static_cast<int32_t>(static_cast<uint32_t>(bits));
  if (t == DType::U32) return static_cast<int64_t>(static_cast<uint32_t>(bits));
  return static_cast<int64_t>(bits);
}

// The new 32-bit lane for old lane `old` (Cas: unchanged unless it matched).
uint32_t new_lane(Fetch k, uint32_t old, int64_t operand, int64_t compare) {
  switch (k) {
    case Fetch::Add: return old + static_cast<uint32_t>(operand);  // wraps like the type
    case Fetch::Swap: return static_cast<uint32_t>(operand);
    case Fetch::Cas: return old == static_cast<uint32_t>(compare) ? static_cast<uint32_t>(operand) : old;
    case Fetch::Load: return old;
  }
  return old;
}

void check_value(ContextImpl& c, Fetch k, int peer, DType t, const WindowState& w, const char* what, int64_t v) {
  if (dtype_size(t) == 8) return;  // every int64 is an int64 or a uint64's bits
  // An addend may be negative on an unsigned element (it wraps); a stored value must fit the type.
  const int64_t lo = t == DType::I32 || k == Fetch::Add ? std::numeric_limits<int32_t>::min() : 0;
  const int64_t hi = t == DType::U32 || k == Fetch::Add ? std::numeric_limits<uint32_t>::max()
                                                        : std::numeric_limits<int32_t>::max();
  if (v < lo || v > hi) {
    throw Error(ErrorCode::InvalidArgument, c.who() + ": " + fetch_name(k) + " peer " + std::to_string(peer) + ": " +
                                                what + " " + std::to_string(v) + " does not fit the " + dtype_name(t) +
                                                " element of " + w.describe() + " ([" + std::to_string(lo) + ", " +
                                                std::to_string(hi) + "])");
  }
}

// The mapped path: CPU atomics on the element's 8-byte word (every update of the word is a 64-bit
// atomic, as notify_direct does it).
uint64_t fetch_direct(char* p, size_t width, Fetch k, int64_t operand, int64_t compare) {
  if (width == 8) {
    std::atomic_ref<uint64_t> a(*reinterpret_cast<uint64_t*>(p));
    switch (k) {
      case Fetch::Add: return a.fetch_add(static_cast<uint64_t>(operand));
      case Fetch::Swap: return a.exchange(static_cast<uint64_t>(operand));
      case Fetch::Load: return a.load();
      case Fetch::Cas: {
        uint64_t expected = static_cast<uint64_t>(compare);
        a.compare_exchange_strong(expected, static_cast<uint64_t>(operand));
        return expected;  // the old value whether or not it matched
      }
    }
  }
  const uintptr_t addr = reinterpret_cast<uintptr_t>(p);
  std::atomic_ref<uint64_t> word(*reinterpret_cast<uint64_t*>(addr & ~uintptr_t{7}));
  const unsigned shift = static_cast<unsigned>(addr & 7) * 8;
  uint64_t old = word.load();
  for (;;) {
    const uint32_t lane = static_cast<uint32_t>(old >> shift);
    const uint32_t nl = new_lane(k, lane, operand, compare);
    if (nl == lane) return lane;  // a load, a failed compare or a no-op: the word as read is the answer
    const uint64_t desired = (old & ~(uint64_t{0xffffffff} << shift)) | (uint64_t{nl} << shift);
    if (word.compare_exchange_weak(old, desired)) return lane;
  }
}

int64_t fetch_atomic(ContextImpl& c, const SignalTarget& t, int peer, Fetch k, int64_t operand, int64_t compare) {
  const char* what = fetch_name(k);
  const DType dtype = t.w->is_signal ? DType::I64 : t.w->dtype;
  check_value(c, k, peer, dtype, *t.w, k == Fetch::Add ? "addend" : "value", operand);
  if (k == Fetch::Cas) check_value(c, k, peer, dtype, *t.w, "expected value", compare);
  const uint64_t off = t.byte_at(0, 0);
  if (char* m = t.w->mapped(peer); m && c.caps.cpu_atomics) {
    return widen(dtype, fetch_direct(m + off, t.width, k, operand, compare));
  }
  Deadline deadline(c.opt.op_timeout);
  PeerState& ps = c.peers[static_cast<size_t>(peer)];
  // Ordered after earlier puts to the peer, as notify (signals.cpp): where the transport does not
  // order an atomic after writes, unflushed writes are drained first.
  if (!ps.ordered && ps.dirty) c.drain(peer, deadline, what);
  const transport::RemoteKey& rkey = t.w->rkey(peer);
  const uint64_t addr = t.w->remote_base(peer) + off;
  auto* result = static_cast<uint64_t*>(c.scratch->addr()) + kFetchResultWord;
  Work w;
  w.peer = peer;
  w.rkey = &rkey;
  w.bytes = 8;
  w.local = result;
  w.local_mr = c.scratch.get();
  if (t.width == 8) {
    w.remote_addr = addr;
    switch (k) {
      case Fetch::Add: w.op = Op::FetchAdd, w.operand = static_cast<uint64_t>(operand); break;
      case Fetch::Load: w.op = Op::FetchAdd, w.operand = 0; break;
      case Fetch::Swap: w.op = Op::Swap, w.operand = static_cast<uint64_t>(operand); break;
      case Fetch::Cas:
        w.op = Op::CompareSwap, w.compare = static_cast<uint64_t>(compare), w.operand = static_cast<uint64_t>(operand);
        break;
    }
    run_single(c, w, what, deadline);
    return widen(dtype, std::atomic_ref<uint64_t>(*result).load(std::memory_order_acquire));
  }
  // 32-bit: CAS on the word. A load or a compare that does not match still CASes the word to
  // itself: its success proves the lane held that value at one instant (linearisable), one round
  // trip like the others.
  const uint64_t word = addr & ~uint64_t{7};
  const unsigned shift = static_cast<unsigned>(addr - word) * 8;
  const auto known = c.cas_guess.find({peer, word});
  uint64_t guess = known == c.cas_guess.end() ? 0 : known->second;
  w.op = Op::CompareSwap;
  w.remote_addr = word;
  for (;;) {
    const uint32_t old_lane = static_cast<uint32_t>(guess >> shift);
    const uint32_t nl = new_lane(k, old_lane, operand, compare);
    const uint64_t desired = (guess & ~(uint64_t{0xffffffff} << shift)) | (uint64_t{nl} << shift);
    w.compare = guess;
    w.operand = desired;
    run_single(c, w, what, deadline);  // one deadline for every attempt
    const uint64_t seen = std::atomic_ref<uint64_t>(*result).load(std::memory_order_acquire);
    if (seen == guess) {
      if (c.cas_guess.size() >= 4096) c.cas_guess.clear();  // only a hint; keep it small
      c.cas_guess[{peer, word}] = desired;
      return widen(dtype, old_lane);
    }
    guess = seen;
  }
}

SignalTarget one_word(ContextImpl& c, const char* op, int peer, const SignalSlice& s) {
  SignalTarget t = check_signal(c, op, peer, s);
  if (t.elements() != 1) {
    throw Error(ErrorCode::InvalidArgument, c.who() + ": " + op + " peer " + std::to_string(peer) + ": signal slice of " +
                                                std::to_string(t.elements()) + " words; a fetching atomic acts on exactly one");
  }
  return t;
}

}  // namespace

int64_t Context::fetch_add(const Slice& target, int peer, int64_t value) {
  ContextImpl& c = *impl_;
  c.check_peer(peer, "fetch_add");
  return fetch_atomic(c, check_atomic_target(c, "fetch_add", peer, target), peer, Fetch::Add, value, 0);
}

int64_t Context::compare_swap(const Slice& target, int peer, int64_t expected, int64_t desired) {
  ContextImpl& c = *impl_;
  c.check_peer(peer, "compare_swap");
  return fetch_atomic(c, check_atomic_target(c, "compare_swap", peer, target), peer, Fetch::Cas, desired, expected);
}

int64_t Context::swap(const Slice& target, int peer, int64_t value) {
  ContextImpl& c = *impl_;
  c.check_peer(peer, "swap");
  return fetch_atomic(c, check_atomic_target(c, "swap", peer, target), peer, Fetch::Swap, value, 0);
}

int64_t Context::atomic_fetch(const Slice& target, int peer) {
  ContextImpl& c = *impl_;
  c.check_peer(peer, "atomic_fetch");
  return fetch_atomic(c, check_atomic_target(c, "atomic_fetch", peer, target), peer, Fetch::Load, 0, 0);
}

int64_t Context::fetch_add(const SignalSlice& target, int peer, int64_t value) {
  ContextImpl& c = *impl_;
  c.check_peer(peer, "fetch_add");
  return fetch_atomic(c, one_word(c, "fetch_add", peer, target), peer, Fetch::Add, value, 0);
}

int64_t Context::compare_swap(const SignalSlice& target, int peer, int64_t expected, int64_t desired) {
  ContextImpl& c = *impl_;
  c.check_peer(peer, "compare_swap");
  return fetch_atomic(c, one_word(c, "compare_swap", peer, target), peer, Fetch::Cas, desired, expected);
}

int64_t Context::swap(const SignalSlice& target, int peer, int64_t value) {
  ContextImpl& c = *impl_;
  c.check_peer(peer, "swap");
  return fetch_atomic(c, one_word(c, "swap", peer, target), peer, Fetch::Swap, value, 0);
}

int64_t Context::atomic_fetch(const SignalSlice& target, int peer) {
  ContextImpl& c = *impl_;
  c.check_peer(peer, "atomic_fetch");
  return fetch_atomic(c, one_word(c, "atomic_fetch", peer, target), peer, Fetch::Load, 0, 0);
}

}  // namespace rwin
