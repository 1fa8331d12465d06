// Interface choice and launcher-derived roots (bootstrap/netif.h).
//
// Everything here runs on the loopback interface of whatever machine runs the tests. The
// multi-interface cases (route to the root vs default route) need network namespaces and are driven
// by tests/multinode/netns-ring.sh through NetifFromEnv below.
#include "bootstrap/netif.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <string>

#include "bootstrap/bootstrap.h"

#include "env_guard.h"

namespace rb = rwin::bootstrap;

namespace {

using rwin::test::EnvGuard;

std::string error_text(const std::string& root_host) {
  try {
    (void)rb::choose_interface(root_host);
  } catch (const rb::BootstrapError& e) {
    EXPECT_EQ(e.kind(), rb::BootstrapError::Kind::Config);
    return e.what();
  }
  ADD_FAILURE() << "choose_interface(" << root_host << ") did not throw";
  return {};
}

}  // namespace

TEST(Netif, ListsLoopbackAddress) {
  auto all = rb::list_ipv4_interfaces();
  bool found = false;
  for (const auto& [name, addr] : all) found = found || (name == "lo" && addr == "127.0.0.1");
  EXPECT_TRUE(found) << "lo 127.0.0.1 missing from " << all.size() << " ipv4 interfaces";
}

TEST(Netif, LoopbackRootPicksLo) {
  EnvGuard env;
  EXPECT_EQ(rb::choose_interface("127.0.0.1"), "lo");
  // Any 127/8 address routes through lo, not only the one lo carries.
  EXPECT_EQ(rb::choose_interface("127.0.0.2"), "lo");
}

TEST(Netif, IfnameOverridesRoute) {
  EnvGuard env;
  env.set("RWIN_IFNAME", "lo");
  EXPECT_EQ(rb::choose_interface("127.0.0.1"), "lo");
}

TEST(Netif, MissingIfnameErrorListsInterfaces) {
  EnvGuard env;
  env.set("RWIN_IFNAME", "rwin-nonexist0");
  std::string msg = error_text("127.0.0.1");
  EXPECT_NE(msg.find("RWIN_IFNAME=rwin-nonexist0 names no interface"), std::string::npos) << msg;
  EXPECT_NE(msg.find("root '127.0.0.1'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("interfaces seen: "), std::string::npos) << msg;
  EXPECT_NE(msg.find("lo 127.0.0.1"), std::string::npos) << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos) << "error must be one line: " << msg;
}

TEST(Netif, EmptyRootIsAnError) {
  EnvGuard env;
  std::string msg = error_text("");
  EXPECT_NE(msg.find("root host is empty"), std::string::npos) << msg;
  EXPECT_NE(msg.find("lo 127.0.0.1"), std::string::npos) << msg;
}

TEST(Netif, FirstHostOfHostlist) {
  EXPECT_EQ(rb::first_host_of_hostlist("node07"), "node07");
  EXPECT_EQ(rb::first_host_of_hostlist("node[07-09,12],gpu1"), "node07");
  EXPECT_EQ(rb::first_host_of_hostlist("gpu1,node[07-09]"), "gpu1");
  EXPECT_EQ(rb::first_host_of_hostlist("rack[2-3]n[001-004]"), "rack2n001");
  EXPECT_EQ(rb::first_host_of_hostlist("n[5]"), "n5");
  EXPECT_EQ(rb::first_host_of_hostlist(""), "");
  EXPECT_EQ(rb::first_host_of_hostlist("node[07-09"), "");
  EXPECT_EQ(rb::first_host_of_hostlist("node[]"), "");
  EXPECT_EQ(rb::first_host_of_hostlist("node[a-b]"), "");
}

TEST(Netif, DerivedPortStaysBelowEphemeralRange) {
  EXPECT_EQ(rb::derived_port(0), 20000u);
  EXPECT_EQ(rb::derived_port(11999), 31999u);
  EXPECT_EQ(rb::derived_port(12000), 20000u);
  EXPECT_EQ(rb::derived_port(1706754049ull), 20000u + 1706754049ull % 12000u);
}

TEST(Netif, NoLauncherNoRoot) {
  EnvGuard env;
  EXPECT_FALSE(rb::derive_launcher_root().has_value());
  EXPECT_FALSE(rb::derive_root_from_launcher().has_value());
}

TEST(Netif, OpenMpiRootFromHnpUri) {
  EnvGuard env;
  // Values as Open MPI 4.1.4 sets them for a rank on mpirun's own node (seen with `mpirun ... env`).
  const std::string hnp = "1706754048.0;tcp://10.1.2.3,192.168.9.9:39121";
  env.set("OMPI_COMM_WORLD_SIZE", "4");
  env.set("OMPI_COMM_WORLD_RANK", "2");
  env.set("OMPI_MCA_orte_hnp_uri", hnp);
  env.set("OMPI_MCA_ess_base_jobid", "1706754049");
  env.set("OMPI_MCA_orte_local_daemon_uri", hnp);
  auto r = rb::derive_launcher_root();
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->source, "openmpi");
  EXPECT_EQ(r->root, "10.1.2.3:" + std::to_string(20000 + 1706754049ull % 12000));
  ASSERT_TRUE(r->on_root_host.has_value());
  EXPECT_TRUE(*r->on_root_host);
  EXPECT_EQ(rb::derive_root_from_launcher(), r->root);

  // A rank whose local daemon is an orted on another node is not on the root's host.
  env.set("OMPI_MCA_orte_local_daemon_uri", "1706754048.1;tcp://10.1.2.4:40000");
  r = rb::derive_launcher_root();
  ASSERT_TRUE(r.has_value());
  ASSERT_TRUE(r->on_root_host.has_value());
  EXPECT_FALSE(*r->on_root_host);
}

