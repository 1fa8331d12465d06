// common/blob.h: the little-endian reader/writer under every hand-made wire format. Round trip,
// the exact bytes written, a short input failing at every cut point, and the exact-consumption check.
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <vector>

#include "common/blob.h"

namespace {

using rwin::blob::Reader;
using rwin::blob::Writer;

const std::array<uint8_t, 3> kPayload = {0xde, 0xad, 0x01};

// u8 | u16 | u32 | u64 | 3 bytes: 18 bytes.
std::vector<uint8_t> sample() {
  Writer w;
  w.u8(0x81);
  w.u16(0x1234);
  w.u32(0x89abcdefu);
  w.u64(0x0102030405060708ull);
  w.bytes(kPayload);
  return w.take();
}

// Reads sample()'s layout; true only if every read succeeded and the values are the sample's.
bool read_sample(Reader& r) {
  uint8_t a = 0;
  uint16_t b = 0;
  uint32_t c = 0;
  uint64_t d = 0;
  std::array<uint8_t, 3> e{};
  if (!r.u8(a) || !r.u16(b) || !r.u32(c) || !r.u64(d) || !r.bytes(e)) return false;
  EXPECT_EQ(a, 0x81);
  EXPECT_EQ(b, 0x1234);
  EXPECT_EQ(c, 0x89abcdefu);
  EXPECT_EQ(d, 0x0102030405060708ull);
  EXPECT_EQ(e, kPayload);
  return true;
}

TEST(Blob, WriterIsLittleEndian) {
  const std::vector<uint8_t> want = {0x81, 0x34, 0x12, 0xef, 0xcd, 0xab, 0x89, 0x08, 0x07,
                                     0x06, 0x05, 0x04, 0x03, 0x02, 0x01, 0xde, 0xad, 0x01};
  EXPECT_EQ(sample(), want);
}

TEST(Blob, RoundTripConsumesExactly) {
  const auto buf = sample();
  Reader r(buf);
  ASSERT_TRUE(read_sample(r));
  EXPECT_FALSE(r.failed());
  EXPECT_EQ(r.remaining(), 0u);
  EXPECT_TRUE(r.done());
}

TEST(Blob, ShortInputFailsAtEveryCut) {
  const auto buf = sample();
  for (size_t cut = 0; cut < buf.size(); ++cut) {
    Reader r(std::span<const uint8_t>(buf).first(cut));
    EXPECT_FALSE(read_sample(r)) << "cut at " << cut;
    EXPECT_TRUE(r.failed()) << "cut at " << cut;
    EXPECT_FALSE(r.done()) << "cut at " << cut;
  }
}

TEST(Blob, TrailingBytesAreNotDone) {
  auto buf = sample();
  buf.push_back(0);
  Reader r(buf);
  ASSERT_TRUE(read_sample(r));
  EXPECT_FALSE(r.failed());
  EXPECT_EQ(r.remaining(), 1u);
  EXPECT_FALSE(r.done());
}

TEST(Blob, FailureIsStickyAndLeavesOutputAlone) {
  const std::vector<uint8_t> buf = {1, 2, 3};
  Reader r(buf);
  uint32_t v = 7;
  EXPECT_FALSE(r.u32(v));
  EXPECT_EQ(v, 7u);
  // Enough bytes remain for a u16, but the reader already failed.
  uint16_t s = 9;
  EXPECT_FALSE(r.u16(s));
  EXPECT_EQ(s, 9u);
  EXPECT_TRUE(r.failed());
  EXPECT_EQ(r.remaining(), 3u);
}

TEST(Blob, TakeChecksHostileLengths) {
  const std::vector<uint8_t> buf = {1, 2, 3, 4};
  {
    Reader r(buf);
    std::span<const uint8_t> s;
    ASSERT_TRUE(r.take(2, s));
    EXPECT_EQ(s.data(), buf.data());  // in place, not a copy
    EXPECT_EQ(s.size(), 2u);
    EXPECT_EQ(r.rest().size(), 2u);
    EXPECT_FALSE(r.take(3, s));
    EXPECT_EQ(s.size(), 2u);
  }
  {
    Reader r(buf);
    std::span<const uint8_t> s;
    EXPECT_FALSE(r.take(UINT64_MAX, s));  // would wrap an offset + length check
    EXPECT_TRUE(r.failed());
  }
}

TEST(Blob, EmptyInput) {
  Reader r(nullptr, 0);
  EXPECT_TRUE(r.done());
  std::span<const uint8_t> s;
  EXPECT_TRUE(r.take(0, s));
  uint8_t b = 0;
  EXPECT_FALSE(r.u8(b));
  EXPECT_FALSE(r.done());
}

TEST(Blob, PatchAndLoad) {
  Writer w;
  w.u32(0);
  w.u16(0xbeef);
  w.patch_u32(0, 0x11223344u);
  const auto& b = w.buf();
  ASSERT_EQ(w.size(), 6u);
  EXPECT_EQ(rwin::blob::load_u32(b.data()), 0x11223344u);
  EXPECT_EQ(rwin::blob::load_u16(b.data() + 4), 0xbeef);
  EXPECT_THROW(w.patch_u32(3, 1), std::out_of_range);  // 3 + 4 > 6: refused before writing anything
  EXPECT_EQ(rwin::blob::load_u16(b.data() + 4), 0xbeef);
}

TEST(Blob, Load64) {
  const std::array<uint8_t, 8> b = {8, 7, 6, 5, 4, 3, 2, 1};
  EXPECT_EQ(rwin::blob::load_u64(b.data()), 0x0102030405060708ull);
}

}  // namespace
