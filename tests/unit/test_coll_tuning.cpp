// The collectives' tuning table (core/src/collectives/tuning.cpp): the built-in rules reproduce the
// measured choices at their edges, a file's rules come first and are checked field by field, and
// every refused file says which rule and field is wrong; and the workspace's automatic slot count.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <initializer_list>
#include <string>

#include "collectives/team_state.h"
#include "collectives/tuning.h"
#include "env_guard.h"
#include "rwin/rwin.h"

using namespace rwin;
using namespace rwin::detail;

namespace {

// Start-up (Options::from_env) with `knob` set to `value` must fail with InvalidArgument, its message
// holding each of `texts` (what names the knob and its value, what was expected).
void expect_refused(const char* knob, const std::string& value, std::initializer_list<std::string> texts) {
  rwin::test::EnvGuard g;
  g.set(knob, value.c_str());
  try {
    (void)Options::from_env();
    ADD_FAILURE() << "start-up accepted " << knob << "=" << value;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument) << knob << "=" << value;
    for (const auto& t : texts) EXPECT_NE(std::string(e.what()).find(t), std::string::npos) << e.what();
  }
}

const TuningLimits kLimits{8 * 1024, 64 * 1024, 256 * 1024};

CollAlgo pick(const TuningTable& t, TunedColl c, bool mapped, const std::string& tp, int ranks, uint64_t bytes) {
  return t.choose(TuningKey{c, mapped, tp, ranks, bytes}).algo;
}

TuningTable built_in_only() {
  TuningTable t;
  t.rules_ = TuningTable::built_in(kLimits);
  return t;
}

// What the refused text's error says (the test fails when it is accepted).
std::string refusal(const std::string& text) {
  try {
    TuningTable::parse(text, "'f.json'");
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
    return e.what();
  }
  ADD_FAILURE() << "accepted: " << text;
  return {};
}

TEST(CollTuning, BuiltInRulesAreTheMeasuredChoices) {
  const TuningTable t = built_in_only();
  const std::string tcp = "tcp";
  // allreduce: Bruck off shared memory on 3+ members up to RWIN_COLL_BRUCK_MAX, else Mesh up to
  // RWIN_ALLREDUCE_MESH_MAX, Ring above.
  EXPECT_EQ(pick(t, TunedColl::Allreduce, false, tcp, 4, 64 * 1024), CollAlgo::Bruck);
  EXPECT_EQ(pick(t, TunedColl::Allreduce, false, tcp, 4, 64 * 1024 + 1), CollAlgo::Ring);
  EXPECT_EQ(pick(t, TunedColl::Allreduce, false, tcp, 2, 8), CollAlgo::Mesh);
  EXPECT_EQ(pick(t, TunedColl::Allreduce, true, tcp, 4, 8 * 1024), CollAlgo::Mesh);
  EXPECT_EQ(pick(t, TunedColl::Allreduce, true, tcp, 4, 8 * 1024 + 1), CollAlgo::Ring);
  // data movement: Bruck under the same condition, the one-round algorithm otherwise.
  for (const TunedColl c : {TunedColl::Allgather, TunedColl::ReduceScatter, TunedColl::AllToAll}) {
    EXPECT_EQ(pick(t, c, false, tcp, 3, 0), CollAlgo::Bruck) << tuned_name(c);
    EXPECT_EQ(pick(t, c, false, tcp, 3, 64 * 1024), CollAlgo::Bruck) << tuned_name(c);
    EXPECT_EQ(pick(t, c, false, tcp, 3, 64 * 1024 + 1), CollAlgo::Direct) << tuned_name(c);
    EXPECT_EQ(pick(t, c, true, tcp, 8, 8), CollAlgo::Direct) << tuned_name(c);
    EXPECT_EQ(pick(t, c, false, tcp, 2, 8), CollAlgo::Direct) << tuned_name(c);
  }
  // broadcast: a binomial tree up to one chunk and a chain above it on 3-7 members off shared memory,
  // direct on 2.
  EXPECT_EQ(pick(t, TunedColl::Broadcast, true, tcp, 3, 256 * 1024), CollAlgo::Tree);
  EXPECT_EQ(pick(t, TunedColl::Broadcast, false, tcp, 8, 0), CollAlgo::Tree);
  EXPECT_EQ(pick(t, TunedColl::Broadcast, true, tcp, 2, 8), CollAlgo::Direct);
  EXPECT_EQ(pick(t, TunedColl::Broadcast, false, tcp, 3, 256 * 1024 + 1), CollAlgo::Chain);
  EXPECT_EQ(pick(t, TunedColl::Broadcast, false, tcp, 7, uint64_t{1} << 30), CollAlgo::Chain);
  // above one chunk the pipelined tree where it was measured ahead: shared memory, and 8+ members off it
  EXPECT_EQ(pick(t, TunedColl::Broadcast, true, tcp, 3, 256 * 1024 + 1), CollAlgo::Tree);
  EXPECT_EQ(pick(t, TunedColl::Broadcast, false, tcp, 8, 256 * 1024 + 1), CollAlgo::Tree);
  EXPECT_EQ(pick(t, TunedColl::Broadcast, false, tcp, 2, uint64_t{1} << 40), CollAlgo::Direct);
}

