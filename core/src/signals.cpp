// notify, wait and test on signal elements: 64-bit words of a SignalArray, or int32/int64
// elements of ordinary windows (the runtime's signal windows).
#include <atomic>
#include <limits>

#include "context_impl.h"
#include "ops.h"
#include "wait_until.h"

namespace rwin {

using namespace detail;  // the core's internal types (context_impl.h, ops.h)
using transport::Op;
using transport::Work;

namespace {

constexpr size_t kCasResultWord = 1;  // scratch word for notify's CAS results (put(Add) reuses
                                      // it too, but never while a notify waits: one thread)

// An int32 lane is read through its 8-byte word, as every update writes it (notify_direct, the
// transports' 64-bit atomics): one atomic object of one size, so the acquire pairs with the update's
// release (a 4-byte load of the upper lane did not, for the C++ model or for TSan, which then
// reported the data before the notify as a race over rwin's own tcp). The word is inside the region:
// buffers are 8-byte aligned and end in the 64-byte-aligned lock table (stripe_locks.h).
int64_t load_element(const SignalTarget& t, uint64_t byte_offset) {
  char* p = t.w->base() + byte_offset;
  if (t.width == 4) {
    const uintptr_t a = reinterpret_cast<uintptr_t>(p);
    const uint64_t word =
        std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(a & ~uintptr_t{7})).load(std::memory_order_acquire);
    return static_cast<int32_t>(static_cast<uint32_t>(word >> ((a & 7) * 8)));
  }
  return std::atomic_ref<int64_t>(*reinterpret_cast<int64_t*>(p)).load(std::memory_order_acquire);
}

std::string element_name(const SignalTarget& t, int64_t i, int64_t j) {
  if (t.w->is_signal) return "word " + std::to_string(t.offsets[1] + j);
  return "element [" + std::to_string(t.offsets[0] + i) + ", " + std::to_string(t.offsets[1] + j) + "]";
}

// The signal element of a notify/wait/test span, as numbers (trace.h): formatted when the file is written.
void trace_signal(ContextImpl& c, TraceEvent& e, const SignalTarget& t, int64_t n) {
  BufferState& b = *t.w->buf;
  if (!b.trace_name) b.trace_name = c.trace->text(b.name);
  e.sig_name = b.trace_name;
  e.sig_word = t.w->is_signal;
  e.sig_i = t.offsets[0];
  e.sig_j = t.offsets[1];
  e.sig_n = n;
}

// The int32 lane of an 8-byte word, updated with compare-and-swap: guess, CAS, retry with what the
// CAS found. The neighbouring lane is written back exactly as seen, so concurrent updates of it
// (by any rank, through either path) are never lost. Blocking: one round trip per attempt.
void notify_i32_cas(ContextImpl& c, int peer, const transport::RemoteKey& rkey, uint64_t addr, int32_t value,
                    NotifyOp op, Deadline& deadline) {
  const uint64_t word = addr & ~uint64_t{7};
  const unsigned shift = static_cast<unsigned>(addr - word) * 8;
  const auto known = c.cas_guess.find({peer, word});
  uint64_t guess = known == c.cas_guess.end() ? 0 : known->second;
  auto* result = static_cast<uint64_t*>(c.scratch->addr()) + kCasResultWord;
  for (;;) {
    const uint32_t old_lane = static_cast<uint32_t>(guess >> shift);
    const uint32_t new_lane = op == NotifyOp::Set ? static_cast<uint32_t>(value)
                                                  : old_lane + static_cast<uint32_t>(value);  // wraps
    const uint64_t desired = (guess & ~(uint64_t{0xffffffff} << shift)) | (uint64_t{new_lane} << shift);
    Work w;
    w.op = Op::CompareSwap;
    w.peer = peer;
    w.local = result;
    w.local_mr = c.scratch.get();
    w.remote_addr = word;
    w.rkey = &rkey;
    w.bytes = 8;
    w.compare = guess;
    w.operand = desired;
    run_single(c, w, "notify", deadline);  // one deadline for every attempt
    const uint64_t seen = std::atomic_ref<uint64_t>(*result).load(std::memory_order_acquire);
    if (seen == guess) {
      if (c.cas_guess.size() >= 4096) c.cas_guess.clear();  // only a hint; keep it small
      c.cas_guess[{peer, word}] = desired;
      return;
    }
    guess = seen;
  }
}

// notify to a peer whose signal is mapped here (WindowState::mapped): one atomic instruction on
// the element, complete on return. Sequentially consistent, so it lands after every earlier put's
// stores (the fast path of transfer.cpp). An int32 lane is updated through its 8-byte word, as
// the transport path does, so every update of the word (any rank, any path) is a 64-bit atomic.
void notify_direct(char* p, size_t width, int64_t value, NotifyOp op) {
  if (width == 8) {
    std::atomic_ref<int64_t> word(*reinterpret_cast<int64_t*>(p));
    if (op == NotifyOp::AtomicAdd) {
      // Two's-complement wrap, as the transports' 64-bit adds do.
      std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(p)).fetch_add(static_cast<uint64_t>(value));
    } else {
      word.store(value);
    }
    return;
  }
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  auto* w = reinterpret_cast<uint64_t*>(a & ~uintptr_t{7});
  const unsigned shift = static_cast<unsigned>(a & 7) * 8;
  std::atomic_ref<uint64_t> word(*w);
  uint64_t old = word.load(std::memory_order_relaxed);
  for (;;) {
    const uint32_t lane = static_cast<uint32_t>(old >> shift);
    const uint32_t nl = op == NotifyOp::Set ? static_cast<uint32_t>(value) : lane + static_cast<uint32_t>(value);
    const uint64_t desired = (old & ~(uint64_t{0xffffffff} << shift)) | (uint64_t{nl} << shift);
    if (word.compare_exchange_weak(old, desired)) return;
  }
}

