// The pure decoders the fuzzers (tests/fuzz) drive, checked on known inputs: window descriptor,
// UCX key/address blobs, am batch walk, store request frames.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "bootstrap/wire.h"
#include "transport/ucx/ucx_am_wire.h"
#include "transport/ucx/ucx_blob.h"
#include "window_blob.h"

namespace {

TEST(WindowBlob, RoundTripsAndRejectsTruncation) {
  const std::vector<uint8_t> key{1, 2, 3, 4, 5};
  const auto b = rwin::detail::window_blob("y", rwin::DType::F32, {4, 1024}, rwin::detail::BlobKind::Signals, key);
  const auto d = rwin::detail::parse_window_blob(b);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->name, "y");
  EXPECT_EQ(d->dtype, rwin::DType::F32);
  EXPECT_EQ(d->kind, rwin::detail::BlobKind::Signals);
  EXPECT_EQ(d->shape, (rwin::Shape2{4, 1024}));
  EXPECT_EQ(std::vector<uint8_t>(d->key.begin(), d->key.end()), key);
  EXPECT_EQ(rwin::detail::describe_window_desc(*d), "'y' f32[4x1024] (16384 bytes)");
  for (size_t n = 0; n < b.size(); ++n) {
    EXPECT_FALSE(rwin::detail::parse_window_blob(std::span(b.data(), n)).has_value()) << n;
  }
}

// Found by window_blob_fuzz: the mismatch message multiplied a peer's shape as int64
// (d->shape[0] * d->shape[1]), signed overflow (UB) for a descriptor with a huge shape.
TEST(WindowBlob, DescribingAHostileShapeDoesNotOverflow) {
  for (rwin::Shape2 shape : {rwin::Shape2{int64_t{1} << 40, int64_t{1} << 40}, rwin::Shape2{-1, 8},
                             rwin::Shape2{INT64_MAX, 2}, rwin::Shape2{int64_t{1} << 61, 1}}) {
    const auto b = rwin::detail::window_blob("h", rwin::DType::U64, shape, rwin::detail::BlobKind::Window, {});
    const auto d = rwin::detail::parse_window_blob(b);
    ASSERT_TRUE(d.has_value());
    EXPECT_NE(rwin::detail::describe_window_desc(*d).find("(not a valid size)"), std::string::npos);
  }
}

TEST(UcxBlob, KeyAndAddressRoundTripAndRejectBadLengths) {
  namespace ub = rwin::transport::ucx_blob;
  const std::vector<uint8_t> raw{9, 8, 7}, addr(40, 0x5a), probe{1, 2};
  auto k = ub::pack_key(0x1000, 64, raw);
  auto pk = ub::parse_key(k);
  ASSERT_TRUE(pk.has_value());
  EXPECT_EQ(pk->base, 0x1000u);
  EXPECT_EQ(pk->bytes, 64u);
  EXPECT_EQ(std::vector<uint8_t>(pk->raw.begin(), pk->raw.end()), raw);
  k.push_back(0);  // trailing byte: raw_len no longer matches
  EXPECT_FALSE(ub::parse_key(k).has_value());
  auto a = ub::pack_addr(addr, 0x2000, probe);
  auto pa = ub::parse_addr(a);
  ASSERT_TRUE(pa.has_value());
  EXPECT_EQ(pa->address.size(), addr.size());
  EXPECT_EQ(pa->probe_base, 0x2000u);
  EXPECT_EQ(std::vector<uint8_t>(pa->probe_key.begin(), pa->probe_key.end()), probe);
  const uint64_t huge = UINT64_MAX - 3;  // an address length that would wrap the offsets
  std::memcpy(a.data() + 8, &huge, 8);
  EXPECT_FALSE(ub::parse_addr(a).has_value());
}