// With RWIN_COLL_BRUCK_MAX unset, reduce_scatter leaves Bruck above 4 KiB on 3-7 members and above 32 KiB
// on 8+, allreduce above 32 KiB, all_to_all above 32 KiB on 3-7 members, on every transport off shared
// memory; allgather keeps Bruck's whole range, and all_to_all on 8+; a set knob (the test above:
// kLimits) means what it says for all four.
TEST(CollTuning, WithTheBruckKnobUnsetReduceScatterAndLargerAllreducesLeaveBruckEarlier) {
  TuningTable t;
  t.rules_ = TuningTable::built_in(TuningLimits{8 * 1024, 64 * 1024, 256 * 1024, false});
  for (const std::string tp : {"tcp", "ucx", "verbs"}) {
    EXPECT_EQ(pick(t, TunedColl::ReduceScatter, false, tp, 3, 4096), CollAlgo::Bruck) << tp;
    EXPECT_EQ(pick(t, TunedColl::ReduceScatter, false, tp, 3, 4097), CollAlgo::Direct) << tp;
    EXPECT_EQ(pick(t, TunedColl::ReduceScatter, false, tp, 7, 4097), CollAlgo::Direct) << tp;
    EXPECT_EQ(pick(t, TunedColl::ReduceScatter, false, tp, 8, 32 * 1024), CollAlgo::Bruck) << tp;
    EXPECT_EQ(pick(t, TunedColl::ReduceScatter, false, tp, 8, 32 * 1024 + 1), CollAlgo::Direct) << tp;
    EXPECT_EQ(pick(t, TunedColl::ReduceScatter, false, tp, 8, 64 * 1024), CollAlgo::Direct) << tp;
    EXPECT_EQ(pick(t, TunedColl::Allreduce, false, tp, 3, 32 * 1024), CollAlgo::Bruck) << tp;
    EXPECT_EQ(pick(t, TunedColl::Allreduce, false, tp, 3, 32 * 1024 + 1), CollAlgo::Ring) << tp;
    EXPECT_EQ(pick(t, TunedColl::Allreduce, false, tp, 2, 8), CollAlgo::Mesh) << tp;
    EXPECT_EQ(pick(t, TunedColl::Allreduce, true, tp, 8, 8 * 1024), CollAlgo::Mesh) << tp;  // shm as before
    for (const TunedColl c : {TunedColl::Allgather, TunedColl::AllToAll}) {
      EXPECT_EQ(pick(t, c, false, tp, 8, 64 * 1024), CollAlgo::Bruck) << tuned_name(c) << " " << tp;
    }
    EXPECT_EQ(pick(t, TunedColl::AllToAll, false, tp, 3, 32 * 1024), CollAlgo::Bruck) << tp;
    EXPECT_EQ(pick(t, TunedColl::AllToAll, false, tp, 3, 32 * 1024 + 1), CollAlgo::Direct) << tp;
    EXPECT_EQ(pick(t, TunedColl::AllToAll, false, tp, 7, 64 * 1024), CollAlgo::Direct) << tp;
    EXPECT_EQ(pick(t, TunedColl::Allgather, false, tp, 4, 64 * 1024), CollAlgo::Bruck) << tp;
  }
  // Bounded by the knob's value: at 4 KiB there is no range left for either rule.
  TuningTable low;
  low.rules_ = TuningTable::built_in(TuningLimits{8 * 1024, 4096, 256 * 1024, false});
  EXPECT_EQ(pick(low, TunedColl::ReduceScatter, false, "tcp", 4, 4096), CollAlgo::Bruck);
  EXPECT_EQ(pick(low, TunedColl::ReduceScatter, false, "tcp", 4, 4097), CollAlgo::Direct);
  EXPECT_EQ(low.rules_.size(), TuningTable::built_in(kLimits).size());
  EXPECT_EQ(t.rules_.size(), TuningTable::built_in(kLimits).size() + 4);  // the four rules above
}

