// Collectives (docs/CONTRACT.md "Collectives"): every collective against a locally computed
// reference, every dtype and op, in place and not, teams, back-to-back reuse, and mismatches that
// end in an error on every member instead of a hang; over every transport.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <poll.h>
#include <unistd.h>

#include "rank_harness.h"
#include "rwin/collectives.h"

using namespace rwin;
using rwin_test::expect_error;
using rwin_test::TransportParam;

namespace {

using Collectives = rwin_test::TransportSuite;

// Small chunks, so a few KiB already take the pipelined multi-chunk paths.
constexpr const char* kSmallChunk = "4096";

// Element i of rank r's input in iteration `it`: raw bits for integers (wrap-around is exercised),
// small multiples of 1/4 for floating types (exact in f16 and bf16 as inputs).
void fill(DType t, void* p, int64_t n, int r, int it) {
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t bits = (static_cast<uint64_t>(r + 1) * 0x9E3779B97F4A7C15ull) ^ (static_cast<uint64_t>(i) * 0xBF58476D1CE4E5B9ull) ^
                          (static_cast<uint64_t>(it) << 17);
    const float f = static_cast<float>(static_cast<int>((bits >> 40) % 17) - 8) * 0.25f;
    char* e = static_cast<char*>(p) + i * static_cast<int64_t>(dtype_size(t));
    switch (t) {
      case DType::F32: std::memcpy(e, &f, 4); break;
      case DType::F64: { const double d = f; std::memcpy(e, &d, 8); break; }
      case DType::F16: { const f16 h = to_f16(f); std::memcpy(e, &h, 2); break; }
      case DType::BF16: { const bf16 h = to_bf16(f); std::memcpy(e, &h, 2); break; }
      default: std::memcpy(e, &bits, dtype_size(t)); break;
    }
  }
}

template <class T, class A, class L, class S>
void ref_typed(ReduceOp op, char* out, const std::vector<std::vector<char>>& in, int64_t n, L load, S store) {
  for (int64_t i = 0; i < n; ++i) {
    T v;
    std::memcpy(&v, in[0].data() + i * static_cast<int64_t>(sizeof(T)), sizeof(T));
    A acc = load(v);
    for (size_t q = 1; q < in.size(); ++q) {
      std::memcpy(&v, in[q].data() + i * static_cast<int64_t>(sizeof(T)), sizeof(T));
      const A x = load(v);
      switch (op) {
        case ReduceOp::Sum: acc = static_cast<A>(acc + x); break;
        case ReduceOp::Prod: acc = static_cast<A>(acc * x); break;
        case ReduceOp::Max:
          if constexpr (std::is_floating_point_v<A>) acc = std::fmax(acc, x); else acc = acc < x ? x : acc;
          break;
        case ReduceOp::Min:
          if constexpr (std::is_floating_point_v<A>) acc = std::fmin(acc, x); else acc = x < acc ? x : acc;
          break;
      }
    }
    const T r = store(acc);
    std::memcpy(out + i * static_cast<int64_t>(sizeof(T)), &r, sizeof(T));
  }
}

template <class T>
void ref_int(ReduceOp op, char* out, const std::vector<std::vector<char>>& in, int64_t n) {
  using U = std::conditional_t<(sizeof(T) < 4), uint32_t, std::make_unsigned_t<T>>;
  if (op == ReduceOp::Max || op == ReduceOp::Min) {
    ref_typed<T, T>(op, out, in, n, [](T v) { return v; }, [](T a) { return a; });
  } else {
    ref_typed<T, U>(op, out, in, n, [](T v) { return static_cast<U>(v); }, [](U a) { return static_cast<T>(a); });
  }
}

// op over in[0], in[1], ... in that order (team-rank order), element by element.
std::vector<char> reference(DType t, ReduceOp op, const std::vector<std::vector<char>>& in, int64_t n) {
  std::vector<char> out(static_cast<size_t>(n) * dtype_size(t) + 1);
  char* o = out.data();
  switch (t) {
    case DType::I8: ref_int<int8_t>(op, o, in, n); break;
    case DType::I16: ref_int<int16_t>(op, o, in, n); break;
    case DType::I32: ref_int<int32_t>(op, o, in, n); break;
    case DType::I64: ref_int<int64_t>(op, o, in, n); break;
    case DType::U8: ref_int<uint8_t>(op, o, in, n); break;
    case DType::U16: ref_int<uint16_t>(op, o, in, n); break;
    case DType::U32: ref_int<uint32_t>(op, o, in, n); break;
    case DType::U64: ref_int<uint64_t>(op, o, in, n); break;
    case DType::F32: ref_typed<float, float>(op, o, in, n, [](float v) { return v; }, [](float a) { return a; }); break;
    case DType::F64: ref_typed<double, double>(op, o, in, n, [](double v) { return v; }, [](double a) { return a; }); break;
    case DType::F16: ref_typed<f16, float>(op, o, in, n, [](f16 v) { return to_float(v); }, [](float a) { return to_f16(a); }); break;
    case DType::BF16: ref_typed<bf16, float>(op, o, in, n, [](bf16 v) { return to_float(v); }, [](float a) { return to_bf16(a); }); break;
  }
  out.resize(static_cast<size_t>(n) * dtype_size(t));
  return out;
}

// Every member's input as the reference sees it (team-rank order).
std::vector<std::vector<char>> inputs(DType t, int64_t n, const std::vector<int>& members, int it) {
  std::vector<std::vector<char>> in;
  for (int r : members) {
    in.emplace_back(static_cast<size_t>(n) * dtype_size(t));
    fill(t, in.back().data(), n, r, it);
  }
  return in;
}

bool same_bytes(const void* a, const void* b, size_t n) { return n == 0 || std::memcmp(a, b, n) == 0; }

// Two team buffers a body makes its views from (allocated once: allocations cost a store exchange).
struct Pool {
  Context& ctx;
  WindowBuffer a, b;
  Pool(Context& c, Team& team, const std::string& tag, size_t bytes)
      : ctx(c), a(team.alloc_window_buffer("pa_" + tag, bytes)), b(team.alloc_window_buffer("pb_" + tag, bytes)) {}
  ~Pool() {
    try {
      ctx.free(a);
      ctx.free(b);
    } catch (...) {
    }
  }
};

std::string first_diff(const void* got, const void* want, int64_t n, DType t) {
  const size_t esz = dtype_size(t);
  for (int64_t i = 0; i < n; ++i) {
    if (std::memcmp(static_cast<const char*>(got) + i * static_cast<int64_t>(esz),
                    static_cast<const char*>(want) + i * static_cast<int64_t>(esz), esz) != 0) {
      return "first wrong element " + std::to_string(i);
    }
  }
  return "";
}

// One allreduce of `n` elements on `team`, checked bit for bit against the reference; in place or not.
void check_allreduce(Context& ctx, Team& team, Pool& pool, DType t, ReduceOp op, AllreduceMode mode, int64_t n,
                     bool in_place, int it) {
  const int me = team.ranks()[static_cast<size_t>(team.rank())];
  Window src = ctx.window(pool.a, t, {1, n});
  Window dst = in_place ? src : ctx.window(pool.b, t, {1, n});
  fill(t, src.data(), n, me, it);
  if (in_place) {
    team.allreduce(src, op, mode);
  } else {
    team.allreduce(src, dst, op, mode);
    std::vector<char> mine(static_cast<size_t>(n) * dtype_size(t));
    fill(t, mine.data(), n, me, it);
    MP_CHECK(same_bytes(src.data(), mine.data(), mine.size()), "allreduce changed its src");
  }
  const auto want = reference(t, op, inputs(t, n, team.ranks(), it), n);
  MP_CHECK(same_bytes(dst.data(), want.data(), want.size()),
           "allreduce " << dtype_name(t) << " " << reduce_op_name(op) << " mode " << static_cast<int>(mode) << " n=" << n
                        << (in_place ? " in place" : "") << " it " << it << ": "
                        << first_diff(dst.data(), want.data(), n, t));
}

// Sizes 1, odd, above the chunk size; Mesh, Ring, Bruck and Auto; in place and not; 3 and 4 members.
TEST_P(Collectives, AllreduceModesSizesInPlace) {
  for (int nr : {3, 4}) {
    run(nr, [](Context& ctx) {
      ::setenv("RWIN_COLL_CHUNK_BYTES", kSmallChunk, 1);
      Team w = world(ctx);
      Pool pool(ctx, w, "ar", 5000 * 4);
      int k = 0;
      for (AllreduceMode mode : {AllreduceMode::Mesh, AllreduceMode::Ring, AllreduceMode::Bruck, AllreduceMode::Auto}) {
        for (int64_t n : {int64_t{1}, int64_t{2}, int64_t{1001}, int64_t{5000}}) {
          for (bool in_place : {false, true}) check_allreduce(ctx, w, pool, DType::F32, ReduceOp::Sum, mode, n, in_place, k++);
        }
      }
    });
  }
}

// Every dtype and op, Mesh, Ring and Bruck, a size inside one chunk and one across several; 3 members.
TEST_P(Collectives, AllreduceEveryDtypeAndOp) {
  run(3, [](Context& ctx) {
    ::setenv("RWIN_COLL_CHUNK_BYTES", kSmallChunk, 1);
    Team w = world(ctx);
    Pool pool(ctx, w, "dt", 3000 * 8);
    int k = 0;
    for (DType t : all_dtypes) {
      for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min, ReduceOp::Prod}) {
        for (AllreduceMode mode : {AllreduceMode::Mesh, AllreduceMode::Ring, AllreduceMode::Bruck}) {
          check_allreduce(ctx, w, pool, t, op, mode, 37, k % 2 == 0, k);
          check_allreduce(ctx, w, pool, t, op, mode, 3000, k % 2 == 1, k);
          ++k;
        }
      }
    }
  });
}

