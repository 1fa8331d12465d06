// notify, wait and test on signal words.
#include <atomic>

#include "context_impl.h"
#include "ops.h"

namespace rwin {

using Clock = std::chrono::steady_clock;
using namespace detail;  // the core's internal types (context_impl.h, ops.h)
using transport::Op;
using transport::PostResult;
using transport::Work;

namespace {

int64_t load_word(const WindowState& s, uint64_t byte_offset) {
  auto* p = reinterpret_cast<int64_t*>(static_cast<char*>(s.base()) + byte_offset);
  return std::atomic_ref<int64_t>(*p).load(std::memory_order_acquire);
}

}  // namespace

void Context::notify(const SignalSlice& signal, int peer, int64_t value, NotifyOp op) {
  ContextImpl& c = *impl_;
  c.check_peer(peer, "notify");
  WindowState& w = check_signal(c, "notify", peer, signal);
  if (signal.count != 1) {
    throw Error(ErrorCode::InvalidArgument, c.who() + ": notify peer " + std::to_string(peer) + ": signal slice of " +
                                                std::to_string(signal.count) + " words; notify updates exactly one");
  }
  Deadline deadline(c.opt.op_timeout);
  PeerState& ps = c.peers[static_cast<size_t>(peer)];
  const transport::RemoteKey& rkey = *w.rkeys[static_cast<size_t>(peer)];
  Work work;
  work.op = op == NotifyOp::AtomicAdd ? Op::AtomicAdd : Op::Swap;
  work.peer = peer;
  work.remote_addr = rkey.base() + signal.byte_offset;
  work.rkey = &rkey;
  work.bytes = 8;
  work.operand = static_cast<uint64_t>(value);
  if (op == NotifyOp::Set) {
    // Swap returns the old value; it lands in a scratch slot nobody reads.
    work.local = c.scratch->addr();
    work.local_mr = c.scratch.get();
  }
  // Ordering: when the peer sees this notify, every earlier put to it must be visible. Where the
  // transport orders an atomic after earlier writes to this peer (verbs: one RC QP; UCX direct and
  // am modes), the atomic simply follows them. Otherwise (UCX native) a peer with unflushed writes
  // is drained (flushed and waited for) first: one round trip over tcp, immediate on shared memory.
  if (!ps.ordered && ps.dirty) c.drain(peer, deadline, "notify");
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

void Context::wait(const SignalSlice& signal, int64_t expected, WaitCmp cmp,
                   std::optional<std::chrono::milliseconds> timeout) {
  ContextImpl& c = *impl_;
  const WindowState& w = check_signal(c, "wait", -1, signal);
  const auto limit = timeout.value_or(c.opt.op_timeout);
  Deadline deadline(limit);
  int64_t word = 0;  // first word that does not satisfy cmp yet
  Backoff backoff;
  for (uint64_t round = 0;; ++round) {
    while (word < signal.count &&
           compare(load_word(w, signal.byte_offset + static_cast<uint64_t>(word) * 8), cmp, expected)) {
      ++word;
    }
    if (word == signal.count) return;
    c.progress();
    if ((round & 63) == 0) {
      c.watch();
      if (c.failures_reported < c.known_failures.size()) {
        const uint64_t idx = signal.byte_offset / 8 + static_cast<uint64_t>(word);
        c.raise_new_failure(" while waiting on signal '" + w.name + "' word " + std::to_string(idx) + " for " +
                            to_string(cmp) + " " + std::to_string(expected) + " (last value seen " +
                            std::to_string(load_word(w, idx * 8)) + ")");
      }
    }
    if ((round & 63) == 0 && deadline.passed()) {
      const uint64_t idx = signal.byte_offset / 8 + static_cast<uint64_t>(word);
      c.degraded = true;
      throw Error(ErrorCode::Timeout,
                  c.who() + ": wait timed out after " + std::to_string(limit.count()) + " ms on signal '" + w.name +
                      "' word " + std::to_string(idx) + " (slice of " + std::to_string(signal.count) +
                      "): expected value " + to_string(cmp) + " " + std::to_string(expected) + ", last value seen " +
                      std::to_string(load_word(w, idx * 8)) + "; " + c.outstanding_summary());
    }
    backoff.idle();
  }
}

bool Context::test(const SignalSlice& signal, int64_t expected, WaitCmp cmp) {
  ContextImpl& c = *impl_;
  const WindowState& w = check_signal(c, "test", -1, signal);
  c.progress();
  for (int64_t i = 0; i < signal.count; ++i) {
    const uint64_t idx = signal.byte_offset / 8 + static_cast<uint64_t>(i);
    if (compare(load_word(w, idx * 8), cmp, expected)) continue;
    // Not satisfied: a caller polling test() in a loop must learn of a dead peer as a wait would.
    if ((++c.test_calls & 63) == 0) c.watch();
    if (c.failures_reported < c.known_failures.size()) {
      c.raise_new_failure(" while testing signal '" + w.name + "' word " + std::to_string(idx) + " for " +
                          to_string(cmp) + " " + std::to_string(expected));
    }
    return false;
  }
  return true;
}

}  // namespace rwin
