// The knob table (common/knobs.h): the accessor's sources, the unknown-variable check and its
// closest-name suggestion.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/knobs.h"
#include "common/log.h"

namespace kn = rwin::knobs;

namespace {

std::vector<kn::Unknown> unknown_of(std::vector<std::string> entries) {
  std::vector<char*> envp;
  for (auto& e : entries) envp.push_back(e.data());
  envp.push_back(nullptr);
  return kn::unknown_variables(envp.data());
}

const kn::Setting& setting(const std::vector<kn::Setting>& all, const char* name) {
  for (const auto& s : all) {
    if (std::string(s.knob->name) == name) return s;
  }
  throw std::runtime_error(std::string("no setting ") + name);
}

}  // namespace

TEST(Knobs, TableNamesAreUniqueAndComplete) {
  std::vector<std::string> names;
  for (const auto& k : kn::table()) {
    EXPECT_EQ(std::string(k.name).rfind("RWIN_", 0), 0u) << k.name;
    EXPECT_TRUE(*k.default_text && *k.range && *k.layer && *k.meaning) << k.name;
    EXPECT_EQ(kn::find(k.name), &k);
    names.push_back(k.name);
  }
  std::sort(names.begin(), names.end());
  EXPECT_EQ(std::adjacent_find(names.begin(), names.end()), names.end());
  // The launchers' variables and the new ones of issue 13 are declared.
  for (const char* n : {"RWIN_RANK", "RWIN_NRANKS", "RWIN_ROOT", "RWIN_JOB_KEY", "RWIN_BOOTSTRAP", "RWIN_LOG_LEVEL",
                        "RWIN_LOG_SUBSYS", "RWIN_LOG_FILE"}) {
    EXPECT_NE(kn::find(n), nullptr) << n;
  }
}

TEST(Knobs, ReadingAnUndeclaredVariableIsAProgrammingError) {
  EXPECT_THROW(kn::env("RWIN_NOT_A_KNOB"), std::logic_error);
}

TEST(Knobs, SourcesAreDefaultEnvironmentAndCode) {
  unsetenv("RWIN_COLL_SLOTS");
  unsetenv("RWIN_ALLREDUCE_MESH_MAX");
  ASSERT_EQ(setenv("RWIN_COLL_SLOTS", "8", 1), 0);
  EXPECT_STREQ(kn::env("RWIN_COLL_SLOTS"), "8");
  ASSERT_EQ(setenv("RWIN_ALLREDUCE_MESH_MAX", "", 1), 0);
  EXPECT_EQ(kn::env("RWIN_ALLREDUCE_MESH_MAX"), nullptr);  // empty counts as unset
  kn::set_in_code("RWIN_SPIN_US", "7");
  const auto all = kn::settings();
  EXPECT_EQ(setting(all, "RWIN_COLL_SLOTS").source, kn::Source::Environment);
  EXPECT_EQ(setting(all, "RWIN_COLL_SLOTS").value, "8");
  EXPECT_EQ(setting(all, "RWIN_ALLREDUCE_MESH_MAX").source, kn::Source::Default);
  EXPECT_EQ(setting(all, "RWIN_ALLREDUCE_MESH_MAX").value, "8 KiB");
  EXPECT_EQ(setting(all, "RWIN_SPIN_US").source, kn::Source::Code);
  EXPECT_EQ(setting(all, "RWIN_SPIN_US").value, "7");
  EXPECT_STREQ(kn::source_name(kn::Source::Code), "code");
  unsetenv("RWIN_COLL_SLOTS");
  unsetenv("RWIN_ALLREDUCE_MESH_MAX");
}

TEST(Knobs, EditDistance) {
  EXPECT_EQ(kn::edit_distance("", ""), 0u);
  EXPECT_EQ(kn::edit_distance("abc", ""), 3u);
  EXPECT_EQ(kn::edit_distance("kitten", "sitting"), 3u);
  EXPECT_EQ(kn::edit_distance("RWIN_CHUNK_BYTE", "RWIN_CHUNK_BYTES"), 1u);
}

TEST(Knobs, UnknownVariablesNameTheClosestKnob) {
  const auto u = unknown_of({"PATH=/bin", "RWIN_CHUNK_BYTE=1K", "RWIN_CHUNK_BYTES=2K", "RWIN_TIMEOUT=5",
                             "RWIN_RXE_DEV=rxe0", "RWIN_NETNS_HOSTS=3", "RWIN_LOGLEVEL=info", "RWIN_FLAG"});
  ASSERT_EQ(u.size(), 4u);
  EXPECT_EQ(kn::unknown_message(u[0]), "RWIN_CHUNK_BYTE=1K is not an rwin variable; did you mean RWIN_CHUNK_BYTES?");
  EXPECT_EQ(u[1].name, "RWIN_TIMEOUT");
  EXPECT_EQ(u[1].closest, "RWIN_TIMEOUT_MS");
  EXPECT_EQ(u[2].closest, "RWIN_LOG_LEVEL");
  EXPECT_EQ(u[3].name, "RWIN_FLAG");  // no '=': still named, with an empty value
  EXPECT_EQ(u[3].value, "");
}

TEST(Knobs, ScriptVariablesAreNotReported) {
  for (const char* p : kn::script_prefixes()) {
    EXPECT_TRUE(unknown_of({std::string(p) + "X=1"}).empty()) << p;
  }
}

TEST(Log, DisabledLevelsDoNotEvaluateTheirArguments) {
  unsetenv("RWIN_LOG_LEVEL");  // before the first line: the defaults, warn for every subsystem
  unsetenv("RWIN_LOG_SUBSYS");
  unsetenv("RWIN_LOG_FILE");
  rwin::log::configure();
  int evaluated = 0;
  auto count = [&] { return ++evaluated; };
  RWIN_LOG(Debug, Core, "%d", count());
  RWIN_LOG(Info, Ucx, "%d", count());
  EXPECT_EQ(evaluated, 0);
  EXPECT_FALSE(rwin::log::enabled(rwin::log::Level::Info, rwin::log::Subsys::Bootstrap));
  EXPECT_TRUE(rwin::log::enabled(rwin::log::Level::Warn, rwin::log::Subsys::Verbs));
  testing::internal::CaptureStderr();
  RWIN_LOG(Warn, Verbs, "test line %d", count());
  const std::string out = testing::internal::GetCapturedStderr();
  EXPECT_EQ(evaluated, 1);
  EXPECT_NE(out.find("] warn verbs: test line 1\n"), std::string::npos) << out;
}
