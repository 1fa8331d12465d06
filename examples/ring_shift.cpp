// ring_shift: the seed program (pld tutorial step 06) on rwin.
//
//   put mode: every rank pushes its src into the next rank's dst  -> y[r] = x[(r-1) % N]
//   get mode: every rank pulls the next rank's src into its dst   -> y[r] = x[(r+1) % N]
//   add mode: as put, with put(Add) into a dst its owner zeroed    -> y[r] = 0 + x[(r-1) % N]
//
// x is filled from (rank, index, iteration) so every element of every iteration is checked. Each
// dtype gets values it holds exactly (f16: half-integers in [-1024, 1024), bf16: half-integers in
// [-128, 128), 8/16-bit integers: their whole range), so a check compares exact values.
// Each rank prints OK or its first mismatches; rank 0 then collects every rank's verdict through
// signal words (notify Set + wait NE) and prints a summary. Exit status 0 only if all ranks agree.
// For the fault suite (tests/faults/): --seconds S runs for a bounded time instead of --iters, and
// --ready-file PATH tells a harness when start-up is over.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "rwin/rwin.h"
#include "rwin/version.h"
#include "tools/cli.h"

namespace {

struct Args {
  std::string mode = "put";
  int64_t size = 1024;
  std::string dtype = "f32";
  int iters = 3;
  double seconds = 0;  // > 0: rank 0 ends the run after this long (at most --iters iterations)
  std::string ready_file;  // created once start-up and window allocation are done (fault tests)
};

Args parse(int argc, char** argv) {
  Args a;
  CLI::App app{"ring_shift: the seed's ring shift on rwin; every rank checks every element and prints OK", "ring_shift"};
  rwin::cli::setup(app, rwin::version());
  app.add_option("--mode", a.mode, "put: y[r] = x[r-1]; get: y[r] = x[r+1]; add: put(Add) into a zeroed y (default put)")
      ->check(CLI::IsMember({"put", "get", "add"}))
      ->type_name("MODE");
  app.add_option("--size", a.size, "elements per rank (K/M/G suffixes: x1024; default 1024)")
      ->transform(rwin::cli::SizedCount(1, INT64_MAX))
      ->type_name("ELEMS");
  app.add_option("--dtype", a.dtype, "element type: f32 f64 f16 bf16 i8 i16 i32 i64 u8 u16 u32 u64 (default f32)")
      ->check(rwin::cli::ParsedBy(rwin::parse_dtype))
      ->type_name("DTYPE");
  app.add_option("--iters", a.iters, "iterations (default 3)")->transform(rwin::cli::Count(1, INT32_MAX))->type_name("K");
  app.add_option("--seconds", a.seconds, "rank 0 ends the run after this long, at most --iters iterations (0: off)")
      ->transform(rwin::cli::Seconds(0, 86400, true))
      ->type_name("S");
  app.add_option("--ready-file", a.ready_file, "created once start-up and window allocation are done (fault tests)")
      ->type_name("PATH");
  rwin::cli::parse_or_exit(app, argc, argv);
  return a;
}

// Exact in every dtype (below 2^24, so f32 holds it) and different per rank, index and iteration.
int64_t expected_value(int rank, int64_t index, int iter) {
  return (static_cast<int64_t>(rank) * 1000003 + index * 7 + static_cast<int64_t>(iter) * 131) % 16777213;
}

// The value of an element (exact in T) derived from expected_value, and back to a double to compare
// and print. Distinct neighbours stay distinct: consecutive indices differ by 7 (mod the range).
template <class T>
struct Elem {
  static T make(int64_t v) { return static_cast<T>(v); }  // below 2^24: exact in every type here
  static double value(T x) { return static_cast<double>(x); }
};
template <>
struct Elem<rwin::f16> {  // half-integers -1024 .. 1023.5: 11 significant bits at most
  static rwin::f16 make(int64_t v) { return rwin::to_f16(static_cast<float>(v % 4096 - 2048) / 2); }
  static double value(rwin::f16 x) { return rwin::to_float(x); }
};
template <>
struct Elem<rwin::bf16> {  // half-integers -128 .. 127.5: 8 significant bits at most
  static rwin::bf16 make(int64_t v) { return rwin::to_bf16(static_cast<float>(v % 512 - 256) / 2); }
  static double value(rwin::bf16 x) { return rwin::to_float(x); }
};
template <>
struct Elem<int8_t> {
  static int8_t make(int64_t v) { return static_cast<int8_t>(v % 256 - 128); }
  static double value(int8_t x) { return x; }
};
template <>
struct Elem<uint8_t> {
  static uint8_t make(int64_t v) { return static_cast<uint8_t>(v % 256); }
  static double value(uint8_t x) { return x; }
};
template <>
struct Elem<int16_t> {
  static int16_t make(int64_t v) { return static_cast<int16_t>(v % 65536 - 32768); }
  static double value(int16_t x) { return x; }
};
template <>
struct Elem<uint16_t> {
  static uint16_t make(int64_t v) { return static_cast<uint16_t>(v % 65536); }
  static double value(uint16_t x) { return x; }
};

template <class T>
void fill(rwin::Window& w, int rank, int iter) {
  T* p = w.data_as<T>();
  const int64_t n = w.shape()[1];
  for (int64_t i = 0; i < n; ++i) p[i] = Elem<T>::make(expected_value(rank, i, iter));
}

template <class T>
int64_t check(const rwin::Window& w, int from_rank, int iter, int rank) {
  const T* p = w.data_as<T>();
  const int64_t n = w.shape()[1];
  int64_t bad = 0;
  for (int64_t i = 0; i < n; ++i) {
    // Every value is exact, so comparing the values (not NaN, never -0) is comparing the bits.
    const double got = Elem<T>::value(p[i]), want = Elem<T>::value(Elem<T>::make(expected_value(from_rank, i, iter)));
    if (got != want) {
      if (bad < 5) {
        std::printf("rank %d iter %d: y[%lld] = %.17g, expected %.17g (x[%d][%lld])\n", rank, iter,
                    static_cast<long long>(i), got, want, from_rank, static_cast<long long>(i));
      }
      ++bad;
    }
  }
  return bad;
}

// --seconds: every rank must run the same number of iterations, so rank 0 alone decides. Before
// iteration `it` rank 0 adds 1 to every rank's checkpoint word; when its time is up it first puts
// `it` into every rank's stop word. A rank that has seen `it` checkpoints therefore also sees the
// stop put issued before the it-th one (a put is visible once a later notify is observed).
bool stop_here(rwin::Context& ctx, rwin::Window& stop, const rwin::SignalSlice& checkpoints, const Args& a,
               std::chrono::steady_clock::time_point t0, int it) {
  int64_t* word = stop.data_as<int64_t>();  // [0]: rank 0's staging word, [1]: iteration to stop at (0: none)
  if (ctx.rank() != 0) {
    ctx.wait(checkpoints, it, rwin::WaitCmp::GE);
    return word[1] == it;
  }
  const bool done = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() >= a.seconds;
  if (done) word[0] = it;
  for (int q = 1; q < ctx.size(); ++q) {
    if (done) ctx.put(stop.slice({0, 1}, {1, 1}), q, stop.slice({0, 0}, {1, 1}));
    ctx.notify(checkpoints, q, 1, rwin::NotifyOp::AtomicAdd);
  }
  return done;
}

template <class T>
int run(rwin::Context& ctx, const Args& a, double startup_ms) {
  using rwin::NotifyOp;
  using rwin::WaitCmp;
  const int r = ctx.rank(), n = ctx.size();
  const int next = (r + 1) % n, prev = (r + n - 1) % n;
  const rwin::DType dt = rwin::dtype_of<T>();
  auto src = ctx.alloc_window("src", dt, {1, a.size});
  auto dst = ctx.alloc_window("dst", dt, {1, a.size});
  // 0: data ready, 1: done reading (lets the next iteration reuse the buffer), 2..2+n: verdicts,
  // 2+n: --seconds checkpoints from rank 0.
  auto sig = ctx.alloc_signals("ring_signals", 3 + n);
  rwin::Window stop;
  if (a.seconds > 0) stop = ctx.alloc_window("ring_stop", rwin::DType::I64, {1, 2});
  if (!a.ready_file.empty()) {
    if (std::FILE* f = std::fopen(a.ready_file.c_str(), "w")) std::fclose(f);
  }
  const auto t0 = std::chrono::steady_clock::now();
  int iters = a.iters;
  int64_t bad = 0;
  for (int it = 0; it < a.iters; ++it) {
    if (a.seconds > 0 && it > 0 && stop_here(ctx, stop, sig.at(2 + n), a, t0, it)) {
      iters = it;
      break;
    }
    if (a.mode == "put" || a.mode == "add") {
      const bool add = a.mode == "add";
      fill<T>(src, r, it);
      if (it > 0) ctx.wait(sig.at(1), it, WaitCmp::GE);  // next rank finished reading our last put
      ctx.put(dst.all(), next, src.all(), add ? rwin::AtomicType::Add : rwin::AtomicType::None);
      ctx.notify(sig.at(0), next, 1, NotifyOp::AtomicAdd);  // ordered after the put
      ctx.wait(sig.at(0), it + 1, WaitCmp::GE);             // prev rank's data has landed here
      bad += check<T>(dst, prev, it, r);
      if (add) std::memset(dst.data(), 0, dst.bytes());     // zero plus prev's next x is x again
      ctx.notify(sig.at(1), prev, 1, NotifyOp::AtomicAdd);  // prev may overwrite our dst now
    } else {
      if (it > 0) ctx.wait(sig.at(1), it, WaitCmp::GE);  // prev rank finished reading our src
      fill<T>(src, r, it);
      // Tell the rank that reads from us (prev) that src is ready; wait for the one we read.
      ctx.notify(sig.at(0), prev, 1, NotifyOp::AtomicAdd);
      ctx.wait(sig.at(0), it + 1, WaitCmp::GE);
      ctx.get(dst.all(), next, src.all());
      bad += check<T>(dst, next, it, r);
      ctx.notify(sig.at(1), next, 1, NotifyOp::AtomicAdd);  // next may refill its src
    }
  }
  std::printf("%s\n", bad == 0 ? "OK" : "FAILED");
  std::fflush(stdout);
  ctx.notify(sig.at(2 + r), 0, bad == 0 ? 1 : 2, NotifyOp::Set);
  int status = bad == 0 ? 0 : 1;
  if (r == 0) {
    ctx.wait(sig.slice(2, n), 0, WaitCmp::NE);
    std::string failed;
    for (int q = 0; q < n; ++q) {
      if (sig.load(2 + q) != 1) failed += " " + std::to_string(q);
    }
    std::printf("ring_shift %s: %d ranks x %lld %s x %d iters over %s: %s (start-up %.0f ms)\n", a.mode.c_str(), n,
                static_cast<long long>(a.size), rwin::dtype_name(dt), iters, ctx.transport_name().c_str(),
                failed.empty() ? "all ranks OK" : ("FAILED on ranks" + failed).c_str(), startup_ms);
    if (!failed.empty()) status = 1;
  }
  ctx.barrier();
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  const Args a = parse(argc, argv);
  try {
    const auto t0 = std::chrono::steady_clock::now();
    rwin::Context ctx;  // collective start-up: rendezvous and connecting every pair of ranks
    const double startup_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    switch (rwin::parse_dtype(a.dtype)) {
      case rwin::DType::F32: return run<float>(ctx, a, startup_ms);
      case rwin::DType::F64: return run<double>(ctx, a, startup_ms);
      case rwin::DType::I32: return run<int32_t>(ctx, a, startup_ms);
      case rwin::DType::I64: return run<int64_t>(ctx, a, startup_ms);
      case rwin::DType::U32: return run<uint32_t>(ctx, a, startup_ms);
      case rwin::DType::U64: return run<uint64_t>(ctx, a, startup_ms);
      case rwin::DType::F16: return run<rwin::f16>(ctx, a, startup_ms);
      case rwin::DType::BF16: return run<rwin::bf16>(ctx, a, startup_ms);
      case rwin::DType::I8: return run<int8_t>(ctx, a, startup_ms);
      case rwin::DType::I16: return run<int16_t>(ctx, a, startup_ms);
      case rwin::DType::U8: return run<uint8_t>(ctx, a, startup_ms);
      case rwin::DType::U16: return run<uint16_t>(ctx, a, startup_ms);
    }
  } catch (const rwin::Error& e) {
    std::fprintf(stderr, "ring_shift: %s\n", e.what());
    return 1;
  }
  return 1;
}
