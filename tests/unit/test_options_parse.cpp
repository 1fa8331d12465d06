// Strict integer parsing (bootstrap/parse_number.h) and every place that reads an integer from the
// environment or a command line: RWIN_* sizes and counts (options.cpp), the launchers' rank and size
// variables (launch_env.cpp), the port of host:port, and the job ids a root port is derived from.
// Issue 9 found ' -1' (sign wrapped by strtoull), '18014398509481985K' and '99999999999G'
// (multiply overflow) accepted.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "bootstrap/bootstrap.h"
#include "bootstrap/netif.h"
#include "bootstrap/parse_number.h"
#include "rwin/rwin.h"

#include "env_guard.h"

namespace rb = rwin::bootstrap;

namespace {

// Texts that no integer knob accepts, with or without a size suffix.
const char* const kNeverANumber[] = {
    "",     " -1",  "-1",  "+1", "1 ",  " 1", "0x10", "1K ", "K", "1KK", "-0", "1.0", "1e3", "abc",
    "1\n", "\t1", "1,000", "١", /* an Arabic-Indic digit */
};

// The launcher variables and the knobs these tests set.
class Env : public rwin::test::EnvGuard {
 public:
  Env()
      : EnvGuard({"RWIN_CHUNK_BYTES", "RWIN_PIPELINE_DEPTH", "RWIN_TIMEOUT_MS", "RWIN_STARTUP_TIMEOUT_MS",
                  "RWIN_IB_PORT", "RWIN_GID_INDEX", "RWIN_SPIN_US"}) {}
};

// Options::from_env's error for one variable set to `text`, or "" when it was accepted.
std::string options_error(const char* var, const std::string& text) {
  Env env;
  env.set(var, text);
  try {
    (void)rwin::Options::from_env(rwin::Options{});
  } catch (const rwin::Error& e) {
    EXPECT_EQ(e.code(), rwin::ErrorCode::InvalidArgument);
    return e.what();
  }
  return {};
}

uint64_t size_of(const std::string& text) {
  uint64_t v = 0;
  const std::string why = rb::parse_size(text, v);
  EXPECT_EQ(why, "") << "'" << text << "'";
  return v;
}

bool size_refused(const std::string& text) {
  uint64_t v = 12345;
  const bool refused = !rb::parse_size(text, v).empty();
  EXPECT_EQ(v, 12345u) << "a refused parse must leave the output alone: '" << text << "'";
  return refused;
}

}  // namespace

TEST(ParseNumber, SizeRefusesTheIssueCases) {
  EXPECT_TRUE(size_refused(" -1"));
  EXPECT_TRUE(size_refused("18014398509481985K"));  // 2^54 + 1 KiB: the product wraps
  EXPECT_TRUE(size_refused("99999999999G"));
}

TEST(ParseNumber, SizeRefusesSignsSpacesAndJunk) {
  for (const char* t : kNeverANumber) EXPECT_TRUE(size_refused(t)) << "'" << t << "'";
  for (const char* t : {"1Ki", "1KB", "1T", "1 K", "1Gib", "1mib", "G1"}) EXPECT_TRUE(size_refused(t)) << t;
}

TEST(ParseNumber, SizeOverflowOfValueAndOfProduct) {
  EXPECT_EQ(size_of("18446744073709551615"), UINT64_MAX);
  EXPECT_TRUE(size_refused("18446744073709551616"));
  EXPECT_TRUE(size_refused("99999999999999999999999"));
  // The largest multiple of each suffix that fits, and the next one that does not.
  EXPECT_EQ(size_of("18014398509481983K"), (UINT64_MAX >> 10) << 10);
  EXPECT_TRUE(size_refused("18014398509481984K"));
  EXPECT_EQ(size_of("17592186044415MiB"), (UINT64_MAX >> 20) << 20);
  EXPECT_TRUE(size_refused("17592186044416M"));
  EXPECT_EQ(size_of("17179869183G"), (UINT64_MAX >> 30) << 30);
  EXPECT_TRUE(size_refused("17179869184GiB"));
}

