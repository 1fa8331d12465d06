// The agent's descriptor and control frames (agent/agent_wire.h): round trips, and every
// truncation, extension and foreign version refused with a reason.
#include <gtest/gtest.h>

#include "agent/agent_wire.h"

using namespace rwin::agent;

namespace {

Descriptor sample_descriptor() {
  Descriptor d;
  d.transport = "ucx";
  d.address = "127.0.0.1:40123";
  for (size_t i = 0; i < d.token.size(); ++i) d.token[i] = static_cast<uint8_t>(i * 7 + 1);
  d.region_id = 3;
  d.generation = 9;
  d.base = 0x7f0000001000;
  d.bytes = 1 << 20;
  d.key = {1, 2, 3, 4, 5, 6, 7};
  return d;
}

TEST(AgentWire, DescriptorRoundTrip) {
  const auto b = encode(sample_descriptor());
  std::string why;
  const auto d = decode_descriptor(b, why);
  ASSERT_TRUE(d) << why;
  EXPECT_EQ(d->transport, "ucx");
  EXPECT_EQ(d->address, "127.0.0.1:40123");
  EXPECT_EQ(d->token, sample_descriptor().token);
  EXPECT_EQ(d->region_id, 3u);
  EXPECT_EQ(d->generation, 9u);
  EXPECT_EQ(d->base, 0x7f0000001000u);
  EXPECT_EQ(d->bytes, 1u << 20);
  EXPECT_EQ(d->key, sample_descriptor().key);
}

TEST(AgentWire, DescriptorEveryTruncationRefused) {
  const auto b = encode(sample_descriptor());
  for (size_t n = 0; n < b.size(); ++n) {
    std::string why;
    EXPECT_FALSE(decode_descriptor(std::span(b.data(), n), why)) << n;
    EXPECT_FALSE(why.empty());
  }
  auto longer = b;
  longer.push_back(0);
  std::string why;
  EXPECT_FALSE(decode_descriptor(longer, why));
  EXPECT_NE(why.find("after the end"), std::string::npos) << why;
}

TEST(AgentWire, DescriptorForeignVersionAndMagic) {
  auto b = encode(sample_descriptor());
  b[4] = 2;
  std::string why;
  EXPECT_FALSE(decode_descriptor(b, why));
  EXPECT_NE(why.find("version 2"), std::string::npos) << why;
  b = encode(sample_descriptor());
  b[0] ^= 0xff;
  EXPECT_FALSE(decode_descriptor(b, why));
  EXPECT_NE(why.find("magic"), std::string::npos) << why;
}

TEST(AgentWire, DescriptorHostileLengthsAndRanges) {
  auto d = sample_descriptor();
  d.bytes = 0;
  std::string why;
  EXPECT_FALSE(decode_descriptor(encode(d), why));
  d = sample_descriptor();
  d.base = UINT64_MAX - 10;  // wraps
  EXPECT_FALSE(decode_descriptor(encode(d), why));
  // A key length far past the input.
  auto b = encode(sample_descriptor());
  const size_t key_len_at = b.size() - sample_descriptor().key.size() - 4;
  b[key_len_at + 3] = 0x7f;
  EXPECT_FALSE(decode_descriptor(b, why));
  // An address string longer than kMaxText.
  d = sample_descriptor();
  d.address.assign(kMaxText + 1, 'a');
  EXPECT_FALSE(decode_descriptor(encode(d), why));
}

TEST(AgentWire, FramesRoundTripAndGarbage) {
  Msg m;
  m.type = MsgType::Hello;
  m.token = sample_descriptor().token;
  m.text = "127.0.0.1:1";
  m.endpoint = {9, 8, 7};
  const auto f = encode(m);
  ASSERT_GE(f.size(), 4u);
  const uint32_t len = uint32_t(f[0]) | uint32_t(f[1]) << 8 | uint32_t(f[2]) << 16 | uint32_t(f[3]) << 24;
  EXPECT_EQ(len, f.size() - 4);
  std::string why;
  auto d = decode_body(std::span(f).subspan(4), why);
  ASSERT_TRUE(d) << why;
  EXPECT_EQ(d->type, MsgType::Hello);
  EXPECT_EQ(d->token, m.token);
  EXPECT_EQ(d->text, m.text);
  EXPECT_EQ(d->endpoint, m.endpoint);
  for (size_t n = 0; n + 4 < f.size(); ++n) EXPECT_FALSE(decode_body(std::span(f.data() + 4, n), why)) << n;
  for (MsgType t : {MsgType::Welcome, MsgType::Ready, MsgType::Ping, MsgType::Import, MsgType::ImportReply,
                    MsgType::Revoke, MsgType::RevokeAck, MsgType::Refuse, MsgType::Bye}) {
    Msg x;
    x.type = t;
    x.req = 5;
    x.region_id = 6;
    x.generation = 7;
    x.status = 1;
    x.text = "no";
    const auto g = encode(x);
    auto y = decode_body(std::span(g).subspan(4), why);
    ASSERT_TRUE(y) << msg_name(t) << ": " << why;
    EXPECT_EQ(y->type, t);
    auto longer = std::vector<uint8_t>(g.begin() + 4, g.end());
    longer.push_back(0);
    EXPECT_FALSE(decode_body(longer, why)) << msg_name(t);
  }
  std::vector<uint8_t> bad = {0x54, 0x43, 0x57, 0x52, 1, 42};  // unknown type
  EXPECT_FALSE(decode_body(bad, why));
  EXPECT_NE(why.find("unknown frame type 42"), std::string::npos) << why;
  bad[4] = 3;  // version
  EXPECT_FALSE(decode_body(bad, why));
  EXPECT_NE(why.find("version 3"), std::string::npos) << why;
}

}  // namespace
