// Element types (issue 10): names and codes, f16/bf16 <-> f32 conversions checked against an
// independent reference (exact decoding with ldexp in double, rounding by searching the sorted
// table of values), the word-lane apply behind put(Add), and integer wrap-around.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "dtype_math.h"
#include "window_blob.h"

namespace {

using rwin::DType;
using rwin::detail::add_into;

// ---------------------------------------------------------------------------------------------
// The reference: a binary floating-point format with `exp_bits` exponent and `frac_bits`
// fraction bits in 16 bits (f16: 5/10, bf16: 8/7), decoded exactly into a double.

struct Fmt {
  int exp_bits, frac_bits;
  int bias() const { return (1 << (exp_bits - 1)) - 1; }
  uint16_t inf() const { return static_cast<uint16_t>(((1u << exp_bits) - 1) << frac_bits); }
  uint16_t max_finite() const { return static_cast<uint16_t>(inf() - 1); }
  bool is_nan(uint16_t h) const { return (h & 0x7fff) > inf(); }
  // |value| of a non-negative code <= inf() (inf() decodes to the first power of two past the max,
  // which is where IEEE rounding puts the overflow boundary).
  double magnitude(uint16_t h) const {
    const int e = (h >> frac_bits) & ((1 << exp_bits) - 1);
    const int m = h & ((1 << frac_bits) - 1);
    if (e == 0) return std::ldexp(static_cast<double>(m), 1 - bias() - frac_bits);
    return std::ldexp(static_cast<double>((1 << frac_bits) + m), e - bias() - frac_bits);
  }
  double value(uint16_t h) const {  // finite or inf, with its sign
    const double v = (h & 0x7fff) == inf() ? std::numeric_limits<double>::infinity() : magnitude(h & 0x7fff);
    return (h & 0x8000) ? -v : v;
  }
  // Round a non-NaN float to nearest, ties to even: find the largest code whose magnitude is
  // <= |x|, compare |x| with the midpoint to the next code (exact in double).
  uint16_t round(float x) const {
    const uint16_t sign = std::signbit(x) ? 0x8000 : 0;
    const double a = std::fabs(static_cast<double>(x));
    if (std::isinf(a)) return sign | inf();
    uint32_t lo = 0, hi = max_finite();  // invariant: magnitude(lo) <= a
    while (lo < hi) {
      const uint32_t mid = (lo + hi + 1) / 2;
      if (magnitude(static_cast<uint16_t>(mid)) <= a) lo = mid;
      else hi = mid - 1;
    }
    const double vlo = magnitude(static_cast<uint16_t>(lo));
    if (vlo == a) return static_cast<uint16_t>(sign | lo);
    const uint32_t up = lo + 1;  // max_finite + 1 is inf
    const double mid = (vlo + magnitude(static_cast<uint16_t>(up))) / 2;
    uint32_t r;
    if (a < mid) r = lo;
    else if (a > mid) r = up;
    else r = (lo % 2 == 0) ? lo : up;
    return static_cast<uint16_t>(sign | r);
  }
};
constexpr Fmt kF16{5, 10}, kBF16{8, 7};

uint32_t bits(float x) { return std::bit_cast<uint32_t>(x); }

template <class H>
uint16_t to_bits(float x);
template <>
uint16_t to_bits<rwin::f16>(float x) { return rwin::to_f16(x).bits; }
template <>
uint16_t to_bits<rwin::bf16>(float x) { return rwin::to_bf16(x).bits; }

// Every one of the 65536 patterns widens exactly (NaN: a NaN with the same sign and payload).
template <class H>
void check_widening(const Fmt& f) {
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    const float got = rwin::to_float(H{static_cast<uint16_t>(h)});
    const uint16_t b = static_cast<uint16_t>(h);
    if (f.is_nan(b)) {
      ASSERT_TRUE(std::isnan(got)) << std::hex << h;
      ASSERT_EQ(std::signbit(got), (h & 0x8000) != 0) << std::hex << h;
      const uint32_t payload = bits(got) & 0x7fffff, frac = h & ((1u << f.frac_bits) - 1);
      ASSERT_EQ(payload >> (23 - f.frac_bits), frac) << std::hex << h;
      ASSERT_EQ(payload & ((1u << (23 - f.frac_bits)) - 1), 0u) << std::hex << h;
    } else {
      const float want = static_cast<float>(f.value(b));  // exact: fewer bits than a float
      ASSERT_EQ(bits(got), bits(want)) << std::hex << h << ": " << got << " vs " << want;
    }
  }
}