TEST(ParseNumber, SizeEverySuffix) {
  EXPECT_EQ(size_of("0"), 0u);
  EXPECT_EQ(size_of("007"), 7u);
  for (const char* k : {"K", "k", "KiB"}) EXPECT_EQ(size_of(std::string("3") + k), 3u << 10) << k;
  for (const char* m : {"M", "m", "MiB"}) EXPECT_EQ(size_of(std::string("3") + m), 3u << 20) << m;
  for (const char* g : {"G", "g", "GiB"}) EXPECT_EQ(size_of(std::string("3") + g), uint64_t{3} << 30) << g;
}

TEST(ParseNumber, IntegersInRange) {
  uint64_t u = 0;
  EXPECT_EQ(rb::parse_u64("18446744073709551615", u), "");
  EXPECT_EQ(u, UINT64_MAX);
  EXPECT_NE(rb::parse_u64("18446744073709551616", u), "");
  for (const char* t : kNeverANumber) EXPECT_NE(rb::parse_u64(t, u), "") << "'" << t << "'";
  int i = -7;
  EXPECT_EQ(rb::parse_int_in("2147483647", 0, 2147483647, i), "");
  EXPECT_EQ(i, 2147483647);
  EXPECT_NE(rb::parse_int_in("2147483648", 0, 2147483647, i), "");
  EXPECT_NE(rb::parse_int_in("4097", 1, 4096, i), "");
  EXPECT_NE(rb::parse_int_in("0", 1, 4096, i), "");
  EXPECT_EQ(i, 2147483647);
  EXPECT_EQ(rb::parse_int_in("3", 1, 4096, i), "");
  EXPECT_EQ(i, 3);
}

TEST(OptionsParse, ChunkBytesNamesVariableTextAndForm) {
  for (const char* t : {" -1", "18014398509481985K", "99999999999G", "+1", "1 ", "0x10", "1K ", "K", "1KK", "-0",
                        "18446744073709551616", "17179869184G", "0"}) {
    const std::string msg = options_error("RWIN_CHUNK_BYTES", t);
    EXPECT_NE(msg.find(std::string("RWIN_CHUNK_BYTES='") + t + "'"), std::string::npos) << "'" << t << "': " << msg;
    EXPECT_NE(msg.find("512K"), std::string::npos) << msg;  // the accepted form
  }
  EXPECT_EQ(options_error("RWIN_CHUNK_BYTES", "64K"), "");
  EXPECT_EQ(options_error("RWIN_CHUNK_BYTES", "18446744073709551615"), "");
  Env env;
  env.set("RWIN_CHUNK_BYTES", "4MiB");
  EXPECT_EQ(rwin::Options::from_env(rwin::Options{}).chunk_bytes, size_t{4} << 20);
  env.set("RWIN_CHUNK_BYTES", "");  // empty counts as unset, like every RWIN_* variable
  EXPECT_EQ(rwin::Options::from_env(rwin::Options{}).chunk_bytes, 0u);
}

TEST(OptionsParse, IntegerKnobsAreStrictAndRangeChecked) {
  struct Knob {
    const char* var;
    const char* lo;
    const char* hi;
    const char* below;
    const char* above;
  };
  const Knob knobs[] = {
      {"RWIN_PIPELINE_DEPTH", "1", "4096", "0", "4097"},
      {"RWIN_TIMEOUT_MS", "1", "86400000", "0", "86400001"},
      {"RWIN_STARTUP_TIMEOUT_MS", "1", "86400000", "0", "99999999999999999999"},
      {"RWIN_IB_PORT", "1", "255", "0", "256"},
      {"RWIN_GID_INDEX", "0", "1023", nullptr, "1024"},
      {"RWIN_SPIN_US", "0", "1000000", nullptr, "1000001"},
  };
  for (const Knob& k : knobs) {
    EXPECT_EQ(options_error(k.var, k.lo), "") << k.var;
    EXPECT_EQ(options_error(k.var, k.hi), "") << k.var;
    std::vector<std::string> bad(std::begin(kNeverANumber) + 1, std::end(kNeverANumber));  // "" is unset
    bad.push_back(k.above);
    bad.push_back("18446744073709551616");
    if (k.below) bad.push_back(k.below);
    for (const std::string& t : bad) {
      const std::string msg = options_error(k.var, t);
      EXPECT_NE(msg.find(std::string(k.var) + "='" + t + "'"), std::string::npos) << k.var << "='" << t << "': " << msg;
      EXPECT_NE(msg.find(std::string("[") + k.lo + ", " + k.hi + "]"), std::string::npos) << msg;
    }
  }
  Env env;
  env.set("RWIN_TIMEOUT_MS", "1500");
  EXPECT_EQ(rwin::Options::from_env(rwin::Options{}).op_timeout.count(), 1500);
  EXPECT_EQ(rwin::Options::from_env(rwin::Options{}).spin_us, -1);  // unset: chosen at start-up
  env.set("RWIN_SPIN_US", "0");
  EXPECT_EQ(rwin::Options::from_env(rwin::Options{}).spin_us, 0);
}

