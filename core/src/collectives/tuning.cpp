// The tuning table's rules: the built-in ones, a user's file (JSON, nlohmann-json: Debian's
// nlohmann-json3-dev, already the tools' parser), and the first-match choice.
#include "collectives/tuning.h"

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "common/knobs.h"
#include "common/parse_number.h"
#include "rwin/rwin.h"

namespace rwin::detail {

namespace {

using nlohmann::json;

constexpr TunedColl kAllColls[] = {TunedColl::Allreduce, TunedColl::Allgather, TunedColl::ReduceScatter,
                                   TunedColl::Broadcast, TunedColl::AllToAll};
constexpr CollAlgo kAllAlgos[] = {CollAlgo::Direct, CollAlgo::Mesh, CollAlgo::Ring, CollAlgo::Bruck, CollAlgo::Chain,
                                  CollAlgo::Tree};

// The algorithms each collective has.
bool algo_valid(TunedColl c, CollAlgo a) {
  switch (c) {
    case TunedColl::Allreduce: return a == CollAlgo::Mesh || a == CollAlgo::Ring || a == CollAlgo::Bruck;
    case TunedColl::Broadcast: return a == CollAlgo::Direct || a == CollAlgo::Chain || a == CollAlgo::Tree;
    default: return a == CollAlgo::Direct || a == CollAlgo::Bruck;
  }
}

std::string valid_algos(TunedColl c) {
  std::string s;
  for (const CollAlgo a : kAllAlgos) {
    if (algo_valid(c, a)) s += std::string(s.empty() ? "" : ", ") + algo_name(a);
  }
  return s;
}

[[noreturn]] void bad(const std::string& where, const std::string& why) {
  throw Error(ErrorCode::InvalidArgument, "RWIN_COLL_TUNING: " + where + ": " + why +
                                              " (docs/CONFIG.md, \"Collective tuning\")");
}

// A size: a non-negative JSON integer, or a string in kSizeForm ("64K").
uint64_t size_of(const json& v, const std::string& where) {
  if (v.is_number_unsigned()) return v.get<uint64_t>();
  if (v.is_string()) {
    uint64_t out = 0;
    const std::string why = common::parse_size(v.get<std::string>(), out);
    if (why.empty()) return out;
    bad(where, "'" + v.get<std::string>() + "' is not a size (" + why + "); expected " + common::kSizeForm);
  }
  bad(where, v.dump() + " is not a size (a non-negative integer or a string such as \"64K\")");
}

// [lo, hi] with hi optional (null or absent: no upper limit).
template <class T>
void range_of(const json& v, const std::string& where, T& lo, T& hi, T (*one)(const json&, const std::string&)) {
  if (!v.is_array() || v.empty() || v.size() > 2) bad(where, v.dump() + " is not a range [lo, hi] (hi null: no limit)");
  lo = one(v[0], where + "[0]");
  if (v.size() == 2 && !v[1].is_null()) hi = one(v[1], where + "[1]");
  if (lo > hi) bad(where, "lo " + std::to_string(lo) + " is above hi " + std::to_string(hi));
}

int64_t ranks_of(const json& v, const std::string& where) {
  if (!v.is_number_unsigned() || v.get<uint64_t>() < 1 || v.get<uint64_t>() > (uint64_t{1} << 31)) {
    bad(where, v.dump() + " is not a team size (an integer >= 1)");
  }
  return static_cast<int64_t>(v.get<uint64_t>());
}

std::string text_of(const json& v, const std::string& where) {
  if (!v.is_string()) bad(where, v.dump() + " is not a string");
  return v.get<std::string>();
}

TuningRule rule_of(const json& r, const std::string& where) {
  if (!r.is_object()) bad(where, "a rule is an object, not " + r.dump());
  for (auto it = r.begin(); it != r.end(); ++it) {
    static const char* const kKeys[] = {"collective", "path", "transport", "ranks", "bytes", "algorithm", "comment"};
    bool known = false;
    for (const char* k : kKeys) known = known || it.key() == k;
    if (!known) {
      bad(where, "unknown field '" + it.key() + "' (known: collective, path, transport, ranks, bytes, algorithm, comment)");
    }
  }
  TuningRule out;
  if (!r.contains("collective")) bad(where, "no 'collective'");
  const std::string coll = text_of(r["collective"], where + ".collective");
  bool found = false;
  for (const TunedColl c : kAllColls) {
    if (coll == tuned_name(c)) out.coll = c, found = true;
  }
  if (!found) bad(where + ".collective", "'" + coll + "' is not allreduce, allgather, reduce_scatter, broadcast or all_to_all");
  if (!r.contains("algorithm")) bad(where, "no 'algorithm'");
  const std::string algo = text_of(r["algorithm"], where + ".algorithm");
  found = false;
  for (const CollAlgo a : kAllAlgos) {
    if (algo == algo_name(a) && algo_valid(out.coll, a)) out.algo = a, found = true;
  }
  if (!found) bad(where + ".algorithm", "'" + algo + "' is not an algorithm of " + coll + " (" + valid_algos(out.coll) + ")");
  if (r.contains("path")) {
    const std::string p = text_of(r["path"], where + ".path");
    if (p == "shm") out.path = TunedPath::Shm;
    else if (p == "net") out.path = TunedPath::Net;
    else if (p != "any") bad(where + ".path", "'" + p + "' is not shm, net or any");
  }
  if (r.contains("transport")) {
    out.transport = text_of(r["transport"], where + ".transport");
    if (out.transport == "any") out.transport.clear();
    if (!out.transport.empty() && out.transport != "ucx" && out.transport != "tcp" && out.transport != "mixed" &&
        out.transport != "verbs") {
      bad(where + ".transport", "'" + out.transport + "' is not ucx, tcp, mixed, verbs or any");
    }
  }
  if (r.contains("ranks")) range_of<int64_t>(r["ranks"], where + ".ranks", out.ranks_lo, out.ranks_hi, ranks_of);
  if (r.contains("bytes")) range_of<uint64_t>(r["bytes"], where + ".bytes", out.bytes_lo, out.bytes_hi, size_of);
  return out;
}

std::string range_text(uint64_t lo, uint64_t hi, uint64_t none) {
  return std::to_string(lo) + ".." + (hi == none ? std::string() : std::to_string(hi));
}

}  // namespace

const char* algo_name(CollAlgo a) noexcept {
  switch (a) {
    case CollAlgo::Direct: return "direct";
    case CollAlgo::Mesh: return "mesh";
    case CollAlgo::Ring: return "ring";
    case CollAlgo::Bruck: return "bruck";
    case CollAlgo::Chain: return "chain";
    case CollAlgo::Tree: return "tree";
  }
  return "?";
}

const char* tuned_name(TunedColl c) noexcept {
  switch (c) {
    case TunedColl::Allreduce: return "allreduce";
    case TunedColl::Allgather: return "allgather";
    case TunedColl::ReduceScatter: return "reduce_scatter";
    case TunedColl::Broadcast: return "broadcast";
    case TunedColl::AllToAll: return "all_to_all";
  }
  return "?";
}

const char* tuned_size_meaning(TunedColl c) noexcept {
  switch (c) {
    case TunedColl::Allreduce: return "the vector's bytes";
    case TunedColl::Allgather: return "a row's bytes (the stage)";
    case TunedColl::ReduceScatter: return "team size x the data's bytes / 2 (half of what Bruck gathers)";
    case TunedColl::Broadcast: return "the vector's bytes";
    case TunedColl::AllToAll: return "the stage's bytes (all team-size rows)";
  }
  return "?";
}

bool rule_matches(const TuningRule& r, const TuningKey& k) noexcept {
  return r.coll == k.coll && (r.path == TunedPath::Any || (r.path == TunedPath::Shm) == k.mapped) &&
         (r.transport.empty() || r.transport == k.transport) && k.ranks >= r.ranks_lo && k.ranks <= r.ranks_hi &&
         k.bytes >= r.bytes_lo && k.bytes <= r.bytes_hi;
}

std::string describe_rule(const TuningRule& r) {
  std::string s = tuned_name(r.coll);
  if (r.path != TunedPath::Any) s += r.path == TunedPath::Shm ? " shm" : " net";
  if (!r.transport.empty()) s += " " + r.transport;
  if (r.ranks_lo != 1 || r.ranks_hi != std::numeric_limits<int64_t>::max()) {
    s += " ranks " + range_text(static_cast<uint64_t>(r.ranks_lo), static_cast<uint64_t>(r.ranks_hi),
                                static_cast<uint64_t>(std::numeric_limits<int64_t>::max()));
  }
  if (r.bytes_lo != 0 || r.bytes_hi != std::numeric_limits<uint64_t>::max()) {
    s += " bytes " + range_text(r.bytes_lo, r.bytes_hi, std::numeric_limits<uint64_t>::max());
  }
  return s + " -> " + algo_name(r.algo);
}

std::vector<TuningRule> TuningTable::parse(const std::string& text, const std::string& origin) {
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::exception& e) {
    bad(origin, std::string("not JSON: ") + e.what());
  }
  if (!doc.is_object()) bad(origin, "the table is an object {\"version\": 1, \"rules\": [...]}");
  for (auto it = doc.begin(); it != doc.end(); ++it) {
    if (it.key() != "version" && it.key() != "rules" && it.key() != "comment") {
      bad(origin, "unknown field '" + it.key() + "' (known: version, rules, comment)");
    }
  }
  if (!doc.contains("version") || doc["version"] != 1) bad(origin, "'version' must be 1");
  if (!doc.contains("rules") || !doc["rules"].is_array()) bad(origin, "'rules' must be an array of rules");
  std::vector<TuningRule> out;
  for (size_t i = 0; i < doc["rules"].size(); ++i) {
    const std::string where = origin + ", rule " + std::to_string(i);
    out.push_back(rule_of(doc["rules"][i], where));
    out.back().from = where;
  }
  return out;
}