void notify_target(ContextImpl& c, const SignalTarget& t, int peer, int64_t value, NotifyOp op) {
  if (t.elements() != 1) {
    throw Error(ErrorCode::InvalidArgument, c.who() + ": notify peer " + std::to_string(peer) + ": signal slice of " +
                                                std::to_string(t.elements()) + " elements; notify updates exactly one");
  }
  if (t.width == 4 && (value < std::numeric_limits<int32_t>::min() || value > std::numeric_limits<int32_t>::max())) {
    throw Error(ErrorCode::InvalidArgument, c.who() + ": notify peer " + std::to_string(peer) + ": value " +
                                                std::to_string(value) + " does not fit the int32 signal " +
                                                t.w->describe());
  }
  ++c.peer_stats[static_cast<size_t>(peer)].notifies;
  // A notify into mapped memory is one atomic store: the span takes its slot and its stamp after it
  // (trace.h, StampLater).
  TraceSpan span(c.trace.get(), "notify", "sync", peer, 0, TraceSpan::StampLater{});
  auto describe = [&] {
    if (!span.on()) return;
    trace_signal(c, span.event(), t, 1);
    span.event().sig_op = op == NotifyOp::Set ? "set" : "add";
    span.event().sig_value = value;
  };
  if (char* m = t.w->mapped(peer); m && c.caps.cpu_atomics) {
    notify_direct(m + t.byte_at(0, 0), t.width, value, op);
    describe();
    return span.ok();
  }
  describe();
  span.start();
  Deadline deadline(c.opt.op_timeout);
  PeerState& ps = c.peers[static_cast<size_t>(peer)];
  const transport::RemoteKey& rkey = t.w->rkey(peer);
  const uint64_t addr = t.w->remote_base(peer) + t.byte_at(0, 0);
  // Ordering: when the peer sees this notify, every earlier put to it must be visible. Where the
  // transport orders an atomic after earlier writes to this peer (verbs: one RC QP; UCX direct and
  // am modes), the atomic simply follows them. Otherwise (UCX native) a peer with unflushed writes
  // is drained (flushed and waited for) first: one round trip over tcp, immediate on shared memory.
  // The same holds for every attempt of an int32 CAS loop: each is an atomic posted after the puts.
  if (!ps.ordered && ps.dirty) c.drain(peer, deadline, "notify");
  Work work;
  work.peer = peer;
  work.rkey = &rkey;
  work.bytes = 8;
  if (t.width == 8) {
    work.op = op == NotifyOp::AtomicAdd ? Op::AtomicAdd : Op::Swap;
    work.remote_addr = addr;
    work.operand = static_cast<uint64_t>(value);
  } else if (op == NotifyOp::AtomicAdd && (addr & 7) == 4) {
    // The upper int32 of a little-endian word: adding value << 32 to the whole word changes only
    // that lane (a carry out of bit 63 leaves the word), so one fetch-free add does it.
    work.op = Op::AtomicAdd;
    work.remote_addr = addr - 4;
    work.operand = static_cast<uint64_t>(static_cast<uint32_t>(value)) << 32;
  } else {
    notify_i32_cas(c, peer, rkey, addr, static_cast<int32_t>(value), op, deadline);
    ps.unflushed = true;
    return;
  }
  if (work.op == Op::Swap) {
    // Swap returns the old value; it lands in a scratch slot nobody reads.
    work.local = c.scratch->addr();
    work.local_mr = c.scratch.get();
  }
  Slot s;
  s.kind = Slot::Async;
  s.peer = peer;
  c.post_blocking(work, s, deadline, "notify");
  ps.outstanding++;
  ps.unflushed = true;
  // The notify must be on its way when we return, even if the caller then leaves rwin for a while:
  // a transport may hold posted work until the next poll (transport.h).
  c.progress();
}

