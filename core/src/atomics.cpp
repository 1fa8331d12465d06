// Fetching atomics (issue 25, item 4): fetch_add, compare_swap, swap and atomic_fetch on one
// int32/int64/uint32/uint64 element of a peer's window, returning the old value. Three paths, one
// rule (docs/CONTRACT.md "Atomics on one word: CPU or NIC, never both"):
//   - the peer's memory is mapped here and the transport's atomics are CPU atomics (UCX direct):
//     one CPU atomic on the element's 8-byte word;
//   - 64-bit elements otherwise: one remote atomic (FetchAdd, CompareSwap, Swap; a load is a
//     FetchAdd of 0), its old value returned into a scratch word;
//   - 32-bit elements otherwise: a compare-and-swap loop on the 8-byte word holding the element,
//     the other half written back as seen (as int32 notify does): IB and UCX atomics are 64-bit.
//
// The _nbi forms post the same operations with a result word of their own (a pool of registered
// words, ContextImpl::fetch_pool) and finish in progress(): the old value is copied to the caller's
// location at the completion; a 32-bit CAS that missed is re-posted from there with what it found.
#include <algorithm>
#include <atomic>
#include <limits>

#include "context_impl.h"
#include "ops.h"

namespace rwin {

using namespace detail;  // the core's internal types (context_impl.h, ops.h)
using transport::Op;
using transport::PostResult;
using transport::Work;

namespace {

constexpr size_t kFetchResultWord = 2;  // scratch word for a fetching atomic's old value (ops.h)

enum class Fetch { Add, Cas, Swap, Load };

const char* fetch_name(Fetch k, bool nbi = false) {
  switch (k) {
    case Fetch::Add: return nbi ? "fetch_add_nbi" : "fetch_add";
    case Fetch::Cas: return nbi ? "compare_swap_nbi" : "compare_swap";
    case Fetch::Swap: return nbi ? "swap_nbi" : "swap";
    case Fetch::Load: return nbi ? "atomic_fetch_nbi" : "atomic_fetch";
  }
  return "?";
}

// "element [0, 3] of 'x' i32[1x4] (16 bytes)": the one element a fetching atomic acts on.
std::string element_text(const SignalTarget& t) {
  return "element [" + std::to_string(t.offsets[0]) + ", " + std::to_string(t.offsets[1]) + "] of " + t.w->describe();
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

void check_value(ContextImpl& c, Fetch k, bool nbi, int peer, DType t, const SignalTarget& st, const char* what,
                 int64_t v) {
  if (dtype_size(t) == 8) return;  // every int64 is an int64 or a uint64's bits
  // An addend may be negative on an unsigned element (it wraps); a stored value must fit the type.
  const int64_t lo = t == DType::I32 || k == Fetch::Add ? std::numeric_limits<int32_t>::min() : 0;
  const int64_t hi = t == DType::U32 || k == Fetch::Add ? std::numeric_limits<uint32_t>::max()
                                                        : std::numeric_limits<int32_t>::max();
  if (v < lo || v > hi) {
    throw Error(ErrorCode::InvalidArgument, c.who() + ": " + fetch_name(k, nbi) + " peer " + std::to_string(peer) +
                                                ": " + what + " " + std::to_string(v) + " does not fit the " +
                                                dtype_name(t) + " " + element_text(st) + " ([" + std::to_string(lo) +
                                                ", " + std::to_string(hi) + "])");
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
  check_value(c, k, false, peer, dtype, t, k == Fetch::Add ? "addend" : "value", operand);
  if (k == Fetch::Cas) check_value(c, k, false, peer, dtype, t, "expected value", compare);
  ++c.peer_stats[static_cast<size_t>(peer)].fetching_atomics;
  TraceSpan span(c.trace.get(), what, "atomic", peer, dtype_size(dtype));
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

// 32-bit CAS: the word to store for `guess` (the lane's new value, the other half as found).
uint64_t cas_desired(Fetch k, uint64_t guess, unsigned shift, int64_t operand, int64_t compare) {
  const uint32_t nl = new_lane(k, static_cast<uint32_t>(guess >> shift), operand, compare);
  return (guess & ~(uint64_t{0xffffffff} << shift)) | (uint64_t{nl} << shift);
}

void remember_guess(ContextImpl& c, int peer, uint64_t word, uint64_t value) {
  if (c.cas_guess.size() >= 4096) c.cas_guess.clear();  // only a hint; keep it small
  c.cas_guess[{peer, word}] = value;
}

// A free result word, growing the pool by a registered page when none is left.
std::pair<uint64_t*, const transport::MemoryRegion*> take_result_word(ContextImpl& c, const char* what, int peer) {
  if (c.free_fetch_words.empty()) {
    constexpr size_t kPoolBytes = 4096;
    std::unique_ptr<transport::MemoryRegion> mr;
    try {
      mr = c.tp->allocate(kPoolBytes);
    } catch (const transport::TransportError& e) {
      throw Error(ErrorCode::Transport, c.who() + ": " + what + " peer " + std::to_string(peer) +
                                            ": allocating result words: " + e.what());
    }
    auto* words = static_cast<uint64_t*>(mr->addr());
    for (size_t i = kPoolBytes / 8; i-- > 0;) c.free_fetch_words.emplace_back(words + i, mr.get());
    c.fetch_pool.push_back(std::move(mr));
  }
  const auto w = c.free_fetch_words.back();
  c.free_fetch_words.pop_back();
  return w;
}

void release_fetch(ContextImpl& c, uint32_t id) noexcept {
  FetchOp& f = c.fetch_ops[id];
  c.free_fetch_words.emplace_back(f.result, f.result_mr);
  f.out = nullptr;
  f.buf.reset();  // also marks the entry free (detach_fetches, fetch_summary)
  c.free_fetch_ops.push_back(id);
}

// A 32-bit op of a chain is done (hit, failed or dropped): the next one of its word starts from
// `known`, the word's last value seen here.
void advance_chain(ContextImpl& c, const FetchOp& f, uint32_t slot, uint64_t known) {
  const auto it = c.cas_chains.find({f.work.peer, f.work.remote_addr});
  if (it == c.cas_chains.end()) return;
  auto& q = it->second;
  const auto at = std::find(q.begin(), q.end(), slot);
  if (at == q.end()) return;
  const bool was_front = at == q.begin();
  q.erase(at);
  if (q.empty()) {
    c.cas_chains.erase(it);
    return;
  }
  if (!was_front) return;  // the front one is still in flight
  FetchOp& next = c.fetch_ops[c.slots[q.front()].index];
  next.work.compare = known;
  next.work.operand = cas_desired(static_cast<Fetch>(next.kind), known, next.shift, next.operand, next.compare);
  c.fetch_retry.push_back(q.front());
}

void finish_fetch(ContextImpl& c, uint32_t slot, uint32_t id, uint64_t known) {
  if (c.fetch_ops[id].cas_loop) advance_chain(c, c.fetch_ops[id], slot, known);
  release_fetch(c, id);
}

std::string fetch_text(const FetchOp& f) {
  return std::string(fetch_name(static_cast<Fetch>(f.kind), true)) + " peer " + std::to_string(f.work.peer) + " of the " +
         dtype_name(f.dtype) + " element at byte " + std::to_string(f.byte) + " of " + f.buf->describe();
}

void fetch_nbi(ContextImpl& c, int64_t* out, const SignalTarget& t, int peer, Fetch k, int64_t operand,
               int64_t compare) {
  const char* what = fetch_name(k, true);
  const DType dtype = t.w->is_signal ? DType::I64 : t.w->dtype;
  if (!out) {
    throw Error(ErrorCode::InvalidArgument, c.who() + ": " + what + " peer " + std::to_string(peer) +
                                                ": null fetch pointer (where the old value of the " + dtype_name(dtype) +
                                                " " + element_text(t) + " should go)");
  }
  check_value(c, k, true, peer, dtype, t, k == Fetch::Add ? "addend" : "value", operand);
  if (k == Fetch::Cas) check_value(c, k, true, peer, dtype, t, "expected value", compare);
  ++c.peer_stats[static_cast<size_t>(peer)].fetching_atomics;
  TraceSpan span(c.trace.get(), what, "atomic", peer, dtype_size(dtype));
  const uint64_t off = t.byte_at(0, 0);
  if (char* m = t.w->mapped(peer); m && c.caps.cpu_atomics) {
    *out = widen(dtype, fetch_direct(m + off, t.width, k, operand, compare));  // done already
    return;
  }
  Deadline deadline(c.opt.op_timeout);
  PeerState& ps = c.peers[static_cast<size_t>(peer)];
  if (!ps.ordered && ps.dirty) c.drain(peer, deadline, what);  // ordered after earlier puts, as blocking
  const uint64_t addr = t.w->remote_base(peer) + off;
  const auto [result, result_mr] = take_result_word(c, what, peer);
  FetchOp f;
  f.out = out;
  f.result = result;
  f.result_mr = result_mr;
  f.buf = t.w->buf;
  f.dtype = dtype;
  f.kind = static_cast<uint8_t>(k);
  f.operand = operand;
  f.compare = compare;
  f.byte = t.w->offset + off;
  Work& w = f.work;
  w.peer = peer;
  w.rkey = &t.w->rkey(peer);
  w.bytes = 8;
  w.local = result;
  w.local_mr = result_mr;
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
  } else {
    const uint64_t word = addr & ~uint64_t{7};
    f.cas_loop = true;
    f.shift = static_cast<unsigned>(addr - word) * 8;
    const auto known = c.cas_guess.find({peer, word});
    const uint64_t guess = known == c.cas_guess.end() ? 0 : known->second;
    w.op = Op::CompareSwap;
    w.remote_addr = word;
    w.compare = guess;
    w.operand = cas_desired(k, guess, f.shift, operand, compare);
  }
  uint32_t id;
  if (c.free_fetch_ops.empty()) {
    id = static_cast<uint32_t>(c.fetch_ops.size());
    c.fetch_ops.push_back(std::move(f));
  } else {
    id = c.free_fetch_ops.back();
    c.free_fetch_ops.pop_back();
    c.fetch_ops[id] = std::move(f);
  }
  Slot s;
  s.kind = Slot::Fetch;
  s.peer = peer;
  s.index = id;
  const std::pair<int, uint64_t> key{peer, c.fetch_ops[id].work.remote_addr};
  if (const auto chain = c.cas_chains.find(key); t.width == 4 && chain != c.cas_chains.end()) {
    const uint32_t slot = c.take_slot(s);  // waits behind the word's op in flight (advance_chain)
    c.fetch_ops[id].work.cookie = slot;
    chain->second.push_back(slot);
    ps.outstanding++;
    c.progress();
    return;
  }
  Work posted = c.fetch_ops[id].work;  // post_blocking may poll, and nothing it runs grows fetch_ops,
  try {                                // but a copy keeps that out of the argument
    c.post_blocking(posted, s, deadline, what);
  } catch (...) {
    release_fetch(c, id);
    throw;
  }
  c.fetch_ops[id].work.cookie = posted.cookie;  // the slot: a retry completes into it again
  if (t.width == 4) c.cas_chains[key].push_back(static_cast<uint32_t>(posted.cookie));
  ps.outstanding++;
  c.progress();  // hands staged work to the device before returning (transport.h)
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

bool ContextImpl::fetch_completed(uint32_t slot, const transport::Completion& done) {
  const uint32_t id = static_cast<uint32_t>(slots[slot].index);
  FetchOp& f = fetch_ops[id];
  PeerState& ps = peers[static_cast<size_t>(f.work.peer)];
  if (!done.ok) {
    if (ps.failed.empty()) ps.failed = done.error + " (" + fetch_text(f) + ")";
    finish_fetch(*this, slot, id, f.work.compare);
    return true;
  }
  const uint64_t seen = std::atomic_ref<uint64_t>(*f.result).load(std::memory_order_acquire);
  if (!f.cas_loop) {
    if (f.out) *f.out = widen(f.dtype, seen);
    release_fetch(*this, id);
    return true;
  }
  if (seen == f.work.compare) {  // the CAS hit: the lane held its old value at that instant
    remember_guess(*this, f.work.peer, f.work.remote_addr, f.work.operand);
    if (f.out) *f.out = widen(f.dtype, static_cast<uint32_t>(seen >> f.shift));
    finish_fetch(*this, slot, id, f.work.operand);
    return true;
  }
  if (!f.out) {  // detached (its quiet gave up): nobody wants the answer, stop trying
    finish_fetch(*this, slot, id, seen);
    return true;
  }
  f.work.compare = seen;  // missed: try again with what the word held
  f.work.operand = cas_desired(static_cast<Fetch>(f.kind), seen, f.shift, f.operand, f.compare);
  fetch_retry.push_back(slot);
  return false;
}

void ContextImpl::post_fetch_retries() {
  std::vector<uint32_t> todo;
  todo.swap(fetch_retry);  // what finishing one starts goes to fetch_retry, for the next progress()
  for (const uint32_t slot : todo) {
    const Slot& s = slots[slot];
    FetchOp& f = fetch_ops[s.index];
    PeerState& ps = peers[static_cast<size_t>(s.peer)];
    // A freed window (its key is gone) or a failed peer ends the loop unanswered: the quiet that
    // waits for it then reports the failure.
    if (f.out && ps.failed.empty() && f.buf->ctx) {
      const PostResult r = tp->post(f.work);
      if (r == PostResult::Busy) {
        fetch_retry.push_back(slot);  // the next progress() tries again
        continue;
      }
      if (r == PostResult::Ok) continue;
      if (ps.failed.empty()) ps.failed = tp->peer_error(s.peer) + " (" + fetch_text(f) + ")";
    }
    ps.outstanding--;
    finish_fetch(*this, slot, static_cast<uint32_t>(s.index), f.work.compare);
    free_slots.push_back(slot);
  }
}

void ContextImpl::detach_fetches(int peer) noexcept {
  for (auto& f : fetch_ops) {
    if (f.buf && (peer < 0 || f.work.peer == peer)) f.out = nullptr;
  }
}

std::string ContextImpl::fetch_summary(int peer) const {
  for (const auto& f : fetch_ops) {
    if (f.buf && f.work.peer == peer) return " (among them " + fetch_text(f) + ")";
  }
  return "";
}

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

void Context::fetch_add_nbi(int64_t* fetch, const Slice& target, int peer, int64_t value) {
  ContextImpl& c = *impl_;
  c.check_peer(peer, "fetch_add_nbi");
  fetch_nbi(c, fetch, check_atomic_target(c, "fetch_add_nbi", peer, target), peer, Fetch::Add, value, 0);
}

void Context::compare_swap_nbi(int64_t* fetch, const Slice& target, int peer, int64_t expected, int64_t desired) {
  ContextImpl& c = *impl_;
  c.check_peer(peer, "compare_swap_nbi");
  fetch_nbi(c, fetch, check_atomic_target(c, "compare_swap_nbi", peer, target), peer, Fetch::Cas, desired, expected);
}

void Context::swap_nbi(int64_t* fetch, const Slice& target, int peer, int64_t value) {
  ContextImpl& c = *impl_;
  c.check_peer(peer, "swap_nbi");
  fetch_nbi(c, fetch, check_atomic_target(c, "swap_nbi", peer, target), peer, Fetch::Swap, value, 0);
}

void Context::atomic_fetch_nbi(int64_t* fetch, const Slice& target, int peer) {
  ContextImpl& c = *impl_;
  c.check_peer(peer, "atomic_fetch_nbi");
  fetch_nbi(c, fetch, check_atomic_target(c, "atomic_fetch_nbi", peer, target), peer, Fetch::Load, 0, 0);
}

void Context::fetch_add_nbi(int64_t* fetch, const SignalSlice& target, int peer, int64_t value) {
  ContextImpl& c = *impl_;
  c.check_peer(peer, "fetch_add_nbi");
  fetch_nbi(c, fetch, one_word(c, "fetch_add_nbi", peer, target), peer, Fetch::Add, value, 0);
}

void Context::compare_swap_nbi(int64_t* fetch, const SignalSlice& target, int peer, int64_t expected, int64_t desired) {
  ContextImpl& c = *impl_;
  c.check_peer(peer, "compare_swap_nbi");
  fetch_nbi(c, fetch, one_word(c, "compare_swap_nbi", peer, target), peer, Fetch::Cas, desired, expected);
}

void Context::swap_nbi(int64_t* fetch, const SignalSlice& target, int peer, int64_t value) {
  ContextImpl& c = *impl_;
  c.check_peer(peer, "swap_nbi");
  fetch_nbi(c, fetch, one_word(c, "swap_nbi", peer, target), peer, Fetch::Swap, value, 0);
}

void Context::atomic_fetch_nbi(int64_t* fetch, const SignalSlice& target, int peer) {
  ContextImpl& c = *impl_;
  c.check_peer(peer, "atomic_fetch_nbi");
  fetch_nbi(c, fetch, one_word(c, "atomic_fetch_nbi", peer, target), peer, Fetch::Load, 0, 0);
}

}  // namespace rwin
