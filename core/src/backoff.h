// Waiting politely while nothing happens. Shared by the core's waits and the benchmarks' raw
// baselines (bench/raw_verbs.cpp), so raw and rwin waits idle alike.
#pragma once

#include <sched.h>
#include <time.h>

#include <chrono>
#include <cstdint>

namespace rwin::detail {

// Spin (lowest latency when ranks <= cores), then yield, then sleep, by elapsed time rather than
// poll count, so a fast ping-pong never sleeps (a 50 us sleep costs a whole 4 ms tick in a TCG
// guest) and 16 ranks on 2 cores still all progress.
class Backoff {
 public:
  void idle() noexcept {
    if (++polls_ < 64) return;  // the first polls are pure spinning: no clock reads at all
    const auto now = std::chrono::steady_clock::now();
    if (!started_) {
      started_ = true;
      start_ = now;
    }
    const auto waited = now - start_;
    if (waited < std::chrono::microseconds(200)) return;
    if (waited < std::chrono::milliseconds(2)) {
      sched_yield();
      return;
    }
    timespec ts{0, 50 * 1000};
    nanosleep(&ts, nullptr);
  }
  void reset() noexcept {
    polls_ = 0;
    started_ = false;
  }

 private:
  uint32_t polls_ = 0;
  bool started_ = false;
  std::chrono::steady_clock::time_point start_{};
};

}  // namespace rwin::detail
