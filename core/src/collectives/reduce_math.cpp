// The reduce step of the collectives: element-wise op over n inputs in a fixed order, for every
// DType. Blocks of kBlock elements accumulate in a local array (so `out` may alias an input and the
// inner loops are plain, vectorisable loops over contiguous arrays).
#include <cmath>
#include <cstring>
#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "collectives/reduce_math.h"

namespace rwin::detail {

namespace {

constexpr size_t kBlock = 512;

// Integers compute in the unsigned type of at least their width: wrap-around, never UB.
template <class T>
using Wide = std::conditional_t<(sizeof(T) < 4), uint32_t, std::make_unsigned_t<T>>;

template <class T>
struct IntAcc {
  using A = Wide<T>;
  static A load(T v) { return static_cast<A>(v); }
  static T store(A a) { return static_cast<T>(a); }
};

template <class T, class A, class Load, class Store>
void reduce_typed(ReduceOp op, void* out_v, const void* const* in_v, int n, size_t elems, Load load, Store store) {
  T* out = static_cast<T*>(out_v);
  A acc[kBlock];
  for (size_t base = 0; base < elems; base += kBlock) {
    const size_t m = std::min(kBlock, elems - base);
    const T* first = static_cast<const T*>(in_v[0]) + base;
    for (size_t i = 0; i < m; ++i) acc[i] = load(first[i]);
    for (int q = 1; q < n; ++q) {
      const T* x = static_cast<const T*>(in_v[q]) + base;
      switch (op) {
        case ReduceOp::Sum:
          for (size_t i = 0; i < m; ++i) acc[i] = static_cast<A>(acc[i] + load(x[i]));
          break;
        case ReduceOp::Prod:
          for (size_t i = 0; i < m; ++i) acc[i] = static_cast<A>(acc[i] * load(x[i]));
          break;
        case ReduceOp::Max:
          if constexpr (std::is_floating_point_v<A>) {
            for (size_t i = 0; i < m; ++i) acc[i] = std::fmax(acc[i], load(x[i]));
          } else {
            for (size_t i = 0; i < m; ++i) acc[i] = std::max(acc[i], static_cast<A>(load(x[i])));
          }
          break;
        case ReduceOp::Min:
          if constexpr (std::is_floating_point_v<A>) {
            for (size_t i = 0; i < m; ++i) acc[i] = std::fmin(acc[i], load(x[i]));
          } else {
            for (size_t i = 0; i < m; ++i) acc[i] = std::min(acc[i], static_cast<A>(load(x[i])));
          }
          break;
      }
    }
    for (size_t i = 0; i < m; ++i) out[base + i] = store(acc[i]);
  }
}

// Integers: Max/Min must compare as the signed type, Sum/Prod wrap in the unsigned one.
template <class T>
void reduce_int(ReduceOp op, void* out, const void* const* in, int n, size_t elems) {
  if (op == ReduceOp::Max || op == ReduceOp::Min) {
    reduce_typed<T, T>(op, out, in, n, elems, [](T v) { return v; }, [](T a) { return a; });
  } else {
    reduce_typed<T, Wide<T>>(op, out, in, n, elems, [](T v) { return static_cast<Wide<T>>(v); },
                             [](Wide<T> a) { return static_cast<T>(a); });
  }
}

}  // namespace

void reduce_arrays(DType t, ReduceOp op, void* out, const void* const* in, int n, size_t elems) {
  if (elems == 0 || n <= 0) return;
  switch (t) {
    case DType::I8: return reduce_int<int8_t>(op, out, in, n, elems);
    case DType::I16: return reduce_int<int16_t>(op, out, in, n, elems);
    case DType::I32: return reduce_int<int32_t>(op, out, in, n, elems);
    case DType::I64: return reduce_int<int64_t>(op, out, in, n, elems);
    case DType::U8: return reduce_int<uint8_t>(op, out, in, n, elems);
    case DType::U16: return reduce_int<uint16_t>(op, out, in, n, elems);
    case DType::U32: return reduce_int<uint32_t>(op, out, in, n, elems);
    case DType::U64: return reduce_int<uint64_t>(op, out, in, n, elems);
    case DType::F32:
      return reduce_typed<float, float>(op, out, in, n, elems, [](float v) { return v; }, [](float a) { return a; });
    case DType::F64:
      return reduce_typed<double, double>(op, out, in, n, elems, [](double v) { return v; },
                                          [](double a) { return a; });
    case DType::F16:
      return reduce_typed<f16, float>(op, out, in, n, elems, [](f16 v) { return to_float(v); },
                                      [](float a) { return to_f16(a); });
    case DType::BF16:
      return reduce_typed<bf16, float>(op, out, in, n, elems, [](bf16 v) { return to_float(v); },
                                       [](float a) { return to_bf16(a); });
  }
}

}  // namespace rwin::detail
