// The timeline (issue 28 item 1, docs/OBSERVING.md): with RWIN_TRACE=DIR every context records what
// its owning thread did (spans of put/get/notify/wait/..., the waits inside them, collectives and their
// phases, start-up; instants for peer failures) and writes them when it ends, as one file in the
// Chrome Trace Event Format (Perfetto, chrome://tracing): DIR/rwin-trace-rank<R>-pid<P>.json.
// `rwin-trace merge DIR` puts the ranks on one time axis.
//
// Off (the default) a context holds no Tracer and every hook is one null-pointer test. On, a span
// costs two clock reads and an append to a vector (no formatting, no I/O until the end); the file is
// written once, at ~Context (a rank killed before that leaves no file).
#pragma once

#include <chrono>
#include <cstdint>
#include <exception>
#include <memory>
#include <string>
#include <vector>

namespace rwin::detail {

struct TraceEvent {
  uint64_t t0 = 0;             // ns on the steady clock (CLOCK_MONOTONIC: one clock for all ranks of a host)
  uint64_t dur = 0;            // ns; instants have none
  const char* name = "";       // static text: "put", "wait", "allreduce", "blocked", "peer failed"
  const char* cat = "";        // static text: "rma", "sync", "wait", "atomic", "coll", "startup", "failure"
  int32_t peer = -1;           // the peer the event is about (-1: none or several)
  uint32_t chunks = 0;         // puts/gets: transport work requests
  uint64_t bytes = 0;
  int64_t expected = 0;        // waits/tests: the value compared with (cmp set)
  const char* cmp = nullptr;   // "EQ", "GE", ...; null when not a comparison
  const char* on = nullptr;    // blocked waits: what was awaited ("chunk completions", "signal", ...)
  std::string detail;          // a signal's name and element, a collective's team, a failure's text
  bool instant = false;
  bool failed = false;         // the span ended by an exception
};

class Tracer {
 public:
  // RWIN_TRACE (empty/unset: off, returns null). The directory is created if missing; a path that
  // cannot be a directory is an error naming the knob, raised at start-up rather than lost at the end.
  static std::unique_ptr<Tracer> from_env(int rank, int nranks);
  Tracer(std::string dir, int rank, int nranks);

  static uint64_t now() noexcept {
    return static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count());
  }
  // Appends an event; past RWIN_TRACE_MAX_EVENTS it only counts the drop (the file says how many).
  void add(TraceEvent&& e);
  void instant(const char* name, const char* cat, int peer, std::string detail);
  // Start-up's sync point: the moment every rank left the same collective (the host allgather), and
  // the identity of this clock (the kernel's boot id: ranks that share it share CLOCK_MONOTONIC).
  // `rwin-trace merge` aligns ranks of other clocks on it (their clocks differ).
  void sync_point(uint64_t t, std::string clock_id);
  // Writes the file. Never throws: a failure is printed to stderr with the path.
  void write() noexcept;
  const std::string& path() const noexcept { return path_; }

  int rank = 0, nranks = 1;

 private:
  std::vector<TraceEvent> events_;
  size_t max_events_ = 0;
  uint64_t dropped_ = 0;
  uint64_t sync_ns_ = 0;
  std::string clock_id_, host_;
  std::string path_;
  uint64_t created_ns_ = 0;
};

// A span over the rest of a scope: one event from construction to destruction, marked failed when an
// exception ends it. With a null tracer it reads no clock and records nothing.
class TraceSpan {
 public:
  TraceSpan(Tracer* t, const char* name, const char* cat, int peer = -1, uint64_t bytes = 0) noexcept : t_(t) {
    if (!t_) return;
    e_.name = name;
    e_.cat = cat;
    e_.peer = peer;
    e_.bytes = bytes;
    unwinding_ = std::uncaught_exceptions();
    e_.t0 = Tracer::now();
  }
  ~TraceSpan() {
    if (!t_) return;
    e_.dur = Tracer::now() - e_.t0;
    e_.failed = std::uncaught_exceptions() > unwinding_;
    try {
      t_->add(std::move(e_));
    } catch (...) {  // out of memory while tracing: the event is lost, the program is not
    }
  }
  TraceSpan(const TraceSpan&) = delete;
  TraceSpan& operator=(const TraceSpan&) = delete;
  bool on() const noexcept { return t_ != nullptr; }
  TraceEvent& event() noexcept { return e_; }  // to add fields known later (chunks, detail)

 private:
  Tracer* t_;
  int unwinding_ = 0;
  TraceEvent e_;
};

}  // namespace rwin::detail