TEST(UcxAmWire, BatchWalkStopsAtBrokenFraming) {
  namespace am = rwin::transport::ucx_am;
  std::vector<uint8_t> data;
  am::AmRequest w;
  w.op = static_cast<uint8_t>(rwin::transport::Op::Write);
  w.sender = 1;
  w.len = 4;
  const uint8_t payload[4] = {1, 2, 3, 4};
  am::append_request(data, w, payload, 4);
  am::AmRequest bad = w;
  bad.sender = 9;  // outside a job of 4
  am::append_request(data, bad, payload, 4);
  std::vector<size_t> seen;
  auto walk = am::walk_batch(data.data(), data.size(), 4, [&](const am::AmRequest&, size_t at, size_t n) {
    EXPECT_EQ(n, 4u);
    seen.push_back(at);
  });
  EXPECT_EQ(seen, std::vector<size_t>{sizeof(am::AmRequest)});
  EXPECT_TRUE(walk.malformed);
  EXPECT_EQ(walk.bad.sender, 9);
  EXPECT_FALSE(walk.complete(data.size(), 2));
  // A Write whose length runs past the data stops the walk without handing it out.
  data.resize(sizeof(am::AmRequest) + 4);
  am::AmRequest longer = w;
  longer.len = 1000;
  am::append_request(data, longer, payload, 0);
  seen.clear();
  walk = am::walk_batch(data.data(), data.size(), 4, [&](const am::AmRequest&, size_t at, size_t) { seen.push_back(at); });
  EXPECT_EQ(seen.size(), 1u);
  EXPECT_FALSE(walk.malformed);
  EXPECT_EQ(walk.off, sizeof(am::AmRequest) + 4);
}

TEST(StoreWire, DecodeFrameInvertsEncodeAndChecksTheHeaderFirst) {
  namespace w = rwin::bootstrap::wire;
  w::Request r;
  r.op = w::Op::Wait;
  r.keys = {"a", "rwin/x"};
  const auto f = w::encode_request(r);
  w::Request got;
  size_t used = 0;
  std::string why;
  ASSERT_EQ(w::decode_frame(f.data(), f.size(), w::ConnState::Data, got, used, why), w::Decode::Ok);
  EXPECT_EQ(used, f.size());
  EXPECT_EQ(got.keys, r.keys);
  EXPECT_EQ(w::decode_frame(f.data(), f.size() - 1, w::ConnState::Data, got, used, why), w::Decode::NeedMore);
  // The same frame before authentication, or on a lease, is refused from its header alone.
  EXPECT_EQ(w::decode_frame(f.data(), f.size(), w::ConnState::ExpectHello, got, used, why), w::Decode::BadHeader);
  EXPECT_NE(why.find("before hello"), std::string::npos) << why;
  EXPECT_EQ(w::decode_frame(f.data(), f.size(), w::ConnState::Lease, got, used, why), w::Decode::BadHeader);
  auto g = f;
  g.push_back(0);  // body longer than its keys
  g[8]++;
  EXPECT_EQ(w::decode_frame(g.data(), g.size(), w::ConnState::Data, got, used, why), w::Decode::BadBody);
  g = f;
  g[8] = 0xff, g[9] = 0xff, g[10] = 0xff, g[11] = 0x7f;  // declares more than the cap: refused unread
  EXPECT_EQ(w::decode_frame(g.data(), g.size(), w::ConnState::Data, got, used, why), w::Decode::BadHeader);
  g = f;
  g[0] ^= 1;
  EXPECT_EQ(w::decode_frame(g.data(), g.size(), w::ConnState::Data, got, used, why), w::Decode::BadHeader);
  // A goodbye with a reason round-trips; one past the reason cap is refused unread.
  w::Request bye;
  bye.op = w::Op::Goodbye;
  bye.reason = "peer 3 failed (its bootstrap connection closed)";
  const auto b = w::encode_request(bye);
  ASSERT_EQ(w::decode_frame(b.data(), b.size(), w::ConnState::Lease, got, used, why), w::Decode::Ok);
  EXPECT_EQ(got.reason, bye.reason);
  bye.reason.assign(w::kMaxGoodbyeReason + 1, 'x');
  const auto big = w::encode_request(bye);
  EXPECT_EQ(w::decode_frame(big.data(), big.size(), w::ConnState::Lease, got, used, why), w::Decode::BadHeader);
}

}  // namespace
