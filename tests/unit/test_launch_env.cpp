// LaunchEnv::detect: each launcher's variables, their precedence, and malformed values.
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <optional>
#include <string>

#include "bootstrap/bootstrap.h"

#include "env_guard.h"

namespace rb = rwin::bootstrap;

namespace {


// Clears every launcher variable for the test and restores the outer environment afterwards
// (the suite itself may run under rwinrun or mpirun).
class LaunchEnvTest : public ::testing::Test {
 protected:
  void set(const char* k, const char* v) { env_.set(k, v); }
  static std::string error_of() {
    try {
      rb::LaunchEnv::detect();
    } catch (const rb::BootstrapError& e) {
      EXPECT_EQ(e.kind(), rb::BootstrapError::Kind::Config);
      return e.what();
    }
    ADD_FAILURE() << "expected a Config error";
    return "";
  }

 private:
  rwin::test::EnvGuard env_;
};

}  // namespace

TEST_F(LaunchEnvTest, NothingSetMeansNoLauncher) { EXPECT_FALSE(rb::LaunchEnv::detect().has_value()); }

TEST_F(LaunchEnvTest, Rwinrun) {
  set("RWIN_RANK", "2");
  set("RWIN_NRANKS", "4");
  set("RWIN_ROOT", "127.0.0.1:4000");
  auto env = rb::LaunchEnv::detect();
  ASSERT_TRUE(env);
  EXPECT_EQ(env->rank, 2);
  EXPECT_EQ(env->nranks, 4);
  EXPECT_EQ(env->root, "127.0.0.1:4000");
  EXPECT_EQ(env->source, "rwin");
}

TEST_F(LaunchEnvTest, EachLauncherSource) {
  struct Case {
    const char* rank_var;
    const char* size_var;
    const char* source;
  };
  for (const Case& c : {Case{"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "openmpi"},
                        Case{"PMI_RANK", "PMI_SIZE", "pmi"}, Case{"SLURM_PROCID", "SLURM_NTASKS", "slurm"}}) {
    rwin::test::EnvGuard each;  // a clean environment per case
    each.set(c.rank_var, "0");
    each.set(c.size_var, "3");
    auto env = rb::LaunchEnv::detect();
    ASSERT_TRUE(env) << c.source;
    EXPECT_EQ(env->rank, 0) << c.source;
    EXPECT_EQ(env->nranks, 3) << c.source;
    EXPECT_EQ(env->source, c.source);
    EXPECT_EQ(env->root, "") << c.source;
  }
}

TEST_F(LaunchEnvTest, PrecedenceRwinThenOpenMpiThenPmiThenSlurm) {
  set("SLURM_PROCID", "3");
  set("SLURM_NTASKS", "8");
  EXPECT_EQ(rb::LaunchEnv::detect()->source, "slurm");
  set("PMI_RANK", "2");
  set("PMI_SIZE", "8");
  EXPECT_EQ(rb::LaunchEnv::detect()->source, "pmi");
  EXPECT_EQ(rb::LaunchEnv::detect()->rank, 2);
  set("OMPI_COMM_WORLD_RANK", "1");
  set("OMPI_COMM_WORLD_SIZE", "8");
  EXPECT_EQ(rb::LaunchEnv::detect()->source, "openmpi");
  EXPECT_EQ(rb::LaunchEnv::detect()->rank, 1);
  set("RWIN_RANK", "0");
  set("RWIN_NRANKS", "2");
  auto env = rb::LaunchEnv::detect();
  EXPECT_EQ(env->source, "rwin");
  EXPECT_EQ(env->rank, 0);
  EXPECT_EQ(env->nranks, 2);
}

TEST_F(LaunchEnvTest, RootComesFromRwinRootWhateverTheLauncher) {
  set("OMPI_COMM_WORLD_RANK", "1");
  set("OMPI_COMM_WORLD_SIZE", "2");
  set("RWIN_ROOT", "node1:5000");
  auto env = rb::LaunchEnv::detect();
  ASSERT_TRUE(env);
  EXPECT_EQ(env->source, "openmpi");
  EXPECT_EQ(env->root, "node1:5000");
}

TEST_F(LaunchEnvTest, MalformedNumbersNameVariableAndValue) {
  for (const char* bad : {"abc", "1x", "", " 1", "1.0", "99999999999", "+1"}) {
    rwin::test::EnvGuard each;
    each.set("PMI_RANK", bad);
    each.set("PMI_SIZE", "4");
    const std::string msg = error_of();
    EXPECT_NE(msg.find(std::string("PMI_RANK='") + bad + "'"), std::string::npos) << msg;
  }
  set("RWIN_RANK", "0");
  set("RWIN_NRANKS", "four");
  const std::string msg = error_of();
  EXPECT_NE(msg.find("RWIN_NRANKS='four'"), std::string::npos) << msg;
}

TEST_F(LaunchEnvTest, RankOutsideJobIsAnError) {
  set("RWIN_RANK", "4");
  set("RWIN_NRANKS", "4");
  EXPECT_NE(error_of().find("RWIN_RANK=4 is outside [0, 4)"), std::string::npos);
  set("RWIN_RANK", "-1");  // a sign is refused before the range check
  EXPECT_NE(error_of().find("RWIN_RANK='-1'"), std::string::npos);
  set("RWIN_RANK", "0");
  set("RWIN_NRANKS", "0");
  EXPECT_NE(error_of().find("RWIN_NRANKS=0"), std::string::npos);
}

TEST_F(LaunchEnvTest, RankWithoutSizeIsAnError) {
  set("SLURM_PROCID", "0");
  EXPECT_NE(error_of().find("SLURM_NTASKS is not"), std::string::npos);
}
