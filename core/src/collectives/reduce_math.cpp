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

// `acc_in` (null: start from in[0]) holds a fold carried over from another member, in the carrier
// type C; out_acc: store the fold in C (to carry on) instead of T.
template <class T, class A, class C, class Load, class Store, class CLoad, class CStore>
void reduce_typed(ReduceOp op, void* out_v, const void* const* in_v, int n, size_t elems, const void* acc_in_v, bool out_acc,
                  Load load, Store store, CLoad cload, CStore cstore) {
  const C* acc_in = static_cast<const C*>(acc_in_v);
  A acc[kBlock];
  for (size_t base = 0; base < elems; base += kBlock) {
    const size_t m = std::min(kBlock, elems - base);
    int q0 = 0;
    if (acc_in) {
      for (size_t i = 0; i < m; ++i) acc[i] = cload(acc_in[base + i]);
    } else {
      const T* first = static_cast<const T*>(in_v[0]) + base;
      for (size_t i = 0; i < m; ++i) acc[i] = load(first[i]);
      q0 = 1;
    }
    for (int q = q0; q < n; ++q) {
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
    if (out_acc) {
      C* out = static_cast<C*>(out_v);
      for (size_t i = 0; i < m; ++i) out[base + i] = cstore(acc[i]);
    } else {
      T* out = static_cast<T*>(out_v);
      for (size_t i = 0; i < m; ++i) out[base + i] = store(acc[i]);
    }
  }
}

// Types whose accumulator is their own type, or (integers) wraps to the same bits when stored in it:
// the carrier is the type itself.
template <class T, class A, class Load, class Store>
void reduce_same(ReduceOp op, void* out, const void* const* in, int n, size_t elems, const void* acc_in, bool out_acc,
                 Load load, Store store) {
  reduce_typed<T, A, T>(op, out, in, n, elems, acc_in, out_acc, load, store, load, store);
}

// f16 / bf16: the fold carries on in f32 (rounded once, by the member that stores the result).
template <class T, class Load, class Store>
void reduce_half(ReduceOp op, void* out, const void* const* in, int n, size_t elems, const void* acc_in, bool out_acc,
                 Load load, Store store) {
  auto same = [](float a) { return a; };
  reduce_typed<T, float, float>(op, out, in, n, elems, acc_in, out_acc, load, store, same, same);
}

// Integers: Max/Min must compare as the signed type, Sum/Prod wrap in the unsigned one.
// Carried as T: wrap-around arithmetic stored back in T keeps the same bits (mod 2^bits).
template <class T>
void reduce_int(ReduceOp op, void* out, const void* const* in, int n, size_t elems, const void* acc_in, bool out_acc) {
  if (op == ReduceOp::Max || op == ReduceOp::Min) {
    reduce_same<T, T>(op, out, in, n, elems, acc_in, out_acc, [](T v) { return v; }, [](T a) { return a; });
  } else {
    reduce_same<T, Wide<T>>(op, out, in, n, elems, acc_in, out_acc, [](T v) { return static_cast<Wide<T>>(v); },
                            [](Wide<T> a) { return static_cast<T>(a); });
  }
}

}  // namespace

void reduce_arrays(DType t, ReduceOp op, void* out, const void* const* in, int n, size_t elems) {
  reduce_fold(t, op, nullptr, in, n, elems, out, false);
}

size_t fold_carrier_size(DType t) { return t == DType::F16 || t == DType::BF16 ? 4 : dtype_size(t); }

void reduce_fold(DType t, ReduceOp op, const void* acc_in, const void* const* in, int n, size_t elems, void* out,
                 bool out_acc) {
  if (elems == 0 || (n <= 0 && !acc_in)) return;
  switch (t) {
    case DType::I8: return reduce_int<int8_t>(op, out, in, n, elems, acc_in, out_acc);
    case DType::I16: return reduce_int<int16_t>(op, out, in, n, elems, acc_in, out_acc);
    case DType::I32: return reduce_int<int32_t>(op, out, in, n, elems, acc_in, out_acc);
    case DType::I64: return reduce_int<int64_t>(op, out, in, n, elems, acc_in, out_acc);
    case DType::U8: return reduce_int<uint8_t>(op, out, in, n, elems, acc_in, out_acc);
    case DType::U16: return reduce_int<uint16_t>(op, out, in, n, elems, acc_in, out_acc);
    case DType::U32: return reduce_int<uint32_t>(op, out, in, n, elems, acc_in, out_acc);
    case DType::U64: return reduce_int<uint64_t>(op, out, in, n, elems, acc_in, out_acc);
    case DType::F32:
      return reduce_same<float, float>(op, out, in, n, elems, acc_in, out_acc, [](float v) { return v; },
                                       [](float a) { return a; });
    case DType::F64:
      return reduce_same<double, double>(op, out, in, n, elems, acc_in, out_acc, [](double v) { return v; },
                                         [](double a) { return a; });
    case DType::F16:
      return reduce_half<f16>(op, out, in, n, elems, acc_in, out_acc, [](f16 v) { return to_float(v); },
                              [](float a) { return to_f16(a); });
    case DType::BF16:
      return reduce_half<bf16>(op, out, in, n, elems, acc_in, out_acc, [](bf16 v) { return to_float(v); },
                               [](float a) { return to_bf16(a); });
  }
}

}  // namespace rwin::detail