// 61 tiny and 60 larger broadcasts in a row, the root moving from member to member (a root returns
// once its messages are out, so members run calls apart, as far as the slots let them); 50 allreduces
// in a row on the same windows (and so the same slots and counters), data changing every time, sizes
// and algorithms alternating; then a barrier and 20 more barriers back to back. With 4 slots per peer
// (acks shared by up to 2 messages), with 1 (every message acknowledged before the slot is written
// again) and with the default, auto, 64 KiB chunks: 64 slots while messages are tiny, and the tiny
// broadcasts leave ~15 acks owed per root and receiver when the first 32000-byte broadcast grows the
// slots to 32 KiB and their number to 8 (credits must start whole again).
TEST_P(Collectives, BackToBackReuse) {
  for (const char* slots : {"auto", "4", "1"}) {
    run(4, [slots](Context& ctx) {
      const bool is_auto = std::string_view(slots) == "auto";
      ::setenv("RWIN_COLL_CHUNK_BYTES", is_auto ? "65536" : kSmallChunk, 1);
      ::setenv("RWIN_COLL_SLOTS", slots, 1);
      Team w = world(ctx);
      Pool pool(ctx, w, "bb", 4000 * 8);
      auto broadcasts = [&](int count, int first, bool tiny) {
        for (int it = first; it < first + count; ++it) {
          const int root = it % w.size();
          const int64_t n = tiny ? 1 + it % 2 : (it % 3 == 0 ? 4000 : (it % 3 == 1 ? 1 : 700));
          Window x = ctx.window(pool.a, DType::F64, {1, n});
          if (w.rank() == root) {
            fill(DType::F64, x.data(), n, root, 1000 + it);
          } else {
            std::memset(x.data(), 0xee, static_cast<size_t>(n) * 8);
          }
          w.broadcast(x, root);
          std::vector<char> want(static_cast<size_t>(n) * 8);
          fill(DType::F64, want.data(), n, root, 1000 + it);
          MP_CHECK(same_bytes(x.data(), want.data(), want.size()),
                   "broadcast " << it << " (root " << root << ", slots " << slots << "): " << first_diff(x.data(), want.data(), n, DType::F64));
        }
      };
      broadcasts(61, 100, true);
      broadcasts(60, 0, false);
      for (int it = 0; it < 50; ++it) {
        const int64_t n = it % 3 == 0 ? 4000 : (it % 3 == 1 ? 3 : 700);
        const AllreduceMode mode = it % 2 ? AllreduceMode::Ring : AllreduceMode::Auto;
        check_allreduce(ctx, w, pool, it % 4 == 0 ? DType::F64 : DType::I32, ReduceOp::Sum, mode, n, it % 5 == 0, it);
      }
      for (int i = 0; i < 20; ++i) w.barrier();
      barrier_collective(ctx);
    });
  }
}

// broadcast from every root, allgather, reduce_scatter (in place and not) and all_to_all on the world,
// each at every size of `sizes` (elements, at most 3000; 777: i16, else f64), against local references.
void data_movement_round(Context& ctx, std::initializer_list<int64_t> sizes) {
  Team w = world(ctx);
  const int n = w.size(), me = w.rank();
  Pool pool(ctx, w, "dm", static_cast<size_t>(n) * 3000 * 8);
  int it = 0;
  for (int64_t s : sizes) {
    const DType t = s == 777 ? DType::I16 : DType::F64;
    const size_t esz = dtype_size(t);
    // broadcast
    for (int root = 0; root < n; ++root, ++it) {
      Window x = ctx.window(pool.a, t, {1, s});
      fill(t, x.data(), s, me, it);
      w.broadcast(x, root);
      std::vector<char> want(static_cast<size_t>(s) * esz);
      fill(t, want.data(), s, root, it);
      MP_CHECK(same_bytes(x.data(), want.data(), want.size()), "broadcast root " << root << " s " << s << ": "
                                                                               << first_diff(x.data(), want.data(), s, t));
    }
    // allgather: stage in buffer a, data [n, s] in buffer b
    {
      Window stage = ctx.window(pool.a, t, {1, s});
      Window data = ctx.window(pool.b, t, {n, s});
      fill(t, stage.data(), s, me, ++it);
      w.allgather(stage, data);
      for (int r = 0; r < n; ++r) {
        std::vector<char> want(static_cast<size_t>(s) * esz);
        fill(t, want.data(), s, r, it);
        MP_CHECK(same_bytes(static_cast<char*>(data.data()) + static_cast<size_t>(r) * want.size(), want.data(), want.size()),
                 "allgather row " << r << " s " << s);
      }
    }
    // reduce_scatter, not in place then in place: row r of every member is fill(member, r-th seed)
    for (bool in_place : {false, true}) {
      const DType rt = in_place ? DType::F16 : DType::I32;
      const ReduceOp op = in_place ? ReduceOp::Max : ReduceOp::Sum;
      const size_t rsz = dtype_size(rt);
      Window data = ctx.window(pool.a, rt, {n, s});
      ++it;
      for (int r = 0; r < n; ++r) fill(rt, static_cast<char*>(data.data()) + static_cast<size_t>(r * s) * rsz, s, me, it * 16 + r);
      std::vector<char> before(static_cast<size_t>(n * s) * rsz);
      std::memcpy(before.data(), data.data(), before.size());
      Window out = ctx.window(pool.b, rt, {1, s});
      if (in_place) {
        w.reduce_scatter(data, op);
      } else {
        w.reduce_scatter(data, out, op);
      }
      std::vector<std::vector<char>> in;
      for (int r = 0; r < n; ++r) {
        in.emplace_back(static_cast<size_t>(s) * rsz);
        fill(rt, in.back().data(), s, r, it * 16 + me);
      }
      const auto want = reference(rt, op, in, s);
      const char* got = in_place ? static_cast<char*>(data.data()) + static_cast<size_t>(me * s) * rsz
                                 : static_cast<char*>(out.data());
      MP_CHECK(same_bytes(got, want.data(), want.size()), "reduce_scatter s " << s << (in_place ? " in place" : "")
                                                                              << ": " << first_diff(got, want.data(), s, rt));
      for (int r = 0; r < n; ++r) {
        if (r == me && in_place) continue;
        const size_t o = static_cast<size_t>(r * s) * rsz;
        MP_CHECK(same_bytes(static_cast<char*>(data.data()) + o, before.data() + o, static_cast<size_t>(s) * rsz),
                 "reduce_scatter changed row " << r);
      }
    }
    // all_to_all: stage row p (in buffer a) goes to member p's data row me (buffer b)
    {
      Window stage = ctx.window(pool.a, t, {n, s});
      Window data = ctx.window(pool.b, t, {n, s});
      ++it;
      for (int p = 0; p < n; ++p) fill(t, static_cast<char*>(stage.data()) + static_cast<size_t>(p * s) * esz, s, me * 8 + p, it);
      w.all_to_all(stage, data);
      for (int q = 0; q < n; ++q) {
        std::vector<char> want(static_cast<size_t>(s) * esz);
        fill(t, want.data(), s, q * 8 + me, it);
        MP_CHECK(same_bytes(static_cast<char*>(data.data()) + static_cast<size_t>(q * s) * esz, want.data(), want.size()),
                 "all_to_all row " << q << " s " << s);
      }
    }
  }
  w.barrier();
}

// broadcast from every root (direct, tree and chained), allgather, reduce_scatter (in place and not),
// all_to_all; 1, 2, 3 and 5 members; sizes 1, odd, above the chunk size. Off shared memory 3 members
// take Bruck where the sizes allow (RWIN_COLL_BRUCK_MAX unset: reduce_scatter only its smallest size, the
// default leaves Bruck above 4 KiB there), 5 members the one-round algorithms.
TEST_P(Collectives, DataMovementAndReduceScatter) {
  for (int nr : {1, 2, 3, 5}) {
    run(nr, [](Context& ctx) {
      ::setenv("RWIN_COLL_CHUNK_BYTES", kSmallChunk, 1);
      if (ctx.size() == 5) ::setenv("RWIN_COLL_BRUCK_MAX", "0", 1);
      data_movement_round(ctx, {1, 777, 3000});
    });
  }
}

// A tuning file (RWIN_COLL_TUNING) that turns every built-in choice around: Bruck on shared memory
// and on 2 members, a chain for a one-chunk broadcast and the direct algorithm for a multi-chunk one,
// Ring for the smallest allreduce and Bruck for multi-chunk ones. Every algorithm gives the reference's
// bits (MismatchEndsInErrorEverywhere's cases 6 and 7 show that such a file changes what a call runs).
TEST_P(Collectives, TuningFileTurnsEveryChoiceAround) {
  const std::string path = ::testing::TempDir() + "rwin_tuning_" + std::to_string(::getpid()) + ".json";
  {
    std::ofstream f(path);
    f << R"({"version": 1, "rules": [
      {"collective": "allgather", "algorithm": "bruck"},
      {"collective": "all_to_all", "algorithm": "bruck"},
      {"collective": "reduce_scatter", "algorithm": "bruck"},
      {"collective": "broadcast", "bytes": [0, "4K"], "algorithm": "chain"},
      {"collective": "broadcast", "algorithm": "direct"},
      {"collective": "allreduce", "bytes": [0, 8], "algorithm": "ring"},
      {"collective": "allreduce", "algorithm": "bruck"}]})";
  }
  for (int nr : {2, 4}) {
    run(nr, [&path](Context& ctx) {
      ::setenv("RWIN_COLL_CHUNK_BYTES", kSmallChunk, 1);
      ::setenv("RWIN_COLL_TUNING", path.c_str(), 1);
      data_movement_round(ctx, {1, 3000});
      Team w = world(ctx);
      Pool pool(ctx, w, "tuned", 3000 * 8);
      int it = 0;
      for (int64_t n : {int64_t{2}, int64_t{3000}}) {
        for (bool in_place : {false, true}) {
          check_allreduce(ctx, w, pool, n == 2 ? DType::I32 : DType::F64, ReduceOp::Sum, AllreduceMode::Auto, n, in_place, ++it);
        }
      }
      w.barrier();
    });
  }
  std::remove(path.c_str());
}

