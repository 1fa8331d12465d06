// RWIN_UCX_RMA: parsed in the one place that reads RWIN_* (options.cpp), defaulting to auto and
// rejecting anything else by name before a transport is built.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <string>

#include "rwin/rwin.h"

namespace {

struct EnvVar {
  explicit EnvVar(const char* v) {
    if (v) setenv("RWIN_UCX_RMA", v, 1);
    else unsetenv("RWIN_UCX_RMA");
  }
  ~EnvVar() { unsetenv("RWIN_UCX_RMA"); }
};

TEST(OptionsUcxRma, DefaultsToAutoAndTakesTheEnvironment) {
  {
    EnvVar e(nullptr);
    EXPECT_EQ(rwin::Options::from_env(rwin::Options{}).ucx_rma, "auto");
  }
  for (const char* v : {"auto", "native", "am"}) {
    EnvVar e(v);
    EXPECT_EQ(rwin::Options::from_env(rwin::Options{}).ucx_rma, v);
  }
  EnvVar e("am");
  rwin::Options o;
  o.ucx_rma = "native";  // an explicit option wins over the environment
  EXPECT_EQ(rwin::Options::from_env(o).ucx_rma, "native");
}

TEST(OptionsUcxRma, RejectsAnUnknownModeByName) {
  EnvVar e("fast");
  try {
    rwin::Options::from_env(rwin::Options{});
    ADD_FAILURE() << "accepted RWIN_UCX_RMA=fast";
  } catch (const rwin::Error& err) {
    EXPECT_EQ(err.code(), rwin::ErrorCode::InvalidArgument);
    const std::string what = err.what();
    EXPECT_NE(what.find("RWIN_UCX_RMA"), std::string::npos) << what;
    EXPECT_NE(what.find("'fast'"), std::string::npos) << what;
  }
}

}  // namespace
