// The core's one wait loop (issue 28 item 4). Every place the core waits for something another rank or
// the transport must do (a signal, a transfer's chunks, a flush, a free staging slot, a stripe lock,
// room in the transport's queue) goes through wait_until, which owns what those waits share:
//   - the cadence: a round of the caller's work, then the idle strategy (backoff.h) between rounds;
//   - the deadline: checked every `deadline_every` rounds, the caller's on_timeout builds the error
//     (it names the operation, peer, offsets and sizes; wait_until knows only what is waited for);
//   - the record: a wait not satisfied by its first round is "blocked"; it reads the clock (ticks.h)
//     then and at its end, and becomes one span of the trace (trace.h) naming what it waited for and
//     for whom; the same two reads time it for the counters, and the end ends `outer` too.
// A wait satisfied by its first round reads no clock and records nothing.
#pragma once

#include <cstdint>

#include "backoff.h"
#include "context_impl.h"
#include "trace.h"

namespace rwin::detail {

struct WaitFor {
  const char* on;               // what is awaited: "signal", "chunk completions", "flush", ...
  int peer = -1;                // whom (-1: several or none)
  uint32_t deadline_mask = 0;   // the deadline is checked when (round & mask) == 0 (mask 2^k - 1)
  uint64_t* blocked_ticks = nullptr;  // where the blocked time is added in ticks (Stats::wait_ns), or null
  uint64_t* blocked_count = nullptr;  // counts blocked waits (Stats::waits_blocked), or null
  TraceSpan* outer = nullptr;  // a span that ends when this wait does (the call's own), or null
};

// Runs `round(r)` for r = 0, 1, ... until it returns true. `round` does one round of the caller's work
// (progress, failure checks that throw); `on_timeout()` throws when `deadline` has passed.
template <class Round, class OnTimeout>
void wait_until(ContextImpl& c, const WaitFor& w, Deadline& deadline, Round&& round, OnTimeout&& on_timeout) {
  if (round(uint64_t{0})) return;
  (void)deadline.passed();  // starts its clock here if nobody did: the limit counts from the first miss
  struct Blocked {
    ContextImpl& c;
    const WaitFor& w;
    TraceSpan span;
    uint64_t t0;
    Blocked(ContextImpl& ctx, const WaitFor& wf)
        : c(ctx), w(wf), span(ctx.trace.get(), "blocked", "wait", wf.peer), t0(span.on() ? span.event().t0 : ticks::read()) {
      if (span.on()) span.event().on = wf.on;
      if (w.blocked_count) ++*w.blocked_count;
    }
    bool ok = false;  // satisfied (not ended by an exception): the spans need not ask (TraceSpan::ok)
    ~Blocked() {  // one clock read ends the blocked span, the outer span and the counter's time
      const uint64_t t1 = ticks::read();
      if (span.on()) {
        if (ok) {
          span.ok();
          if (w.outer) w.outer->ok();
        }
        span.end_at(t1);
        if (w.outer && w.outer->on()) w.outer->end_at(t1);
      }
      if (w.blocked_ticks) *w.blocked_ticks += t1 - t0;
    }
  } blocked(c, w);
  Backoff backoff;
  uint64_t arrivals = c.tp ? c.tp->arrivals() : 0;
  for (uint64_t r = 1;; ++r) {
    backoff.idle([&c](std::chrono::microseconds max) { return c.tp && c.tp->idle_wait(max); });
    if (round(r)) {
      blocked.ok = true;
      return;
    }
    if (c.tp) {
      const uint64_t now = c.tp->arrivals();
      if (now != arrivals) backoff.active();
      arrivals = now;
    }
    if ((r & w.deadline_mask) == 0 && deadline.passed()) on_timeout();
  }
}

}  // namespace rwin::detail