// 6 and 8 members (a power of two and not): every collective once, small and multi-chunk. On the
// native UCX modes too this would only repeat the 3-5 member tests at a higher cost: skipped there.
TEST_P(Collectives, SixAndEightMembers) {
  if (GetParam().name.find("native") != std::string::npos) GTEST_SKIP() << "covered by the smaller tests";
  for (int nr : {6, 8}) {
    run(nr, [](Context& ctx) {
      ::setenv("RWIN_COLL_CHUNK_BYTES", kSmallChunk, 1);
      Team w = world(ctx);
      const int n = w.size(), me = w.rank();
      Pool pool(ctx, w, "many", static_cast<size_t>(n) * 2000 * 8);
      int it = 0;
      for (int64_t s : {int64_t{3}, int64_t{2000}}) {
        check_allreduce(ctx, w, pool, DType::F32, ReduceOp::Sum, AllreduceMode::Mesh, s, false, it++);
        check_allreduce(ctx, w, pool, DType::BF16, ReduceOp::Sum, AllreduceMode::Ring, s, true, it++);
        check_allreduce(ctx, w, pool, DType::I64, ReduceOp::Prod, AllreduceMode::Bruck, s, s == 3, it++);
        {
          // Inputs whose f32 sums round: Mesh, Bruck and Ring must still give the same bits (each
          // reduces in team-rank order), which a Bruck that reduced its gathered rows rotated would not.
          Window src = ctx.window(pool.a, DType::F32, {1, s});
          Window dst = ctx.window(pool.b, DType::F32, {1, s});
          auto* in = static_cast<float*>(src.data());
          for (int64_t i = 0; i < s; ++i) in[i] = 1.0f / static_cast<float>(3 + ((me * 7919 + i * 104729) % 1000));
          std::vector<char> mesh(static_cast<size_t>(s) * 4);
          w.allreduce(src, dst, ReduceOp::Sum, AllreduceMode::Mesh);
          std::memcpy(mesh.data(), dst.data(), mesh.size());
          for (AllreduceMode m : {AllreduceMode::Bruck, AllreduceMode::Ring}) {
            std::memset(dst.data(), 0, mesh.size());
            w.allreduce(src, dst, ReduceOp::Sum, m);
            MP_CHECK(same_bytes(dst.data(), mesh.data(), mesh.size()), "mode " << static_cast<int>(m) << " s " << s << " differs from mesh");
          }
        }
        Window x = ctx.window(pool.a, DType::I32, {1, s});
        fill(DType::I32, x.data(), s, me, ++it);
        w.broadcast(x, n - 1);
        std::vector<char> want(static_cast<size_t>(s) * 4);
        fill(DType::I32, want.data(), s, n - 1, it);
        MP_CHECK(same_bytes(x.data(), want.data(), want.size()), "broadcast s " << s);
        Window stage = ctx.window(pool.a, DType::I32, {1, s});
        Window data = ctx.window(pool.b, DType::I32, {n, s});
        fill(DType::I32, stage.data(), s, me, ++it);
        w.allgather(stage, data);
        for (int r = 0; r < n; ++r) {
          fill(DType::I32, want.data(), s, r, it);
          MP_CHECK(same_bytes(static_cast<char*>(data.data()) + static_cast<size_t>(r) * want.size(), want.data(), want.size()),
                   "allgather row " << r);
        }
        Window rs = ctx.window(pool.a, DType::I64, {n, s / 2 + 1});
        const int64_t cols = s / 2 + 1;
        for (int r = 0; r < n; ++r) fill(DType::I64, static_cast<char*>(rs.data()) + static_cast<size_t>(r * cols) * 8, cols, me, it * 16 + r);
        w.reduce_scatter(rs, ReduceOp::Prod);
        std::vector<std::vector<char>> in;
        for (int r = 0; r < n; ++r) {
          in.emplace_back(static_cast<size_t>(cols) * 8);
          fill(DType::I64, in.back().data(), cols, r, it * 16 + me);
        }
        const auto rwant = reference(DType::I64, ReduceOp::Prod, in, cols);
        MP_CHECK(same_bytes(static_cast<char*>(rs.data()) + static_cast<size_t>(me * cols) * 8, rwant.data(), rwant.size()),
                 "reduce_scatter prod");
        Window a2 = ctx.window(pool.a, DType::U8, {n, s});
        Window d2 = ctx.window(pool.b, DType::U8, {n, s});
        for (int p = 0; p < n; ++p) fill(DType::U8, static_cast<char*>(a2.data()) + p * s, s, me * 8 + p, it);
        w.all_to_all(a2, d2);
        for (int q = 0; q < n; ++q) {
          std::vector<char> w2(static_cast<size_t>(s));
          fill(DType::U8, w2.data(), s, q * 8 + me, it);
          MP_CHECK(same_bytes(static_cast<char*>(d2.data()) + q * s, w2.data(), w2.size()), "all_to_all row " << q);
        }
      }
      w.barrier();
    });
  }
}

// Two disjoint teams at once on 5 ranks: the evens {0, 2, 4} and the odds in reverse order {3, 1}.
// Team windows exist on members only: a put to a non-member is InvalidArgument; free syncs the team.
TEST_P(Collectives, DisjointTeams) {
  run(5, [](Context& ctx) {
    ::setenv("RWIN_COLL_CHUNK_BYTES", kSmallChunk, 1);
    const int r = ctx.rank();
    const std::vector<int> members = r % 2 == 0 ? std::vector<int>{0, 2, 4} : std::vector<int>{3, 1};
    Team team = make_team(ctx, members);
    MP_CHECK(team.size() == static_cast<int>(members.size()), "team size");
    MP_CHECK(team.global_rank(team.rank()) == r, "team rank " << team.rank() << " of rank " << r);
    Pool pool(ctx, team, "team", 3000 * 4);
    for (int it = 0; it < 6; ++it) {
      check_allreduce(ctx, team, pool, DType::F32, ReduceOp::Sum, it % 2 ? AllreduceMode::Ring : AllreduceMode::Mesh,
                      it < 3 ? 5 : 3000, it % 3 == 0, it);
    }
    Window x = ctx.window(pool.a, DType::I32, {1, 100});
    fill(DType::I32, x.data(), 100, r, 99);
    team.broadcast(x, 1);
    std::vector<char> want(400);
    fill(DType::I32, want.data(), 100, members[1], 99);
    MP_CHECK(same_bytes(x.data(), want.data(), 400), "team broadcast");
    Window tw = team.alloc_window("tw", DType::I64, {1, 4});
    const int outsider = r % 2 == 0 ? 1 : 0;
    expect_error([&] { ctx.put(tw.all(), outsider, tw.all()); }, ErrorCode::InvalidArgument, {"not a member"});
    expect_error([&] { ctx.get(tw.all(), outsider, tw.all()); }, ErrorCode::InvalidArgument, {"not a member"});
    expect_error([&] { ctx.notify(tw, outsider, {0, 0}, 1); }, ErrorCode::InvalidArgument, {"not a member"});
    // From a local source: tw itself is the target of the member before this one meanwhile.
    std::vector<int64_t> four(4, r);
    ctx.put(tw.all(), members[static_cast<size_t>((team.rank() + 1) % team.size())], rwin::local(four.data(), {1, 4}));
    team.barrier();
    // put(Add) from every member into the first member's team window (its lock table is there too).
    Window add = team.alloc_window("tadd", DType::I64, {1, 70000});
    std::vector<int64_t> mine(70000, r + 1);
    ctx.put(add.all(), members[0], rwin::local(mine.data(), {1, 70000}), AtomicType::Add);
    team.barrier();
    if (team.rank() == 0) {
      int64_t want_sum = 0;
      for (int m : members) want_sum += m + 1;
      const auto* got = static_cast<const int64_t*>(add.data());
      for (int64_t i = 0; i < 70000; ++i) MP_CHECK(got[i] == want_sum, "team put(Add) element " << i << ": " << got[i]);
    }
    team.barrier();
    ctx.free(add);
    ctx.free(tw);
    expect_error([&] { make_team(ctx, {r, r}); }, ErrorCode::InvalidArgument, {"twice"});
    expect_error([&] { make_team(ctx, {(r + 1) % 5}); }, ErrorCode::InvalidArgument, {"not in the list"});
    expect_error([&] { make_team(ctx, {r, 7}); }, ErrorCode::InvalidArgument, {"outside the job"});
    // The world still works next to the teams.
    Team w = world(ctx);
    Pool wp(ctx, w, "world", 64);
    check_allreduce(ctx, w, wp, DType::I64, ReduceOp::Max, AllreduceMode::Auto, 8, false, 7);
  });
}

// all_to_all_v: counts that differ per (sender, receiver) pair, zeros and flows above the chunk size
// among them; packed blocks and blocks in reversed member order with gaps (left untouched);
// 1, 2, 3 and 5 members; three dtypes.
TEST_P(Collectives, AllToAllV) {
  for (int nr : {1, 2, 3, 5}) {
    run(nr, [](Context& ctx) {
      ::setenv("RWIN_COLL_CHUNK_BYTES", kSmallChunk, 1);
      Team w = world(ctx);
      const int n = w.size(), me = w.rank();
      constexpr int64_t kGap = 3;
      const int64_t cap = static_cast<int64_t>(n) * (1500 + kGap) * 8;  // bytes: the largest dtype's blocks
      Pool pool(ctx, w, "a2av", static_cast<size_t>(cap));
      int it = 0;
      for (DType t : {DType::F64, DType::I8, DType::BF16}) {
        const int64_t esz = static_cast<int64_t>(dtype_size(t));
        for (bool packed : {true, false}) {
          ++it;
          // Elements member s sends member d: 0 for some pairs, 1500 (> one 4 KiB chunk) for others.
          const auto count = [it](int s, int d) -> int64_t {
            if ((s * 7 + d * 3 + it) % 5 == 0) return 0;
            if ((s + 2 * d + it) % 3 == 0) return 1500;
            return 1 + (s * 5 + d * 11 + it) % 37;
          };
          std::vector<int64_t> sc(static_cast<size_t>(n)), so(sc.size()), rc(sc.size()), ro(sc.size());
          int64_t sat = 0, rat = 0;
          for (int q = n - 1; q >= 0; --q) {  // unpacked: blocks in reversed member order, gaps between
            const auto i = static_cast<size_t>(q);
            sc[i] = count(me, q);
            rc[i] = count(q, me);
            so[i] = sat;
            ro[i] = rat;
            sat += sc[i] + kGap;
            rat += rc[i] + kGap;
          }
          if (packed) {
            int64_t a = 0, b = 0;
            for (size_t i = 0; i < sc.size(); ++i) {
              so[i] = a;
              ro[i] = b;
              a += sc[i];
              b += rc[i];
            }
          }
          Window send = ctx.window(pool.a, t, {1, cap / esz});
          Window recv = ctx.window(pool.b, t, {1, cap / esz});
          std::memset(recv.data(), 0x5A, static_cast<size_t>(cap));
          for (int q = 0; q < n; ++q) {
            const auto i = static_cast<size_t>(q);
            fill(t, static_cast<char*>(send.data()) + so[i] * esz, sc[i], me * 8 + q, it);
          }
          if (packed) {
            w.all_to_all_v(send, sc, recv, rc);
          } else {
            w.all_to_all_v(send, sc, so, recv, rc, ro);
          }
          std::vector<char> expect(static_cast<size_t>(cap), 0x5A);
          for (int p = 0; p < n; ++p) {
            const auto i = static_cast<size_t>(p);
            fill(t, expect.data() + ro[i] * esz, rc[i], p * 8 + me, it);
          }
          for (int p = 0; p < n; ++p) {
            const auto i = static_cast<size_t>(p);
            MP_CHECK(same_bytes(static_cast<char*>(recv.data()) + ro[i] * esz, expect.data() + ro[i] * esz,
                                static_cast<size_t>(rc[i] * esz)),
                     "all_to_all_v " << dtype_name(t) << (packed ? " packed" : " gapped") << " block from " << p << " ("
                                     << rc[i] << " elements): "
                                     << first_diff(static_cast<char*>(recv.data()) + ro[i] * esz, expect.data() + ro[i] * esz, rc[i], t));
          }
          MP_CHECK(same_bytes(recv.data(), expect.data(), expect.size()),
                   "all_to_all_v " << dtype_name(t) << (packed ? " packed" : " gapped") << " wrote outside its blocks");
        }
      }
      w.barrier();
    });
  }
}

