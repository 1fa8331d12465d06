// LaunchEnv::detect: each launcher's variables, their precedence, and malformed values.
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <optional>
#include <string>

#include "bootstrap/bootstrap.h"

namespace rb = rwin::bootstrap;

namespace {

const char* const kVars[] = {"RWIN_RANK", "RWIN_NRANKS", "RWIN_ROOT",    "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                             "PMI_RANK",  "PMI_SIZE",    "SLURM_PROCID", "SLURM_NTASKS", "SLURM_NPROCS",
                             "PMIX_RANK", "PMIX_NAMESPACE", "OMPI_MCA_orte_hnp_uri", "OMPI_MCA_ess_base_jobid",
                             "SLURM_JOB_ID", "SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"};

// Clears every launcher variable for the test and restores the outer environment afterwards
// (the suite itself may run under rwinrun or mpirun).
class LaunchEnvTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* v : kVars) {
      if (const char* val = std::getenv(v)) saved_[v] = val;
      ::unsetenv(v);
    }
  }
  void TearDown() override {
    for (const char* v : kVars) ::unsetenv(v);
    for (auto& [k, v] : saved_) ::setenv(k.c_str(), v.c_str(), 1);
  }
  static void set(const char* k, const char* v) { ::setenv(k, v, 1); }
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
  std::map<std::string, std::string> saved_;
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
    SetUp();
    set(c.rank_var, "0");
    set(c.size_var, "3");
    auto env = rb::LaunchEnv::detect();
    ASSERT_TRUE(env) << c.source;
    EXPECT_EQ(env->rank, 0) << c.source;
    EXPECT_EQ(env->nranks, 3) << c.source;
    EXPECT_EQ(env->source, c.source);
    EXPECT_EQ(env->root, "") << c.source;
    TearDown();
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
    SetUp();
    set("PMI_RANK", bad);
    set("PMI_SIZE", "4");
    const std::string msg = error_of();
    EXPECT_NE(msg.find(std::string("PMI_RANK='") + bad + "'"), std::string::npos) << msg;
    TearDown();
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
