// Pinning a benchmark process to one CPU (rwin-perf's ranks, rwin-agent-perf's client and server).
#pragma once

#include <sched.h>

#include <cstdio>
#include <vector>

namespace rwin_bench {

// The CPUs this process may run on, in order.
inline std::vector<int> allowed_cpus() {
  std::vector<int> cpus;
  cpu_set_t allowed;
  if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) return cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &allowed)) cpus.push_back(c);
  }
  return cpus;
}

// The calling process (and the threads it starts from now on) on the k-th of those CPUs (k modulo
// their number); `tool` names the failure.
inline void pin_to_allowed(size_t k, const char* tool) {
  const std::vector<int> cpus = allowed_cpus();
  if (cpus.empty()) return;
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpus[k % cpus.size()], &one);
  if (sched_setaffinity(0, sizeof one, &one) != 0) std::fprintf(stderr, "%s: sched_setaffinity failed\n", tool);
}

}  // namespace rwin_bench