// Arguments checked up front, before any message: shapes, dtypes, roots.
TEST_P(Collectives, ArgumentChecks) {
  run(2, [](Context& ctx) {
    Team w = world(ctx);
    Window a = ctx.alloc_window("a", DType::F32, {2, 8});
    Window b = ctx.alloc_window("b", DType::F32, {3, 8});
    Window c = ctx.alloc_window("c", DType::I32, {2, 8});
    Window s = ctx.alloc_window("s", DType::F32, {1, 8});
    expect_error([&] { w.allgather(s, b); }, ErrorCode::ShapeMismatch, {"allgather", "must be [2, 8]"});
    expect_error([&] { w.allgather(s, c); }, ErrorCode::DtypeMismatch, {"allgather"});
    expect_error([&] { w.broadcast(a, 2); }, ErrorCode::InvalidArgument, {"root 2"});
    expect_error([&] { w.reduce_scatter(b); }, ErrorCode::ShapeMismatch, {"2 rows"});
    expect_error([&] { w.allreduce(a, c); }, ErrorCode::DtypeMismatch, {"allreduce"});
    expect_error([&] { w.all_to_all(a, a); }, ErrorCode::InvalidArgument, {"overlap"});
    // all_to_all_v (a: 16 f32 elements, s: 8)
    const int me = ctx.rank();
    expect_error([&] { w.all_to_all_v(a, {1}, s, {1, 1}); }, ErrorCode::InvalidArgument, {"send_counts has 1 entries", "(2)"});
    expect_error([&] { w.all_to_all_v(a, {1, -1}, s, {1, 1}); }, ErrorCode::InvalidArgument, {"send_counts[1] = -1"});
    expect_error([&] { w.all_to_all_v(a, {1, 1}, {0, 16}, s, {1, 1}, {0, 1}); }, ErrorCode::InvalidArgument,
                 {"send_counts[1] = 1 at send_offsets[1] = 16", "(16 elements)"});
    expect_error([&] { w.all_to_all_v(a, {1, 1}, {0, 0}, s, {1, 1}, {0, INT64_MAX}); }, ErrorCode::InvalidArgument,
                 {"recv_offsets[1] = 9223372036854775807", "outside recv"});
    expect_error([&] { w.all_to_all_v(a, {2, 2}, {0, 2}, s, {2, 2}, {0, 1}); }, ErrorCode::InvalidArgument,
                 {"recv blocks of members 0 and 1 overlap"});
    expect_error([&] { w.all_to_all_v(a, me == 0 ? std::vector<int64_t>{2, 1} : std::vector<int64_t>{1, 2}, s, {1, 1}); },
                 ErrorCode::InvalidArgument, {"sends itself", "expects recv_counts"});
    expect_error([&] { w.all_to_all_v(a, {1, 1}, a, {1, 1}); }, ErrorCode::InvalidArgument, {"not in place"});
    expect_error([&] { w.all_to_all_v(a, {1, 1}, c, {1, 1}); }, ErrorCode::DtypeMismatch, {"all_to_all_v"});
    expect_error([&] { parse_reduce_op("avg"); }, ErrorCode::InvalidArgument, {"avg"});
    // The team is still usable after refused arguments (nothing was sent).
    w.allreduce(a);
    w.barrier();
  });
}

// Members that disagree (count, root, op, dtype) end in an error on every member, fast: the mismatched
// call throws, or at the latest the next collective call on that team does. Never a hang.
TEST_P(Collectives, MismatchEndsInErrorEverywhere) {
  Options o;
  o.op_timeout = std::chrono::milliseconds(3000);
  run(3, [](Context& ctx) {
    const int r = ctx.rank();
    // Cases 6 and 7: one member's tuning file (RWIN_COLL_TUNING) picks another algorithm.
    const std::string tuning = ::testing::TempDir() + "rwin_mm_tuning_" + std::to_string(::getpid()) + ".json";
    if (r == 0) {
      std::ofstream f(tuning);
      // The opposite of the built-in choices: one round off shared memory, Bruck on it.
      f << R"({"version": 1, "rules": [{"collective": "broadcast", "algorithm": "chain"},
                                       {"collective": "allgather", "path": "shm", "algorithm": "bruck"},
                                       {"collective": "allgather", "path": "net", "algorithm": "direct"}]})";
    }
    for (int kase = 0; kase < 9; ++kase) {
      // Cases 6 and 7 only: with member 0's file in case 8 too, two mismatches at once (roots and
      // algorithms) can leave a member waiting for a message nobody sends in that call, while the others
      // find the mismatch in the next call (through the host leaders: member 2 waits for member 0, which
      // chains to member 1 only), and a member finishes its own call before it heeds a later call's abort.
      if ((kase == 6 || kase == 7) && r == 0) ::setenv("RWIN_COLL_TUNING", tuning.c_str(), 1);  // read by make_team
      Team t = make_team(ctx, {0, 1, 2});
      ::unsetenv("RWIN_COLL_TUNING");
      Window x = ctx.window(t.alloc_window_buffer("mm" + std::to_string(kase), 4096), DType::F32, {1, 64});
      t.allreduce(x);  // the workspace exists at the same size everywhere before the mismatch
      Window xi = ctx.window(x.buffer(), DType::I32, {1, 64});
      Window x65 = ctx.window(x.buffer(), DType::F32, {1, 65});
      const auto start = std::chrono::steady_clock::now();
      bool threw = false;
      try {
        switch (kase) {
          case 0: t.allreduce(r == 1 ? x65 : x); break;                                     // count
          case 1: t.broadcast(x, r == 2 ? 1 : 0); break;                                    // root
          case 2: t.allreduce(x, r == 0 ? ReduceOp::Max : ReduceOp::Sum); break;            // op
          case 3: if (r == 1) t.allreduce(xi); else t.allreduce(x); break;                  // dtype
          case 4: {  // all_to_all_v: member 1 expects 3 elements from member 0, which sends it 4
            Window y = ctx.window(x.buffer(), DType::F32, {1, 32});
            Window z = ctx.window(x.buffer(), DType::F32, {1, 32}, 32 * 4);
            const std::vector<int64_t> sends{4, 4, 4};
            std::vector<int64_t> recvs{4, 4, 4};
            if (r == 1) recvs[0] = 3;
            try {
              t.all_to_all_v(y, sends, z, recvs);
            } catch (const Error& e) {
              if (r == 1) {
                MP_CHECK(std::string(e.what()).find("team rank 0 (job rank 0) sends 4 elements (16 bytes) to team rank 1 "
                                                    "(job rank 1), which expects 3 elements (12 bytes) from it") != std::string::npos,
                         e.what());
              }
              throw;
            }
            break;
          }
          case 5: t.allreduce(x, ReduceOp::Sum, r == 0 ? AllreduceMode::Bruck : AllreduceMode::Mesh); break;  // algorithm
          case 6: t.broadcast(x, 0); break;  // member 0 chains, 1 and 2 expect the tree's messages
          case 7: {                          // member 0 gathers by Bruck and 1, 2 in one round, or the reverse
            Window row = ctx.window(x.buffer(), DType::F32, {1, 4});
            Window rows = ctx.window(x.buffer(), DType::F32, {3, 4}, 64);
            t.allgather(row, rows);
            break;
          }
          case 8:  // two members act as the root: both roots return at once (no acks to wait for), so
                   // the call may end well everywhere; the next call that receives ends it
            t.broadcast(x, r == 1 ? 1 : 0);
            t.allreduce(x);
            break;
        }
        t.barrier();
      } catch (const Error& e) {
        threw = true;
        // Each of these is seen in a header (or a growth handshake): CollectiveMismatch, not a timeout.
        MP_CHECK(e.code() == ErrorCode::CollectiveMismatch,
                 "case " << kase << ": " << to_string(e.code()) << ": " << e.what());
      }
      MP_CHECK(threw, "case " << kase << ": no error on rank " << r);
      const auto took = std::chrono::steady_clock::now() - start;
      MP_CHECK(took < std::chrono::milliseconds(2000), "case " << kase << " took too long");
    }
    if (r == 0) std::remove(tuning.c_str());
  }, o);
}

// broadcast's latency path (one message per link: send_one / recv_one) and what it hands to an
// exchange: a member without a free slot (one slot per peer, a receiver that sleeps while the root
// runs ahead; three slots, a count that is not a power of two), payloads above RWIN_COLL_COPY_MAX
// (one message, sent from x with an ack where it goes through the transport) and above a chunk (the
// pipelined path), roots that change. 2 members run Direct, 4 the binomial tree (member 1
// forwards to 3). Every receiver checks every call's bytes. In shared memory broadcasts of up to 64
// bytes take the lines (RWIN_COLL_LINES): with none, the slots as everywhere else; with 1 and 3 lines
// per peer (the same sleeping receivers: the root waits for a free line), and the default 64.
TEST_P(Collectives, BroadcastLatencyPathAndItsFallbacks) {
  const std::pair<const char*, const char*> depths[] = {{"1", "0"}, {"3", "0"}, {"auto", "1"}, {"auto", "3"}, {"auto", "64"}};
  for (int nr : {2, 4}) {
    for (const auto& [slots, lines] : depths) {  // 3: not a power of two (scratch_off, line_off divide)
      run(nr, [slots, lines](Context& ctx) {
        ::setenv("RWIN_COLL_SLOTS", slots, 1);
        ::setenv("RWIN_COLL_LINES", lines, 1);
        Team w = world(ctx);
        ::unsetenv("RWIN_COLL_SLOTS");
        ::unsetenv("RWIN_COLL_LINES");
        Pool pool(ctx, w, "blp", 300 * 1024);
        auto one = [&](int it, int root, int64_t n) {
          Window x = ctx.window(pool.a, DType::F64, {1, n});
          if (w.rank() == root) {
            fill(DType::F64, x.data(), n, root, it);
          } else {
            std::memset(x.data(), 0xee, static_cast<size_t>(n) * 8);
          }
          w.broadcast(x, root);
          std::vector<char> want(static_cast<size_t>(n) * 8);
          fill(DType::F64, want.data(), n, root, it);
          MP_CHECK(same_bytes(x.data(), want.data(), want.size()), "broadcast " << it << " (root " << root << ", " << n
                                                                                 << " f64, slots " << slots << ", lines "
                                                                                 << lines << "): "
                                                                                 << first_diff(x.data(), want.data(), n, DType::F64));
        };
        // The root runs ahead of members that sleep now and then: it finds no free slot (line) and
        // waits for one. 8, 16 and 64 bytes (the most a line holds).
        for (int it = 0; it < 200; ++it) {
          if (w.rank() != 0 && it % 50 == 7) std::this_thread::sleep_for(std::chrono::milliseconds(2));
          one(it, 0, it % 3 == 2 ? 8 : 1 + it % 3);
        }
        // Every root, sizes on each path: in the header (<= 8 bytes), a line's most and one element
        // more, 1 KiB, 100 KiB (> the copy limit, one message), 300 KiB (chunks): lines and slots
        // interleaved.
        const int64_t sizes[] = {1, 8, 9, 128, 12800, 38400};
        for (int it = 0; it < 72; ++it) one(1000 + it, it % w.size(), sizes[it % 6]);
        w.barrier();
      });
    }
  }
}

// Lines exist only on a team all mapped here: of these instances, UCX's shared memory in direct mode.
bool has_lines(const TransportParam& p) { return p.name == "ucx_shm"; }

