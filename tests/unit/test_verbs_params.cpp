// The verbs knobs and the rules fed by them (transport/verbs/verbs_params.h): parsing and validation
// of RWIN_IB_TC / SL / HOP_LIMIT / TIMEOUT / RETRY_CNT / GID_TYPE / GID_SUBNET / FORK_SAFE and
// RWIN_VERBS_QPS_PER_PEER / STRIPE_MIN, the
// subnet match, and the RDMA read/atomic depth rule (rd_atomic_limits). No device needed.
#include <gtest/gtest.h>

#include <string>

#include "env_guard.h"
#include "rwin/rwin.h"
#include "transport/transport.h"
#include "transport/verbs/verbs_params.h"

namespace {

namespace rt = rwin::transport;

constexpr const char* kVars[] = {"RWIN_IB_TC",       "RWIN_IB_SL",        "RWIN_IB_HOP_LIMIT",  "RWIN_IB_TIMEOUT",
                                 "RWIN_IB_RETRY_CNT", "RWIN_IB_GID_TYPE", "RWIN_IB_GID_SUBNET", "RWIN_IB_FORK_SAFE",
                                 "RWIN_VERBS_QPS_PER_PEER", "RWIN_VERBS_STRIPE_MIN", "RWIN_IB_HCA"};

class Env : public rwin::test::EnvGuard {
 public:
  Env() {
    for (const char* v : kVars) unset(v);
  }
};

// VerbsParams::from_env()'s error with `var` = `text`, "" when accepted; and the same through
// Options::from_env, which must refuse it as InvalidArgument with the same text.
std::string params_error(const char* var, const std::string& text) {
  Env env;
  env.set(var, text);
  std::string err;
  try {
    (void)rt::VerbsParams::from_env();
  } catch (const rt::TransportError& e) {
    err = e.what();
  }
  try {
    (void)rwin::Options::from_env(rwin::Options{});
    EXPECT_EQ(err, "") << "Options::from_env accepted " << var << "=" << text;
  } catch (const rwin::Error& e) {
    EXPECT_EQ(e.code(), rwin::ErrorCode::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find(err), std::string::npos) << e.what();
  }
  return err;
}

TEST(VerbsParams, DefaultsAreTheDocumentedOnes) {
  Env env;
  const auto p = rt::VerbsParams::from_env();
  EXPECT_EQ(p.traffic_class, 0);
  EXPECT_EQ(p.service_level, 0);
  EXPECT_EQ(p.hop_limit, 64);
  EXPECT_EQ(p.ack_timeout, 18);
  EXPECT_EQ(p.retry_count, 6);
  EXPECT_EQ(p.gid_type, rt::GidType::Auto);
  EXPECT_FALSE(p.gid_subnet.set);
  EXPECT_EQ(p.fork_safe, rt::ForkSafe::Auto);
  EXPECT_EQ(p.qps_per_peer, 1);
  EXPECT_EQ(p.stripe_min, 65536u);
  EXPECT_EQ(p.text(),
            "tc 0 sl 0 hop_limit 64 gid_type auto timeout 18 retry_cnt 6 fork_safe auto qps_per_peer 1 stripe_min 65536");
  // A default-made TransportConfig carries the same values as an empty environment.
  EXPECT_EQ(rt::TransportConfig{}.verbs.text(), p.text());
}

TEST(VerbsParams, ValuesAreRead) {
  Env env;
  env.set("RWIN_IB_TC", "106");
  env.set("RWIN_IB_SL", "3");
  env.set("RWIN_IB_HOP_LIMIT", "1");
  env.set("RWIN_IB_TIMEOUT", "14");
  env.set("RWIN_IB_RETRY_CNT", "7");
  env.set("RWIN_IB_GID_TYPE", "roce-v1");
  env.set("RWIN_IB_GID_SUBNET", "10.1.0.0/16");
  env.set("RWIN_IB_FORK_SAFE", "1");
  env.set("RWIN_VERBS_QPS_PER_PEER", "4");
  env.set("RWIN_VERBS_STRIPE_MIN", "16K");
  const auto p = rt::VerbsParams::from_env();
  EXPECT_EQ(p.text(),
            "tc 106 sl 3 hop_limit 1 gid_type roce-v1 gid_subnet 10.1.0.0/16 timeout 14 retry_cnt 7 fork_safe 1 "
            "qps_per_peer 4 stripe_min 16384");
}

TEST(VerbsParams, BadValuesNameTheVariableTextAndRange) {
  EXPECT_NE(params_error("RWIN_IB_TC", "256").find("RWIN_IB_TC='256' is not an integer in [0, 255]"), std::string::npos);
  EXPECT_NE(params_error("RWIN_IB_TC", "0x6a").find("digits only"), std::string::npos);
  EXPECT_NE(params_error("RWIN_IB_TC", "-1").find("RWIN_IB_TC='-1'"), std::string::npos);
  EXPECT_NE(params_error("RWIN_IB_SL", "16").find("RWIN_IB_SL='16' is not an integer in [0, 15]"), std::string::npos);
  EXPECT_NE(params_error("RWIN_IB_HOP_LIMIT", "0").find("[1, 255]"), std::string::npos);
  EXPECT_NE(params_error("RWIN_IB_TIMEOUT", "0").find("wait forever is refused"), std::string::npos);
  EXPECT_NE(params_error("RWIN_IB_TIMEOUT", "32").find("[1, 31]"), std::string::npos);
  EXPECT_NE(params_error("RWIN_IB_RETRY_CNT", "8").find("[0, 7]"), std::string::npos);
  EXPECT_NE(params_error("RWIN_IB_GID_TYPE", "v2").find("expected auto, roce-v2, roce-v1 or ib"), std::string::npos);
  EXPECT_NE(params_error("RWIN_IB_FORK_SAFE", "yes").find("not auto, 1 or 0"), std::string::npos);
  EXPECT_NE(params_error("RWIN_IB_GID_SUBNET", "10.1.0.0/33").find("prefix length"), std::string::npos);
  EXPECT_NE(params_error("RWIN_IB_GID_SUBNET", "10.1/8").find("neither an IPv4 nor an IPv6"), std::string::npos);
  EXPECT_NE(params_error("RWIN_IB_GID_SUBNET", "fe80::/129").find("prefix length"), std::string::npos);
  EXPECT_NE(params_error("RWIN_VERBS_QPS_PER_PEER", "0").find("RWIN_VERBS_QPS_PER_PEER='0' is not an integer in [1, 16]"),
            std::string::npos);
  EXPECT_NE(params_error("RWIN_VERBS_QPS_PER_PEER", "17").find("[1, 16]"), std::string::npos);
  EXPECT_NE(params_error("RWIN_VERBS_STRIPE_MIN", "0").find("outside [1, 2 GiB]"), std::string::npos);
  EXPECT_NE(params_error("RWIN_VERBS_STRIPE_MIN", "4G").find("RWIN_VERBS_STRIPE_MIN='4G'"), std::string::npos);
  EXPECT_NE(params_error("RWIN_VERBS_STRIPE_MIN", "64X").find("unknown suffix"), std::string::npos);
  EXPECT_EQ(params_error("RWIN_VERBS_STRIPE_MIN", "2GiB"), "");
  EXPECT_EQ(params_error("RWIN_IB_TC", "255"), "");
  EXPECT_EQ(params_error("RWIN_IB_GID_SUBNET", "fe80::/10"), "");
}

// RWIN_IB_HCA, NCCL_IB_HCA's syntax: names (prefixes unless '='), optional ports, '^' excludes.
TEST(VerbsParams, HcaListIsParsedAsNcclDoes) {
  const auto h = rt::parse_hca_list("RWIN_IB_HCA", "mlx5_0:1,mlx5_1");
  EXPECT_TRUE(h.set);
  EXPECT_FALSE(h.exclude);
  EXPECT_FALSE(h.exact);
  ASSERT_EQ(h.entries.size(), 2u);
  EXPECT_EQ(h.entries[0].name, "mlx5_0");
  EXPECT_EQ(h.entries[0].port, 1);
  EXPECT_EQ(h.entries[1].name, "mlx5_1");
  EXPECT_EQ(h.entries[1].port, 0);  // RWIN_IB_PORT
  EXPECT_TRUE(h.matches(h.entries[0], "mlx5_0"));
  EXPECT_TRUE(h.matches(rt::HcaList::Entry{"mlx5", 0}, "mlx5_10"));  // a prefix
  const auto exact = rt::parse_hca_list("RWIN_IB_HCA", "=rxe");
  EXPECT_TRUE(exact.exact);
  EXPECT_FALSE(exact.matches(exact.entries[0], "rxe0"));
  EXPECT_TRUE(exact.matches(exact.entries[0], "rxe"));
  const auto ex = rt::parse_hca_list("RWIN_IB_HCA", "^mlx5_2,mlx5_3:2");
  EXPECT_TRUE(ex.exclude);
  ASSERT_EQ(ex.entries.size(), 2u);
  EXPECT_EQ(ex.entries[1].port, 2);
  EXPECT_NE(params_error("RWIN_IB_HCA", ",").find("an empty device name"), std::string::npos);
  EXPECT_NE(params_error("RWIN_IB_HCA", "rxe0,").find("an empty device name"), std::string::npos);
  EXPECT_NE(params_error("RWIN_IB_HCA", "rxe0:0").find("port of rxe0"), std::string::npos);
  EXPECT_NE(params_error("RWIN_IB_HCA", "rxe0:x").find("port of rxe0"), std::string::npos);
  EXPECT_NE(params_error("RWIN_IB_HCA", "a,b,c,d,e").find("5 devices"), std::string::npos);
  EXPECT_EQ(params_error("RWIN_IB_HCA", "a,b,c,d"), "");
  Env env;
  env.set("RWIN_IB_HCA", "rxe0,rxe1:1");
  EXPECT_EQ(rt::VerbsParams::from_env().text(),
            "tc 0 sl 0 hop_limit 64 gid_type auto timeout 18 retry_cnt 6 fork_safe auto qps_per_peer 1 stripe_min 65536 "
            "hca rxe0,rxe1:1");
}

TEST(VerbsParams, SubnetMatchesGids) {
  auto gid = [](std::initializer_list<int> tail, bool v4) {
    uint8_t g[16] = {};
    if (v4) g[10] = g[11] = 0xff;
    int i = v4 ? 12 : 0;
    for (int b : tail) g[i++] = static_cast<uint8_t>(b);
    return std::array<uint8_t, 16>{g[0], g[1], g[2],  g[3],  g[4],  g[5],  g[6],  g[7],
                                   g[8], g[9], g[10], g[11], g[12], g[13], g[14], g[15]};
  };
  const auto s = rt::parse_gid_subnet("X", "10.1.0.0/16");
  EXPECT_TRUE(s.matches(gid({10, 1, 2, 3}, true).data()));
  EXPECT_FALSE(s.matches(gid({10, 2, 2, 3}, true).data()));
  // An IPv4 prefix never matches a GID that is not IPv4-mapped (e.g. a link-local fe80:: GID).
  EXPECT_FALSE(s.matches(gid({0xfe, 0x80}, false).data()));
  const auto host = rt::parse_gid_subnet("X", "10.1.2.3");  // no /n: that one address
  EXPECT_TRUE(host.matches(gid({10, 1, 2, 3}, true).data()));
  EXPECT_FALSE(host.matches(gid({10, 1, 2, 4}, true).data()));
  const auto odd = rt::parse_gid_subnet("X", "10.1.2.128/25");
  EXPECT_TRUE(odd.matches(gid({10, 1, 2, 200}, true).data()));
  EXPECT_FALSE(odd.matches(gid({10, 1, 2, 127}, true).data()));
  const auto ll = rt::parse_gid_subnet("X", "fe80::/10");
  EXPECT_TRUE(ll.matches(gid({0xfe, 0x80, 0, 0, 0, 0, 0, 0, 1}, false).data()));
  EXPECT_FALSE(ll.matches(gid({10, 1, 2, 3}, true).data()));
  const auto all = rt::parse_gid_subnet("X", "::/0");
  EXPECT_TRUE(all.matches(gid({10, 1, 2, 3}, true).data()));
  EXPECT_TRUE(rt::GidSubnet{}.matches(gid({1}, false).data()));  // unset: everything
}

// Our initiator depth never exceeds the peer's responder resources (else the peer NAKs the excess:
// a fatal invalid-request error), nor our device's initiator limit; both capped at 16.
TEST(VerbsParams, RdAtomicRule) {
  rt::RdAtomic r;
  ASSERT_EQ(rt::rd_atomic_limits(16, 16, 16, 16, r), "");
  EXPECT_EQ(r.max_rd_atomic, 16);
  EXPECT_EQ(r.max_dest_rd_atomic, 16);
  // A ConnectX-class device (init 16, resp 16) facing a device that accepts only 4 as responder.
  ASSERT_EQ(rt::rd_atomic_limits(16, 16, 16, 4, r), "");
  EXPECT_EQ(r.max_rd_atomic, 4);
  EXPECT_EQ(r.max_dest_rd_atomic, 16);
  // Our device's own initiator limit is the bound when it is the smaller.
  ASSERT_EQ(rt::rd_atomic_limits(2, 128, 255, 128, r), "");
  EXPECT_EQ(r.max_rd_atomic, 2);
  EXPECT_EQ(r.max_dest_rd_atomic, 16);  // capped
  // rxe reports 128 for both: capped at 16 on each side.
  ASSERT_EQ(rt::rd_atomic_limits(128, 128, 16, 16, r), "");
  EXPECT_EQ(r.max_rd_atomic, 16);
  // Zero anywhere: reads and atomics cannot work; the message says whose and which.
  EXPECT_NE(rt::rd_atomic_limits(16, 16, 16, 0, r).find("the peer accepts no RDMA read/atomic as responder"),
            std::string::npos);
  EXPECT_NE(rt::rd_atomic_limits(0, 16, 16, 16, r).find("this device allows no outstanding"), std::string::npos);
  EXPECT_NE(rt::rd_atomic_limits(16, -1, 16, 16, r).find("this device accepts no"), std::string::npos);
  EXPECT_NE(rt::rd_atomic_limits(16, 16, 0, 16, r).find("the peer allows no"), std::string::npos);
  EXPECT_EQ(rt::rd_atomic_advertised(300), 16);
  EXPECT_EQ(rt::rd_atomic_advertised(-5), 0);
}

}  // namespace
