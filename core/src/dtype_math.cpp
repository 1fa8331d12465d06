#include "dtype_math.h"

#include <bit>
#include <cstring>

namespace rwin {

// binary16: 1 sign, 5 exponent (bias 15), 10 fraction bits. binary32: 1, 8 (bias 127), 23.
float to_float(f16 h) noexcept {
  const uint32_t sign = static_cast<uint32_t>(h.bits & 0x8000u) << 16;
  const uint32_t exp = (h.bits >> 10) & 0x1fu;
  const uint32_t frac = h.bits & 0x3ffu;
  uint32_t out;
  if (exp == 0x1f) {
    out = sign | 0x7f800000u | (frac << 13);  // inf, or NaN with its payload
  } else if (exp != 0) {
    out = sign | ((exp + 112) << 23) | (frac << 13);  // normal: rebias 15 -> 127
  } else {
    // Zero or subnormal: frac * 2^-24, exact in float.
    const float mag = static_cast<float>(frac) * 0x1p-24f;
    out = sign | std::bit_cast<uint32_t>(mag);
  }
  return std::bit_cast<float>(out);
}

f16 to_f16(float x) noexcept {
  const uint32_t u = std::bit_cast<uint32_t>(x);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) {  // NaN: quiet, keep the top payload bits
    return f16{static_cast<uint16_t>(sign | 0x7e00u | ((a >> 13) & 0x3ffu))};
  }
  if (a >= 0x38800000u) {  // |x| >= 2^-14: normal in f16, or overflow
    const uint32_t r = a - (112u << 23);  // rebias 127 -> 15 (exponent field moves down)
    uint32_t h = r >> 13;
    const uint32_t rest = r & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;  // nearest, ties to even
    if (h >= 0x7c00u) h = 0x7c00u;  // overflow (and f32 inf) -> inf
    return f16{static_cast<uint16_t>(sign | h)};
  }
  const uint32_t exp = a >> 23;
  if (exp < 102) return f16{sign};  // |x| < 2^-25: rounds to zero
  // Subnormal result: the significand (with its implicit bit) in units of 2^-24.
  const uint32_t m = (a & 0x7fffffu) | 0x800000u;
  const uint32_t shift = 126 - exp;  // 14..24
  uint32_t h = m >> shift;
  const uint32_t rest = m & ((1u << shift) - 1u), half = 1u << (shift - 1);
  if (rest > half || (rest == half && (h & 1u))) ++h;  // may carry into the smallest normal: right
  return f16{static_cast<uint16_t>(sign | h)};
}

float to_float(bf16 h) noexcept { return std::bit_cast<float>(static_cast<uint32_t>(h.bits) << 16); }

bf16 to_bf16(float x) noexcept {
  const uint32_t u = std::bit_cast<uint32_t>(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return bf16{static_cast<uint16_t>((u >> 16) | 0x0040u)};  // quiet NaN
  // Nearest, ties to even; a carry out of the fraction bumps the exponent (to inf past the max).
  const uint32_t rounded = u + 0x7fffu + ((u >> 16) & 1u);
  return bf16{static_cast<uint16_t>(rounded >> 16)};
}

}  // namespace rwin

namespace rwin::detail {
namespace {

template <class T>
T load(const unsigned char* p) noexcept {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
template <class T>
void store(unsigned char* p, T v) noexcept {
  std::memcpy(p, &v, sizeof v);
}

// One element: *dst += *addend. Integers go through the unsigned type of their width (wrap).
template <DType D>
void add_one(unsigned char* dst, const unsigned char* addend) noexcept {
  if constexpr (D == DType::I8 || D == DType::U8) {
    store(dst, static_cast<uint8_t>(load<uint8_t>(dst) + load<uint8_t>(addend)));
  } else if constexpr (D == DType::I16 || D == DType::U16) {
    store(dst, static_cast<uint16_t>(load<uint16_t>(dst) + load<uint16_t>(addend)));
  } else if constexpr (D == DType::I32 || D == DType::U32) {
    store(dst, static_cast<uint32_t>(load<uint32_t>(dst) + load<uint32_t>(addend)));
  } else if constexpr (D == DType::I64 || D == DType::U64) {
    store(dst, static_cast<uint64_t>(load<uint64_t>(dst) + load<uint64_t>(addend)));
  } else if constexpr (D == DType::F32) {
    store(dst, load<float>(dst) + load<float>(addend));
  } else if constexpr (D == DType::F64) {
    store(dst, load<double>(dst) + load<double>(addend));
  } else if constexpr (D == DType::F16) {
    store(dst, to_f16(to_float(load<f16>(dst)) + to_float(load<f16>(addend))));
  } else {
    static_assert(D == DType::BF16);
    store(dst, to_bf16(to_float(load<bf16>(dst)) + to_float(load<bf16>(addend))));
  }
}

template <DType D>
void add_n(unsigned char* dst, const unsigned char* addend, size_t n) noexcept {
  constexpr size_t size = dtype_size(D);
  for (size_t i = 0; i < n; ++i) add_one<D>(dst + i * size, addend + i * size);
}

}  // namespace

#define RWIN_DTYPE_DISPATCH(t, F, ...)               \
  switch (t) {                                       \
    case DType::I32: return F<DType::I32>(__VA_ARGS__);   \
    case DType::I64: return F<DType::I64>(__VA_ARGS__);   \
    case DType::U32: return F<DType::U32>(__VA_ARGS__);   \
    case DType::U64: return F<DType::U64>(__VA_ARGS__);   \
    case DType::F32: return F<DType::F32>(__VA_ARGS__);   \
    case DType::F64: return F<DType::F64>(__VA_ARGS__);   \
    case DType::F16: return F<DType::F16>(__VA_ARGS__);   \
    case DType::BF16: return F<DType::BF16>(__VA_ARGS__); \
    case DType::I8: return F<DType::I8>(__VA_ARGS__);     \
    case DType::I16: return F<DType::I16>(__VA_ARGS__);   \
    case DType::U8: return F<DType::U8>(__VA_ARGS__);     \
    case DType::U16: return F<DType::U16>(__VA_ARGS__);   \
  }

void add_into(DType t, void* dst, const void* addend, size_t n) noexcept {
  auto* d = static_cast<unsigned char*>(dst);
  const auto* a = static_cast<const unsigned char*>(addend);
  RWIN_DTYPE_DISPATCH(t, add_n, d, a, n)
}

#undef RWIN_DTYPE_DISPATCH

}  // namespace rwin::detail
