#include "chunk_planner.h"

#include <algorithm>

namespace rwin::detail {

ChunkPlanner::ChunkPlanner(const TransferShape& t) noexcept : t_(t) {
  const int64_t rows = t.shape[0], cols = t.shape[1];
  if (rows <= 0 || cols <= 0 || t.elem_bytes == 0 || t.max_chunk_bytes == 0) return;
  // Whole rows on both sides (or a single row) are one contiguous run in both windows.
  const bool contiguous = rows == 1 || (cols == t.local_cols && cols == t.remote_cols);
  runs_ = contiguous ? 1 : static_cast<uint64_t>(rows);
  run_bytes_ = (contiguous ? static_cast<uint64_t>(rows * cols) : static_cast<uint64_t>(cols)) * t.elem_bytes;
  chunks_per_run_ = (run_bytes_ + t.max_chunk_bytes - 1) / t.max_chunk_bytes;
  total_chunks_ = chunks_per_run_ * runs_;
}

bool ChunkPlanner::next(Chunk& out) noexcept {
  if (run_ >= runs_) return false;
  const uint64_t row = run_;  // a run is a row unless the transfer is contiguous (then run_ == 0)
  const uint64_t local_start =
      (static_cast<uint64_t>(t_.local_offsets[0]) + row) * t_.local_cols * t_.elem_bytes +
      static_cast<uint64_t>(t_.local_offsets[1]) * t_.elem_bytes;
  const uint64_t remote_start =
      (static_cast<uint64_t>(t_.remote_offsets[0]) + row) * t_.remote_cols * t_.elem_bytes +
      static_cast<uint64_t>(t_.remote_offsets[1]) * t_.elem_bytes;
  out.local_offset = local_start + pos_;
  out.remote_offset = remote_start + pos_;
  out.bytes = std::min<uint64_t>(t_.max_chunk_bytes, run_bytes_ - pos_);
  pos_ += out.bytes;
  if (pos_ == run_bytes_) {
    pos_ = 0;
    ++run_;
  }
  return true;
}

}  // namespace rwin::detail