void expect_round(const Fmt& f, uint16_t got, float x) {
  const uint16_t want = f.round(x);
  ASSERT_EQ(got, want) << std::hexfloat << x << std::hex << " (bits " << bits(x) << "): got 0x" << got
                       << ", reference 0x" << want;
}

// Narrowing: every value narrows to itself; every midpoint between neighbours (ties: to even) and
// the floats just either side of it; beyond the largest value (overflow at max + half an ulp);
// NaNs stay NaN; a million random floats of every exponent.
template <class H>
void check_narrowing(const Fmt& f) {
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    const uint16_t b = static_cast<uint16_t>(h);
    if (f.is_nan(b)) continue;
    const float x = static_cast<float>(f.value(b));
    ASSERT_EQ(to_bits<H>(x), b) << std::hex << h;
  }
  int ties = 0;
  for (uint32_t h = 0; h <= f.max_finite(); ++h) {
    const double mid = (f.magnitude(static_cast<uint16_t>(h)) + f.magnitude(static_cast<uint16_t>(h + 1))) / 2;
    const float m = static_cast<float>(mid);
    ASSERT_EQ(static_cast<double>(m), mid) << "a midpoint is exact in float";
    for (float s : {1.0f, -1.0f}) {
      const float x = s * m;
      expect_round(f, to_bits<H>(x), x);
      const uint16_t even = static_cast<uint16_t>((h % 2 == 0 ? h : h + 1) | (s < 0 ? 0x8000 : 0));
      ASSERT_EQ(to_bits<H>(x), even) << "tie at " << std::hexfloat << x << " goes to the even neighbour";
      ++ties;
      for (float toward : {0.0f, std::numeric_limits<float>::infinity()}) {
        const float y = std::nextafter(x, s * toward);
        expect_round(f, to_bits<H>(y), y);
      }
    }
  }
  EXPECT_EQ(ties, 2 * (f.max_finite() + 1));
  const float inf = std::numeric_limits<float>::infinity();
  for (float x : {inf, -inf, std::numeric_limits<float>::max(), -std::numeric_limits<float>::max(),
                  std::numeric_limits<float>::denorm_min(), -std::numeric_limits<float>::denorm_min(),
                  std::numeric_limits<float>::min(), 0.0f, -0.0f}) {
    expect_round(f, to_bits<H>(x), x);
  }
  // NaN (quiet and signalling, any payload, either sign) stays NaN with its sign.
  for (uint32_t nan : {0x7fc00000u, 0x7f800001u, 0x7fbfffffu, 0x7fffffffu, 0xffc00000u, 0xff800001u, 0x7f802000u}) {
    const uint16_t got = to_bits<H>(std::bit_cast<float>(nan));
    ASSERT_TRUE(f.is_nan(got)) << std::hex << nan << " -> " << got;
    ASSERT_EQ((got & 0x8000) != 0, (nan & 0x80000000u) != 0) << std::hex << nan;
  }
  std::mt19937 rng(12345);
  for (int i = 0; i < 1000000; ++i) {
    const float x = std::bit_cast<float>(static_cast<uint32_t>(rng()));
    if (std::isnan(x)) {
      ASSERT_TRUE(f.is_nan(to_bits<H>(x))) << std::hex << bits(x);
    } else {
      expect_round(f, to_bits<H>(x), x);
    }
  }
}

TEST(F16, WideningIsExactForAll65536Patterns) { check_widening<rwin::f16>(kF16); }
TEST(BF16, WideningIsExactForAll65536Patterns) { check_widening<rwin::bf16>(kBF16); }
TEST(F16, NarrowingRoundsToNearestEven) { check_narrowing<rwin::f16>(kF16); }
TEST(BF16, NarrowingRoundsToNearestEven) { check_narrowing<rwin::bf16>(kBF16); }

