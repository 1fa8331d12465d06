// The UCX transport's direct mode (transport/ucx/ucx_direct.h): copies at every skew and size,
// including the split path for 4K-aliasing pairs, and each atomic op's result and old value.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "transport/ucx/ucx_direct.h"

namespace rt = rwin::transport;
namespace direct = rwin::transport::ucx_direct;

namespace {

// dst sits `skew` bytes past a page boundary relative to src, the case the split path handles.
TEST(UcxDirect, CopyIsExactAtEverySkewAndSize) {
  std::vector<uint8_t> src_buf(3 * 4096 + 8192), dst_buf(3 * 4096 + 8192);
  auto page = [](std::vector<uint8_t>& v) {
    const auto p = reinterpret_cast<uintptr_t>(v.data());
    return reinterpret_cast<uint8_t*>((p + 4095) & ~uintptr_t{4095});
  };
  uint8_t* src = page(src_buf);
  uint8_t* dst_page = page(dst_buf);
  for (size_t i = 0; i < 2 * 4096 + 4096; ++i) src[i] = static_cast<uint8_t>(i * 131 + 7);
  for (size_t skew : {0, 1, 8, 63, 64, 100}) {
    for (size_t n : {1, 2, 3, 4, 5, 7, 8, 9, 12, 15, 16, 17, 2047, 2048, 3000, 4031, 4032, 4033, 4096, 5000, 8064, 8192}) {
      uint8_t* dst = dst_page + skew;
      std::memset(dst_page, 0xEE, 2 * 4096 + 4096);
      direct::copy(dst, src, n);
      ASSERT_EQ(std::memcmp(dst, src, n), 0) << "skew " << skew << " size " << n;
      // Nothing before or after the destination range is touched.
      for (size_t i = 0; i < skew; ++i) ASSERT_EQ(dst_page[i], 0xEE) << "before, skew " << skew << " size " << n;
      ASSERT_EQ(dst[n], 0xEE) << "after, skew " << skew << " size " << n;
    }
  }
}

TEST(UcxDirect, WriteAndReadMoveTheBytes) {
  uint64_t window[4] = {0, 0, 0, 0};
  uint64_t local[2] = {0x1111, 0x2222};
  rt::Work w;
  w.op = rt::Op::Write;
  w.local = local;
  w.bytes = 16;
  direct::apply(w, &window[1]);
  EXPECT_EQ(window[0], 0u);
  EXPECT_EQ(window[1], 0x1111u);
  EXPECT_EQ(window[2], 0x2222u);
  EXPECT_EQ(window[3], 0u);
  uint64_t back[2] = {0, 0};
  w.op = rt::Op::Read;
  w.local = back;
  direct::apply(w, &window[1]);
  EXPECT_EQ(back[0], 0x1111u);
  EXPECT_EQ(back[1], 0x2222u);
}

TEST(UcxDirect, AtomicsReturnTheOldValue) {
  alignas(8) uint64_t word = 40;
  uint64_t old = 0;
  rt::Work w;
  w.local = &old;
  w.bytes = 8;

  w.op = rt::Op::AtomicAdd;
  w.operand = 2;
  direct::apply(w, &word);
  EXPECT_EQ(word, 42u);
  EXPECT_EQ(old, 0u) << "AtomicAdd does not fetch";

  w.op = rt::Op::FetchAdd;
  w.operand = static_cast<uint64_t>(-2);  // wraps: a subtraction
  direct::apply(w, &word);
  EXPECT_EQ(old, 42u);
  EXPECT_EQ(word, 40u);

  w.op = rt::Op::Swap;
  w.operand = 7;
  direct::apply(w, &word);
  EXPECT_EQ(old, 40u);
  EXPECT_EQ(word, 7u);

  w.op = rt::Op::CompareSwap;
  w.compare = 6;  // wrong guess: no change, old value returned
  w.operand = 100;
  direct::apply(w, &word);
  EXPECT_EQ(old, 7u);
  EXPECT_EQ(word, 7u);
  w.compare = 7;  // right guess
  direct::apply(w, &word);
  EXPECT_EQ(old, 7u);
  EXPECT_EQ(word, 100u);

  w.op = rt::Op::Swap;  // Swap without a result buffer (notify Set may pass none)
  w.local = nullptr;
  w.operand = 5;
  direct::apply(w, &word);
  EXPECT_EQ(word, 5u);
}

}  // namespace
