// The verbs transport's wire blobs (connection blob, memory key blob): pure (de)serialisation,
// no device needed.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "transport/verbs/verbs_blob.h"

namespace {

using rwin::transport::TransportError;
using rwin::transport::verbs::ConnBlob;
using rwin::transport::verbs::EndpointBlob;
using rwin::transport::verbs::KeyBlob;

ConnBlob sample_conn() {
  ConnBlob b;
  b.rank = 3;
  b.peer = 1;
  b.qpn = 0x123456;
  b.psn = 0xabcdef;
  b.lid = 0xbeef;
  b.mtu = 3;
  b.link_layer = 2;
  for (int i = 0; i < 16; ++i) b.gid[i] = static_cast<uint8_t>(0xf0 + i);
  b.gid_type = 3;
  b.rd_atomic_init = 16;
  b.rd_atomic_resp = 8;
  b.flush_addr = 0x00007f00aabbc000ull;
  b.flush_rkey = 0x11223344;
  b.lane = 2;
  b.lanes = 4;
  b.rail = 1;
  return b;
}

KeyBlob sample_key() {
  KeyBlob k;
  k.addr = 0x00007f1234567000ull;
  k.bytes = 8ull << 20;
  k.rails = 2;
  k.rkeys = {0xdeadbeef, 0x0badf00d, 0, 0};
  return k;
}

void expect_same_qp_address(const rwin::transport::verbs::QpAddress& b, const rwin::transport::verbs::QpAddress& a) {
  EXPECT_EQ(b.qpn, a.qpn);
  EXPECT_EQ(b.psn, a.psn);
  EXPECT_EQ(b.lid, a.lid);
  EXPECT_EQ(b.mtu, a.mtu);
  EXPECT_EQ(b.link_layer, a.link_layer);
  EXPECT_EQ(b.gid, a.gid);
  EXPECT_EQ(b.gid_type, a.gid_type);
  EXPECT_EQ(b.rd_atomic_init, a.rd_atomic_init);
  EXPECT_EQ(b.rd_atomic_resp, a.rd_atomic_resp);
  EXPECT_EQ(b.flush_addr, a.flush_addr);
  EXPECT_EQ(b.flush_rkey, a.flush_rkey);
  EXPECT_EQ(b.lane, a.lane);
  EXPECT_EQ(b.lanes, a.lanes);
  EXPECT_EQ(b.rail, a.rail);
}

// Runs `f`, expects TransportError whose message contains `part`.
template <class F>
void expect_rejected(F&& f, const std::string& part) {
  try {
    f();
    ADD_FAILURE() << "accepted, expected a TransportError mentioning '" << part << "'";
  } catch (const TransportError& e) {
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
}

TEST(VerbsBlob, ConnRoundTripKeepsEveryField) {
  const ConnBlob a = sample_conn();
  const auto bytes = a.pack();
  ASSERT_EQ(bytes.size(), ConnBlob::kBytes);
  const ConnBlob b = ConnBlob::unpack(bytes);
  EXPECT_EQ(b.rank, a.rank);
  EXPECT_EQ(b.peer, a.peer);
  expect_same_qp_address(b, a);
}

TEST(VerbsBlob, ConnEncodingIsLittleEndianAndFixed) {
  const auto bytes = sample_conn().pack();
  // magic "RWQP", version 4, length 64
  EXPECT_EQ(bytes[0], 'R');
  EXPECT_EQ(bytes[1], 'W');
  EXPECT_EQ(bytes[2], 'Q');
  EXPECT_EQ(bytes[3], 'P');
  EXPECT_EQ(bytes[4], 4);
  EXPECT_EQ(bytes[5], 0);
  EXPECT_EQ(bytes[6], ConnBlob::kBytes);
  // qpn 0x123456 at offset 16
  EXPECT_EQ(bytes[16], 0x56);
  EXPECT_EQ(bytes[17], 0x34);
  EXPECT_EQ(bytes[18], 0x12);
  EXPECT_EQ(bytes[19], 0x00);
}

// The collective blob is on the wire between ranks of one job: its bytes are pinned, so a change
// of layout (e.g. of the QpAddress part it shares with EndpointBlob) must come with a new version.
TEST(VerbsBlob, ConnEncodingIsPinned) {
  const std::vector<uint8_t> want = {'R', 'W', 'Q', 'P', 4, 0, 64, 0,                    // header
                                     3, 0, 0, 0, 1, 0, 0, 0,                             // rank, peer
                                     0x56, 0x34, 0x12, 0, 0xef, 0xcd, 0xab, 0,           // qpn, psn
                                     0xef, 0xbe, 3, 2,                                   // lid, mtu, link layer
                                     0xf0, 0xf1, 0xf2, 0xf3, 0xf4, 0xf5, 0xf6, 0xf7,     // gid
                                     0xf8, 0xf9, 0xfa, 0xfb, 0xfc, 0xfd, 0xfe, 0xff,
                                     3, 16, 8, 2,  // gid type (roce v2), rd_atomic init / resp, lane
                                     0x00, 0xc0, 0xbb, 0xaa, 0x00, 0x7f, 0, 0,           // flush target address
                                     0x44, 0x33, 0x22, 0x11, 4, 0, 1, 0};  // its rkey, lanes (u16), rail, reserved
  EXPECT_EQ(sample_conn().pack(), want);
}

TEST(VerbsBlob, EndpointRoundTripKeepsEveryField) {
  EndpointBlob a;
  static_cast<rwin::transport::verbs::QpAddress&>(a) = sample_conn();
  a.instance = 0x0123456789abcdefull;
  a.slot = 7;
  const auto bytes = a.pack();
  ASSERT_EQ(bytes.size(), EndpointBlob::kBytes);
  EXPECT_EQ(bytes[2], 'E');  // "RWEP": not the collective blob's magic
  const EndpointBlob b = EndpointBlob::unpack(bytes);
  EXPECT_EQ(b.instance, a.instance);
  EXPECT_EQ(b.slot, a.slot);
  expect_same_qp_address(b, a);
  // Neither kind of connection blob is taken for the other; every truncation is refused.
  expect_rejected([&] { EndpointBlob::unpack(sample_conn().pack()); }, "bad magic");
  expect_rejected([&] { ConnBlob::unpack(bytes); }, "bad magic");
  for (size_t n = 0; n < bytes.size(); ++n) {
    std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + static_cast<long>(n));
    expect_rejected([&] { EndpointBlob::unpack(cut); }, n < 8 ? "truncated" : "length mismatch");
  }
}

TEST(VerbsBlob, KeyRoundTripKeepsEveryField) {
  const KeyBlob a = sample_key();
  const auto bytes = a.pack();
  ASSERT_EQ(bytes.size(), KeyBlob::kBytes);
  const KeyBlob b = KeyBlob::unpack(bytes);
  EXPECT_EQ(b.addr, a.addr);
  EXPECT_EQ(b.bytes, a.bytes);
  EXPECT_EQ(b.rails, a.rails);
  EXPECT_EQ(b.rkeys, a.rkeys);
}

TEST(VerbsBlob, EveryTruncationIsRejected) {
  const auto conn = sample_conn().pack();
  for (size_t n = 0; n < conn.size(); ++n) {
    std::vector<uint8_t> cut(conn.begin(), conn.begin() + static_cast<long>(n));
    expect_rejected([&] { ConnBlob::unpack(cut); }, n < 8 ? "truncated" : "length mismatch");
  }
  const auto key = sample_key().pack();
  for (size_t n = 0; n < key.size(); ++n) {
    std::vector<uint8_t> cut(key.begin(), key.begin() + static_cast<long>(n));
    expect_rejected([&] { KeyBlob::unpack(cut); }, n < 8 ? "truncated" : "length mismatch");
  }
}

TEST(VerbsBlob, TrailingBytesAreRejected) {
  auto key = sample_key().pack();
  key.push_back(0);
  expect_rejected([&] { KeyBlob::unpack(key); }, "length mismatch");
}

TEST(VerbsBlob, WrongMagicIsRejected) {
  auto key = sample_key().pack();
  key[0] ^= 0xff;
  expect_rejected([&] { KeyBlob::unpack(key); }, "bad magic");
  // A connection blob is not a key blob and vice versa.
  expect_rejected([&] { KeyBlob::unpack(sample_conn().pack()); }, "bad magic");
  expect_rejected([&] { ConnBlob::unpack(sample_key().pack()); }, "bad magic");
}

// Blobs of older builds, as they wrote them: version 1 (44 bytes: before the GID type and
// rd_atomic depths), version 2 (48 bytes: before the flush target) and version 3 (the same 64
// bytes, lane and lanes reserved as zero). Refused by name, never half-read.
TEST(VerbsBlob, OldVersionsAreRefusedByName) {
  for (const auto& [version, cut] : {std::pair{1, 20}, std::pair{2, 16}, std::pair{3, 0}}) {
    auto old = sample_conn().pack();
    old.resize(old.size() - static_cast<size_t>(cut));
    old[4] = static_cast<uint8_t>(version);
    old[6] = static_cast<uint8_t>(old.size());
    const std::string want = "has version " + std::to_string(version) + ", this build speaks version 4";
    expect_rejected([&] { ConnBlob::unpack(old); }, want);
    EndpointBlob e;
    static_cast<rwin::transport::verbs::QpAddress&>(e) = sample_conn();
    auto eold = e.pack();
    eold.erase(eold.end() - cut, eold.end());
    eold[4] = static_cast<uint8_t>(version);
    eold[6] = static_cast<uint8_t>(eold.size());
    expect_rejected([&] { EndpointBlob::unpack(eold); }, want);
  }
}

TEST(VerbsBlob, WrongVersionIsRejected) {
  auto conn = sample_conn().pack();
  conn[4] = 5;
  expect_rejected([&] { ConnBlob::unpack(conn); }, "version 5");
  auto key = sample_key().pack();
  key[4] = 0;
  expect_rejected([&] { KeyBlob::unpack(key); }, "version 0");
}

TEST(VerbsBlob, WrongLengthFieldIsRejected) {
  auto conn = sample_conn().pack();
  conn[6] = static_cast<uint8_t>(conn[6] + 1);
  expect_rejected([&] { ConnBlob::unpack(conn); }, "length mismatch");
}

TEST(VerbsBlob, KeyWithoutDevicesOrWithTooManyIsRejected) {
  for (uint32_t rails : {0u, 5u, 0xffffffffu}) {
    KeyBlob k = sample_key();
    k.rails = rails;
    expect_rejected([&] { KeyBlob::unpack(k.pack()); }, "names " + std::to_string(rails) + " devices");
  }
  // Version 1 (one rkey, 28 bytes) is refused by name.
  auto old = sample_key().pack();
  old.resize(28);
  old[4] = 1;
  old[6] = 28;
  expect_rejected([&] { KeyBlob::unpack(old); }, "has version 1, this build speaks version 2");
}

TEST(VerbsBlob, KeyThatWrapsTheAddressSpaceIsRejected) {
  KeyBlob k = sample_key();
  k.addr = ~0ull - 10;
  k.bytes = 100;
  expect_rejected([&] { KeyBlob::unpack(k.pack()); }, "wraps");
}

TEST(VerbsBlob, RandomGarbageIsRejected) {
  // Deterministic pseudo-random bytes of every length up to twice the blob size.
  uint32_t x = 12345;
  for (size_t n = 0; n < 2 * KeyBlob::kBytes; ++n) {
    std::vector<uint8_t> g(n);
    for (auto& b : g) {
      x = x * 1103515245u + 12345u;
      b = static_cast<uint8_t>(x >> 16);
    }
    EXPECT_THROW(KeyBlob::unpack(g), TransportError) << n << " bytes";
    EXPECT_THROW(ConnBlob::unpack(g), TransportError) << n << " bytes";
    EXPECT_THROW(EndpointBlob::unpack(g), TransportError) << n << " bytes";
  }
}

}  // namespace
