// ChunkPlanner: a pure function from a slice transfer to contiguous chunks.
#include <gtest/gtest.h>

#include <vector>

#include "chunk_planner.h"

using rwin::detail::Chunk;
using rwin::detail::ChunkPlanner;
using rwin::detail::TransferShape;

namespace {

std::vector<Chunk> plan(const TransferShape& t) {
  ChunkPlanner p(t);
  std::vector<Chunk> out;
  Chunk c;
  while (p.next(c)) out.push_back(c);
  EXPECT_EQ(out.size(), p.total_chunks());
  return out;
}

TransferShape contiguous(int64_t elems, size_t elem, uint64_t chunk) {
  TransferShape t;
  t.elem_bytes = elem;
  t.shape = {1, elems};
  t.local_cols = elems;
  t.remote_cols = elems;
  t.max_chunk_bytes = chunk;
  return t;
}

// Every byte of the rectangle is covered exactly once, at the right offsets on both sides.
void expect_covers(const TransferShape& t, const std::vector<Chunk>& chunks) {
  std::vector<int> local_hits(static_cast<size_t>((t.local_offsets[0] + t.shape[0]) * t.local_cols) * t.elem_bytes);
  for (const Chunk& c : chunks) {
    ASSERT_GT(c.bytes, 0u);
    ASSERT_LE(c.bytes, t.max_chunk_bytes);
    for (uint64_t b = 0; b < c.bytes; ++b) {
      const uint64_t lo = c.local_offset + b, ro = c.remote_offset + b;
      // Map each local byte to its (row, col) and check the remote byte is the same element.
      const uint64_t row_bytes_l = static_cast<uint64_t>(t.local_cols) * t.elem_bytes;
      const uint64_t row_bytes_r = static_cast<uint64_t>(t.remote_cols) * t.elem_bytes;
      const uint64_t lrow = lo / row_bytes_l - static_cast<uint64_t>(t.local_offsets[0]);
      const uint64_t lcolb = lo % row_bytes_l - static_cast<uint64_t>(t.local_offsets[1]) * t.elem_bytes;
      const uint64_t rrow = ro / row_bytes_r - static_cast<uint64_t>(t.remote_offsets[0]);
      const uint64_t rcolb = ro % row_bytes_r - static_cast<uint64_t>(t.remote_offsets[1]) * t.elem_bytes;
      ASSERT_EQ(lrow, rrow);
      ASSERT_EQ(lcolb, rcolb);
      ASSERT_LT(lrow, static_cast<uint64_t>(t.shape[0]));
      ASSERT_LT(lcolb, static_cast<uint64_t>(t.shape[1]) * t.elem_bytes);
      local_hits[lo]++;
    }
  }
  uint64_t covered = 0;
  for (int h : local_hits) {
    ASSERT_LE(h, 1);
    covered += static_cast<uint64_t>(h);
  }
  EXPECT_EQ(covered, static_cast<uint64_t>(t.shape[0] * t.shape[1]) * t.elem_bytes);
}

TEST(ChunkPlanner, ContiguousExactMultiple) {
  auto t = contiguous(1024, 4, 1024);
  auto c = plan(t);
  ASSERT_EQ(c.size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(c[i].local_offset, i * 1024);
    EXPECT_EQ(c[i].remote_offset, i * 1024);
    EXPECT_EQ(c[i].bytes, 1024u);
  }
}

TEST(ChunkPlanner, ContiguousWithPartialLastChunk) {
  auto t = contiguous(1000, 8, 3000);  // 8000 bytes = 3000 + 3000 + 2000
  auto c = plan(t);
  ASSERT_EQ(c.size(), 3u);
  EXPECT_EQ(c[2].local_offset, 6000u);
  EXPECT_EQ(c[2].bytes, 2000u);
  expect_covers(t, c);
}

TEST(ChunkPlanner, OneElement) {
  auto t = contiguous(1, 4, 1 << 20);
  auto c = plan(t);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].bytes, 4u);
}

TEST(ChunkPlanner, EmptyShapesProduceNothing) {
  auto t = contiguous(0, 4, 1024);
  EXPECT_TRUE(plan(t).empty());
  t = contiguous(10, 4, 1024);
  t.shape = {0, 10};
  EXPECT_TRUE(plan(t).empty());
}

TEST(ChunkPlanner, FullRowsMergeIntoOneRun) {
  TransferShape t;
  t.elem_bytes = 4;
  t.shape = {3, 16};
  t.local_offsets = {1, 0};
  t.local_cols = 16;
  t.remote_offsets = {4, 0};
  t.remote_cols = 16;
  t.max_chunk_bytes = 1 << 20;
  auto c = plan(t);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].local_offset, 64u);
  EXPECT_EQ(c[0].remote_offset, 256u);
  EXPECT_EQ(c[0].bytes, 192u);
}

TEST(ChunkPlanner, StridedRectangleIsOneRunPerRow) {
  TransferShape t;
  t.elem_bytes = 4;
  t.shape = {4, 10};
  t.local_offsets = {1, 2};
  t.local_cols = 32;
  t.remote_offsets = {3, 20};
  t.remote_cols = 32;
  t.max_chunk_bytes = 1 << 20;
  auto c = plan(t);
  ASSERT_EQ(c.size(), 4u);
  EXPECT_EQ(c[0].local_offset, (1 * 32 + 2) * 4u);
  EXPECT_EQ(c[0].remote_offset, (3 * 32 + 20) * 4u);
  EXPECT_EQ(c[3].local_offset, (4 * 32 + 2) * 4u);
  expect_covers(t, c);
}

TEST(ChunkPlanner, StridedRowsLongerThanTheChunkAreCut) {
  TransferShape t;
  t.elem_bytes = 8;
  t.shape = {3, 100};
  t.local_offsets = {0, 5};
  t.local_cols = 200;
  t.remote_offsets = {2, 0};
  t.remote_cols = 150;  // different window widths on the two sides
  t.max_chunk_bytes = 300;
  auto c = plan(t);
  ASSERT_EQ(c.size(), 3u * 3u);  // 800 bytes per row = 300 + 300 + 200
  expect_covers(t, c);
}

TEST(ChunkPlanner, SingleRowOfAWideWindowIsContiguous) {
  TransferShape t;
  t.elem_bytes = 4;
  t.shape = {1, 7};
  t.local_offsets = {2, 3};
  t.local_cols = 64;
  t.remote_offsets = {5, 1};
  t.remote_cols = 64;
  t.max_chunk_bytes = 1024;
  auto c = plan(t);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].bytes, 28u);
  expect_covers(t, c);
}

TEST(ChunkPlanner, TotalBytesMatchesTheRectangle) {
  TransferShape t = contiguous(12345, 4, 4096);
  ChunkPlanner p(t);
  EXPECT_EQ(p.total_bytes(), 12345u * 4);
  EXPECT_EQ(p.total_chunks(), (12345u * 4 + 4095) / 4096);
}

}  // namespace
