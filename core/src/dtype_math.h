// Element arithmetic on raw bytes, for every DType: the step put(Add) applies to a remote word
// (accumulate.cpp) and the reduce step of collectives. Pure: no transport, no context.
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

// One aligned 8-byte memory word, as it sits in memory (its bytes in address order, loaded with
// memcpy), with `addend` (8 bytes laid out like the word) added to the elements selected by
// `byte_mask`: bit b stands for byte b of the word. Elements of type `t` sit at offsets that are
// multiples of their size; one takes part when the bit of its first byte is set (callers set the
// bits of all its bytes), and every byte of an element that does not take part is returned as it
// was. Returns the new word.
uint64_t add_in_word(DType t, uint64_t word, const void* addend, uint8_t byte_mask) noexcept;

// The byte mask of one element of `size` bytes at byte `at` of a word (at % size == 0).
constexpr uint8_t element_mask(size_t at, size_t size) noexcept {
  return static_cast<uint8_t>(((1u << size) - 1u) << at);
}

}  // namespace rwin::detail