void wait_target(ContextImpl& c, const SignalTarget& t, int64_t expected, WaitCmp cmp,
                 std::optional<std::chrono::milliseconds> timeout) {
  if (timeout && timeout->count() < 0) {
    throw Error(ErrorCode::InvalidArgument, c.who() + ": wait on signal '" + t.w->name() + "': negative timeout " +
                                                std::to_string(timeout->count()) + " ms");
  }
  const auto limit = timeout.value_or(c.opt.op_timeout);
  Deadline deadline(limit);
  const int64_t n = t.elements();
  const int64_t cols = t.shape[1];
  int64_t k = 0;  // first element (row-major in the rectangle) that does not satisfy cmp yet
  ++c.own_stats.waits;
  TraceSpan span(c.trace.get(), "wait", "sync");
  if (span.on()) {
    span.event().cmp = to_string(cmp);
    span.event().expected = expected;
    trace_signal(c, span.event(), t, n);
  }
  const auto satisfied = [&] {
    while (k < n && compare(load_element(t, t.byte_at(k / cols, k % cols)), cmp, expected)) ++k;
    return k == n;
  };
  WaitFor wf{"signal"};
  wf.deadline_mask = 63;  // a signal wait reads the clock every 64 rounds only
  wf.blocked_ticks = &c.wait_ticks;
  wf.outer = &span;  // the wait ends when its blocked part does
  wf.blocked_count = &c.own_stats.waits_blocked;
  wait_until(
      c, wf, deadline,
      [&](uint64_t round) {
        if (satisfied()) return true;
        // Where every peer is mapped here, nothing arrives through the transport: it needs only
        // housekeeping now and then.
        if (!c.all_direct || (round & 15) == 15) c.progress();
        if ((round & 63) == 0) {
          c.watch();
          if (c.failures_reported < c.known_failures.size()) {
            // A failure is raised only by a wait still unsatisfied once it is known: what the peers sent
            // before (maybe just delivered by the progress above) may satisfy this one. The failure then
            // stays for the next wait.
            c.progress();
            if (satisfied()) return true;
            const int64_t fi = k / cols, fj = k % cols;
            c.raise_new_failure(" while waiting on signal '" + t.w->name() + "' " + element_name(t, fi, fj) + " for " +
                                to_string(cmp) + " " + std::to_string(expected) + " (last value seen " +
                                std::to_string(load_element(t, t.byte_at(fi, fj))) + ")");
          }
        }
        return false;
      },
      [&] {
        c.degraded = true;
        const int64_t i = k / cols, j = k % cols;
        throw Error(ErrorCode::Timeout,
                    c.who() + ": wait timed out after " + std::to_string(limit.count()) + " ms on signal '" +
                        t.w->name() + "' " + element_name(t, i, j) + " (slice of " + std::to_string(n) +
                        "): expected value " + to_string(cmp) + " " + std::to_string(expected) + ", last value seen " +
                        std::to_string(load_element(t, t.byte_at(i, j))) + "; " + c.outstanding_summary());
      });
  span.ok();
}