// With RWIN_ALLREDUCE_MESH_MAX unset, a team of 4+ in shared memory rings above 2 KiB; 2-3 members and
// teams off shared memory keep the knob's Mesh range; a set knob means what it says.
TEST(CollTuning, WithTheMeshKnobUnsetLargerShmAllreducesRing) {
  TuningTable t;
  t.rules_ = TuningTable::built_in(TuningLimits{8 * 1024, 64 * 1024, 256 * 1024, true, false});
  EXPECT_EQ(pick(t, TunedColl::Allreduce, true, "ucx", 4, 2048), CollAlgo::Mesh);
  EXPECT_EQ(pick(t, TunedColl::Allreduce, true, "ucx", 4, 2049), CollAlgo::Ring);
  EXPECT_EQ(pick(t, TunedColl::Allreduce, true, "ucx", 8, 8 * 1024), CollAlgo::Ring);
  EXPECT_EQ(pick(t, TunedColl::Allreduce, true, "ucx", 3, 8 * 1024), CollAlgo::Mesh);
  EXPECT_EQ(pick(t, TunedColl::Allreduce, true, "ucx", 2, 8 * 1024), CollAlgo::Mesh);
  EXPECT_EQ(pick(t, TunedColl::Allreduce, false, "tcp", 2, 8 * 1024), CollAlgo::Mesh);  // off shared memory
  EXPECT_EQ(pick(t, TunedColl::Allreduce, true, "ucx", 8, 8 * 1024 + 1), CollAlgo::Ring);
  EXPECT_EQ(t.rules_.size(), TuningTable::built_in(kLimits).size() + 1);
  TuningTable low;  // a knob at or below 2 KiB leaves no range for the rule
  low.rules_ = TuningTable::built_in(TuningLimits{2048, 64 * 1024, 256 * 1024, true, false});
  EXPECT_EQ(low.rules_.size(), TuningTable::built_in(kLimits).size());
}

