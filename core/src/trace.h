// The timeline (issue 28 item 1, docs/OBSERVING.md): with RWIN_TRACE=DIR every context records what
// its owning thread did (spans of put/get/notify/wait/..., the waits inside them, collectives and their
// phases, start-up; instants for peer failures) and writes them when it ends, as one file in the
// Chrome Trace Event Format (Perfetto, chrome://tracing): DIR/rwin-trace-rank<R>-pid<P>.json.
// `rwin-trace merge DIR` puts the ranks on one time axis.
//
// Off (the default) a context holds no Tracer and every hook is one null-pointer test. On, a span
// costs two clock reads (ticks.h) and fills a slot of a block allocated ahead (no formatting, no I/O
// until the end: signal names are interned ids, elements numbers); the file is written once, at
// ~Context (a rank killed before that leaves no file).
#pragma once

#include <cstdint>
#include <exception>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "ticks.h"

namespace rwin::detail {

struct TraceEvent {
  uint64_t t0 = 0;             // ticks::read() (ns when `ns`), CLOCK_MONOTONIC ns in the file
  uint64_t dur = 0;            // ticks likewise; instants have none
  const char* name = "";       // static text: "put", "wait", "allreduce", "blocked", "peer failed"
  const char* cat = "";        // static text: "rma", "sync", "wait", "atomic", "coll", "startup", "failure"
  int32_t peer = -1;           // the peer the event is about (-1: none or several)
  uint32_t chunks = 0;         // puts/gets: transport work requests
  uint64_t bytes = 0;
  int64_t expected = 0;        // waits/tests: the value compared with (cmp set)
  const char* cmp = nullptr;   // "EQ", "GE", ...; null when not a comparison
  const char* on = nullptr;    // blocked waits: what was awaited ("chunk completions", "signal", ...)
  // A signal element (notify, wait, test), kept as numbers and formatted when the file is written:
  // "add 1 on 'sig' word 3", "'sig' element [0, 2] (slice of 4)". sig_name 0: none.
  uint32_t sig_name = 0;       // Tracer::intern id of the window's name
  // Calls this event stands for: a run of identical calls stamped after their stores, back to back
  // (Tracer::end_later), is one event from the first one's stamp to the last one's, bytes and chunks
  // summed; a run of 65535 calls ends the event.
  uint16_t calls = 1;
  bool sig_word = false;       // a signal window ("word N") rather than a data window ("element [i, j]")
  bool later = false;          // stamped once, after the call's stores (TraceSpan::StampLater, never started)
  const char* sig_op = nullptr;  // notify: "add" / "set" (then sig_value)
  int64_t sig_value = 0, sig_i = 0, sig_j = 0, sig_n = 1;
  uint32_t detail = 0;         // Tracer::text id: a collective's team, a failure's text (0: none)
  bool instant = false;
  bool failed = false;         // the span ended by an exception
  bool ns = false;             // t0 and dur are steady-clock ns already (events built by hand)
};

// Copied into the tracer's blocks as plain bytes: no string or allocation per event.
static_assert(std::is_trivially_copyable_v<TraceEvent>);
static_assert(sizeof(TraceEvent) == 128, "two cache lines: keep new fields in the padding");

class Tracer {
 public:
  // RWIN_TRACE (empty/unset: off, returns null). The directory is created if missing; a path that
  // cannot be a directory is an error naming the knob, raised at start-up rather than lost at the end.
  static std::unique_ptr<Tracer> from_env(int rank, int nranks);
  Tracer(std::string dir, int rank, int nranks);
  // An agent's (rwin::Agent: no rank of a job): DIR/rwin-trace-agent-pid<P>-<n>.json, shown as
  // `label` ("agent 127.0.0.1:40123 ucx(tcp)"); otherData.rank -1 and otherData.agent the address.
  // Null when RWIN_TRACE is unset.
  static std::unique_ptr<Tracer> for_agent(const std::string& address, const std::string& label);

