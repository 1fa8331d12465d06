// The reduce step of the collectives (reduce_math.cpp). Pure: no transport, no context.
#pragma once

#include <cstddef>

#include "rwin/collectives.h"

namespace rwin::detail {

// out[i] = in[0][i] op in[1][i] op ... op in[n-1][i], folded in that order (team-rank order), for
// `elements` elements of type `t`. Integers wrap (Sum, Prod); f16/bf16 accumulate in f32 and round
// once per element; floating Max/Min are fmax/fmin. `out` may alias any input; inputs aligned for `t`.
void reduce_arrays(DType t, ReduceOp op, void* out, const void* const* in, int n, size_t elements);

}  // namespace rwin::detail