TEST(CollTuning, AFilesRulesComeFirstAndMatchOnEveryKey) {
  TuningTable t;
  t.rules_ = TuningTable::parse(R"({"version": 1, "comment": "x", "rules": [
    {"collective": "allreduce", "path": "shm", "transport": "tcp", "ranks": [4, 8], "bytes": ["1K", "4K"], "algorithm": "ring"},
    {"collective": "broadcast", "ranks": [2, null], "bytes": [0, 100], "algorithm": "chain", "comment": "y"},
    {"collective": "all_to_all", "path": "any", "transport": "any", "algorithm": "bruck"}]})",
                                "'f.json'");
  ASSERT_EQ(t.rules_.size(), 3u);
  EXPECT_EQ(t.rules_[1].from, "'f.json', rule 1");
  for (auto& r : TuningTable::built_in(kLimits)) t.rules_.push_back(r);
  const std::string tcp = "tcp", ucx = "ucx";
  EXPECT_EQ(pick(t, TunedColl::Allreduce, true, tcp, 4, 1024), CollAlgo::Ring);
  EXPECT_EQ(pick(t, TunedColl::Allreduce, true, tcp, 8, 4096), CollAlgo::Ring);
  EXPECT_EQ(pick(t, TunedColl::Allreduce, true, tcp, 4, 1023), CollAlgo::Mesh);   // below bytes
  EXPECT_EQ(pick(t, TunedColl::Allreduce, true, tcp, 4, 4097), CollAlgo::Mesh);   // above bytes
  EXPECT_EQ(pick(t, TunedColl::Allreduce, true, tcp, 3, 2048), CollAlgo::Mesh);   // below ranks
  EXPECT_EQ(pick(t, TunedColl::Allreduce, true, tcp, 9, 2048), CollAlgo::Mesh);   // above ranks
  EXPECT_EQ(pick(t, TunedColl::Allreduce, false, tcp, 4, 2048), CollAlgo::Bruck); // path
  EXPECT_EQ(pick(t, TunedColl::Allreduce, true, ucx, 4, 2048), CollAlgo::Mesh);   // transport
  EXPECT_EQ(pick(t, TunedColl::Broadcast, true, ucx, 2, 100), CollAlgo::Chain);
  EXPECT_EQ(pick(t, TunedColl::Broadcast, true, ucx, 2, 101), CollAlgo::Direct);
  EXPECT_EQ(pick(t, TunedColl::Broadcast, true, ucx, 1000000, 0), CollAlgo::Chain);  // null: no upper end
  EXPECT_EQ(pick(t, TunedColl::AllToAll, true, ucx, 2, uint64_t{1} << 40), CollAlgo::Bruck);
  EXPECT_EQ(pick(t, TunedColl::Allgather, true, ucx, 2, 8), CollAlgo::Direct);  // other collectives untouched
  EXPECT_EQ(describe_rule(t.rules_[0]), "allreduce shm tcp ranks 4..8 bytes 1024..4096 -> ring");
  EXPECT_EQ(describe_rule(t.rules_[1]), "broadcast ranks 2.. bytes 0..100 -> chain");
}

