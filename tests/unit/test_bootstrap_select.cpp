// RWIN_BOOTSTRAP (pmix|tcp|auto) and the rule that a process seeing launcher variables for more than
// one rank never runs as a job of 1 (launch_env.cpp, options.cpp, bootstrap/pmix.h). The real PMIx
// rendezvous runs under mpirun in tests/scripts/pmix_bootstrap.sh.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <map>
#include <string>
#include <vector>

#include "bootstrap/bootstrap.h"
#include "bootstrap/netif.h"
#include "bootstrap/pmix.h"
#include "rwin/rwin.h"

#include "env_guard.h"

namespace rb = rwin::bootstrap;

namespace {

using Clean = rwin::test::EnvGuard;

// Options::from_env's InvalidArgument message, or "" when it accepted the environment.
std::string from_env_error(rwin::Options o = {}) {
  try {
    (void)rwin::Options::from_env(o);
  } catch (const rwin::Error& e) {
    EXPECT_EQ(e.code(), rwin::ErrorCode::InvalidArgument) << e.what();
    return e.what();
  }
  return {};
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST(BootstrapMethod, ValuesAndStrictness) {
  Clean env;
  EXPECT_EQ(rb::bootstrap_method(""), rb::BootstrapMethod::Auto);
  env.set("RWIN_BOOTSTRAP", "pmix");
  EXPECT_EQ(rb::bootstrap_method(""), rb::BootstrapMethod::Pmix);
  env.set("RWIN_BOOTSTRAP", "tcp");
  EXPECT_EQ(rb::bootstrap_method(""), rb::BootstrapMethod::Tcp);
  env.set("RWIN_BOOTSTRAP", "auto");
  EXPECT_EQ(rb::bootstrap_method(""), rb::BootstrapMethod::Auto);
  EXPECT_EQ(rb::bootstrap_method("pmix"), rb::BootstrapMethod::Pmix);  // the option wins over the variable
  for (const char* bad : {"bogus", "PMIX", " tcp", "tcp ", "pmi"}) {
    env.set("RWIN_BOOTSTRAP", bad);
    try {
      (void)rb::bootstrap_method("");
      ADD_FAILURE() << "RWIN_BOOTSTRAP='" << bad << "' accepted";
    } catch (const rb::BootstrapError& e) {
      EXPECT_EQ(e.kind(), rb::BootstrapError::Kind::Config);
      EXPECT_TRUE(has(e.what(), std::string("RWIN_BOOTSTRAP='") + bad + "'")) << e.what();
      EXPECT_TRUE(has(e.what(), "pmix, tcp or auto")) << e.what();
    }
  }
  EXPECT_STREQ(rb::bootstrap_method_name(rb::BootstrapMethod::Pmix), "pmix");
}

TEST(BootstrapMethod, BogusValueIsAnInvalidArgumentOfFromEnv) {
  Clean env;
  env.set("RWIN_BOOTSTRAP", "bogus");
  EXPECT_TRUE(has(from_env_error(), "RWIN_BOOTSTRAP='bogus'"));
}

TEST(JobOfMany, EvidenceNamesVariablesAndValues) {
  Clean env;
  EXPECT_TRUE(rb::LaunchEnv::job_of_many_evidence().empty());
  env.set("OMPI_COMM_WORLD_SIZE", "1");
  env.set("OMPI_COMM_WORLD_RANK", "0");
  EXPECT_TRUE(rb::LaunchEnv::job_of_many_evidence().empty()) << "a launcher's job of 1 is a job of 1";
  env.set("OMPI_COMM_WORLD_SIZE", "4");
  env.set("OMPI_COMM_WORLD_RANK", "1");
  EXPECT_EQ(rb::LaunchEnv::job_of_many_evidence(),
            (std::vector<std::string>{"OMPI_COMM_WORLD_SIZE=4", "OMPI_COMM_WORLD_RANK=1"}));
}

TEST(JobOfMany, EachLaunchersVariables) {
  for (const char* var : {"PMI_SIZE", "SLURM_NTASKS", "SLURM_NPROCS"}) {
    Clean env;
    env.set(var, "3");
    EXPECT_EQ(rb::LaunchEnv::job_of_many_evidence(), std::vector<std::string>{std::string(var) + "=3"});
  }
  for (const char* var : {"PMI_RANK", "SLURM_PROCID", "PMIX_RANK"}) {
    Clean env;
    env.set(var, "0");
    EXPECT_TRUE(rb::LaunchEnv::job_of_many_evidence().empty()) << var << "=0 alone";
    env.set(var, "2");
    EXPECT_EQ(rb::LaunchEnv::job_of_many_evidence(), std::vector<std::string>{std::string(var) + "=2"});
  }
  Clean env;
  env.set("PMIX_NAMESPACE", "x");
  env.set("PMIX_RANK", "0");  // a PMIx client: the size is PMIx's to say, never assumed to be 1
  EXPECT_EQ(rb::LaunchEnv::job_of_many_evidence(), (std::vector<std::string>{"PMIX_NAMESPACE=x", "PMIX_RANK=0"}));
}

TEST(JobOfMany, NoLauncherIsAJobOfOne) {
  Clean env;
  const auto o = rwin::Options::from_env();
  EXPECT_EQ(o.rank, 0);
  EXPECT_EQ(o.nranks, 1);
  EXPECT_EQ(o.bootstrap, "tcp");
}

TEST(JobOfMany, FakeOpenMpiVariablesWithoutRootAreRefused) {
  Clean env;
  env.set("OMPI_COMM_WORLD_SIZE", "4");
  env.set("OMPI_COMM_WORLD_RANK", "1");
  const std::string msg = from_env_error();
  EXPECT_TRUE(has(msg, "OMPI_COMM_WORLD_RANK=1")) << msg;
  EXPECT_TRUE(has(msg, "OMPI_COMM_WORLD_SIZE=4")) << msg;
  EXPECT_TRUE(has(msg, "RWIN_ROOT")) << msg;
  EXPECT_TRUE(has(msg, "job of 1")) << msg;
}

TEST(JobOfMany, SizeWithoutRankIsRefused) {
  Clean env;
  env.set("SLURM_NTASKS", "6");  // e.g. an sbatch script's environment seen by a stray process
  const std::string msg = from_env_error();
  EXPECT_TRUE(has(msg, "SLURM_NTASKS=6")) << msg;
  EXPECT_TRUE(has(msg, "refusing to run as a job of 1")) << msg;
}

TEST(JobOfMany, PmixVariablesUnderTcpAreRefused) {
  Clean env;
  env.set("PMIX_NAMESPACE", "x");
  env.set("PMIX_RANK", "1");
  env.set("RWIN_BOOTSTRAP", "tcp");
  const std::string msg = from_env_error();
  EXPECT_TRUE(has(msg, "PMIX_NAMESPACE=x")) << msg;
  EXPECT_TRUE(has(msg, "PMIX_RANK=1")) << msg;
  EXPECT_TRUE(has(msg, "refusing to run as a job of 1")) << msg;
}

TEST(JobOfMany, RootWithoutRankUnderPmixIsRefusedSayingWhy) {
  Clean env;
  env.set("PMIX_NAMESPACE", "x");
  env.set("PMIX_RANK", "1");
  env.set("RWIN_ROOT", "127.0.0.1:4000");  // names the root, so tcp; but nothing gives rank and size
  const std::string msg = from_env_error();
  EXPECT_TRUE(has(msg, "PMIX_RANK=1")) << msg;
  EXPECT_TRUE(has(msg, "no launcher variable gives this rank and the job size")) << msg;
  EXPECT_TRUE(has(msg, "refusing to run as a job of 1")) << msg;
}

TEST(PmixSelect, AutoPicksPmixForAPmixClientAndLeavesRankToIt) {
  Clean env;
  env.set("PMIX_NAMESPACE", "x");
  env.set("PMIX_RANK", "1");
  EXPECT_TRUE(rb::pmix_server_advertised());
  if (!rb::pmix_built_in()) {
    // Without PMIx the tcp path refuses: never a job of 1.
    EXPECT_TRUE(has(from_env_error(), "built without PMIx"));
    return;
  }
  const auto o = rwin::Options::from_env();
  EXPECT_EQ(o.bootstrap, "pmix");
  EXPECT_EQ(o.rank, -1);  // the Context asks PMIx
  EXPECT_EQ(o.nranks, -1);
  EXPECT_EQ(o.root, "");
}

TEST(PmixSelect, RwinRootKeepsTcp) {
  Clean env;
  env.set("PMIX_NAMESPACE", "x");
  env.set("PMIX_RANK", "1");
  env.set("OMPI_COMM_WORLD_SIZE", "4");
  env.set("OMPI_COMM_WORLD_RANK", "1");
  env.set("RWIN_ROOT", "127.0.0.1:4000");
  const auto o = rwin::Options::from_env();
  EXPECT_EQ(o.bootstrap, "tcp");
  EXPECT_EQ(o.rank, 1);
  EXPECT_EQ(o.nranks, 4);
  EXPECT_EQ(o.root, "127.0.0.1:4000");
}

TEST(PmixSelect, ForcedPmixWithoutServerNamesWhatIsMissing) {
  Clean env;
  env.set("RWIN_BOOTSTRAP", "pmix");
  const std::string msg = from_env_error();
  if (!rb::pmix_built_in()) {
    EXPECT_TRUE(has(msg, "built without PMIx")) << msg;
    return;
  }
  EXPECT_TRUE(has(msg, "no PMIx server is advertised")) << msg;
  EXPECT_TRUE(has(msg, "PMIX_SERVER_URI")) << msg;
  env.set("PMIX_NAMESPACE", "x");  // half of a client's pair: named, still not a server
  const std::string half = from_env_error();
  EXPECT_TRUE(has(half, "seen: PMIX_NAMESPACE=x")) << half;
}

TEST(PmixSelect, SessionWithoutServerFailsNamingTheVariables) {
  Clean env;
  env.set("PMIX_NAMESPACE", "x");
  env.set("PMIX_RANK", "1");
  try {
    rb::PmixSession session(std::chrono::milliseconds(5000));
    ADD_FAILURE() << "a PMIx session without a server started (rank " << session.rank() << ")";
  } catch (const rb::BootstrapError& e) {
    const std::string msg = e.what();
    EXPECT_TRUE(has(msg, rb::pmix_built_in() ? "PMIx_Init failed" : "built without PMIx")) << msg;
    EXPECT_TRUE(has(msg, "PMIX_NAMESPACE=x")) << msg;
    EXPECT_TRUE(has(msg, "PMIX_RANK=1")) << msg;
    EXPECT_TRUE(has(msg, "no PMIX_SERVER_URI")) << msg;
  }
}

TEST(LaunchEnvHow, SaysWhereRankSizeAndRootCameFrom) {
  Clean env;
  env.set("OMPI_COMM_WORLD_SIZE", "4");
  env.set("OMPI_COMM_WORLD_RANK", "2");
  env.set("RWIN_ROOT", "127.0.0.1:4000");
  auto got = rb::LaunchEnv::detect();
  ASSERT_TRUE(got);
  EXPECT_EQ(got->how, "rank OMPI_COMM_WORLD_RANK=2, size OMPI_COMM_WORLD_SIZE=4, root RWIN_ROOT");
}

// Rank 0's address under PMIx when ranks run on other nodes: RWIN_IFNAME first (the routing and
// host-name rules need other hosts: tests/multinode/netns-ring.sh, root kind pmix).
TEST(ServeAddress, IfnameWinsAndABadOneIsNamed) {
  Clean env;
  env.set("RWIN_IFNAME", "lo");
  std::string how;
  EXPECT_EQ(rb::choose_serve_address("", how), "127.0.0.1");
  EXPECT_EQ(how, "the address of RWIN_IFNAME=lo");
  env.set("RWIN_IFNAME", "nope0");
  try {
    (void)rb::choose_serve_address("", how);
    ADD_FAILURE() << "RWIN_IFNAME=nope0 accepted";
  } catch (const rb::BootstrapError& e) {
    EXPECT_EQ(e.kind(), rb::BootstrapError::Kind::Config);
    EXPECT_TRUE(has(e.what(), "RWIN_IFNAME=nope0")) << e.what();
    EXPECT_TRUE(has(e.what(), "interfaces seen: ")) << e.what();
    EXPECT_TRUE(has(e.what(), "lo 127.0.0.1")) << e.what();
  }
}
