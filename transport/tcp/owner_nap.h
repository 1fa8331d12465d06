// How long tcp's receiver thread naps while its owner serves its own arrivals (receiver_main,
// tcp_receiver.cpp). The thread must notice an owner that left rwin without saying so (a loop of
// calls that stopped) and serve for it, which only a look at the owner's last poll tells; each look
// is a timer wake-up on a CPU that polling ranks use (a timer interrupt, two context switches, the
// next timer set: one timer syscall alone is ~7 us in this VM). So the first nap ends when the
// owner's window does, and each nap the owner outlasts doubles the next one, up to kLongest: an
// owner that polls without a gap is looked at every 800 us instead of every 200, and one that leaves
// after such a stretch is served at most a window plus kLongest after its last poll (one that says
// so, arm() / owner_away(), at once). Windows of kLongest or more (2 ms on oversubscribed hosts) do
// not grow. Measured (bench/RESULTS.md, "A receiver thread that looks less often at a polling
// owner"): put+notify+wait at 128 KiB-1 MiB 0.73-0.93x the time.
#pragma once

#include <algorithm>
#include <cstdint>

namespace rwin::transport::tcp {

class OwnerNap {
 public:
  static constexpr int64_t kLongest = 800'000;  // ns
  // `left`: what remains of the owner's window (ns; <= 0: it is away, and the streak ends).
  // Returns how long to nap (0: do not).
  int64_t next(int64_t left, int64_t window) noexcept {
    if (left <= 0) {
      streak_ = 0;
      return 0;
    }
    if (window >= kLongest) return left;  // the oversubscribed window (2 ms) is looked at this seldom already
    const int64_t grown = streak_ == 0 ? 0 : std::min(kLongest, window << std::min(streak_, 16));
    streak_ = std::min(streak_ + 1, 16);
    return std::max(left, grown);
  }

 private:
  int streak_ = 0;  // naps in a row at whose end the owner was still here
};

}  // namespace rwin::transport::tcp
