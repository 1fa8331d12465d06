// The core's idle strategy (core/src/backoff.h): spin, then yield, then sleep; a wait that sees
// traffic arrive starts its spin over; the collectives' yield stage counts polls instead of time. Driven with a clock of the test's own (Backoff::step), so
// nothing here depends on how fast this machine runs.
#include <gtest/gtest.h>

#include <chrono>

#include "backoff.h"

namespace {

using rwin::detail::Backoff;
using Clock = std::chrono::steady_clock;
using std::chrono::microseconds;
using std::chrono::milliseconds;

struct SpinUs {  // sets the process-wide spin time for one test
  uint32_t saved;
  explicit SpinUs(uint32_t us) : saved(rwin::detail::g_spin_us.exchange(us)) {}
  ~SpinUs() { rwin::detail::g_spin_us.store(saved); }
};

TEST(Backoff, SpinsThenYieldsThenSleeps) {
  SpinUs spin(200);
  Backoff b;
  int slept = 0;
  auto sleep = [&](microseconds max) {
    EXPECT_EQ(max, microseconds(50));
    ++slept;
    return true;
  };
  const auto t0 = Clock::now();
  b.step(t0, sleep);                         // starts the clock
  b.step(t0 + microseconds(150), sleep);     // spinning
  b.step(t0 + milliseconds(1), sleep);       // yielding
  EXPECT_EQ(slept, 0);
  b.step(t0 + milliseconds(3), sleep);
  EXPECT_EQ(slept, 1);
}

TEST(Backoff, ArrivalsStartTheSpinOver) {
  SpinUs spin(200);
  Backoff b;
  int slept = 0;
  auto sleep = [&](microseconds) {
    ++slept;
    return true;
  };
  const auto t0 = Clock::now();
  b.step(t0, sleep);
  b.step(t0 + milliseconds(3), sleep);
  ASSERT_EQ(slept, 1) << "a long wait sleeps";
  b.active();  // something arrived
  b.step(t0 + milliseconds(3) + microseconds(10), sleep);
  b.step(t0 + milliseconds(4), sleep);
  EXPECT_EQ(slept, 1) << "spinning and yielding again, counted from the arrival";
  b.step(t0 + milliseconds(6), sleep);
  EXPECT_EQ(slept, 2) << "2 ms without arrivals: asleep again";
}

// The collectives' policy: where ranks outnumber cores (no spin window) every poll yields until the
// 20000th, however long the yields took, then the wait sleeps; with a spin window it first spins it.
TEST(Backoff, YieldStageByPolls) {
  int slept = 0;
  auto sleep = [&](microseconds) {
    ++slept;
    return true;
  };
  {
    SpinUs spin(0);
    Backoff b(Backoff::YieldPolls{20000});
    for (int i = 1; i < 20000; ++i) b.idle(sleep);
    EXPECT_EQ(slept, 0) << "19999 polls yield";
    b.idle(sleep);
    EXPECT_EQ(slept, 1) << "the 20000th sleeps";
    b.reset();
    b.idle(sleep);
    EXPECT_EQ(slept, 1) << "a reset wait yields again";
  }
  {
    SpinUs spin(200);
    Backoff b(Backoff::YieldPolls{100});
    const auto t0 = Clock::now() - std::chrono::seconds(1);  // the wait began a second ago
    b.step(t0, sleep);
    b.step(t0 + milliseconds(5), sleep);  // past 2 ms, but polls (none counted by step) decide
    EXPECT_EQ(slept, 1) << "yielding: the stage is 100 polls, not 2 ms";
    for (int i = 1; i < 100; ++i) b.idle(sleep);  // 63 spin without a clock, then yields
    EXPECT_EQ(slept, 1);
    b.idle(sleep);
    EXPECT_EQ(slept, 2) << "the 100th poll sleeps";
  }
}

}  // namespace