TEST(F16, KnownValues) {
  EXPECT_EQ(rwin::to_f16(1.0f).bits, 0x3c00);
  EXPECT_EQ(rwin::to_f16(-2.0f).bits, 0xc000);
  EXPECT_EQ(rwin::to_f16(65504.0f).bits, 0x7bff);
  EXPECT_EQ(rwin::to_f16(65519.99f).bits, 0x7bff);
  EXPECT_EQ(rwin::to_f16(65520.0f).bits, 0x7c00);  // max + half an ulp: a tie, to even = inf
  EXPECT_EQ(rwin::to_f16(1e10f).bits, 0x7c00);
  EXPECT_EQ(rwin::to_f16(0x1p-24f).bits, 0x0001);  // smallest subnormal
  EXPECT_EQ(rwin::to_f16(0x1p-25f).bits, 0x0000);  // half of it: tie, to even = 0
  EXPECT_EQ(rwin::to_f16(0x1.000002p-25f).bits, 0x0001);
  EXPECT_EQ(rwin::to_f16(-0x1p-26f).bits, 0x8000);
  EXPECT_EQ(rwin::to_f16(0x1.ff8p-15f).bits, 0x03ff);  // the largest subnormal
  EXPECT_EQ(rwin::to_f16(0x1.ffcp-15f).bits, 0x0400);  // a tie above it: to even, the smallest normal
  EXPECT_EQ(rwin::to_float(rwin::f16{0x3555}), 0x1.554p-2f);
}

TEST(BF16, KnownValues) {
  EXPECT_EQ(rwin::to_bf16(1.0f).bits, 0x3f80);
  EXPECT_EQ(rwin::to_bf16(-3.0f).bits, 0xc040);
  EXPECT_EQ(rwin::to_bf16(std::numeric_limits<float>::max()).bits, 0x7f80);  // rounds past the max
  EXPECT_EQ(rwin::to_bf16(257.0f).bits, rwin::to_bf16(256.0f).bits);         // tie, to even
  EXPECT_EQ(rwin::to_float(rwin::to_bf16(259.0f)), 260.0f);                  // tie, to even (up)
  EXPECT_EQ(rwin::to_bf16(std::numeric_limits<float>::denorm_min()).bits, 0x0000);
  EXPECT_EQ(rwin::to_float(rwin::bf16{0x0001}), 0x1p-133f);
}

// ---------------------------------------------------------------------------------------------
// Names, sizes, codes

TEST(DType, NamesSizesAndCodes) {
  struct Row {
    DType t;
    const char* name;
    size_t size;
    int code;
  };
  const Row rows[] = {{DType::I32, "i32", 4, 0}, {DType::I64, "i64", 8, 1},  {DType::U32, "u32", 4, 2},
                      {DType::U64, "u64", 8, 3}, {DType::F32, "f32", 4, 4},  {DType::F64, "f64", 8, 5},
                      {DType::F16, "f16", 2, 6}, {DType::BF16, "bf16", 2, 7}, {DType::I8, "i8", 1, 8},
                      {DType::I16, "i16", 2, 9}, {DType::U8, "u8", 1, 10},   {DType::U16, "u16", 2, 11}};
  ASSERT_EQ(std::size(rows), rwin::all_dtypes.size());
  for (size_t i = 0; i < std::size(rows); ++i) {
    const Row& r = rows[i];
    EXPECT_EQ(rwin::all_dtypes[i], r.t);
    EXPECT_EQ(static_cast<int>(r.t), r.code) << r.name << ": the code is on the wire and must not move";
    EXPECT_STREQ(rwin::dtype_name(r.t), r.name);
    EXPECT_EQ(rwin::dtype_size(r.t), r.size);
    EXPECT_EQ(rwin::parse_dtype(r.name), r.t);
  }
  EXPECT_EQ(rwin::dtype_size(static_cast<DType>(12)), 0u);
  static_assert(rwin::dtype_of<rwin::f16>() == DType::F16 && rwin::dtype_of<rwin::bf16>() == DType::BF16);
  static_assert(rwin::dtype_of<int8_t>() == DType::I8 && rwin::dtype_of<int16_t>() == DType::I16);
  static_assert(rwin::dtype_of<uint8_t>() == DType::U8 && rwin::dtype_of<uint16_t>() == DType::U16);
  static_assert(sizeof(rwin::f16) == 2 && sizeof(rwin::bf16) == 2);
  try {
    rwin::parse_dtype("f8");
    FAIL() << "f8 parsed";
  } catch (const rwin::Error& e) {
    EXPECT_EQ(e.code(), rwin::ErrorCode::InvalidArgument);
    for (DType t : rwin::all_dtypes) {
      EXPECT_NE(std::string(e.what()).find(std::string(" ") + rwin::dtype_name(t) + (t == DType::U16 ? ")" : ",")),
                std::string::npos)
          << e.what() << " does not list " << rwin::dtype_name(t);
    }
  }
}