bool test_target(ContextImpl& c, const SignalTarget& t, int64_t expected, WaitCmp cmp) {
  ++c.own_stats.tests;
  TraceSpan span(c.trace.get(), "test", "sync");
  if (span.on()) {
    span.event().cmp = to_string(cmp);
    span.event().expected = expected;
    trace_signal(c, span.event(), t, t.elements());
  }
  if (!c.all_direct || (++c.test_progress & 15) == 0) c.progress();
  for (int64_t i = 0; i < t.shape[0]; ++i) {
    for (int64_t j = 0; j < t.shape[1]; ++j) {
      if (compare(load_element(t, t.byte_at(i, j)), cmp, expected)) continue;
      // Not satisfied: a caller polling test() in a loop must learn of a dead peer as a wait would.
      if ((++c.test_calls & 63) == 0) c.watch();
      if (c.failures_reported < c.known_failures.size()) {
        // As in a wait: raised only if the element is still unsatisfied once the failure is known.
        c.progress();
        if (compare(load_element(t, t.byte_at(i, j)), cmp, expected)) continue;
        c.raise_new_failure(" while testing signal '" + t.w->name() + "' " + element_name(t, i, j) + " for " +
                            to_string(cmp) + " " + std::to_string(expected));
      }
      span.ok();
      return false;
    }
  }
  ++c.own_stats.tests_satisfied;
  span.ok();
  return true;
}

Slice element(const Window& w, Shape2 offsets) { return w.slice(offsets, {1, 1}); }

}  // namespace

void Context::notify(const SignalSlice& signal, int peer, int64_t value, NotifyOp op) {
  ContextImpl& c = *impl_;
  c.check_peer(peer, "notify");
  notify_target(c, check_signal(c, "notify", peer, signal), peer, value, op);
}

void Context::notify(const Slice& signal, int peer, int64_t value, NotifyOp op) {
  ContextImpl& c = *impl_;
  c.check_peer(peer, "notify");
  notify_target(c, check_signal(c, "notify", peer, signal), peer, value, op);
}

void Context::notify(const Window& signal, int peer, Shape2 offsets, int64_t value, NotifyOp op) {
  notify(element(signal, offsets), peer, value, op);
}

void Context::wait(const SignalSlice& signal, int64_t expected, WaitCmp cmp,
                   std::optional<std::chrono::milliseconds> timeout) {
  ContextImpl& c = *impl_;
  c.check_owner("wait");
  wait_target(c, check_signal(c, "wait", -1, signal), expected, cmp, timeout);
}

void Context::wait(const Slice& signals, int64_t expected, WaitCmp cmp,
                   std::optional<std::chrono::milliseconds> timeout) {
  ContextImpl& c = *impl_;
  c.check_owner("wait");
  wait_target(c, check_signal(c, "wait", -1, signals), expected, cmp, timeout);
}

void Context::wait(const Window& signal, Shape2 offsets, int64_t expected, WaitCmp cmp,
                   std::optional<std::chrono::milliseconds> timeout) {
  wait(element(signal, offsets), expected, cmp, timeout);
}

bool Context::test(const SignalSlice& signal, int64_t expected, WaitCmp cmp) {
  ContextImpl& c = *impl_;
  c.check_owner("test");
  return test_target(c, check_signal(c, "test", -1, signal), expected, cmp);
}

bool Context::test(const Slice& signals, int64_t expected, WaitCmp cmp) {
  ContextImpl& c = *impl_;
  c.check_owner("test");
  return test_target(c, check_signal(c, "test", -1, signals), expected, cmp);
}

bool Context::test(const Window& signal, Shape2 offsets, int64_t expected, WaitCmp cmp) {
  return test(element(signal, offsets), expected, cmp);
}

}  // namespace rwin
