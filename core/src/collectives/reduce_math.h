// The reduce step of the collectives (reduce_math.cpp). Pure: no transport, no context.
#pragma once

#include <cstddef>

#include "rwin/collectives.h"

namespace rwin::detail {

// out[i] = in[0][i] op in[1][i] op ... op in[n-1][i], folded in that order (team-rank order), for
// `elements` elements of type `t`. Integers wrap (Sum, Prod); f16/bf16 accumulate in f32 and round
// once per element; floating Max/Min are fmax/fmin. `out` may alias any input; inputs aligned for `t`.
void reduce_arrays(DType t, ReduceOp op, void* out, const void* const* in, int n, size_t elements);
// The same fold in pieces, carried from member to member (hier_chain_allreduce): starts from `acc_in`
// (a fold carried over, in the carrier type; null: from in[0]), folds in[0..n-1] in order, and stores
// the result in `out` as the carrier type (out_acc, to carry on) or as `t`. Carrying a fold this way
// gives reduce_arrays' bits over all the inputs in order: the carrier is f32 for f16/bf16 (rounded
// once, at the end) and the type itself otherwise.
void reduce_fold(DType t, ReduceOp op, const void* acc_in, const void* const* in, int n, size_t elements, void* out,
                 bool out_acc);
size_t fold_carrier_size(DType t);  // bytes per element of a carried fold

}  // namespace rwin::detail
