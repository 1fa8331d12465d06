// Waiting politely while nothing happens. Shared by the core's waits and the benchmarks' raw
// baselines (bench/raw_verbs.cpp), so raw and rwin waits idle alike.
#pragma once

#include <sched.h>
#include <time.h>

#include <atomic>
#include <chrono>
#include <cstdint>

namespace rwin::detail {

// How long a wait spins before it yields, process-wide (RWIN_SPIN_US). A Context sets it at start-up:
// 200 us, or 0 when the job's ranks on this host outnumber the CPUs this process may run on (then the
// rank a wait is waiting for is usually not running, and every microsecond spun delays it: Open MPI's
// mpi_yield_when_idle does the same).
inline std::atomic<uint32_t> g_spin_us{200};

// Spin (lowest latency when ranks <= cores; g_spin_us), then yield, then sleep, by elapsed time rather than
// poll count, so a fast ping-pong never sleeps (a 50 us sleep costs a whole 4 ms tick in a TCG
// guest) and 16 ranks on 2 cores still all progress.
class Backoff {
 public:
  // How long the yield stage lasts: 2 ms of waiting by default, or a number of polls (counted from the
  // wait's first), for waits on several peers where ranks often outnumber cores: there one yield may
  // take a whole scheduler slice, so a time limit would end the stage after a few yields (the
  // collectives, core/src/collectives/channel.cpp).
  struct YieldPolls {
    uint32_t n;
  };
  Backoff() = default;
  explicit Backoff(YieldPolls p) noexcept : yield_polls_(p.n) {}
  void idle() noexcept {
    idle([](std::chrono::microseconds) { return false; });
  }
  // The same, where the last stage may sleep somewhere that ends early when work arrives:
  // `sleep(max)` returns true when it slept (Transport::idle_wait), false to sleep here.
  template <class Sleep>
  void idle(Sleep&& sleep) noexcept {
    // The first polls are pure spinning, no clock reads at all; unless spinning is off (ranks outnumber
    // CPUs): then a poll that costs system calls (a transport serving its sockets) would hold the core
    // ~100 us before its first yield.
    if (++polls_ < 64 && g_spin_us.load(std::memory_order_relaxed) != 0) return;
    step(std::chrono::steady_clock::now(), sleep);
  }
  // Something arrived for this rank while it waited (Transport::arrivals moved): traffic is flowing,
  // so the wait starts its spin over instead of sleeping between arrivals (a passive target served
  // 8 B gets at 2x a busy-poll ping-pong's round trip when its long wait slept between them, 1.1x
  // spinning; bench/RESULTS.md). Where spinning is off (RWIN_SPIN_US=0, oversubscribed) it yields.
  void active() noexcept { started_ = false; }
  // One idle step at time `now` (idle() reads the clock; tests drive it).
  template <class Sleep>
  void step(std::chrono::steady_clock::time_point now, Sleep&& sleep) noexcept {
    if (!started_) {
      started_ = true;
      start_ = now;
    }
    const auto waited = now - start_;
    if (waited < std::chrono::microseconds(g_spin_us.load(std::memory_order_relaxed))) return;
    if (yield_polls_ != 0 ? polls_ < yield_polls_ : waited < std::chrono::milliseconds(2)) {
      sched_yield();
      return;
    }
    if (sleep(std::chrono::microseconds(50))) return;
    timespec ts{0, 50 * 1000};
    nanosleep(&ts, nullptr);
  }
  void reset() noexcept {
    polls_ = 0;
    started_ = false;
  }

 private:
  uint32_t polls_ = 0;
  uint32_t yield_polls_ = 0;  // 0: the yield stage is 2 ms
  bool started_ = false;
  std::chrono::steady_clock::time_point start_{};
};

}  // namespace rwin::detail
