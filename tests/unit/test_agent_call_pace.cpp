// CallPace (agent/call_pace.h): an agent call hands serving to the transport when it ends, unless it
// is one of a loop of calls.
#include <gtest/gtest.h>

#include "agent/call_pace.h"

namespace {

using rwin::CallPace;
using std::chrono::microseconds;

TEST(AgentCallPace, ALoneCallHandsOffAndALoopOfCallsDoesNot) {
  CallPace p;
  CallPace::Clock::time_point t{std::chrono::seconds(100)};
  p.begin(t);
  EXPECT_TRUE(p.end(t + microseconds(3))) << "the first call";
  t += microseconds(3);
  for (int i = 0; i < 5; ++i) {  // calls back to back: a test() loop
    t += microseconds(1);
    p.begin(t);
    t += microseconds(2);
    EXPECT_FALSE(p.end(t)) << "call " << i << " of a loop";
  }
  // The caller went away (slept 1 ms): its next call hands off again.
  t += microseconds(1000);
  p.begin(t);
  EXPECT_TRUE(p.end(t + microseconds(2)));
}

TEST(AgentCallPace, TheLoopGapIsMeasuredFromTheLastEndNotTheLastStart) {
  CallPace p;
  CallPace::Clock::time_point t{std::chrono::seconds(100)};
  p.begin(t);
  (void)p.end(t + CallPace::kLoopGap * 3);  // a long call
  t += CallPace::kLoopGap * 3 + CallPace::kLoopGap / 2;
  p.begin(t);  // began half a gap after that call ended: a loop
  EXPECT_FALSE(p.end(t + microseconds(1)));
  t += microseconds(1) + CallPace::kLoopGap;
  p.begin(t);  // exactly one gap later: no longer a loop
  EXPECT_TRUE(p.end(t + microseconds(1)));
}

}  // namespace