// A root runs 40 broadcasts of 8 and 64 bytes ahead of a member that has not called broadcast again yet
// (it waits for the root's notify first). Where there are lines, with one slot per peer: the lines'
// depth is their own (in the slots the second would wait for the member's ack of the first:
// RWIN_COLL_LINES=0 times out). Elsewhere the slots carry them, 64 deep for messages this small.
TEST_P(Collectives, BroadcastLinesKeepTheirDepthWhateverTheSlots) {
  const bool lines = has_lines(GetParam());
  run(2, [lines](Context& ctx) {
    if (lines) ::setenv("RWIN_COLL_SLOTS", "1", 1);
    Team w = world(ctx);
    ::unsetenv("RWIN_COLL_SLOTS");
    auto sig = ctx.alloc_signals("ahead", 1);
    Pool pool(ctx, w, "lines_ahead", 64 * 8);
    constexpr int kCalls = 40;
    auto n_of = [](int it) -> int64_t { return it % 2 ? 8 : 1; };  // f64: 64 and 8 bytes
    w.broadcast(ctx.window(pool.a, DType::F64, {1, 8}), 0);  // together: the workspace (slots and lines) is made
    if (w.rank() == 0) {
      for (int it = 0; it < kCalls; ++it) {
        Window x = ctx.window(pool.a, DType::F64, {1, n_of(it)});
        fill(DType::F64, x.data(), n_of(it), 0, it);
        w.broadcast(x, 0);
      }
      ctx.notify(sig.at(0), 1, 1);  // all 40 sent: none of them waited for member 1
    } else {
      ctx.wait(sig.at(0), 1, WaitCmp::GE);
      for (int it = 0; it < kCalls; ++it) {
        Window x = ctx.window(pool.a, DType::F64, {1, n_of(it)});
        std::memset(x.data(), 0xee, 64);
        w.broadcast(x, 0);
        std::vector<char> want(static_cast<size_t>(n_of(it)) * 8);
        fill(DType::F64, want.data(), n_of(it), 0, it);
        MP_CHECK(same_bytes(x.data(), want.data(), want.size()), "broadcast " << it << " received late: "
                                                                              << first_diff(x.data(), want.data(), n_of(it), DType::F64));
      }
    }
    w.barrier();
  });
}

// RWIN_COLL_LINES must be the same on every member: where there are lines, their registration compares
// their sizes, so a member with another count ends the team's first call in CollectiveMismatch on both,
// naming the knob, instead of writing outside a member's lines. Elsewhere the knob has nothing to size:
// the broadcast works.
TEST_P(Collectives, BroadcastLinesCountMustAgree) {
  Options o;
  o.op_timeout = std::chrono::milliseconds(3000);
  const bool lines = has_lines(GetParam());
  run(2, [lines](Context& ctx) {
    if (ctx.rank() == 1) ::setenv("RWIN_COLL_LINES", "3", 1);
    Team w = world(ctx);
    ::unsetenv("RWIN_COLL_LINES");
    Window x = ctx.window(w.alloc_window_buffer("lines_count", 64), DType::F64, {1, 1});
    if (lines) {
      expect_error([&] { w.broadcast(x, 0); }, ErrorCode::CollectiveMismatch,
                   {"RWIN_COLL_LINES differ (this rank's is", "collective lines of"});
      return;
    }
    *static_cast<double*>(x.data()) = w.rank() == 0 ? 2.5 : 0.0;
    w.broadcast(x, 0);
    MP_CHECK(*static_cast<double*>(x.data()) == 2.5, "broadcast without lines: " << *static_cast<double*>(x.data()));
  }, o);
}

// The latency path's mismatches, 2 members (Direct): another count (recv_one's check of the header) and two
// members acting as the root (both return; the next call that receives finds the message nobody
// consumed); the same for broadcasts of up to 64 bytes (the lines in shared memory), and a receiver
// that looks in the lines for a message the root sent through the slots (17 elements: 68 bytes) or
// the other way round (each finds the other's message where it did not look). Both members end in
// CollectiveMismatch.
TEST_P(Collectives, BroadcastLatencyPathMismatch) {
  Options o;
  o.op_timeout = std::chrono::milliseconds(3000);
  run(2, [](Context& ctx) {
    const int r = ctx.rank();
    for (int kase = 0; kase < 6; ++kase) {
      Team t = make_team(ctx, {0, 1});
      Window x = ctx.window(t.alloc_window_buffer("lpm" + std::to_string(kase), 4096), DType::F32, {1, 64});
      // Fewer elements: the workspace the allreduce sized serves them all (no growth handshake to notice first).
      auto first = [&](int64_t n) { return ctx.window(x.buffer(), DType::F32, {1, n}); };
      t.allreduce(x);
      bool threw = false;
      const int64_t counts[6][2] = {{64, 63}, {64, 64}, {2, 1}, {2, 2}, {17, 16}, {16, 17}};  // root's, member 1's
      try {
        const Window mine = first(counts[kase][r == 1 ? 1 : 0]);
        t.broadcast(mine, kase == 1 || kase == 3 ? r : 0);
        t.allreduce(x);
        t.barrier();
      } catch (const Error& e) {
        threw = true;
        MP_CHECK(e.code() == ErrorCode::CollectiveMismatch, "case " << kase << ": " << to_string(e.code()) << ": " << e.what());
        if ((kase == 0 || kase == 2) && r == 1) {
          const std::string root = "count " + std::to_string(counts[kase][0]) + " root 0";
          const std::string member = "count " + std::to_string(counts[kase][1]) + " root 0";
          MP_CHECK(std::string(e.what()).find(root) != std::string::npos &&
                       std::string(e.what()).find(member) != std::string::npos,
                   e.what());
        }
      }
      MP_CHECK(threw, "case " << kase << ": no error on rank " << r);
    }
  }, o);
}

// make_team: members that pass different lists all get CollectiveMismatch naming both lists.
TEST_P(Collectives, MakeTeamMismatch) {
  Options o;
  o.op_timeout = std::chrono::milliseconds(3000);
  run(3, [](Context& ctx) {
    const std::vector<int> list = ctx.rank() == 2 ? std::vector<int>{0, 2, 1} : std::vector<int>{0, 1, 2};
    expect_error([&] { make_team(ctx, list); }, ErrorCode::CollectiveMismatch, {"make_team", "[0, 2, 1]", "[0, 1, 2]"});
  }, o);
}

// allgather and all_to_all by pull (RWIN_COLL_PULL_MIN, a team all in shared memory; elsewhere the
// same calls take the message path): every block size around the threshold, then stage views that
// are not each other's copies (member 1's stage lies 64 bytes further into the buffer), where the
// pairs with member 1 fall back to messages and members 0 and 2 still pull from each other.
TEST_P(Collectives, PullPathAndItsFallback) {
  run(3, [](Context& ctx) {
    ::setenv("RWIN_COLL_PULL_MIN", "64", 1);
    ::setenv("RWIN_COLL_CHUNK_BYTES", kSmallChunk, 1);
    data_movement_round(ctx, {1, 7, 8, 777, 3000});  // f64 rows of 8, 56, 64 bytes...; i16 1554 bytes
    Team w = world(ctx);
    {  // back to back, inputs rewritten the moment a call returns: a member that returned while a peer
       // still read its stage or src would hand that peer the next call's data
      Pool pool(ctx, w, "pull_bb", 3 * 2048 * 8);
      const int n = w.size(), me = w.rank();
      for (int it = 0; it < 40; ++it) {
        const int64_t s = it % 2 ? 2048 : 1000;
        Window stage = ctx.window(pool.a, DType::F64, {1, s});
        Window data = ctx.window(pool.b, DType::F64, {n, s});
        fill(DType::F64, stage.data(), s, me, 300 + it);
        w.allgather(stage, data);
        fill(DType::F64, stage.data(), s, me, 900 + it);  // at once: the next call's data
        for (int r = 0; r < n; ++r) {
          std::vector<char> want(static_cast<size_t>(s) * 8);
          fill(DType::F64, want.data(), s, r, 300 + it);
          MP_CHECK(same_bytes(static_cast<char*>(data.data()) + static_cast<size_t>(r) * want.size(), want.data(), want.size()),
                   "back-to-back allgather " << it << " row " << r);
        }
        Window x = ctx.window(pool.a, DType::F64, {1, 3 * s});
        fill(DType::F64, x.data(), 3 * s, me, 500 + it);
        w.allreduce(x, ReduceOp::Sum, AllreduceMode::Ring);
        const auto want = reference(DType::F64, ReduceOp::Sum, inputs(DType::F64, 3 * s, w.ranks(), 500 + it), 3 * s);
        MP_CHECK(same_bytes(x.data(), want.data(), want.size()), "back-to-back allreduce " << it << ": "
                                                                    << first_diff(x.data(), want.data(), 3 * s, DType::F64));
        fill(DType::F64, x.data(), 3 * s, me, 700 + it);  // at once
      }
      w.barrier();
    }
    {  // allreduce Ring (its reduce-scatter and gather by pull), in place and not, sizes around the blocks
      Pool pool(ctx, w, "pull_ar", 5000 * 8);
      int k = 0;
      for (DType t : {DType::F32, DType::BF16, DType::I64}) {
        for (int64_t n : {int64_t{2}, int64_t{49}, int64_t{1001}, int64_t{5000}}) {
          for (bool in_place : {false, true}) check_allreduce(ctx, w, pool, t, ReduceOp::Sum, AllreduceMode::Ring, n, in_place, 200 + k++);
        }
      }
    }
    const int n = w.size(), me = w.rank();
    bool mapped = true;
    for (int p = 0; p < ctx.size(); ++p) mapped = mapped && ctx.rma_mode(p) == "direct";
    WindowBuffer buf = w.alloc_window_buffer("pull_asym", 1 << 16);
    const int64_t s = 1000;  // f32 blocks of 4000 bytes
    const uint64_t shift = me == 1 ? 64 : 0;
    for (int round = 0; round < 2; ++round) {  // twice: the second reuses slots the first left behind
      Window stage = ctx.window(buf, DType::F32, {1, s}, shift);
      Window data = ctx.window(buf, DType::F32, {n, s}, 8192);
      fill(DType::F32, stage.data(), s, me, 60 + round);
      w.allgather(stage, data);
      for (int r = 0; r < n; ++r) {
        std::vector<char> want(static_cast<size_t>(s) * 4);
        fill(DType::F32, want.data(), s, r, 60 + round);
        MP_CHECK(same_bytes(static_cast<char*>(data.data()) + static_cast<size_t>(r) * want.size(), want.data(), want.size()),
                 "asymmetric allgather round " << round << " row " << r);
      }
      Window a2a_stage = ctx.window(buf, DType::F32, {n, s}, 24576 + shift);
      Window a2a_data = ctx.window(buf, DType::F32, {n, s}, 40960);
      for (int p = 0; p < n; ++p) {
        fill(DType::F32, static_cast<char*>(a2a_stage.data()) + static_cast<size_t>(p * s) * 4, s, me * 8 + p, 70 + round);
      }
      w.all_to_all(a2a_stage, a2a_data);
      for (int q = 0; q < n; ++q) {
        std::vector<char> want(static_cast<size_t>(s) * 4);
        fill(DType::F32, want.data(), s, q * 8 + me, 70 + round);
        MP_CHECK(same_bytes(static_cast<char*>(a2a_data.data()) + static_cast<size_t>(q) * want.size(), want.data(), want.size()),
                 "asymmetric all_to_all round " << round << " row " << q);
      }
      // broadcast from member 0 (member 1 cannot pull: the root sends it messages; member 2 pulls) and
      // from member 1 (nobody can pull: it sends to both)
      for (int root : {0, 1}) {
        Window x = ctx.window(buf, DType::F32, {1, s}, 49152 + shift);
        if (me == root) fill(DType::F32, x.data(), s, root, 100 + round);
        else std::memset(x.data(), 0x5a, static_cast<size_t>(s) * 4);
        w.broadcast(x, root);
        std::vector<char> want(static_cast<size_t>(s) * 4);
        fill(DType::F32, want.data(), s, root, 100 + round);
        MP_CHECK(same_bytes(x.data(), want.data(), want.size()), "asymmetric broadcast from " << root << " round " << round);
      }
      // all_to_all_v: pairs of 0, 3, 16 (64 bytes: the threshold) and 1000 f32 elements, gaps between
      // the blocks; in round 1 member 1's send view lies elsewhere, so the large blocks to and from it
      // travel as messages (a pair pulls only where the sender's view is the receiver's copy).
      {
        const auto count = [](int from, int to) -> int64_t {  // members 1 and 2 send one large block each
          static const int64_t kCounts[] = {0, 3, 16, 1000};
          return kCounts[(from * 3 + to) % 4];
        };
        std::vector<int64_t> sc(static_cast<size_t>(n)), so(sc.size()), rc(sc.size()), ro(sc.size());
        int64_t sat = 0, rat = 0;
        for (int q = n - 1; q >= 0; --q) {
          const auto i = static_cast<size_t>(q);
          sc[i] = count(me, q);
          rc[i] = count(q, me);
          so[i] = sat;
          ro[i] = rat;
          sat += sc[i] + 5;
          rat += rc[i] + 5;
        }
        Window vs = ctx.window(buf, DType::F32, {1, 3 * 1005}, round == 1 ? 24576 + shift : 24576);
        Window vr = ctx.window(buf, DType::F32, {1, 3 * 1005}, 40960);
        std::memset(vr.data(), 0x5a, 3 * 1005 * 4);
        for (int q = 0; q < n; ++q) {
          fill(DType::F32, static_cast<char*>(vs.data()) + so[static_cast<size_t>(q)] * 4, sc[static_cast<size_t>(q)], me * 8 + q, 80 + round);
        }
        const Stats before = ctx.stats();
        w.all_to_all_v(vs, sc, so, vr, rc, ro);
        // Pulled: this member's large block never travelled (only offers and flags did). Not pulled
        // (round 1: both large blocks go to or come from member 1; or nobody mapped): it did.
        const uint64_t moved = ctx.stats().total.put_bytes - before.total.put_bytes;
        if (me != 0) {
          const bool pulled = mapped && round == 0;
          MP_CHECK(pulled ? moved < 4000 : moved >= 4000, "all_to_all_v round " << round << ": " << moved << " bytes sent");
        }
        std::vector<char> want(3 * 1005 * 4, 0x5a);
        for (int q = 0; q < n; ++q) {
          fill(DType::F32, want.data() + ro[static_cast<size_t>(q)] * 4, rc[static_cast<size_t>(q)], q * 8 + me, 80 + round);
        }
        MP_CHECK(same_bytes(vr.data(), want.data(), want.size()), "all_to_all_v round " << round << " (blocks and gaps)");
        w.barrier();  // nobody rewrites vs's region (the next round's stage) while a member may still read it
      }
      // allreduce with member 1's src elsewhere (every member falls back to messages), then with only
      // its dst elsewhere (the reduction pulls, the gather falls back for the pairs with member 1).
      for (int kase = 0; kase < 2; ++kase) {
        Window src = ctx.window(buf, DType::F32, {1, s}, 49152 + (kase == 0 ? shift : 0));
        Window dst = ctx.window(buf, DType::F32, {1, s}, 57344 + (kase == 1 ? shift : 0));
        fill(DType::F32, src.data(), s, me, 90 + round * 2 + kase);
        w.allreduce(src, dst, ReduceOp::Sum, AllreduceMode::Ring);
        const auto want = reference(DType::F32, ReduceOp::Sum, inputs(DType::F32, s, w.ranks(), 90 + round * 2 + kase), s);
        MP_CHECK(same_bytes(dst.data(), want.data(), want.size()),
                 "asymmetric allreduce case " << kase << " round " << round << ": " << first_diff(dst.data(), want.data(), s, DType::F32));
      }
    }
    w.barrier();
  });
}

