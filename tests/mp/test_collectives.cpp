// Collectives (docs/CONTRACT.md "Collectives"): every collective against a locally computed
// reference, every dtype and op, in place and not, teams, back-to-back reuse, and mismatches that
// end in an error on every member instead of a hang; over every transport.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <vector>

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

// One allreduce of `n` elements on `team`, checked against the reference; in place or not.
void check_allreduce(Context& ctx, Team& team, DType t, ReduceOp op, AllreduceMode mode, int64_t n, bool in_place,
                     int it, const std::string& tag) {
  const int me = team.ranks()[static_cast<size_t>(team.rank())];
  Window src = ctx.window(team.alloc_window_buffer("ar_src_" + tag, static_cast<size_t>(n) * dtype_size(t)), t, {1, n});
  Window dst = in_place ? src : ctx.window(team.alloc_window_buffer("ar_dst_" + tag, static_cast<size_t>(n) * dtype_size(t)), t, {1, n});
  fill(t, src.data(), n, me, it);
  if (in_place) {
    team.allreduce(src, op, mode);
  } else {
    team.allreduce(src, dst, op, mode);
    std::vector<char> mine(static_cast<size_t>(n) * dtype_size(t));
    fill(t, mine.data(), n, me, it);
    MP_CHECK(same_bytes(src.data(), mine.data(), mine.size()), "allreduce changed its src (" << tag << ")");
  }
  const auto want = reference(t, op, inputs(t, n, team.ranks(), it), n);
  if (!same_bytes(dst.data(), want.data(), want.size())) {
    int64_t bad = 0;
    const size_t esz = dtype_size(t);
    while (bad < n && std::memcmp(static_cast<char*>(dst.data()) + bad * static_cast<int64_t>(esz),
                                  want.data() + bad * static_cast<int64_t>(esz), esz) == 0) {
      ++bad;
    }
    MP_CHECK(false, "allreduce " << tag << " " << dtype_name(t) << " " << reduce_op_name(op) << " n=" << n
                                 << ": first wrong element " << bad);
  }
  WindowBuffer b = src.buffer();
  ctx.free(b);
  if (!in_place) {
    WindowBuffer d = dst.buffer();
    ctx.free(d);
  }
}

// Sizes 1, odd, above the chunk size; Mesh, Ring and Auto; in place and not; 1-4 members.
TEST_P(Collectives, AllreduceModesSizesInPlace) {
  for (int nr : {3, 4}) {
    run(nr, [](Context& ctx) {
      ::setenv("RWIN_COLL_CHUNK_BYTES", kSmallChunk, 1);
      Team w = world(ctx);
      int k = 0;
      for (AllreduceMode mode : {AllreduceMode::Mesh, AllreduceMode::Ring, AllreduceMode::Auto}) {
        for (int64_t n : {int64_t{1}, int64_t{2}, int64_t{1001}, int64_t{5000}}) {
          for (bool in_place : {false, true}) {
            check_allreduce(ctx, w, DType::F32, ReduceOp::Sum, mode, n, in_place, k, std::to_string(k));
            ++k;
          }
        }
      }
    });
  }
}

}  // namespace

INSTANTIATE_TEST_SUITE_P(Transports, Collectives, ::testing::ValuesIn(rwin_test::transports()),
                         [](const ::testing::TestParamInfo<TransportParam>& pinfo) { return pinfo.param.name; });