TEST(WindowBlob, AcceptsExactlyTheDtypeCodes) {
  for (int code = 0; code < 256; ++code) {
    auto b = rwin::detail::window_blob("w", DType::I32, {2, 3}, rwin::detail::BlobKind::Window, {});
    b[8] = static_cast<uint8_t>(code);  // magic(4) version(4) dtype(1)
    const auto d = rwin::detail::parse_window_blob(b);
    ASSERT_EQ(d.has_value(), code < 12) << code;
    if (d) {
      EXPECT_EQ(static_cast<int>(d->dtype), code);
    }
  }
  for (DType t : rwin::all_dtypes) {
    const auto d = rwin::detail::parse_window_blob(rwin::detail::window_blob("w", t, {3, 5}, rwin::detail::BlobKind::Window, {}));
    ASSERT_TRUE(d.has_value()) << rwin::dtype_name(t);
    EXPECT_EQ(d->dtype, t);
  }
}

// ---------------------------------------------------------------------------------------------
// add_into and the word-lane apply

// The expected sum of two elements of `t` (raw bytes), computed independently of dtype_math: by
// the unsigned type's wrap for integers, in the type for f32/f64, through the reference for f16/bf16.
void ref_add(DType t, unsigned char* dst, const unsigned char* a) {
  auto wrap = [&](auto zero) {
    using U = decltype(zero);
    U x, y;
    std::memcpy(&x, dst, sizeof x);
    std::memcpy(&y, a, sizeof y);
    x = static_cast<U>(x + y);
    std::memcpy(dst, &x, sizeof x);
  };
  auto half = [&](const Fmt& f) {
    uint16_t x, y;
    std::memcpy(&x, dst, 2);
    std::memcpy(&y, a, 2);
    const uint16_t r = f.round(static_cast<float>(f.value(x) + f.value(y)));  // exact in double, once rounded
    std::memcpy(dst, &r, 2);
  };
  switch (t) {
    case DType::I8: case DType::U8: return wrap(uint8_t{});
    case DType::I16: case DType::U16: return wrap(uint16_t{});
    case DType::I32: case DType::U32: return wrap(uint32_t{});
    case DType::I64: case DType::U64: return wrap(uint64_t{});
    case DType::F32: {
      float x, y;
      std::memcpy(&x, dst, 4);
      std::memcpy(&y, a, 4);
      x += y;
      std::memcpy(dst, &x, 4);
      return;
    }
    case DType::F64: {
      double x, y;
      std::memcpy(&x, dst, 8);
      std::memcpy(&y, a, 8);
      x += y;
      std::memcpy(dst, &x, 8);
      return;
    }
    case DType::F16: return half(kF16);
    case DType::BF16: return half(kBF16);
  }
}

// Random element bytes that are finite numbers for the float types (NaN != NaN would make the
// byte comparison of a NaN sum meaningless; a NaN passes through all the same).
void random_elements(DType t, unsigned char* p, size_t n, std::mt19937& rng) {
  const size_t sz = rwin::dtype_size(t);
  for (size_t i = 0; i < n; ++i) {
    unsigned char* e = p + i * sz;
    for (size_t b = 0; b < sz; ++b) e[b] = static_cast<unsigned char>(rng());
    if (t == DType::F32 || t == DType::F64 || t == DType::F16 || t == DType::BF16) {
      e[sz - 1] &= 0xbf;  // clear the exponent's top bit (little-endian: the last byte): finite
      if (t == DType::BF16 || t == DType::F32) e[sz - 1] |= 0x20;  // and not tiny
    }
  }
}

