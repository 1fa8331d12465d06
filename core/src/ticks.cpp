// ticks.h: whether the time-stamp counter can serve as the process's clock.
#include "ticks.h"

#include <cstdio>
#include <cstring>

namespace rwin::detail::ticks {

// The kernel's word on the TSC (x86 flags in /proc/cpuinfo): usable as a clock only when its rate is
// constant and it runs in every C-state; otherwise ticks are clock_gettime nanoseconds.
bool use_tsc() noexcept {
#if defined(__x86_64__)
  FILE* f = std::fopen("/proc/cpuinfo", "r");
  if (!f) return false;
  char line[4096];
  bool constant = false, nonstop = false;
  while (std::fgets(line, sizeof line, f)) {
    if (std::strncmp(line, "flags", 5) != 0) continue;
    constant = std::strstr(line, " constant_tsc") != nullptr;
    nonstop = std::strstr(line, " nonstop_tsc") != nullptr;
    break;
  }
  std::fclose(f);
  return constant && nonstop;
#else
  return false;
#endif
}

}  // namespace rwin::detail::ticks