// Members that disagree on RWIN_COLL_PULL_MIN in shared memory choose different paths: the call ends
// in CollectiveMismatch on every member (the header's mode), never in a hang or a wrong result.
// (Where the members are not all mapped, nobody pulls and the knob changes nothing: the call works.)
// all_to_all and allgather rows of 64 KiB and more on a team not all in shared memory are pushed:
// written straight into each member's data (a store where it is mapped, a put otherwise), then a
// message that says so.
// Back to back with the stage rewritten the moment a call returns (a member that returned while its
// put still read its stage would hand the next call's bytes), every row checked; a member whose data
// view is not the others' copy (it starts 64 bytes further into its buffer) gets and sends its rows as
// messages, the others push among themselves; a member whose count differs ends the call in
// CollectiveMismatch on every member. On shared memory the same calls take the pull path.
TEST_P(Collectives, PushPathAndItsFallback) {
  run(4, [](Context& ctx) {
    Team w = world(ctx);
    const int n = w.size(), me = w.rank();
    constexpr int64_t kS = 8200;  // f64 rows of 65600 bytes
    WindowBuffer sb = w.alloc_window_buffer("push_stage", static_cast<size_t>(n * kS) * 8);
    WindowBuffer db = w.alloc_window_buffer("push_data", static_cast<size_t>(n * kS) * 8 + 64);
    for (const bool skew : {false, true}) {
      Window stage = ctx.window(sb, DType::F64, {n, kS});
      Window data = ctx.window(db, DType::F64, {n, kS}, skew && me == 1 ? 64 : 0);
      for (int it = 0; it < rwin_test::trials(12, 4); ++it) {
        for (int p = 0; p < n; ++p) fill(DType::F64, static_cast<char*>(stage.data()) + static_cast<size_t>(p * kS) * 8, kS, me * 8 + p, 40 + it);
        w.all_to_all(stage, data);
        std::memset(stage.data(), 0xee, static_cast<size_t>(n * kS) * 8);  // at once
        for (int q = 0; q < n; ++q) {
          std::vector<char> want(static_cast<size_t>(kS) * 8);
          fill(DType::F64, want.data(), kS, q * 8 + me, 40 + it);
          MP_CHECK(same_bytes(static_cast<char*>(data.data()) + static_cast<size_t>(q) * want.size(), want.data(), want.size()),
                   (skew ? "skewed, " : "") << "all_to_all call " << it << ": row " << q);
        }
        Window row = ctx.window(sb, DType::F64, {1, kS});
        fill(DType::F64, row.data(), kS, me, 70 + it);
        w.allgather(row, data);
        fill(DType::F64, row.data(), kS, me, 99);  // at once
        for (int q = 0; q < n; ++q) {
          std::vector<char> want(static_cast<size_t>(kS) * 8);
          fill(DType::F64, want.data(), kS, q, 70 + it);
          MP_CHECK(same_bytes(static_cast<char*>(data.data()) + static_cast<size_t>(q) * want.size(), want.data(), want.size()),
                   (skew ? "skewed, " : "") << "allgather call " << it << ": row " << q);
        }
      }
    }
    Team t2 = make_team(ctx, w.ranks());
    Window a = t2.alloc_window("push_mm_a", DType::F64, {n, kS}), b = t2.alloc_window("push_mm_b", DType::F64, {n, kS});
    Window a1 = ctx.window(a.buffer(), DType::F64, {n, kS - 8}), b1 = ctx.window(b.buffer(), DType::F64, {n, kS - 8});
    expect_error([&] {
      if (me == 2) t2.all_to_all(a1, b1); else t2.all_to_all(a, b);
      t2.barrier();
    }, ErrorCode::CollectiveMismatch, {});
  });
}

// Members whose RWIN_COLL_PULL_MIN differ: in shared memory (everyone mapped) one pulls a row the other
// sends, so the allgather ends in CollectiveMismatch on every member; a member that found it names the
// pull path, one that learned it from the abort word names the member that found it (both sides are in
// that one's error: docs/CONTRACT.md "Mismatch"), and at least one member found it. Elsewhere nobody
// pulls and the call ends well.
TEST_P(Collectives, PullPathMismatch) {
  Options o;
  o.op_timeout = std::chrono::milliseconds(3000);
  const rwin_test::Pipe said;  // 'P': a member's error named the pull path; 'M': a member that is not mapped
  run(3, [&said](Context& ctx) {
    ::setenv("RWIN_COLL_PULL_MIN", ctx.rank() == 2 ? "0" : "64", 1);
    Team w = world(ctx);
    Window stage = ctx.alloc_window("pm_stage", DType::F32, {1, 256});
    Window data = ctx.alloc_window("pm_data", DType::F32, {3, 256});
    fill(DType::F32, stage.data(), 256, ctx.rank(), 80);
    bool mapped = true;
    for (int p = 0; p < ctx.size(); ++p) mapped = mapped && ctx.rma_mode(p) == "direct";
    if (mapped) {
      try {
        w.allgather(stage, data);
        MP_CHECK(false, "no error on rank " << ctx.rank());
      } catch (const Error& e) {
        const std::string what = e.what();
        MP_CHECK(e.code() == ErrorCode::CollectiveMismatch && what.find("allgather") != std::string::npos,
                 to_string(e.code()) << ": " << what);
        if (what.find("(pull)") != std::string::npos) {
          MP_CHECK(::write(said.fd[1], "P", 1) == 1, "pipe write");
        } else {
          MP_CHECK(what.find("its error names both sides") != std::string::npos, "names neither the pull path nor the finder: " << what);
        }
      }
    } else {
      MP_CHECK(::write(said.fd[1], "M", 1) == 1, "pipe write");
      w.allgather(stage, data);
      std::vector<char> want(256 * 4);
      fill(DType::F32, want.data(), 256, 2, 80);
      MP_CHECK(same_bytes(static_cast<char*>(data.data()) + 2 * want.size(), want.data(), want.size()), "row 2");
    }
  }, o);
  char got[8] = {};
  pollfd pf{said.fd[0], POLLIN, 0};
  const ssize_t k = ::poll(&pf, 1, 0) == 1 ? ::read(said.fd[0], got, sizeof got) : 0;
  const std::string bytes(got, static_cast<size_t>(std::max<ssize_t>(k, 0)));
  EXPECT_NE(bytes.find_first_of("PM"), std::string::npos) << "no member named the pull path";
}

