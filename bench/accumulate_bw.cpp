// put(atomic = Add) bandwidth per element type against a plain put of the same bytes, measured in
// one run (every rank but the last adds into the last, all at once, into the same elements; with 2
// ranks: rank 0 into rank 1; both kinds alternate). The figure the collectives issue sets its
// target against. MiB/s is the sum over the sources: bytes they moved / the slowest one's time.
//   rwinrun -n 2 -- build/bin/rwin-accumulate-bw [--dtypes i32,f32,...] [--sizes 4K,64K] [--seconds S]
//   rwinrun -n 5 -- build/bin/rwin-accumulate-bw --dtypes f32 --sizes 1200K     (4 sources into rank 4)
//   ... --target-away 0.5: the target sleeps outside rwin for 0.5 s of each figure (passive target)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "rwin/rwin.h"
#include "rwin/version.h"
#include "tools/cli.h"

namespace {

using Clock = std::chrono::steady_clock;

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string t; std::getline(ss, t, ',');) {
    if (!t.empty()) out.push_back(t);
  }
  return out;
}

// --sizes: comma-separated sizes in parse_size's form (bootstrap/parse_number.h), each > 0.
std::string check_sizes(const std::string& list) {
  for (const std::string& t : split(list)) {
    uint64_t v = 0;
    const std::string why = rwin::bootstrap::parse_size(t, v);
    if (!why.empty()) return "'" + t + "' is not a size: " + why + " (want " + rwin::bootstrap::kSizeForm + ")";
    if (v == 0) return "'" + t + "' is not a positive size";
  }
  return {};
}

// --dtypes: names rwin::parse_dtype knows.
std::string check_dtypes(const std::string& list) {
  try {
    for (const std::string& t : split(list)) (void)rwin::parse_dtype(t);
  } catch (const std::exception& e) {
    return e.what();
  }
  return {};
}

// MiB/s of `op` repeated by every source until `seconds` passed (at least 3 times), all ranks in
// step: the bytes of all sources over the longest source's time. `away` > 0: the target spends that
// long outside rwin (asleep, as a rank waiting on its device or disk) before it joins the barrier,
// so only what its transport applies without it lands meanwhile.
template <class Op>
double measure(rwin::Context& ctx, uint64_t bytes, double seconds, double away, Op&& op) {
  int64_t reps = 0;
  double elapsed = 0;
  ctx.barrier();
  const auto t0 = Clock::now();
  if (ctx.rank() == ctx.size() - 1 && away > 0) std::this_thread::sleep_for(std::chrono::duration<double>(away));
  if (ctx.rank() != ctx.size() - 1) {
    do {
      op();
      ++reps;
      elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
    } while (reps < 3 || elapsed < seconds);
    ctx.quiet();
    elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
  }
  ctx.barrier();  // the target progresses here (it applies staged adds)
  std::vector<uint8_t> mine(16);
  std::memcpy(mine.data(), &reps, 8);
  std::memcpy(mine.data() + 8, &elapsed, 8);
  int64_t total = 0;
  double longest = 0;
  for (const auto& b : ctx.allgather(mine)) {
    int64_t r = 0;
    double e = 0;
    std::memcpy(&r, b.data(), 8);
    std::memcpy(&e, b.data() + 8, 8);
    total += r;
    longest = std::max(longest, e);
  }
  return static_cast<double>(bytes) * static_cast<double>(total) / longest / 1048576.0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string dtypes = "i8,i16,i32,i64,u8,u16,u32,u64,f16,bf16,f32,f64";
  std::string sizes = "4K,64K";
  double seconds = 0.3;
  double away = 0;
  CLI::App app{"rwin-accumulate-bw: put(Add) MiB/s per element type against a plain put; run it as\n"
               "  rwinrun -n 2 -- rwin-accumulate-bw [options]   (every rank but the last adds into the last)",
               "rwin-accumulate-bw"};
  rwin::cli::setup(app, rwin::version());
  app.add_option("--dtypes", dtypes, "comma-separated element types (default all twelve)")
      ->check(CLI::Validator(check_dtypes, ""))
      ->type_name("LIST");
  app.add_option("--sizes", sizes, "comma-separated sizes in bytes, K/M/G suffixes (default 4K,64K)")
      ->check(CLI::Validator(check_sizes, ""))
      ->type_name("LIST");
  app.add_option("--seconds", seconds, "time per figure (default 0.3)")->transform(rwin::cli::Seconds(0, 3600))->type_name("S");
  app.add_option("--target-away", away,
                 "the target sleeps outside rwin this long at the start of each figure (default 0: it waits in a barrier)")
      ->transform(rwin::cli::Seconds(0, 3600, true))
      ->type_name("S");
  rwin::cli::parse_or_exit(app, argc, argv);
  try {
    rwin::Context ctx;
    if (ctx.size() < 2) throw std::runtime_error("needs 2 ranks (rwinrun -n 2)");
    if (ctx.rank() == 0) {
      std::printf("# %s; ranks 0..%d add into rank %d; %.1f s per figure%s\n", ctx.transport_name().c_str(),
                  ctx.size() - 2, ctx.size() - 1, seconds,
                  away > 0 ? ("; the target outside rwin for the first " + std::to_string(away) + " s").c_str() : "");
      std::printf("| dtype | size | put MiB/s | put(Add) MiB/s | Add / put |\n|---|---|---|---|---|\n");
    }
    for (const std::string& size_s : split(sizes)) {
      uint64_t bytes = 0;
      (void)rwin::bootstrap::parse_size(size_s, bytes);  // checked by check_sizes
      for (const std::string& name : split(dtypes)) {
        const rwin::DType dt = rwin::parse_dtype(name);
        const int64_t n = static_cast<int64_t>(bytes / rwin::dtype_size(dt));
        rwin::Window dst = ctx.alloc_window("acc.dst." + name, dt, {1, n});
        rwin::Window src = ctx.alloc_window("acc.src." + name, dt, {1, n});
        std::memset(src.data(), 0, src.bytes());  // adding zeros keeps every type finite
        const double put = measure(ctx, bytes, seconds, away, [&] { ctx.put(dst.all(), ctx.size() - 1, src.all()); });
        const double add =
            measure(ctx, bytes, seconds, away, [&] { ctx.put(dst.all(), ctx.size() - 1, src.all(), rwin::AtomicType::Add); });
        if (ctx.rank() == 0) {
          std::printf("| %s | %s | %.1f | %.2f | %.4f |\n", name.c_str(), size_s.c_str(), put, add, add / put);
          std::fflush(stdout);
        }
        ctx.free(src);
        ctx.free(dst);
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rwin-accumulate-bw: %s\n", e.what());
    return 1;
  }
  return 0;
}
