// The THP trial of bench/RESULTS.md "The fast mode measured, and streams of small calls": 1500 trace-sized
// blocks (2 MiB) mapped 2 MiB-aligned, with (argument given) or without MADV_HUGEPAGE, zeroed; prints the
// time per block every 250 blocks. g++ -O2 thp_blocks.cpp -o thp_blocks && ./thp_blocks 1 && ./thp_blocks
#include <sys/mman.h>
#include <chrono>
#include <cstdio>
#include <cstdint>
#include <cstring>
int main(int argc, char** argv) {
  const size_t B = 2u << 20; bool thp = argc > 1;
  using clk = std::chrono::steady_clock;
  auto t0 = clk::now();
  for (int i = 1; i <= 1500; ++i) {
    char* p = (char*)mmap(nullptr, 2*B, PROT_READ|PROT_WRITE, MAP_PRIVATE|MAP_ANONYMOUS, -1, 0);
    char* a = (char*)(((uintptr_t)p + B - 1) & ~(uintptr_t)(B - 1));
    if (a > p) munmap(p, a - p); if (a + B < p + 2*B) munmap(a + B, p + 2*B - (a + B));
    if (thp) madvise(a, B, MADV_HUGEPAGE);
    memset(a, 0, B);
    if (i % 250 == 0) { printf("%d blocks: %.0f us/block\n", i, std::chrono::duration<double, std::micro>(clk::now() - t0).count() / 250); t0 = clk::now(); }
  }
}