// all_to_all_v's pairs decide alone whether a block is pulled (by the count both ends hold): ends that
// count a block differently end the call in CollectiveMismatch on every member, the member that
// found it naming both counts, whether both counts are above RWIN_COLL_PULL_MIN (the offer carries
// the sender's), on either side of it (one end offers, the other expects a message), or below it
// (the message path's check). On every transport: where nobody pulls, the message path reports them.
TEST_P(Collectives, AllToAllVCountMismatchWithPulls) {
  Options o;
  o.op_timeout = std::chrono::milliseconds(5000);
  run(3, [](Context& ctx) {
    ::setenv("RWIN_COLL_PULL_MIN", "64", 1);
    const int r = ctx.rank();
    bool mapped = true;
    for (int p = 0; p < ctx.size(); ++p) mapped = mapped && ctx.rma_mode(p) == "direct";
    // member 0 sends member 1 `sent` f32 elements, member 1 expects `expected`; every other pair 100
    const struct {
      int64_t sent, expected;
      const char* says;  // what member 1's error says where both ends pull
    } kCases[] = {{200, 100, "sends 200 elements (800 bytes) to team rank 1 (job rank 1), which expects 100 elements (400 bytes)"},
                  {100, 10, "count the block between them differently"},
                  {10, 100, "count the block between them differently"},
                  {5, 3, "sends 5 elements (20 bytes) to team rank 1 (job rank 1), which expects 3 elements (12 bytes)"}};
    int k = 0;
    for (const auto& c : kCases) {
      Team t = make_team(ctx, {0, 1, 2});  // a fresh team per case: a mismatch leaves a team unusable
      Window y = t.alloc_window("cm_send" + std::to_string(k), DType::F32, {1, 3 * 200});
      Window z = t.alloc_window("cm_recv" + std::to_string(k++), DType::F32, {1, 3 * 200});
      std::vector<int64_t> sends{100, 100, 100}, recvs{100, 100, 100};
      if (r == 0) sends[1] = c.sent;
      if (r == 1) recvs[0] = c.expected;
      bool threw = false;
      try {
        t.all_to_all_v(y, sends, z, recvs);
        t.barrier();
      } catch (const Error& e) {
        threw = true;
        MP_CHECK(e.code() == ErrorCode::CollectiveMismatch, "case " << c.sent << "/" << c.expected << ": " << e.what());
        const std::string what = e.what();
        if (r == 1 && what.find("found that the members' calls") == std::string::npos) {
          // member 1 found it (else another member did first and told it)
          const std::string says = mapped || c.says[0] != 'c'
                                       ? c.says
                                       : "sends " + std::to_string(c.sent) + " elements (" + std::to_string(c.sent * 4) + " bytes)";
          MP_CHECK(what.find(says) != std::string::npos, "case " << c.sent << "/" << c.expected << ": " << what);
        }
      }
      MP_CHECK(threw, "case " << c.sent << "/" << c.expected << ": no error on rank " << r);
    }
  }, o);
}

// ---------------------------------------------------------------------------------------------
// Nonblocking collectives (Team::start_*, CollectiveRequest)

// Views carved one after another out of one team buffer (64-byte aligned), so collectives queued at
// once never share bytes.
struct Carver {
  Context& ctx;
  WindowBuffer buf;
  uint64_t next = 0;
  Window take(DType t, Shape2 shape) {
    Window w = ctx.window(buf, t, shape, next);
    next += (static_cast<uint64_t>(shape[0] * shape[1]) * dtype_size(t) + 63) / 64 * 64;
    return w;
  }
};

using rwin_test::Pipe;

// Every collective started at once, queued on the worker, on members 0 and 2, while member 1 calls
// the blocking forms in the same order; then every result against the reference, bit for bit.
TEST_P(Collectives, NonblockingEveryCollectiveMatchesTheBlockingOne) {
  run(3, [](Context& ctx) {
    ::setenv("RWIN_COLL_CHUNK_BYTES", kSmallChunk, 1);
    Team w = world(ctx);
    const int n = w.size(), me = w.rank();
    const bool nb = me != 1;
    Carver cv{ctx, w.alloc_window_buffer("nb_all", 1 << 20)};
    const int64_t s = 777;
    Window ar = cv.take(DType::F32, {1, 1001});
    Window ar_src = cv.take(DType::I32, {1, 3000}), ar_dst = cv.take(DType::I32, {1, 3000});
    Window ag_stage = cv.take(DType::F64, {1, s}), ag_data = cv.take(DType::F64, {n, s});
    Window rs = cv.take(DType::F16, {n, s});
    Window rs_in = cv.take(DType::I32, {n, s}), rs_out = cv.take(DType::I32, {1, s});
    Window bc = cv.take(DType::F64, {1, s});
    Window a2a_stage = cv.take(DType::I16, {n, s}), a2a_data = cv.take(DType::I16, {n, s});
    Window v_send = cv.take(DType::F32, {1, 3 * 5}), v_recv = cv.take(DType::F32, {1, 3 * 5});
    fill(DType::F32, ar.data(), 1001, me, 1);
    fill(DType::I32, ar_src.data(), 3000, me, 2);
    fill(DType::F64, ag_stage.data(), s, me, 3);
    for (int r = 0; r < n; ++r) fill(DType::F16, static_cast<char*>(rs.data()) + static_cast<size_t>(r * s) * 2, s, me, 40 + r);
    for (int r = 0; r < n; ++r) fill(DType::I32, static_cast<char*>(rs_in.data()) + static_cast<size_t>(r * s) * 4, s, me, 50 + r);
    if (me == 2) fill(DType::F64, bc.data(), s, 2, 6);
    for (int p = 0; p < n; ++p) fill(DType::I16, static_cast<char*>(a2a_stage.data()) + static_cast<size_t>(p * s) * 2, s, me * 8 + p, 7);
    // all_to_all_v: member me sends me + q + 1 elements to member q (at most 5 each).
    std::vector<int64_t> sc(3), rc(3);
    for (int q = 0; q < n; ++q) sc[static_cast<size_t>(q)] = me + q + 1, rc[static_cast<size_t>(q)] = q + me + 1;
    fill(DType::F32, v_send.data(), 15, me, 8);
    std::vector<CollectiveRequest> reqs;
    if (nb) {
      reqs.push_back(w.start_allreduce(ar));
      reqs.push_back(w.start_allreduce(ar_src, ar_dst, ReduceOp::Sum, AllreduceMode::Ring));
      reqs.push_back(w.start_allgather(ag_stage, ag_data));
      reqs.push_back(w.start_reduce_scatter(rs, ReduceOp::Max));
      reqs.push_back(w.start_reduce_scatter(rs_in, rs_out, ReduceOp::Sum));
      reqs.push_back(w.start_broadcast(bc, 2));
      reqs.push_back(w.start_all_to_all(a2a_stage, a2a_data));
      reqs.push_back(w.start_all_to_all_v(v_send, sc, v_recv, rc));
      reqs.push_back(w.start_barrier());
      MP_CHECK(reqs[0].what() == "allreduce on world", reqs[0].what());
      for (auto it = reqs.rbegin(); it != reqs.rend(); ++it) it->wait();  // the last first: the rest are done then
      for (auto& r : reqs) MP_CHECK(r.test(), r.what() << ": test() after wait() is false");
    } else {
      w.allreduce(ar);
      w.allreduce(ar_src, ar_dst, ReduceOp::Sum, AllreduceMode::Ring);
      w.allgather(ag_stage, ag_data);
      w.reduce_scatter(rs, ReduceOp::Max);
      w.reduce_scatter(rs_in, rs_out, ReduceOp::Sum);
      w.broadcast(bc, 2);
      w.all_to_all(a2a_stage, a2a_data);
      w.all_to_all_v(v_send, sc, v_recv, rc);
      w.barrier();
    }
    const std::vector<int> all{0, 1, 2};
    auto want = reference(DType::F32, ReduceOp::Sum, inputs(DType::F32, 1001, all, 1), 1001);
    MP_CHECK(same_bytes(ar.data(), want.data(), want.size()), "allreduce: " << first_diff(ar.data(), want.data(), 1001, DType::F32));
    want = reference(DType::I32, ReduceOp::Sum, inputs(DType::I32, 3000, all, 2), 3000);
    MP_CHECK(same_bytes(ar_dst.data(), want.data(), want.size()), "allreduce src -> dst");
    for (int r = 0; r < n; ++r) {
      std::vector<char> row(static_cast<size_t>(s) * 8);
      fill(DType::F64, row.data(), s, r, 3);
      MP_CHECK(same_bytes(static_cast<char*>(ag_data.data()) + static_cast<size_t>(r) * row.size(), row.data(), row.size()),
               "allgather row " << r);
    }
    std::vector<std::vector<char>> in;
    for (int r = 0; r < n; ++r) in.emplace_back(static_cast<size_t>(s) * 2), fill(DType::F16, in.back().data(), s, r, 40 + me);
    want = reference(DType::F16, ReduceOp::Max, in, s);
    MP_CHECK(same_bytes(static_cast<char*>(rs.data()) + static_cast<size_t>(me * s) * 2, want.data(), want.size()),
             "reduce_scatter in place");
    in.clear();
    for (int r = 0; r < n; ++r) in.emplace_back(static_cast<size_t>(s) * 4), fill(DType::I32, in.back().data(), s, r, 50 + me);
    want = reference(DType::I32, ReduceOp::Sum, in, s);
    MP_CHECK(same_bytes(rs_out.data(), want.data(), want.size()), "reduce_scatter to out");
    std::vector<char> row(static_cast<size_t>(s) * 8);
    fill(DType::F64, row.data(), s, 2, 6);
    MP_CHECK(same_bytes(bc.data(), row.data(), row.size()), "broadcast from 2");
    for (int q = 0; q < n; ++q) {
      std::vector<char> r2(static_cast<size_t>(s) * 2);
      fill(DType::I16, r2.data(), s, q * 8 + me, 7);
      MP_CHECK(same_bytes(static_cast<char*>(a2a_data.data()) + static_cast<size_t>(q) * r2.size(), r2.data(), r2.size()),
               "all_to_all row " << q);
    }
    int64_t at = 0;
    for (int q = 0; q < n; ++q) {  // member q's block for me: its elements from its packed offset sum_{p<me}(q+p+1)
      std::vector<float> src(15);
      fill(DType::F32, src.data(), 15, q, 8);
      int64_t off = 0;
      for (int p = 0; p < me; ++p) off += q + p + 1;
      for (int64_t i = 0; i < q + me + 1; ++i, ++at) {
        MP_CHECK(v_recv.data_as<float>()[at] == src[static_cast<size_t>(off + i)], "all_to_all_v from " << q << " element " << i);
      }
    }
  });
}