TEST(CollTuning, ABadFileNamesTheRuleAndTheField) {
  EXPECT_NE(refusal("{\"version\": 1, \"rules\": [").find("'f.json': not JSON"), std::string::npos);
  EXPECT_NE(refusal("[]").find("the table is an object"), std::string::npos);
  EXPECT_NE(refusal(R"({"rules": []})").find("'version' must be 1"), std::string::npos);
  EXPECT_NE(refusal(R"({"version": 2, "rules": []})").find("'version' must be 1"), std::string::npos);
  EXPECT_NE(refusal(R"({"version": 1, "rule": []})").find("unknown field 'rule'"), std::string::npos);
  EXPECT_NE(refusal(R"({"version": 1, "rules": {}})").find("'rules' must be an array"), std::string::npos);
  const auto one = [](const std::string& rule) { return refusal(R"({"version": 1, "rules": [{"collective": "allreduce", "algorithm": "ring"}, )" + rule + "]}"); };
  EXPECT_NE(one("3").find("rule 1: a rule is an object"), std::string::npos);
  EXPECT_NE(one(R"({"algorithm": "ring"})").find("rule 1: no 'collective'"), std::string::npos);
  EXPECT_NE(one(R"({"collective": "allreduce"})").find("rule 1: no 'algorithm'"), std::string::npos);
  EXPECT_NE(one(R"({"collective": "gather", "algorithm": "ring"})").find("rule 1.collective: 'gather' is not"), std::string::npos);
  EXPECT_NE(one(R"({"collective": "broadcast", "algorithm": "bruck"})").find("rule 1.algorithm: 'bruck' is not an algorithm of broadcast (direct, chain, tree)"),
            std::string::npos);
  EXPECT_NE(one(R"({"collective": "allreduce", "algorithm": "direct"})").find("(mesh, ring, bruck)"), std::string::npos);
  EXPECT_NE(one(R"({"collective": "allreduce", "algorithm": "ring", "byte": [0, 1]})").find("rule 1: unknown field 'byte'"),
            std::string::npos);
  EXPECT_NE(one(R"({"collective": "allreduce", "algorithm": "ring", "path": "ib"})").find("rule 1.path: 'ib' is not shm, net or any"),
            std::string::npos);
  EXPECT_NE(one(R"({"collective": "allreduce", "algorithm": "ring", "transport": "rdma"})").find("rule 1.transport"), std::string::npos);
  EXPECT_NE(one(R"({"collective": "allreduce", "algorithm": "ring", "ranks": [0, 4]})").find("rule 1.ranks[0]: 0 is not a team size"),
            std::string::npos);
  EXPECT_NE(one(R"({"collective": "allreduce", "algorithm": "ring", "ranks": [5, 4]})").find("rule 1.ranks: lo 5 is above hi 4"),
            std::string::npos);
  EXPECT_NE(one(R"({"collective": "allreduce", "algorithm": "ring", "ranks": 4})").find("is not a range"), std::string::npos);
  EXPECT_NE(one(R"({"collective": "allreduce", "algorithm": "ring", "bytes": [0, 1, 2]})").find("is not a range"), std::string::npos);
  EXPECT_NE(one(R"({"collective": "allreduce", "algorithm": "ring", "bytes": ["4Q", null]})").find("rule 1.bytes[0]: '4Q' is not a size"),
            std::string::npos);
  EXPECT_NE(one(R"({"collective": "allreduce", "algorithm": "ring", "bytes": [-1, 4]})").find("rule 1.bytes[0]: -1 is not a size"),
            std::string::npos);
  EXPECT_NE(one(R"({"collective": "allreduce", "algorithm": "ring", "bytes": ["8K", 4]})").find("lo 8192 is above hi 4"),
            std::string::npos);
  EXPECT_NE(one(R"({"collective": 7, "algorithm": "ring"})").find("rule 1.collective: 7 is not a string"), std::string::npos);
}

TEST(CollTuning, LoadReadsTheFileBeforeTheBuiltInRules) {
  const std::string path = ::testing::TempDir() + "rwin_coll_tuning_test.json";
  {
    std::ofstream f(path);
    f << R"({"version": 1, "rules": [{"collective": "allgather", "algorithm": "bruck"}]})";
  }
  {
    rwin::test::EnvGuard g;
    g.set("RWIN_COLL_TUNING", path);
    const TuningTable t = TuningTable::load(kLimits);
    ASSERT_EQ(t.rules().size(), TuningTable::built_in(kLimits).size() + 1);
    EXPECT_EQ(t.rules()[0].from, "'" + path + "', rule 0");
    EXPECT_EQ(pick(t, TunedColl::Allgather, true, "ucx", 2, 8), CollAlgo::Bruck);
  }
  std::remove(path.c_str());
  {
    rwin::test::EnvGuard g;
    g.set("RWIN_COLL_TUNING", path);
    try {
      (void)TuningTable::load(kLimits);
      ADD_FAILURE() << "a missing file was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("'" + path + "': cannot be read"), std::string::npos) << e.what();
    }
  }
  // Every rank checks the file at start-up (Options::from_env), before any team is made.
  expect_refused("RWIN_COLL_TUNING", path, {"RWIN_COLL_TUNING: '" + path + "': cannot be read"});
  {
    rwin::test::EnvGuard g({"RWIN_COLL_TUNING"});
    EXPECT_EQ(TuningTable::load(kLimits).rules().size(), TuningTable::built_in(kLimits).size());
  }
}

