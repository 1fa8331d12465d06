// The consumer of an installed rwin (tests/install/consumer-test.sh): a ring shift on N ranks with
// put + notify + wait, using only the installed headers. Each rank prints "OK rank R of N, rwin V"
// when the data it got from its left neighbour is right, else the first wrong element (exit 1).
#include <cstdint>
#include <cstdio>
#include <cstring>

#include "rwin/rwin.h"
#include "rwin/version.h"

int main() {
  rwin::Context ctx;
  const int rank = ctx.rank(), size = ctx.size();
  const int next = (rank + 1) % size, prev = (rank + size - 1) % size;
  constexpr int64_t n = 1000;
  auto src = ctx.alloc_window("consumer_src", rwin::DType::I64, {1, n});
  auto dst = ctx.alloc_window("consumer_dst", rwin::DType::I64, {1, n});
  auto ready = ctx.alloc_signals("consumer_ready", 1);
  for (int64_t i = 0; i < n; ++i) src.data_as<int64_t>()[i] = rank * 1000003 + i;

  ctx.put(dst.slice({0, 0}, {1, n}), next, src.slice({0, 0}, {1, n}));
  ctx.notify(ready.at(0), next, 1);  // after the put: the next rank sees the data once it sees this
  ctx.wait(ready.at(0), 1, rwin::WaitCmp::GE);

  const int64_t* got = dst.data_as<int64_t>();
  for (int64_t i = 0; i < n; ++i) {
    if (got[i] != prev * 1000003 + i) {
      std::printf("FAIL rank %d: dst[%lld] = %lld, expected %lld (from rank %d)\n", rank, static_cast<long long>(i),
                  static_cast<long long>(got[i]), static_cast<long long>(prev * 1000003 + i), prev);
      return 1;
    }
  }
  // The headers' version and the library's must agree: the consumer ran against the installed librwin.
  if (std::strcmp(rwin::version(), RWIN_VERSION_STRING) != 0) {
    std::printf("FAIL rank %d: librwin says version %s, its headers %s\n", rank, rwin::version(), RWIN_VERSION_STRING);
    return 1;
  }
  ctx.barrier();
  std::printf("OK rank %d of %d, rwin %s\n", rank, size, rwin::version());
  return 0;
}
