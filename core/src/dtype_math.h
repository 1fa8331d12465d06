// Element arithmetic on raw bytes, for every DType: the loop put(Add) runs under a stripe lock
// (accumulate.cpp) and the reduce step of collectives. Pure: no transport, no context. Built -O3
// (core/CMakeLists.txt) so the integer and f32/f64 loops vectorise.
//
// Semantics, per element (docs/CONTRACT.md, "Element types"):
//  - integers (signed and unsigned, every width) add modulo 2^bits: two's complement wrap-around,
//    never undefined behaviour;
//  - f32 and f64 add in their own precision (IEEE 754, round to nearest even);
//  - f16 and bf16 are widened to f32 (exact), added in f32 and rounded to nearest even once per
//    element update. An f32 sum of two f16/bf16 values rounded once to f16/bf16 equals the
//    correctly rounded f16/bf16 sum (f32 carries more than 2p+2 bits for both).
#pragma once

#include <cstddef>
#include <cstdint>

#include "rwin/rwin.h"

namespace rwin::detail {

// dst[i] += addend[i] for i < n, elements of type `t`. The buffers need no alignment (bytes are
// copied in and out) and may be the same buffer.
void add_into(DType t, void* dst, const void* addend, size_t n) noexcept;

}  // namespace rwin::detail