// RWIN_COLL_COPY_MAX: 64 KiB by default, 16 KiB over verbs, a size wins on every transport (never more
// than a chunk's payload), and a bad value is refused at start-up naming it.
TEST(CollTuning, CopyMaxDefaultsByTransportAndIsASize) {
  {
    rwin::test::EnvGuard g({"RWIN_COLL_COPY_MAX", "RWIN_COLL_CHUNK_BYTES"});
    EXPECT_EQ(CollConfig::from_env("ucx").inline_max, 64u * 1024);
    EXPECT_EQ(CollConfig::from_env("tcp").inline_max, 64u * 1024);
    EXPECT_EQ(CollConfig::from_env("verbs").inline_max, 16u * 1024);
  }
  {
    rwin::test::EnvGuard g({"RWIN_COLL_CHUNK_BYTES"});
    g.set("RWIN_COLL_COPY_MAX", "128K");
    EXPECT_EQ(CollConfig::from_env("verbs").inline_max, 128u * 1024);
    EXPECT_EQ(CollConfig::from_env("tcp").inline_max, 128u * 1024);
    g.set("RWIN_COLL_CHUNK_BYTES", "64K");
    EXPECT_EQ(CollConfig::from_env("tcp").inline_max, 64u * 1024);  // at most a chunk
  }
  expect_refused("RWIN_COLL_COPY_MAX", "lots", {"RWIN_COLL_COPY_MAX='lots'"});
}

// RWIN_COLL_SLOTS: unset or "auto" leaves the count to the slot size (CollConfig::slots 0), a number
// 1..64 fixes it, anything else is refused at start-up with the value and what is expected.
TEST(CollTuning, SlotsAreAutoOrACountFrom1To64) {
  {
    rwin::test::EnvGuard g({"RWIN_COLL_SLOTS"});
    EXPECT_EQ(CollConfig::from_env("ucx").slots, 0);
  }
  for (const char* v : {"auto", "1", "64", "7"}) {
    rwin::test::EnvGuard g;
    g.set("RWIN_COLL_SLOTS", v);
    EXPECT_EQ(CollConfig::from_env("ucx").slots, std::string(v) == "auto" ? 0 : std::stoi(v)) << v;
  }
  for (const char* v : {"0", "65", "many", "-1"}) {
    expect_refused("RWIN_COLL_SLOTS", v, {std::string("RWIN_COLL_SLOTS='") + v + "'", "expected auto or 1..64"});
  }
}

// RWIN_COLL_LINES: 64 unset, 0 (none) to 64 taken as given, anything else refused at start-up.
TEST(CollTuning, LinesAreACountFrom0To64) {
  {
    rwin::test::EnvGuard g({"RWIN_COLL_LINES"});
    EXPECT_EQ(CollConfig::from_env("ucx").lines, 64);
  }
  for (const char* v : {"0", "1", "3", "64"}) {
    rwin::test::EnvGuard g;
    g.set("RWIN_COLL_LINES", v);
    EXPECT_EQ(CollConfig::from_env("ucx").lines, std::stoi(v)) << v;
  }
  for (const char* v : {"65", "many", "-1"}) expect_refused("RWIN_COLL_LINES", v, {std::string("RWIN_COLL_LINES='") + v + "'"});
}

}  // namespace

// docs/CONTRACT.md, "Workspace": with RWIN_COLL_SLOTS auto, K = 256 KiB / (64 + P), 8 to 64. The floor
// matters after a large call: the window only grows, so 256 KiB chunks set the depth of every later
// small call (4 there made tiny broadcasts 1.4x slower, bench/RESULTS.md).
TEST(CollWorkspace, AutoSlotsFillQuarterMebibytePerPeerBetweenEightAndSixtyFour) {
  EXPECT_EQ(auto_slots(64 + 64), 64u);           // tiny messages: the ceiling
  EXPECT_EQ(auto_slots(64 + 2048), 64u);         // 262144 / 2112 = 124
  EXPECT_EQ(auto_slots(64 + 4096), 63u);         // 262144 / 4160
  EXPECT_EQ(auto_slots(64 + 16384), 15u);        // 262144 / 16448
  EXPECT_EQ(auto_slots(64 + 32768), 8u);         // 7 by the quotient: the floor
  EXPECT_EQ(auto_slots(64 + 256 * 1024), 8u);    // the chunk size: 2 MiB per peer
  EXPECT_EQ(auto_slots(64 + (1u << 30)), 8u);    // any chunk size the knob allows
}