std::vector<TuningRule> TuningTable::built_in(const TuningLimits& l) {
  std::vector<TuningRule> out;
  auto add = [&out](TunedColl c, TunedPath path, int64_t ranks_lo, uint64_t bytes_lo, uint64_t bytes_hi, CollAlgo a,
                    const char* from, int64_t ranks_hi = std::numeric_limits<int64_t>::max()) {
    TuningRule r;
    r.coll = c;
    r.path = path;
    r.ranks_lo = ranks_lo;
    r.ranks_hi = ranks_hi;
    r.bytes_lo = bytes_lo;
    r.bytes_hi = bytes_hi;
    r.algo = a;
    r.from = from;
    out.push_back(std::move(r));
  };
  constexpr uint64_t kAll = std::numeric_limits<uint64_t>::max();
  // Off shared memory, log-depth rounds beat one round of NR - 1 messages up to bruck_max (measured,
  // bench/RESULTS.md 2026-12-05); on shared memory a message is a few stores and one round wins.
  const char* bruck = "built-in (RWIN_COLL_BRUCK_MAX)";
  // With RWIN_COLL_BRUCK_MAX unset, three collectives leave Bruck earlier inside that range, as measured
  // over both tcp paths (bench/RESULTS.md 2026-12-06, "Where Bruck stops paying, again"): reduce_scatter
  // on 3-7 members above 4 KiB of its tuned size (NR x the input / 2) and on 8+ above 32 KiB (the
  // crossover moves up with NR: 4 ranks direct ahead from 4 KiB inputs, 8 ranks level at 8 KiB and ahead
  // at 16 KiB), and allreduce above 32 KiB (ring 0.35-0.97x Bruck's time at 64 KiB); and all_to_all on
  // 3-7 members above 32 KiB, once own tcp sent messages of up to 16 KiB with their notify (bench/
  // RESULTS.md 2026-12-07, "Writes of up to 16 KiB ride with the notify": direct 0.72-0.85x Bruck's time
  // at 48-64 KiB on 4 ranks, 0.77x on 6, 0.87x over UCX's tcp; level at 32 KiB; at 8 ranks 0.87x over own
  // tcp and 1.06x over UCX's, so 8+ keep Bruck). A set knob means what it says for all four collectives.
  if (!l.bruck_max_set) {
    const char* measured = "built-in (measured; RWIN_COLL_BRUCK_MAX unset)";
    if (l.bruck_max > 4096) add(TunedColl::ReduceScatter, TunedPath::Net, 3, 4097, l.bruck_max, CollAlgo::Direct, measured, 7);
    if (l.bruck_max > 32 * 1024) {
      add(TunedColl::ReduceScatter, TunedPath::Net, 8, 32 * 1024 + 1, l.bruck_max, CollAlgo::Direct, measured);
      add(TunedColl::Allreduce, TunedPath::Net, 3, 32 * 1024 + 1, l.bruck_max, CollAlgo::Ring, measured);
      add(TunedColl::AllToAll, TunedPath::Net, 3, 32 * 1024 + 1, l.bruck_max, CollAlgo::Direct, measured, 7);
    }
  }
  add(TunedColl::Allreduce, TunedPath::Net, 3, 0, l.bruck_max, CollAlgo::Bruck, bruck);
  // With RWIN_ALLREDUCE_MESH_MAX unset, a team of 4+ all in shared memory rings above 2 KiB: Mesh
  // (every member reads every input) costs NR x the bytes where the ring moves 2x; measured
  // 2026-12-06 (bench/RESULTS.md, "Mesh or ring on shared memory"): at 4 KiB the two level at 4 ranks and
  // the ring takes ~0.78x Mesh's time at 8; at 8 KiB 0.80-0.85x (4 ranks) and 0.65-0.70x (8 ranks); Mesh
  // ahead up to 2 KiB, and on 2 ranks at every size to 8 KiB.
  if (!l.mesh_max_set && l.mesh_max > 2048) {
    add(TunedColl::Allreduce, TunedPath::Shm, 4, 2049, l.mesh_max, CollAlgo::Ring,
        "built-in (measured; RWIN_ALLREDUCE_MESH_MAX unset)");
  }
  add(TunedColl::Allreduce, TunedPath::Any, 1, 0, l.mesh_max, CollAlgo::Mesh, "built-in (RWIN_ALLREDUCE_MESH_MAX)");
  add(TunedColl::Allreduce, TunedPath::Any, 1, 0, kAll, CollAlgo::Ring, "built-in");
  for (const TunedColl c : {TunedColl::Allgather, TunedColl::ReduceScatter, TunedColl::AllToAll}) {
    add(c, TunedPath::Net, 3, 0, l.bruck_max, CollAlgo::Bruck, bruck);
    add(c, TunedPath::Any, 1, 0, kAll, CollAlgo::Direct, "built-in");
  }
  // A broadcast of more than one chunk on 3-7 members off shared memory is pipelined along a chain
  // (every link carries the data once); up to one chunk a binomial tree (the root sends ceil(log2 NR)
  // messages, not NR - 1: 1.2-1.9x the direct algorithm from 8 B to 4 KiB on 4 and 8 ranks, over tcp
  // and shared memory alike, bench/RESULTS.md 2026-12-05); on 2 members the two are one message.
  // Measured again on 2026-12-06 (bench/RESULTS.md, "Broadcast above one chunk: tree or chain"): the
  // pipelined binomial tree (each member forwards chunk j as soon as it landed, as the chain does) took
  // 0.84-0.98x the chain's time on shared memory at 4 and 8 ranks from 1 to 16 MiB, and off it at 8 ranks
  // 0.77-1.04x over own tcp (ahead in 5 of 7 cells; at 4 ranks the two traded places from run to run).
  const char* tree = "built-in (measured: tree ahead of chain above RWIN_COLL_CHUNK_BYTES)";
  add(TunedColl::Broadcast, TunedPath::Shm, 3, l.chunk_bytes + 1, kAll, CollAlgo::Tree, tree);
  add(TunedColl::Broadcast, TunedPath::Net, 8, l.chunk_bytes + 1, kAll, CollAlgo::Tree, tree);
  add(TunedColl::Broadcast, TunedPath::Any, 3, l.chunk_bytes + 1, kAll, CollAlgo::Chain,
      "built-in (RWIN_COLL_CHUNK_BYTES)");
  add(TunedColl::Broadcast, TunedPath::Any, 3, 0, l.chunk_bytes, CollAlgo::Tree, "built-in (RWIN_COLL_CHUNK_BYTES)");
  add(TunedColl::Broadcast, TunedPath::Any, 1, 0, kAll, CollAlgo::Direct, "built-in");
  return out;
}

TuningTable TuningTable::load(const TuningLimits& limits) {
  TuningTable t;
  if (const char* path = knobs::env("RWIN_COLL_TUNING")) {
    std::ifstream f(path, std::ios::binary);
    std::stringstream text;
    if (f) text << f.rdbuf();
    if (!f || f.bad()) bad(std::string("'") + path + "'", "cannot be read");
    t.rules_ = parse(text.str(), std::string("'") + path + "'");
  }
  for (auto& r : built_in(limits)) t.rules_.push_back(std::move(r));
  return t;
}

const TuningRule& TuningTable::choose(const TuningKey& k) const {
  for (const TuningRule& r : rules_) {
    if (rule_matches(r, k)) return r;
  }
  // Unreachable: every collective's built-in rules end with one that matches every call.
  throw Error(ErrorCode::InvalidArgument, std::string("collective tuning: no rule matches ") + tuned_name(k.coll));
}

}  // namespace rwin::detail