// A started collective moves while its caller makes no rwin call at all: members 1 and 2 finish
// their blocking allreduce while member 0's thread sits in poll(2) on a pipe, and only then does
// member 0 wait. Before the others joined, test() is false and the context is the worker's: every
// call on it from member 0's thread is refused, naming the collective, and changes nothing.
TEST_P(Collectives, NonblockingProgressesWhileTheCallerIsAway) {
  const Pipe joined, finished;
  run(3, [&](Context& ctx) {
    Team w = world(ctx);
    const int me = w.rank();
    Window x = ctx.alloc_window("nb_x", DType::F32, {1, 5000});
    Window y = ctx.alloc_window("nb_y", DType::F32, {1, 8});
    SignalArray sig = ctx.alloc_signals("nb_sig", 1);
    fill(DType::F32, x.data(), 5000, me, 9);
    w.barrier();
    if (me == 0) {
      CollectiveRequest req = w.start_allreduce(x);
      MP_CHECK(!req.test(), "the allreduce finished before members 1 and 2 started it");
      const std::initializer_list<std::string> lent{"rank 0", "lent to a nonblocking collective (allreduce on world"};
      expect_error([&] { ctx.put(y.all(), 1, y.all()); }, ErrorCode::InvalidArgument, {"put", *lent.begin(), *(lent.begin() + 1)});
      expect_error([&] { ctx.get(y.all(), 1, y.all()); }, ErrorCode::InvalidArgument, lent);
      expect_error([&] { ctx.notify(sig.at(0), 1, 1); }, ErrorCode::InvalidArgument, lent);
      expect_error([&] { (void)ctx.test(sig.at(0), 1); }, ErrorCode::InvalidArgument, {"test", *(lent.begin() + 1)});
      expect_error([&] { ctx.quiet(); }, ErrorCode::InvalidArgument, lent);
      expect_error([&] { ctx.barrier(); }, ErrorCode::InvalidArgument, lent);
      expect_error([&] { w.allreduce(y); }, ErrorCode::InvalidArgument, lent);
      expect_error([&] { (void)ctx.alloc_window("late", DType::F32, {1, 8}); }, ErrorCode::InvalidArgument, lent);
      expect_error([&] { (void)ctx.stats(); }, ErrorCode::InvalidArgument, lent);
      expect_error([&] { ctx.free(y); }, ErrorCode::InvalidArgument, lent);
      expect_error([&] { (void)ctx.rma_mode(1); }, ErrorCode::InvalidArgument, lent);
      MP_CHECK(ctx.rank() == 0 && ctx.size() == 3 && w.size() == 3, "rank/size are allowed while lent");
      (void)ctx.window(x.buffer(), DType::F32, {1, 8});  // a view: local, allowed
      joined.put_byte();
      joined.put_byte();
      MP_CHECK(finished.await_byte(), "member 1 did not finish its allreduce within 60 s");
      req.wait();
      MP_CHECK(req.test(), "test() after wait()");
    } else {
      MP_CHECK(joined.await_byte(), "member 0 did not start within 60 s");
      w.allreduce(x);
      if (me == 1) finished.put_byte();
    }
    const auto want = reference(DType::F32, ReduceOp::Sum, inputs(DType::F32, 5000, {0, 1, 2}, 9), 5000);
    MP_CHECK(same_bytes(x.data(), want.data(), want.size()), "allreduce: " << first_diff(x.data(), want.data(), 5000, DType::F32));
    ctx.barrier();  // the context is the caller's again
    ctx.free(y);
  });
}

// Errors of a started collective come back from wait() and test() (every time); a request dropped
// before it finished waits for it (the context is usable right after); a started collective still
// running when its Context goes is finished first (the other members' results need it).
TEST_P(Collectives, NonblockingErrorsAndUnwaitedRequests) {
  Options o;
  o.op_timeout = std::chrono::milliseconds(3000);
  static CollectiveRequest kept;  // outlives member 0's Context (the process ends with _exit)
  run(3, [](Context& ctx) {
    const int r = ctx.rank();
    {
      Team t = make_team(ctx, {0, 1, 2});
      Window x = ctx.window(t.alloc_window_buffer("nb_mm", 4096), DType::F32, {1, 64});
      Window x65 = ctx.window(x.buffer(), DType::F32, {1, 65});
      expect_error([&] { (void)t.start_allreduce(Window{}); }, ErrorCode::InvalidArgument, {"allreduce", "empty Window"});
      if (r == 1) {
        expect_error([&] { t.allreduce(x65); }, ErrorCode::CollectiveMismatch, {"allreduce"});
      } else {
        CollectiveRequest req = t.start_allreduce(x);
        expect_error([&] { req.wait(); }, ErrorCode::CollectiveMismatch, {"allreduce"});
        expect_error([&] { (void)req.test(); }, ErrorCode::CollectiveMismatch, {"allreduce"});
        expect_error([&] { req.wait(); }, ErrorCode::CollectiveMismatch, {"allreduce"});
      }
    }
    Team w = world(ctx);
    Window z = ctx.alloc_window("nb_z", DType::I64, {1, 100});
    for (int64_t i = 0; i < 100; ++i) z.data_as<int64_t>()[i] = (r + 1) * 1000 + i;
    if (r == 0) {
      { CollectiveRequest dropped = w.start_allreduce(z); }  // its destructor waits
      for (int64_t i = 0; i < 100; ++i) MP_CHECK(z.data_as<int64_t>()[i] == 6000 + 3 * i, "dropped allreduce element " << i);
    } else {
      w.allreduce(z);
    }
    ctx.barrier();  // member 0: refused if the dropped request had left the context lent
    for (int64_t i = 0; i < 100; ++i) z.data_as<int64_t>()[i] = r + 1;
    if (r == 0) {
      kept = w.start_allreduce(z);  // never waited: ~Context finishes it
    } else {
      w.allreduce(z);
      for (int64_t i = 0; i < 100; ++i) MP_CHECK(z.data_as<int64_t>()[i] == 6, "allreduce with an unwaited member: element " << i);
    }
  }, o);
}

// A member that dies while a collective it never joined is started elsewhere: the survivors' wait()
// throws PeerFailed naming it (not a timeout), and the context is theirs again afterwards.
TEST_P(Collectives, NonblockingPeerDeathEndsTheStartedCollective) {
  Options o;
  o.op_timeout = std::chrono::milliseconds(20000);
  const Pipe passed;  // the survivors are past the barrier (else they may learn of the death inside it)
  run(3, [&passed](Context& ctx) {
    Team w = world(ctx);
    Window x = ctx.alloc_window("nb_dead", DType::F64, {1, 4096});
    Window y = ctx.alloc_window("nb_after", DType::I32, {1, 4});
    w.barrier();
    if (ctx.rank() == 2) {
      MP_CHECK(passed.await_byte() && passed.await_byte(), "the survivors never passed the barrier");
      ::_exit(0);  // dies without a word
    }
    passed.put_byte();
    CollectiveRequest req = w.start_allreduce(x);
    const auto t0 = std::chrono::steady_clock::now();
    expect_error([&] { req.wait(); }, ErrorCode::PeerFailed, {"allreduce", "2"});
    MP_CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(15000), "the failure took the whole deadline");
    expect_error([&] { (void)req.test(); }, ErrorCode::PeerFailed, {"allreduce"});
    // The context is the caller's again (the other survivor is fine). From a local source: y is the
    // other survivor's target meanwhile.
    std::vector<int32_t> four(4, ctx.rank());
    ctx.put(y.all(), 1 - ctx.rank(), rwin::local(four.data(), {1, 4}));
    ctx.fence(1 - ctx.rank());
  }, o);
}

// A member that dies in the middle of a collective (its worker has started an allgather by pull in
// shared memory, or the message path elsewhere, when its process exits): whatever step it reached
// (before its offers, after them while the others read its stage, before its flags), the survivors'
// call ends in PeerFailed naming it, never in a hang, a timeout or torn rows. (Where its worker did
// its whole part first, the survivors' call may end well, every row exact; their next call fails.)
TEST_P(Collectives, MemberDyingMidCollectiveEndsItForTheSurvivors) {
  if (GetParam().name == "ucx_tcp_native") {
    // UCX 1.13's tcp transport aborts a survivor (tcp_ep.c: PUT_TX_WAITING_ACK assertion) when a peer
    // dies with a ucp_put to it in flight; the default (RWIN_UCX_RMA=auto) runs tcp peers in am mode
    // for this reason (docs/CONFIG.md). Seen 5 times in 10 runs of this test.
    GTEST_SKIP() << "UCX 1.13 tcp + RWIN_UCX_RMA=native: a peer dying mid-put aborts the survivor inside UCX";
  }
  Options o;
  o.op_timeout = std::chrono::milliseconds(20000);
  for (int trial = 0; trial < 3; ++trial) {
    const Pipe passed;  // the survivors are past the barrier (else they may learn of the death inside it)
    run(3, [trial, &passed](Context& ctx) {
      Team w = world(ctx);
      const int64_t s = 64 * 1024;  // f32 rows of 256 KiB: the pull path in shared memory
      Window stage = ctx.alloc_window("die_stage", DType::F32, {1, s});
      Window data = ctx.alloc_window("die_data", DType::F32, {3, s});
      w.barrier();
      if (ctx.rank() != 2) passed.put_byte();
      if (ctx.rank() == 2) {
        MP_CHECK(passed.await_byte() && passed.await_byte(), "the survivors never passed the barrier");
        fill(DType::F32, stage.data(), s, 2, 7);
        CollectiveRequest r = w.start_allgather(stage, data);
        if (trial > 0) std::this_thread::sleep_for(std::chrono::microseconds(200 * trial));
        ::_exit(0);  // mid-call (its worker may be anywhere in it), without a word
      }
      fill(DType::F32, stage.data(), s, ctx.rank(), 7);
      const auto t0 = std::chrono::steady_clock::now();
      // Member 2's worker may have done its whole part before it died (sent its row, read or acked
      // ours: with the sleep, or a slow build such as TSan's): then this call may end well, and must
      // hold every row exactly, rank 2's included; the next call cannot (member 2 never makes it).
      bool ended = false;
      try {
        w.allgather(stage, data);
      } catch (const Error& e) {
        const std::string what = e.what();
        MP_CHECK(e.code() == ErrorCode::PeerFailed, "wrong code " << rwin::to_string(e.code()) << ": " << what);
        MP_CHECK(what.find("allgather") != std::string::npos && what.find("peer 2 failed") != std::string::npos,
                 "message lacks the call or the peer: " << what);
        ended = true;
      }
      if (!ended) {
        std::vector<char> want(static_cast<size_t>(s) * 4);
        for (int q = 0; q < 3; ++q) {
          fill(DType::F32, want.data(), s, q, 7);
          MP_CHECK(same_bytes(static_cast<const char*>(data.data()) + static_cast<size_t>(q) * want.size(), want.data(), want.size()),
                   "an allgather that ended well has a torn row " << q);
        }
        expect_error([&] { w.barrier(); }, ErrorCode::PeerFailed, {"barrier", "peer 2 failed"});
      }
      MP_CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(15000), "the failure took the whole deadline");
    }, o);
  }
}

}  // namespace

INSTANTIATE_TEST_SUITE_P(Transports, Collectives, ::testing::ValuesIn(rwin_test::transports()),
                         [](const ::testing::TestParamInfo<TransportParam>& pinfo) { return pinfo.param.name; });
