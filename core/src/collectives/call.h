// What every collective entry shares: argument checks naming rank, collective and window, and the
// wrapper that marks the team unusable when a call fails half way.
#pragma once

#include <string>

#include "collectives/team_state.h"
#include "ops.h"

namespace rwin::detail {

struct Call {
  TeamState& t;
  const char* what;
  std::string head() const { return t.c->who() + ": " + what + " on " + t.describe(); }

  // A live window of this context; `arg` names it in messages ("x", "stage", ...).
  WindowState& window(const Window& w, const char* arg) const {
    const auto& s = ContextAccess::state(w);
    if (!s) throw Error(ErrorCode::InvalidArgument, head() + ": " + arg + " is an empty Window handle");
    if (!s->ctx()) throw Error(ErrorCode::UseAfterFree, head() + ": " + arg + " window " + s->describe() + " was freed");
    if (s->ctx() != t.c) {
      throw Error(ErrorCode::InvalidArgument, head() + ": " + arg + " window " + s->describe() + " belongs to another context");
    }
    return *s;
  }
  static int64_t elements(const WindowState& w) { return w.shape[0] * w.shape[1]; }
  void same_dtype(const WindowState& a, const char* an, const WindowState& b, const char* bn) const {
    if (a.dtype != b.dtype) {
      throw Error(ErrorCode::DtypeMismatch, head() + ": " + an + " " + a.describe() + " and " + bn + " " + b.describe() +
                                                " have different dtypes");
    }
  }
  // Byte ranges [a, a + an) and [b, b + bn) of the same buffer overlap.
  static bool overlap(const WindowState& a, uint64_t aoff, uint64_t an, const WindowState& b, uint64_t boff, uint64_t bn) {
    if (a.buf != b.buf || an == 0 || bn == 0) return false;
    const uint64_t x0 = a.offset + aoff, y0 = b.offset + boff;
    return x0 < y0 + bn && y0 < x0 + an;
  }

  // Runs the body of the call after its checks: the team is usable, the header started; a failure
  // leaves the team marked unusable (its counters no longer agree with the other members').
  template <class F>
  void run(CollKind kind, F&& body) {
    MsgHeader h = begin_call(t, kind, what);
    TraceSpan span(t.c->trace.get(), what, "coll");
    if (span.on()) span.detail(t.describe());
    try {
      body(h);
    } catch (const Error& e) {
      fail_call(t, e.what());
      rethrow_in_call(e, t, what);
    }
  }
};

}  // namespace rwin::detail
