// The collectives' reduce step (core/src/collectives/reduce_math.cpp): fold order, wrap-around,
// f16/bf16 rounded once per element, fmax/fmin, aliasing output, lengths across its block size.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "collectives/reduce_math.h"

using namespace rwin;
using rwin::detail::reduce_arrays;

namespace {

template <class T>
std::vector<T> reduce3(DType t, ReduceOp op, const std::vector<T>& a, const std::vector<T>& b, const std::vector<T>& c) {
  std::vector<T> out(a.size());
  const void* in[3] = {a.data(), b.data(), c.data()};
  reduce_arrays(t, op, out.data(), in, 3, a.size());
  return out;
}

TEST(ReduceMath, HalfPrecisionRoundsOncePerElement) {
  // 1 + 2^-11 + 2^-11: rounding after each step gives 1 (each 1 + 2^-11 is a tie, to even);
  // the f32 sum rounded once is 1 + 2^-10, which f16 holds exactly.
  const std::vector<f16> a{to_f16(1.0f)}, b{to_f16(std::ldexp(1.0f, -11))};
  EXPECT_EQ(to_float(reduce3(DType::F16, ReduceOp::Sum, a, b, b)[0]), 1.0f + std::ldexp(1.0f, -10));
  const std::vector<bf16> x{to_bf16(1.0f)}, y{to_bf16(std::ldexp(1.0f, -8))};
  EXPECT_EQ(to_float(reduce3(DType::BF16, ReduceOp::Sum, x, y, y)[0]), 1.0f + std::ldexp(1.0f, -7));
}

TEST(ReduceMath, IntegersWrapAndCompareSigned) {
  const std::vector<int8_t> a{127, -128, 5}, b{1, -1, -7}, c{0, 0, 2};
  EXPECT_EQ(reduce3(DType::I8, ReduceOp::Sum, a, b, c), (std::vector<int8_t>{-128, 127, 0}));
  EXPECT_EQ(reduce3(DType::I8, ReduceOp::Max, a, b, c), (std::vector<int8_t>{127, 0, 5}));
  EXPECT_EQ(reduce3(DType::I8, ReduceOp::Min, a, b, c), (std::vector<int8_t>{0, -128, -7}));
  const std::vector<int64_t> p{INT64_MAX}, q{2}, r{1};
  EXPECT_EQ(reduce3(DType::I64, ReduceOp::Prod, p, q, r)[0], -2);  // wraps, no UB
  const std::vector<uint16_t> u{65535}, v{1}, w{1};
  EXPECT_EQ(reduce3(DType::U16, ReduceOp::Sum, u, v, w)[0], 1);
  EXPECT_EQ(reduce3(DType::U16, ReduceOp::Max, u, v, w)[0], 65535);
}

TEST(ReduceMath, FloatMaxMinIgnoreNaNAndFoldInOrder) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> a{nan, 1.0f}, b{2.0f, nan}, c{-1.0f, 3.0f};
  EXPECT_EQ(reduce3(DType::F32, ReduceOp::Max, a, b, c), (std::vector<float>{2.0f, 3.0f}));
  EXPECT_EQ(reduce3(DType::F32, ReduceOp::Min, a, b, c), (std::vector<float>{-1.0f, 1.0f}));
  // (1e20 + -1e20) + 1 = 1 in this order; another order would give 0.
  const std::vector<float> x{1e20f}, y{-1e20f}, z{1.0f};
  EXPECT_EQ(reduce3(DType::F32, ReduceOp::Sum, x, y, z)[0], 1.0f);
}

TEST(ReduceMath, OutputMayAliasAnInputAcrossBlocks) {
  for (size_t n : {size_t{1}, size_t{511}, size_t{512}, size_t{513}, size_t{2000}}) {
    std::vector<double> a(n), b(n);
    for (size_t i = 0; i < n; ++i) {
      a[i] = static_cast<double>(i);
      b[i] = 0.5 * static_cast<double>(i);
    }
    const void* in[2] = {a.data(), b.data()};
    reduce_arrays(DType::F64, ReduceOp::Sum, a.data(), in, 2, n);
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(a[i], 1.5 * static_cast<double>(i)) << "n " << n << " i " << i;
  }
}

}  // namespace
