// The tracer's spans (core/src/trace.h): how a span stamped after its stores ends (its work, its failure
// or success, told without asking the C++ runtime when its owner marks success), and runs of calls
// (Tracer::end_later): back-to-back identical calls stamped after their stores become one event with
// their count. Driven with stamps of the test's own, so what folds depends only on the rule, not on how
// fast this machine runs the calls.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "trace.h"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using rwin::detail::TraceSpan;
using rwin::detail::Tracer;

struct FoldDir {  // a fresh directory for one tracer's file
  fs::path path = fs::temp_directory_path() / ("rwin-trace-fold-" + std::to_string(::getpid()));
  FoldDir() { fs::create_directories(path); }
  ~FoldDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

// One call stamped after its stores at `stamp`: a notify of `value` to word `word` of peer 1, or a put
// of `bytes` to `peer`.
void notify_at(Tracer& t, uint64_t stamp, int64_t value, int64_t word = 0) {
  TraceSpan s(&t, "notify", "sync", 1, 0, TraceSpan::StampLater{});
  s.event().sig_name = 1;
  s.event().sig_word = true;
  s.event().sig_j = word;
  s.event().sig_op = "add";
  s.event().sig_value = value;
  s.end_at(stamp);
}
void put_at(Tracer& t, uint64_t stamp, int peer, uint64_t bytes) {
  TraceSpan s(&t, "put", "rma", peer, bytes, TraceSpan::StampLater{});
  s.end_at(stamp);
}

std::vector<json> events_of(Tracer& t) {
  t.write();
  std::ifstream in(t.path());
  const json d = json::parse(in);
  std::vector<json> v;
  for (const auto& e : d.at("traceEvents")) {
    if (e.value("ph", "") == "X") v.push_back(e);
  }
  return v;
}

int calls(const json& e) { return e.at("args").value("calls", 1); }

TEST(TraceFold, RunsOfIdenticalCallsBecomeOneEvent) {
  FoldDir dir;
  Tracer t(dir.path.string(), 0, 1);
  (void)t.text("sig");  // id 1: the signal window's name
  const uint64_t gap = t.fold_gap();
  ASSERT_EQ(gap, 2000u);  // before the start-up sync point
  const uint64_t b = Tracer::stamp();
  notify_at(t, b, 1);
  notify_at(t, b + 10, 1);
  notify_at(t, b + 10 + gap, 1);             // exactly the gap: still the run
  notify_at(t, b + 10 + 2 * gap + 1, 1);     // one tick past it: a new event
  notify_at(t, b + 10 + 2 * gap + 2, 2);     // another value: a new event
  notify_at(t, b + 10 + 2 * gap + 3, 2, 5);  // another word: a new event
  put_at(t, b + 10 + 2 * gap + 4, 1, 8);     // another call: a new event
  put_at(t, b + 10 + 2 * gap + 5, 1, 24);    // the same call: folded, bytes summed
  put_at(t, b + 10 + 2 * gap + 6, 0, 8);     // another peer: a new event
  {
    TraceSpan started(&t, "put", "rma", 0, 8);  // a span with a start: never folded, and ends any run
  }
  put_at(t, b + 10 + 2 * gap + 7, 0, 8);
  const auto ev = events_of(t);
  ASSERT_EQ(ev.size(), 8u);
  const std::vector<std::string> names{"notify", "notify", "notify", "notify", "put", "put", "put", "put"};
  const std::vector<int> want_calls{3, 1, 1, 1, 2, 1, 1, 1};
  for (size_t i = 0; i < ev.size(); ++i) {
    SCOPED_TRACE(ev[i].dump());
    EXPECT_EQ(ev[i].at("name"), names[i]);
    EXPECT_EQ(calls(ev[i]), want_calls[i]);
  }
  EXPECT_GT(ev[0].at("dur").get<double>(), 0.0);  // from the first call's stamp to the third's
  EXPECT_EQ(ev[1].at("dur").get<double>(), 0.0);
  EXPECT_EQ(ev[3].at("args").at("detail"), "add 2 on 'sig' word 5");
  EXPECT_EQ(ev[4].at("args").at("bytes"), 32);
  EXPECT_EQ(ev[5].at("args").at("peer"), 0);
  EXPECT_EQ(ev[7].at("args").at("peer"), 0);  // after the started span: its own event
}

// A run stops at 65535 calls (the count's width); the next call starts a new event.
TEST(TraceFold, RunEndsAtItsCountsWidth) {
  FoldDir dir;
  Tracer t(dir.path.string(), 0, 1);
  const uint64_t b = Tracer::stamp();
  for (uint64_t i = 0; i < 65536; ++i) put_at(t, b + i, 1, 1);
  const auto ev = events_of(t);
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(calls(ev[0]), 65535);
  EXPECT_EQ(ev[0].at("args").at("bytes"), 65535);
  EXPECT_EQ(calls(ev[1]), 1);
}

// The gap is 1 us in ticks at the counter's rate: 4000 ticks at 4 GHz, 1000 where ticks are ns.
TEST(TraceFold, GapIsOneMicrosecondAtTheCountersRate) {
  FoldDir dir;
  Tracer t(dir.path.string(), 0, 1);
  t.set_fold_gap(0.25L);  // 4 GHz
  EXPECT_EQ(t.fold_gap(), 4000u);
  const uint64_t b = Tracer::stamp();
  put_at(t, b, 1, 8);
  put_at(t, b + 3000, 1, 8);  // 0.75 us later: the run
  put_at(t, b + 7001, 1, 8);  // 1.00025 us after the run's last stamp: a new event
  t.set_fold_gap(1.0L);       // ticks that are ns
  EXPECT_EQ(t.fold_gap(), 1000u);
  put_at(t, b + 8001, 1, 8);  // exactly 1 us: the run
  t.set_fold_gap(0.0L);       // no rate measured: unchanged
  EXPECT_EQ(t.fold_gap(), 1000u);
  const auto ev = events_of(t);
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(calls(ev[0]), 2);
  EXPECT_EQ(calls(ev[1]), 2);
}

// A put stamped later takes no slot at its end (Tracer::end_held: it waits in the tracer's own event so
// nothing of the tracer's is written between its stores and the next call's): the next event to take a
// slot, and the file, find it first, with its stamp and work; a stream of it still folds.
TEST(TraceFold, AHeldPutGoesBeforeTheNextEvent) {
  FoldDir dir;
  Tracer t(dir.path.string(), 0, 1);
  (void)t.text("sig");
  const uint64_t b = Tracer::stamp();
  put_at(t, b, 1, 8);
  put_at(t, b + 5, 1, 8);          // folded into the held put
  notify_at(t, b + 10, 1);         // takes a slot: the put goes first
  put_at(t, b + 20, 2, 16);        // held again
  { TraceSpan started(&t, "quiet", "sync"); }  // started spans take their slot at their start
  put_at(t, Tracer::stamp(), 3, 4);  // held until write()
  const auto ev = events_of(t);
  ASSERT_EQ(ev.size(), 5u);
  const std::vector<std::string> names{"put", "notify", "put", "quiet", "put"};
  for (size_t i = 0; i < ev.size(); ++i) EXPECT_EQ(ev[i].at("name"), names[i]) << ev[i].dump();
  EXPECT_EQ(calls(ev[0]), 2);
  EXPECT_EQ(ev[0].at("args").at("bytes"), 16);
  EXPECT_GT(ev[0].at("dur").get<double>(), 0.0);
  EXPECT_EQ(ev[2].at("args").at("peer"), 2);
  EXPECT_EQ(ev[4].at("args").at("peer"), 3);
  EXPECT_EQ(ev[4].at("args").at("bytes"), 4);
  EXPECT_LE(ev[0].at("ts").get<double>(), ev[1].at("ts").get<double>());
}

bool failed(const json& e) { return e.at("args").value("failed", false); }

// A span stamped later holds the work it is told of (count_transfer's bytes and chunks) until its end,
// and its slot then: events opened inside it come first in the file, and nothing of it is lost.
TEST(TraceSpanEnd, StampedLaterKeepsItsWorkUntilItsEnd) {
  FoldDir dir;
  Tracer t(dir.path.string(), 0, 1);
  {
    TraceSpan put(&t, "put", "rma", 2, 8, TraceSpan::StampLater{});
    put.add_work(16, 2);
    { TraceSpan inner(&t, "fence", "sync", 2); }
    put.add_work(4, 1);
    put.ok();
  }
  TraceSpan started(&t, "get", "rma", 3, 0, TraceSpan::StampLater{});
  started.start();
  started.add_work(1024, 3);
  started.ok();
  started.end_at(Tracer::stamp());
  const auto ev = events_of(t);
  ASSERT_EQ(ev.size(), 3u);
  EXPECT_EQ(ev[0].at("name"), "fence");
  EXPECT_EQ(ev[1].at("name"), "put");
  EXPECT_EQ(ev[1].at("args").at("bytes"), 28);
  EXPECT_EQ(ev[1].at("args").at("chunks"), 3);
  EXPECT_EQ(ev[1].at("args").at("peer"), 2);
  EXPECT_EQ(ev[1].at("dur"), 0);
  EXPECT_EQ(ev[2].at("name"), "get");
  EXPECT_EQ(ev[2].at("args").at("bytes"), 1024);
  EXPECT_EQ(ev[2].at("args").at("chunks"), 3);
  for (const auto& e : ev) EXPECT_FALSE(failed(e)) << e.dump();
}

// An exception that ends a span marks it failed, whether the span took its slot at its start or at
// its end; ok() was never reached.
TEST(TraceSpanEnd, AnExceptionThatEndsASpanFailsIt) {
  FoldDir dir;
  Tracer t(dir.path.string(), 0, 1);
  EXPECT_THROW(
      {
        TraceSpan s(&t, "notify", "sync", 1, 0, TraceSpan::StampLater{});
        throw std::runtime_error("peer 1 failed");
      },
      std::runtime_error);
  EXPECT_THROW(
      {
        TraceSpan s(&t, "wait", "sync", 1);
        throw std::runtime_error("timed out");
      },
      std::runtime_error);
  const auto ev = events_of(t);
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_TRUE(failed(ev[0])) << ev[0].dump();
  EXPECT_TRUE(failed(ev[1])) << ev[1].dump();
}

// A call made by a destructor while an exception unwinds, that itself succeeds, is not failed: a span
// started then counted the exception already in flight; one stamped later was marked ok().
TEST(TraceSpanEnd, ACallInsideUnwindingThatSucceedsIsNotFailed) {
  FoldDir dir;
  Tracer t(dir.path.string(), 0, 1);
  struct Cleanup {
    Tracer& t;
    ~Cleanup() {
      { TraceSpan s(&t, "quiet", "sync"); }
      TraceSpan later(&t, "notify", "sync", 1, 0, TraceSpan::StampLater{});
      later.ok();
    }
  };
  try {
    Cleanup c{t};
    throw std::runtime_error("the caller's own failure");
  } catch (const std::runtime_error&) {
  }
  const auto ev = events_of(t);
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(ev[0].at("name"), "quiet");
  EXPECT_FALSE(failed(ev[0])) << ev[0].dump();
  EXPECT_EQ(ev[1].at("name"), "notify");
  EXPECT_FALSE(failed(ev[1])) << ev[1].dump();
}

}  // namespace
