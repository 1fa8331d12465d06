// Cost of the chunk planner per chunk: contiguous transfers (one run cut at chunk_bytes) and
// strided ones (one run per row), plus the constructor alone (paid by every put/get, even 8 B).
#include <benchmark/benchmark.h>

#include "chunk_planner.h"

namespace {

using rwin::detail::Chunk;
using rwin::detail::ChunkPlanner;
using rwin::detail::TransferShape;

// args: total bytes, chunk bytes
void BM_PlannerContiguous(benchmark::State& state) {
  TransferShape t;
  t.elem_bytes = 4;
  t.shape = {1, state.range(0) / 4};
  t.local_cols = t.remote_cols = t.shape[1];
  t.max_chunk_bytes = static_cast<uint64_t>(state.range(1));
  uint64_t chunks = 0;
  for (auto _ : state) {
    ChunkPlanner p(t);
    Chunk c;
    while (p.next(c)) {
      benchmark::DoNotOptimize(c);
      ++chunks;
    }
  }
  state.SetItemsProcessed(static_cast<int64_t>(chunks));  // items/s = chunks/s
  state.counters["chunks_per_transfer"] = static_cast<double>(chunks) / static_cast<double>(state.iterations());
}
BENCHMARK(BM_PlannerContiguous)->Args({8, 1 << 20})->Args({16 << 20, 1 << 20})->Args({16 << 20, 64 << 10});

// A column block: rows x cols of a window whose rows are 4096 elements wide, so every row is a run.
// args: rows, cols (f32), chunk bytes
void BM_PlannerStrided(benchmark::State& state) {
  TransferShape t;
  t.elem_bytes = 4;
  t.shape = {state.range(0), state.range(1)};
  t.local_offsets = {0, 16};
  t.remote_offsets = {3, 32};
  t.local_cols = t.remote_cols = 4096;
  t.max_chunk_bytes = static_cast<uint64_t>(state.range(2));
  uint64_t chunks = 0;
  for (auto _ : state) {
    ChunkPlanner p(t);
    Chunk c;
    while (p.next(c)) {
      benchmark::DoNotOptimize(c);
      ++chunks;
    }
  }
  state.SetItemsProcessed(static_cast<int64_t>(chunks));
  state.counters["chunks_per_transfer"] = static_cast<double>(chunks) / static_cast<double>(state.iterations());
}
BENCHMARK(BM_PlannerStrided)->Args({1024, 64, 1 << 20})->Args({64, 4000, 4096});

}  // namespace