TEST(Netif, OpenMpiWithoutUsableUriGivesNothing) {
  EnvGuard env;
  env.set("OMPI_COMM_WORLD_SIZE", "4");
  env.set("OMPI_MCA_ess_base_jobid", "77");
  env.set("OMPI_MCA_orte_hnp_uri", "1.0;tcp6://[::1]:4000");
  // Slurm variables are present too, but under mpirun its ranks are not Slurm's tasks.
  env.set("SLURM_PROCID", "0");
  env.set("SLURM_JOB_ID", "5");
  env.set("SLURM_STEP_NODELIST", "n1");
  EXPECT_FALSE(rb::derive_launcher_root().has_value());
}

TEST(Netif, SlurmRootFromStepNodelist) {
  EnvGuard env;
  env.set("SLURM_PROCID", "1");
  env.set("SLURM_NTASKS", "3");
  env.set("SLURM_JOB_ID", "4242");
  env.set("SLURM_STEP_ID", "3");
  env.set("SLURM_JOB_NODELIST", "other[1-9]");
  env.set("SLURM_STEP_NODELIST", "cn[012-014]");
  env.set("SLURMD_NODENAME", "cn013");
  auto r = rb::derive_launcher_root();
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->source, "slurm");
  EXPECT_EQ(r->root, "cn012:" + std::to_string(rb::derived_port(4242ull * 1000 + 3)));
  ASSERT_TRUE(r->on_root_host.has_value());
  EXPECT_FALSE(*r->on_root_host);

  env.set("SLURMD_NODENAME", "cn012");
  EXPECT_TRUE(*rb::derive_launcher_root()->on_root_host);

  // Two steps of one job get different ports, so they can run side by side.
  env.set("SLURM_STEP_ID", "4");
  EXPECT_NE(rb::derive_root_from_launcher(), r->root);
}

TEST(Netif, SlurmWithoutJobIdGivesNothing) {
  EnvGuard env;
  env.set("SLURM_PROCID", "0");
  env.set("SLURM_NODELIST", "n1");
  EXPECT_FALSE(rb::derive_launcher_root().has_value());
}

// Driven by tests/multinode/netns-ring.sh inside a namespace with two interfaces:
// RWIN_NETIF_TEST_ROOT=<addr> RWIN_NETIF_TEST_EXPECT=<ifname> (or "error:<text>" when the choice must
// fail with a message containing <text>). Skipped when those variables are absent.
TEST(NetifFromEnv, ChoosesExpectedInterface) {
  const char* root = std::getenv("RWIN_NETIF_TEST_ROOT");
  const char* expect = std::getenv("RWIN_NETIF_TEST_EXPECT");
  if (!root || !expect) GTEST_SKIP() << "set RWIN_NETIF_TEST_ROOT and RWIN_NETIF_TEST_EXPECT (netns-ring.sh does)";
  std::string want = expect;
  if (want.rfind("error:", 0) == 0) {
    std::string msg = error_text(root);
    EXPECT_NE(msg.find(want.substr(6)), std::string::npos) << msg;
    std::printf("netif: root %s -> error: %s\n", root, msg.c_str());
  } else {
    std::string got = rb::choose_interface(root);
    EXPECT_EQ(got, want);
    std::printf("netif: root %s -> %s\n", root, got.c_str());
  }
}
