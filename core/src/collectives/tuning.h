// The collectives' tuning table (issue 27): which algorithm a call runs, by collective, size, team
// size, path (shared memory or not) and transport. Rules are tried in order and the first that matches
// decides: the rules of the file named by RWIN_COLL_TUNING first (JSON, docs/CONFIG.md "Collective
// tuning"), then the built-in rules, which are today's measured choices (RWIN_ALLREDUCE_MESH_MAX,
// RWIN_COLL_BRUCK_MAX, RWIN_COLL_CHUNK_BYTES) and end with a rule that matches every call of each
// collective. An allreduce's explicit mode argument and RWIN_ALLREDUCE come before the table.
//
// Every key is a value all members of a team agree on (size, team size, `mapped`, the job's transport),
// so a table that is the same on every member makes the same choice everywhere; members whose tables
// differ name different algorithms in their headers and the call ends in CollectiveMismatch.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace rwin::detail {

// The algorithm, as the header's `mode` byte carries it (AllreduceMode's values for Mesh, Ring, Bruck).
enum class CollAlgo : uint8_t { Direct = 0, Mesh = 1, Ring = 2, Bruck = 3, Chain = 4, Tree = 5 };
// The collectives the table tunes (all_to_all_v and barrier have one algorithm each).
enum class TunedColl : uint8_t { Allreduce, Allgather, ReduceScatter, Broadcast, AllToAll };
constexpr size_t kTunedColls = static_cast<size_t>(TunedColl::AllToAll) + 1;  // keep AllToAll last

const char* algo_name(CollAlgo a) noexcept;
const char* tuned_name(TunedColl c) noexcept;
// What the table counts as a call's size, for messages and docs.
const char* tuned_size_meaning(TunedColl c) noexcept;

enum class TunedPath : uint8_t { Any, Shm, Net };  // Shm: every member's memory mapped here

struct TuningRule {
  TunedColl coll = TunedColl::Allreduce;
  TunedPath path = TunedPath::Any;
  std::string transport;  // "ucx", "tcp", "mixed", "verbs"; empty: any
  int64_t ranks_lo = 1, ranks_hi = std::numeric_limits<int64_t>::max();
  uint64_t bytes_lo = 0, bytes_hi = std::numeric_limits<uint64_t>::max();
  CollAlgo algo = CollAlgo::Direct;
  std::string from;  // "FILE, rule 2" or "built-in (RWIN_COLL_BRUCK_MAX)"
};

struct TuningKey {
  TunedColl coll;
  bool mapped;
  const std::string& transport;
  int ranks;
  uint64_t bytes;  // tuned_size_meaning(coll)
};

struct TuningLimits {  // the knobs the built-in rules come from (CollConfig's values)
  uint64_t mesh_max, bruck_max, chunk_bytes;
  bool bruck_max_set = true;  // false: RWIN_COLL_BRUCK_MAX unset, so measured per-collective edges apply inside it
  bool mesh_max_set = true;   // false: RWIN_ALLREDUCE_MESH_MAX unset (likewise for Mesh on shared memory)
};

class TuningTable {
 public:
  // The file's rules (RWIN_COLL_TUNING, when set), then the built-in ones. Throws Error(InvalidArgument)
  // naming the file, the rule and the field when the file cannot be read or is not a valid table.
  static TuningTable load(const TuningLimits& limits);
  // `text` as a file's contents (`origin` names it in errors and in TuningRule::from).
  static std::vector<TuningRule> parse(const std::string& text, const std::string& origin);
  static std::vector<TuningRule> built_in(const TuningLimits& limits);

  // The first matching rule (the built-in rules match every call in the end).
  const TuningRule& choose(const TuningKey& k) const;
  const std::vector<TuningRule>& rules() const { return rules_; }
  std::vector<TuningRule> rules_;
};

bool rule_matches(const TuningRule& r, const TuningKey& k) noexcept;
std::string describe_rule(const TuningRule& r);  // "allreduce net ranks 3.. bytes 0..65536 -> bruck"

}  // namespace rwin::detail
