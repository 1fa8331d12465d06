// Whether an agent call's end hands serving to the transport (CallLock, agent_impl.h).
#pragma once

#include <chrono>

namespace rwin {

// A call that ends hands peers' requests to the transport (Transport::owner_away: tcp's receiver
// thread stops napping and serves), since its caller may not call again for a while; but not when
// the call began within kLoopGap of the previous call's end: a caller's loop of calls (test() until
// a signal) then woke that thread at every call, and the two took turns on a CPU (a 4 KiB put_notify
// answered from such a loop: 7 -> 17-19 us one way with the server on one CPU), while the thread's
// hand-offs cut a 1 MiB get served between a sleeping server's 1 ms calls (bench/RESULTS.md, "An agent
// call hands off unless its caller loops"). A looping caller that stops is missed within the
// transport's owner window (tcp: 200 us, up to 1 ms after a long loop: transport/tcp/owner_nap.h).
class CallPace {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr std::chrono::microseconds kLoopGap{100};
  void begin(Clock::time_point now) noexcept { looping_ = now - last_end_ < kLoopGap; }
  // The call ends at `now`: whether it hands off.
  bool end(Clock::time_point now) noexcept {
    last_end_ = now;
    return !looping_;
  }

 private:
  Clock::time_point last_end_{};
  bool looping_ = false;
};

}  // namespace rwin
