// rwin-reg-bench: ibv_reg_mr time of a fresh window buffer as the verbs transport allocates it
// (common/page_alloc.h) with 4 KiB pages, THP and hugetlbfs (RWIN_HUGEPAGES; bench/RESULTS.md).
// Each repetition maps a new buffer (its pages are faulted in by the registration, as a window's
// are), registers it with the window's access flags, and deregisters and unmaps it.
#include <infiniband/verbs.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "common/page_alloc.h"
#include "tools/cli.h"
#include "rwin/version.h"

using rwin::pages::HugeMode;

int main(int argc, char** argv) {
  std::string device = "rxe0";
  std::vector<std::string> sizes = {"2M", "32M", "256M"};
  int reps = 5;
  CLI::App app{"rwin-reg-bench: ibv_reg_mr time of window buffers on 4 KiB pages, THP and hugetlbfs", "rwin-reg-bench"};
  rwin::cli::setup(app, rwin::version());
  app.add_option("-d,--device", device, "verbs device (default rxe0)");
  app.add_option("--sizes", sizes, "buffer sizes (K/M/G suffixes; default 2M 32M 256M)");
  app.add_option("--reps", reps, "repetitions per size and mode (default 5; the median is printed)");
  rwin::cli::parse_or_exit(app, argc, argv);
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  ibv_context* ctx = nullptr;
  for (int i = 0; list && i < n && !ctx; ++i) {
    if (device == ibv_get_device_name(list[i])) ctx = ibv_open_device(list[i]);
  }
  if (list) ibv_free_device_list(list);
  if (!ctx) {
    std::fprintf(stderr, "rwin-reg-bench: cannot open device %s\n", device.c_str());
    return 1;
  }
  ibv_pd* pd = ibv_alloc_pd(ctx);
  if (!pd) {
    std::fprintf(stderr, "rwin-reg-bench: ibv_alloc_pd failed\n");
    ibv_close_device(ctx);
    return 1;
  }
  std::printf("%s; %s\n", device.c_str(), rwin::pages::system_text().c_str());
  std::printf("%10s %-10s %-34s %12s %12s\n", "bytes", "mode", "pages", "reg_ms", "dereg_ms");
  int status = 0;
  for (const std::string& st : sizes) {
    size_t bytes = std::stoull(st);
    const char u = st.empty() ? ' ' : st.back();
    bytes <<= u == 'K' ? 10 : u == 'M' ? 20 : u == 'G' ? 30 : 0;
    for (HugeMode m : {HugeMode::Off, HugeMode::Thp, HugeMode::Hugetlbfs}) {
      std::vector<double> reg, dereg;
      std::string kind;
      for (int r = 0; r < reps; ++r) {
        rwin::pages::PageBuffer buf(bytes, m);
        kind = buf.kind();
        const auto t0 = std::chrono::steady_clock::now();
        ibv_mr* mr = ibv_reg_mr(pd, buf.data(), buf.mapped_bytes(),
                                IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                                    IBV_ACCESS_REMOTE_ATOMIC);
        const auto t1 = std::chrono::steady_clock::now();
        if (!mr) {
          std::fprintf(stderr, "rwin-reg-bench: ibv_reg_mr of %zu bytes (%s) failed: %s\n", bytes, kind.c_str(),
                       std::strerror(errno));
          status = 1;
          break;
        }
        ibv_dereg_mr(mr);
        const auto t2 = std::chrono::steady_clock::now();
        reg.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
        dereg.push_back(std::chrono::duration<double, std::milli>(t2 - t1).count());
      }
      if (reg.empty()) continue;
      std::sort(reg.begin(), reg.end());
      std::sort(dereg.begin(), dereg.end());
      std::printf("%10zu %-10s %-34s %12.3f %12.3f\n", bytes, rwin::pages::huge_mode_name(m), kind.c_str(),
                  reg[reg.size() / 2], dereg[dereg.size() / 2]);
    }
  }
  ibv_dealloc_pd(pd);
  ibv_close_device(ctx);
  return status;
}
