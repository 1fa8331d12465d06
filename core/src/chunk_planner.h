// ChunkPlanner: turns a (possibly strided) 2-D slice transfer into contiguous chunks.
//
// A pure function of its inputs (no I/O), so it is unit-tested on its own. Runs are rows of the
// slice, merged into one run when both sides are contiguous (full rows, or a single row); each
// run is then cut at `max_chunk_bytes`.
#pragma once

#include <cstddef>
#include <cstdint>

#include "rwin/rwin.h"

namespace rwin::detail {

struct Chunk {
  uint64_t local_offset = 0;   // bytes from the start of the local window
  uint64_t remote_offset = 0;  // bytes from the start of the remote window
  uint64_t bytes = 0;
};

struct TransferShape {
  size_t elem_bytes = 0;
  Shape2 shape{0, 0};           // rows x cols moved
  Shape2 local_offsets{0, 0};   // element offsets in the local window
  int64_t local_cols = 0;       // row length of the local window, in elements
  Shape2 remote_offsets{0, 0};  // element offsets in the remote window
  int64_t remote_cols = 0;      // row length of the remote window, in elements
  uint64_t max_chunk_bytes = 0; // > 0
};

class ChunkPlanner {
 public:
  explicit ChunkPlanner(const TransferShape& t) noexcept;
  // Produces the next chunk; false when the transfer is exhausted.
  bool next(Chunk& out) noexcept;
  uint64_t total_chunks() const noexcept { return total_chunks_; }
  uint64_t total_bytes() const noexcept { return run_bytes_ * runs_; }

 private:
  TransferShape t_;
  uint64_t runs_ = 0;       // number of contiguous runs
  uint64_t run_bytes_ = 0;  // bytes per run
  uint64_t chunks_per_run_ = 0;
  uint64_t total_chunks_ = 0;
  uint64_t run_ = 0;        // current run
  uint64_t pos_ = 0;        // bytes consumed in the current run
};

}  // namespace rwin::detail
