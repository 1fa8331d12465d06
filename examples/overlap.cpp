// overlap: collectives beside compute, the runtime's gradient pattern on rwin's nonblocking forms.
//
//   rwinrun -n 4 -- build/bin/overlap --size 1M --iters 5 --compute-us 2000
//
// Every iteration each rank fills its gradient, starts an allreduce of it and an allgather of a small
// status row (Team::start_*: they run on the context's collective worker, in that order), computes
// for --compute-us (asleep, as a host thread waiting on a device kernel), then waits for both and
// checks every element exactly. While they run the rank makes no rwin call on the context: it is
// lent to them (docs/CONTRACT.md, "Nonblocking forms"). Prints the time per iteration and how long
// the waits took after the compute (0 when the collectives were hidden behind it), then OK.
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "rwin/collectives.h"
#include "rwin/rwin.h"
#include "rwin/version.h"
#include "tools/cli.h"

namespace {

struct Args {
  int64_t size = 1 << 20;  // f32 elements of the gradient
  int iters = 5;
  int64_t compute_us = 2000;
};

// Exact in f32 (below 2^24 summed over up to 64 ranks) and different per rank, index and iteration.
float grad_value(int rank, int64_t i, int it) { return static_cast<float>((rank * 7 + i * 13 + it * 5) % 4096); }

}  // namespace

int main(int argc, char** argv) {
  Args a;
  CLI::App app{"overlap: an allreduce and an allgather started, compute beside them, then wait and check", "overlap"};
  rwin::cli::setup(app, rwin::version());
  app.add_option("--size", a.size, "f32 elements of the gradient (K/M suffixes: x1024; default 1M)")
      ->transform(rwin::cli::SizedCount(1, int64_t{1} << 28))
      ->type_name("ELEMS");
  app.add_option("--iters", a.iters, "iterations (default 5)")->transform(rwin::cli::Count(1, 1000000))->type_name("K");
  app.add_option("--compute-us", a.compute_us, "compute per iteration, asleep (default 2000)")
      ->transform(rwin::cli::Count(0, 60000000))
      ->type_name("US");
  rwin::cli::parse_or_exit(app, argc, argv);

  try {
    rwin::Context ctx;  // options from the environment (rwinrun, mpirun, srun)
    const int me = ctx.rank(), n = ctx.size();
    rwin::Team world = rwin::world(ctx);
    rwin::Window grad = ctx.alloc_window("grad", rwin::DType::F32, {1, a.size});
    rwin::Window status = ctx.alloc_window("status", rwin::DType::I64, {1, 2});
    rwin::Window all_status = ctx.alloc_window("all_status", rwin::DType::I64, {n, 2});
    using Clock = std::chrono::steady_clock;
    double total_us = 0, waited_us = 0;
    int bad = 0;
    for (int it = 0; it < a.iters; ++it) {
      float* g = grad.data_as<float>();
      for (int64_t i = 0; i < a.size; ++i) g[i] = grad_value(me, i, it);
      status.data_as<int64_t>()[0] = me;
      status.data_as<int64_t>()[1] = it;
      const auto t0 = Clock::now();
      rwin::CollectiveRequest sum = world.start_allreduce(grad);
      rwin::CollectiveRequest gather = world.start_allgather(status, all_status);
      std::this_thread::sleep_for(std::chrono::microseconds(a.compute_us));  // the device kernel
      const auto t1 = Clock::now();
      sum.wait();
      gather.wait();
      const auto t2 = Clock::now();
      total_us += std::chrono::duration<double, std::micro>(t2 - t0).count();
      waited_us += std::chrono::duration<double, std::micro>(t2 - t1).count();
      for (int64_t i = 0; i < a.size && bad < 5; ++i) {
        float want = 0;
        for (int r = 0; r < n; ++r) want += grad_value(r, i, it);
        if (g[i] != want) {
          std::fprintf(stderr, "overlap: rank %d iteration %d: grad[%lld] = %g, want %g\n", me, it,
                       static_cast<long long>(i), static_cast<double>(g[i]), static_cast<double>(want));
          ++bad;
        }
      }
      for (int r = 0; r < n && bad < 5; ++r) {
        const int64_t* row = all_status.data_as<int64_t>() + 2 * r;
        if (row[0] != r || row[1] != it) {
          std::fprintf(stderr, "overlap: rank %d iteration %d: status row %d = (%lld, %lld)\n", me, it, r,
                       static_cast<long long>(row[0]), static_cast<long long>(row[1]));
          ++bad;
        }
      }
    }
    std::printf("overlap: rank %d: %d iterations of %lld f32 + %lld us compute: %.0f us each, %.0f us of it waiting "
                "after the compute: %s\n",
                me, a.iters, static_cast<long long>(a.size), static_cast<long long>(a.compute_us), total_us / a.iters,
                waited_us / a.iters, bad ? "FAILED" : "OK");
    return bad ? 1 : 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "overlap: %s\n", e.what());
    return 1;
  }
}