// A carry out of one element never reaches its neighbour: adding 1 to every other all-ones element
// wraps those to 0 and leaves the ones between as they were.
TEST(DtypeMath, CarriesStayInTheirElement) {
  for (DType t : {DType::U8, DType::U16, DType::U32, DType::U64, DType::I8, DType::I16, DType::I32, DType::I64}) {
    const size_t sz = rwin::dtype_size(t);
    std::vector<unsigned char> dst(64 * sz, 0xff), add(64 * sz, 0);
    for (size_t i = 0; i < 64; i += 2) add[i * sz] = 1;  // little-endian 1 in the even elements
    add_into(t, dst.data(), add.data(), 64);
    for (size_t i = 0; i < 64; ++i) {
      for (size_t b = 0; b < sz; ++b) {
        ASSERT_EQ(dst[i * sz + b], i % 2 ? 0xff : 0x00) << rwin::dtype_name(t) << " element " << i << " byte " << b;
      }
    }
  }
}

template <class T>
void expect_wrap(T a, T b, T want) {
  T x = a;
  add_into(rwin::dtype_of<T>(), &x, &b, 1);
  EXPECT_EQ(x, want) << rwin::dtype_name(rwin::dtype_of<T>()) << ": " << +a << " + " << +b;
}

TEST(DtypeMath, IntegersWrapAround) {
  expect_wrap<int8_t>(127, 1, -128);
  expect_wrap<int8_t>(-128, -1, 127);
  expect_wrap<int8_t>(100, 100, -56);
  expect_wrap<uint8_t>(255, 1, 0);
  expect_wrap<uint8_t>(200, 100, 44);
  expect_wrap<int16_t>(32767, 1, -32768);
  expect_wrap<int16_t>(-32768, -32768, 0);
  expect_wrap<uint16_t>(65535, 2, 1);
  expect_wrap<int32_t>(std::numeric_limits<int32_t>::max(), 1, std::numeric_limits<int32_t>::min());
  expect_wrap<uint32_t>(0xffffffffu, 0xffffffffu, 0xfffffffeu);
  expect_wrap<int64_t>(std::numeric_limits<int64_t>::max(), 1, std::numeric_limits<int64_t>::min());
  expect_wrap<uint64_t>(~uint64_t{0}, 1, 0);
}

TEST(DtypeMath, AddIntoManyUnalignedElements) {
  std::mt19937 rng(99);
  for (DType t : rwin::all_dtypes) {
    const size_t sz = rwin::dtype_size(t), n = 37;
    std::vector<unsigned char> dst(n * sz + 1), add(n * sz + 3), want;
    random_elements(t, dst.data() + 1, n, rng);  // odd addresses: add_into needs no alignment
    random_elements(t, add.data() + 3, n, rng);
    want = dst;
    for (size_t i = 0; i < n; ++i) ref_add(t, want.data() + 1 + i * sz, add.data() + 3 + i * sz);
    add_into(t, dst.data() + 1, add.data() + 3, n);
    EXPECT_EQ(dst, want) << rwin::dtype_name(t);
  }
}

TEST(DtypeMath, HalfPrecisionSumsRoundOnceToNearestEven) {
  auto f16_sum = [](float a, float b) {
    rwin::f16 x = rwin::to_f16(a), y = rwin::to_f16(b);
    add_into(DType::F16, &x, &y, 1);
    return rwin::to_float(x);
  };
  auto bf16_sum = [](float a, float b) {
    rwin::bf16 x = rwin::to_bf16(a), y = rwin::to_bf16(b);
    add_into(DType::BF16, &x, &y, 1);
    return rwin::to_float(x);
  };
  EXPECT_EQ(f16_sum(2048, 1), 2048);  // 2049: a tie between 2048 and 2050, to even
  EXPECT_EQ(f16_sum(2050, 1), 2052);  // 2051: a tie, to even (up)
  EXPECT_EQ(f16_sum(65504, 15), 65504);
  EXPECT_TRUE(std::isinf(f16_sum(65504, 16)));  // 65520: a tie between max and overflow
  EXPECT_EQ(f16_sum(-7, 3.5f), -3.5f);
  EXPECT_EQ(bf16_sum(256, 1), 256);
  EXPECT_EQ(bf16_sum(258, 1), 260);
  EXPECT_EQ(bf16_sum(1, -1), 0);
  EXPECT_FALSE(std::signbit(bf16_sum(1, -1)));
}

}  // namespace