  static uint64_t now() noexcept { return ticks::now_ns(); }
  // What spans read (ticks.h); write() maps them onto CLOCK_MONOTONIC ns by the tracer's anchor.
  static uint64_t stamp() noexcept { return ticks::read(); }
  // Appends an event; past RWIN_TRACE_MAX_EVENTS it only counts the drop (the file says how many).
  void add(const TraceEvent& e) noexcept { *open() = e; }
  // The next event's slot, filled in place by a span (no copy); past RWIN_TRACE_MAX_EVENTS, or when a
  // new block cannot be allocated, a scratch slot that is never written out (the drop is counted).
  TraceEvent* open() noexcept {
    if (holding_) commit_held();  // the held event goes first: slots stay in the order of their stamps
    if (count_ < ready_) {
      const size_t i = count_++;
      return &blocks_[i / kBlock][i % kBlock];
    }
    return open_slow();
  }
  // Ends `e`, the slot open() gave last, a span stamped once at `stamp` after its stores: folded into the
  // event before it when that is a run of the same call (name, peer, signal word and value, nothing
  // failed) whose last stamp is at most fold_gap() ticks old; `e` is then cleared and handed out again by
  // the next open(). A stream of small puts or notifies then writes one event, in a slot that stays in
  // the cache, instead of 128 fresh bytes per call; a call after a pause starts a new event.
  void end_later(TraceEvent* e, uint64_t stamp) noexcept;
  // Ends a span stamped once at `stamp` after its stores that never took a slot (a small put into mapped
  // memory: nothing but its name, peer and work): held in the tracer's own event, which stays in L1,
  // until the next event or the file needs it, and folded there like end_later's runs, so no fresh slot
  // is written between a put's stores and the next call's. Measured (bench/RESULTS.md, "A small put
  // held out of its slot"): a stream of 8 B puts traced 13 % faster; a put + notify ping-pong unchanged.
  void end_held(const char* name, const char* cat, int peer, uint64_t bytes, uint32_t chunks, bool failed,
                uint64_t stamp) noexcept;
  // 1 us: longer than a gap between calls of one loop, shorter than anything worth its own place in the
  // timeline. In ticks at the counter's rate, measured at the start-up sync point (set_fold_gap); before
  // it (start-up itself, an agent's tracer) 2000 ticks, 1 us at 2 GHz.
  static constexpr uint64_t kFoldGapNs = 1000;
  void set_fold_gap(long double ns_per_tick) noexcept;
  uint64_t fold_gap() const noexcept { return fold_gap_; }
  void instant(const char* name, const char* cat, int peer, std::string detail);
  // A text's id for TraceEvent::sig_name / detail (from 1). A buffer interns its name once and keeps
  // the id; other details (a collective's team, a failure) are stored once per event.
  uint32_t text(std::string s);
  // Start-up's sync point: the moment every rank left the same collective (the host allgather), and
  // the identity of this clock (the kernel's boot id: ranks that share it share CLOCK_MONOTONIC).
  // `rwin-trace merge` aligns ranks of other clocks on it (their clocks differ).
  void sync_point(uint64_t t, std::string clock_id);
  // Writes the file. Never throws: a failure is printed to stderr with the path.
  void write() noexcept;
  const std::string& path() const noexcept { return path_; }

  int rank = 0, nranks = 1;

