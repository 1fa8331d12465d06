// The core's idle strategy (core/src/backoff.h): spin, then yield, then sleep; and a wait that sees
// traffic arrive starts its spin over. Driven with a clock of the test's own (Backoff::step), so
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

}  // namespace