TEST(LaunchEnvParse, RankAndSizeVariablesAreStrict) {
  const std::pair<const char*, const char*> pairs[] = {{"RWIN_RANK", "RWIN_NRANKS"},
                                                      {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
                                                      {"PMI_RANK", "PMI_SIZE"},
                                                      {"SLURM_PROCID", "SLURM_NTASKS"}};
  for (const auto& [rank_var, size_var] : pairs) {
    std::vector<std::string> bad(std::begin(kNeverANumber), std::end(kNeverANumber));
    bad.push_back("2147483648");
    bad.push_back("18446744073709551616");
    bad.push_back("4294967297");  // 2^32 + 1: would pass as 1 if truncated to 32 bits
    for (bool as_rank : {true, false}) {
      for (const std::string& t : bad) {
        Env env;
        env.set(rank_var, as_rank ? t : "0");
        env.set(size_var, as_rank ? "2" : t);
        const char* var = as_rank ? rank_var : size_var;
        try {
          (void)rb::LaunchEnv::detect();
          ADD_FAILURE() << var << "='" << t << "' accepted";
        } catch (const rb::BootstrapError& e) {
          const std::string msg = e.what();
          EXPECT_NE(msg.find(std::string(var) + "='" + t + "'"), std::string::npos) << msg;
          EXPECT_NE(msg.find("decimal digits only"), std::string::npos) << msg;
        }
      }
    }
    Env env;
    env.set(rank_var, "2147483646");
    env.set(size_var, "2147483647");
    env.set("RWIN_ROOT", "127.0.0.1:1");
    auto got = rb::LaunchEnv::detect();
    ASSERT_TRUE(got.has_value()) << rank_var;
    EXPECT_EQ(got->rank, 2147483646);
    EXPECT_EQ(got->nranks, 2147483647);
  }
}

TEST(HostPortParse, PortIsStrict) {
  EXPECT_EQ(rb::HostPort::parse("127.0.0.1:65535").port, 65535);
  EXPECT_EQ(rb::HostPort::parse("[::1]:0").port, 0);
  for (const char* p : {"65536", "+1", "-0", " 1", "1 ", "0x10", "1K", "4294967297", "18446744073709551616"}) {
    const std::string text = std::string("127.0.0.1:") + p;
    try {
      (void)rb::HostPort::parse(text);
      ADD_FAILURE() << text << " accepted";
    } catch (const rb::BootstrapError& e) {
      EXPECT_NE(std::string(e.what()).find("port '" + std::string(p) + "'"), std::string::npos) << e.what();
    }
  }
}

TEST(LauncherRootParse, JobIdsWithJunkDeriveNoPort) {
  for (const char* id : {" 5", "+5", "5x", "-5", "18446744073709551616"}) {
    Env env;
    env.set("SLURM_PROCID", "0");
    env.set("SLURM_NODELIST", "n1");
    env.set("SLURM_JOB_ID", id);
    EXPECT_FALSE(rb::derive_launcher_root().has_value()) << "SLURM_JOB_ID='" << id << "'";
  }
  Env env;
  env.set("SLURM_PROCID", "0");
  env.set("SLURM_NODELIST", "n1");
  env.set("SLURM_JOB_ID", "5");
  EXPECT_TRUE(rb::derive_launcher_root().has_value());
}