 private:
  // Events in blocks allocated whole and touched at once (the first when the tracer is made, before
  // the program's work): growing a vector instead copied every event and page-faulted its new memory
  // in the middle of the operations it timed (0.6 -> 1.3 us per 64 KiB put on this VM).
  static constexpr size_t kBlock = 16384;
  TraceEvent* open_slow() noexcept;
  void commit_held() noexcept;  // the held event into a slot of its own
  std::vector<std::unique_ptr<TraceEvent[]>> blocks_;
  size_t count_ = 0;
  size_t ready_ = 0;      // slots allocated and not past max_events_
  TraceEvent scratch_;    // where dropped events go
  TraceEvent held_;       // end_held's event, when holding_
  bool holding_ = false;
  std::vector<std::string> texts_;  // text()'s, id - 1
  size_t max_events_ = 0;
  uint64_t dropped_ = 0;
  uint64_t fold_gap_ = 2000;  // ticks (set_fold_gap)
  uint64_t sync_ns_ = 0;
  std::string clock_id_, host_;
  std::string path_;
  TickAnchor anchor_;  // ticks -> ns for the file
  std::string agent_, label_;  // an agent's address and row name (empty: a rank's)
};

// A span over the rest of a scope: one event from construction to destruction (or to end_at), marked
// failed when an exception ends it. It fills its slot in the tracer in place, so its place in the
// file is where it took the slot: its start, or its end for a span stamped later (below). With a
// null tracer it reads no clock and records nothing.
class TraceSpan {
 public:
  // A span whose work may be a few stores into a peer's mapped memory (a notify, a small put): nothing
  // of the tracer's before the work. start() stamps the start when the work turns out longer (through
  // the transport, a large copy); a span never started takes its slot and is stamped once, when it
  // ends, with no duration. On the way from a peer's signal to this rank's next store that is one
  // clock read and no slot (the read and the slot's writes after the stores are on nobody's path:
  // stores leave in order, so slot writes before them delayed them), for a start a few stores late.
  struct StampLater {};
  TraceSpan(Tracer* t, const char* name, const char* cat, int peer = -1, uint64_t bytes = 0) noexcept
      : TraceSpan(t, name, cat, peer, bytes, StampLater{}) {
    start();
  }
  TraceSpan(Tracer* t, const char* name, const char* cat, int peer, uint64_t bytes, StampLater) noexcept
      : t_(t), name_(name), cat_(cat), peer_(peer), bytes_(bytes) {}
  void start() noexcept {
    if (t_) {
      open();
      e_->t0 = Tracer::stamp();
      started_ = true;
    }
  }
  ~TraceSpan() {
    if (t_ && !ended_) end_at(Tracer::stamp());
  }
  TraceSpan(const TraceSpan&) = delete;
  TraceSpan& operator=(const TraceSpan&) = delete;
  bool on() const noexcept { return t_ != nullptr; }
  // Only when on(): fields known later (chunks, cmp). Takes the span's slot if it has none yet.
  TraceEvent& event() noexcept {
    open();
    return *e_;
  }
  // Work the span stands for, known as it is done (count_transfer): kept here, not in the slot, so a
  // span stamped later touches its slot only after its stores. Only when on().
  void add_work(uint64_t bytes, uint64_t chunks) noexcept {
    bytes_ += bytes;
    chunks_ += static_cast<uint32_t>(chunks);
  }
  // The call succeeded: its end needs no std::uncaught_exceptions() (a call into the C++ runtime) to
  // tell. A span never marked asks it at its end.
  void ok() noexcept { ok_ = true; }
  // Ends the span at a stamp its owner read anyway (a wait ends when its blocked part does): one clock
  // read less on the path back to the caller. Only when on().
  void end_at(uint64_t stamp) noexcept {
    ended_ = true;
    const bool failed = !ok_ && std::uncaught_exceptions() > unwinding_;
    if (!e_) return t_->end_held(name_, cat_, peer_, bytes_, chunks_, failed, stamp);  // never started
    e_->bytes += bytes_;
    e_->chunks += chunks_;
    e_->failed = failed;
    if (!started_) return t_->end_later(e_, stamp);
    e_->dur = stamp - e_->t0;
  }
  void detail(std::string s) {  // a text shown as args.detail (stored once, by id)
    if (t_) event().detail = t_->text(std::move(s));
  }

 private:
  // The slot, taken at the first need. A span taken earlier than its end notes the exceptions in
  // flight, so that its end tells one that ended it from one it began inside (a call made by a
  // destructor during unwinding). A span taken at its end was never asked: its end counts any
  // exception in flight as its own, so its owner marks success with ok() (a stamped-later call).
  void open() noexcept {
    if (e_) return;
    e_ = t_->open();
    e_->name = name_;
    e_->cat = cat_;
    e_->peer = peer_;
    if (!ended_) unwinding_ = std::uncaught_exceptions();
  }
  Tracer* t_;
  TraceEvent* e_ = nullptr;
  const char* name_;
  const char* cat_;
  int peer_;
  uint64_t bytes_;
  uint32_t chunks_ = 0;
  int unwinding_ = 0;
  bool started_ = false;
  bool ended_ = false;
  bool ok_ = false;
};

}  // namespace rwin::detail
