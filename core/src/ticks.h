// A cheap clock for timing inside the data path (trace spans, blocked waits): the CPU's time-stamp
// counter where it is invariant (constant_tsc and nonstop_tsc: one rate on every core, in every power
// state; 11 ns a read on this VM against 28 ns for clock_gettime), else steady_clock nanoseconds.
// The choice is made once per process, so every tick in it has one unit; a TickAnchor turns ticks
// into nanoseconds by the line through its own two reads (when it was made and when it converts).
#pragma once

#include <chrono>
#include <cstdint>
#if defined(__x86_64__)
#include <x86intrin.h>
#endif

namespace rwin::detail::ticks {

// CLOCK_MONOTONIC nanoseconds (steady_clock on Linux).
inline uint64_t now_ns() noexcept {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count());
}

bool use_tsc() noexcept;  // the kernel's word on the TSC (ticks.cpp)
inline bool tsc() noexcept {  // use_tsc(), asked once per process
  static const bool yes = use_tsc();
  return yes;
}

inline uint64_t read() noexcept {
#if defined(__x86_64__)
  if (tsc()) return __rdtsc();
#endif
  return now_ns();
}

}  // namespace rwin::detail::ticks

namespace rwin::detail {

struct TickAnchor {
  uint64_t ns0 = ticks::now_ns();
  uint64_t tick0 = ticks::read();
  // Nanoseconds per tick, measured from the anchor to now (1 when ticks are nanoseconds already).
  long double ns_per_tick() const noexcept {
    const uint64_t ns = ticks::now_ns(), t = ticks::read();
    return t > tick0 && ns > ns0 ? static_cast<long double>(ns - ns0) / static_cast<long double>(t - tick0) : 1.0L;
  }
  uint64_t to_ns(uint64_t elapsed_ticks) const noexcept {
    return static_cast<uint64_t>(static_cast<long double>(elapsed_ticks) * ns_per_tick() + 0.5L);
  }
};

}  // namespace rwin::detail
