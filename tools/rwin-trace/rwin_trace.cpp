// rwin-trace: the ranks' RWIN_TRACE files (core/src/trace.h) as one timeline, and what it says.
//   rwin-trace merge DIR [-o job.json]   one Chrome Trace Event file for Perfetto / chrome://tracing,
//                                        ranks on one time axis; prints the summary unless --quiet
//   rwin-trace summary FILE|DIR           time per operation kind and per peer, the longest waits,
//                                        the failures
//   rwin-trace bars FILE|DIR              one line per span (rank, start us, end us, category, name):
//                                        what bench/trace_plot.sh draws with gnuplot
// Clocks: ranks whose files carry the same clock_id (the kernel's boot id) share CLOCK_MONOTONIC and
// are taken as they are. Another clock is shifted so that its first rank's start-up sync point (the
// end of the start-up allgather, which every rank leaves at about the same moment) meets rank 0's.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "rwin/rwin.h"
#include "tools/cli.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

struct RankFile {
  std::string path;
  json doc;
  int rank = -1;
  std::string agent;     // an agent's file (rwin::Agent): its address; its row is renumbered
  int pid = -1;          // the row in the merged file: the rank, or kAgentRow + n for agents
  int64_t shift_ns = 0;  // added to every timestamp of this file
};

constexpr int kAgentRow = 1000;  // the agents' rows follow the ranks


[[noreturn]] void die(const std::string& msg) {
  std::cerr << "rwin-trace: " << msg << "\n";
  std::exit(1);
}

json load(const std::string& path) {
  std::ifstream in(path);
  if (!in) die("cannot open " + path);
  try {
    return json::parse(in);
  } catch (const json::exception& e) {
    die(path + ": not JSON: " + e.what());
  }
}

// Timestamps are microseconds with three decimals; nanoseconds as integers avoid a double's drift.
int64_t ts_ns(const json& e, const char* key) {
  const double us = e.value(key, 0.0);
  return static_cast<int64_t>(us * 1000.0 + (us >= 0 ? 0.5 : -0.5));
}

// The rank files (and agent files) of DIR, checked: each an rwin trace, one file per rank.
std::vector<RankFile> load_dir(const std::string& dir) {
  std::vector<RankFile> files;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) die(dir + ": not a directory");
  for (const auto& ent : fs::directory_iterator(dir)) {
    const std::string name = ent.path().filename().string();
    const bool agent = name.rfind("rwin-trace-agent-", 0) == 0;
    if ((!agent && name.rfind("rwin-trace-rank", 0) != 0) || ent.path().extension() != ".json") continue;
    RankFile f;
    f.path = ent.path().string();
    f.doc = load(f.path);
    const json& od = f.doc.value("otherData", json::object());
    if (od.value("rwin_trace", 0) != 1 || !od.contains("rank") || !f.doc.contains("traceEvents")) {
      die(f.path + ": not an rwin trace file (no otherData.rwin_trace / rank / traceEvents)");
    }
    f.rank = od["rank"].get<int>();
    if (agent) {
      f.agent = od.value("agent", std::string("?"));
      f.rank = -1;
    }
    files.push_back(std::move(f));
  }
  if (files.empty()) {
    die(dir + ": no rwin-trace-rank*.json or rwin-trace-agent-*.json files (was RWIN_TRACE set to this directory?)");
  }
  // Ranks first, in order; then agents by address.
  std::sort(files.begin(), files.end(), [](const RankFile& a, const RankFile& b) {
    if (a.agent.empty() != b.agent.empty()) return a.agent.empty();
    return a.agent.empty() ? a.rank < b.rank : a.agent < b.agent;
  });
  int agents = 0;
  for (auto& f : files) f.pid = f.agent.empty() ? f.rank : kAgentRow + agents++;
  for (size_t i = 1; i < files.size(); ++i) {
    if (files[i].agent.empty() && files[i].rank == files[i - 1].rank) {
      die("rank " + std::to_string(files[i].rank) + " has two files, " + files[i - 1].path + " and " + files[i].path +
          ": traces of several runs in one directory? (use a fresh RWIN_TRACE directory per run)");
    }
  }
  const int nranks = files.front().doc["otherData"].value("nranks", 0);  // 0 when only agents
  std::vector<int> missing;
  for (int r = 0; r < nranks; ++r) {
    if (!std::any_of(files.begin(), files.end(), [r](const RankFile& f) { return f.rank == r; })) missing.push_back(r);
  }
  if (!missing.empty()) {
    std::string m;
    for (int r : missing) m += (m.empty() ? "" : ", ") + std::to_string(r);
    std::cerr << "rwin-trace: warning: no file for rank(s) " << m << " of " << nranks
              << " (a rank writes its file when its Context ends: killed before that?)\n";
  }
  // Clock alignment: the reference is the lowest rank's clock.
  const json& ref = files.front().doc["otherData"];
  const std::string ref_clock = ref.value("clock_id", "");
  const int64_t ref_sync = ref.value("sync_ns", int64_t{0});
  std::map<std::string, int64_t> shift;  // clock_id -> shift
  for (auto& f : files) {  // ranks first: an agent on a rank's host takes that host's shift
    const json& od = f.doc["otherData"];
    const std::string clock = od.value("clock_id", "");
    if (clock == ref_clock) continue;
    if (!shift.count(clock)) {
      if (!f.agent.empty()) {  // an agent has no start-up sync point
        std::cerr << "rwin-trace: warning: " << f.path << " (agent " << f.agent
                  << ") is from a host with no rank file: its times are not aligned\n";
        continue;
      }
      shift[clock] = ref_sync - od.value("sync_ns", int64_t{0});
    }
    f.shift_ns = shift[clock];
  }
  return files;
}

// Every event of the files, shifted onto one axis and rebased so the earliest is at 0.
json merged_events(std::vector<RankFile>& files) {
  int64_t t_min = INT64_MAX;
  for (const auto& f : files) {
    for (const auto& e : f.doc["traceEvents"]) {
      if (e.value("ph", "") == "M") continue;
      t_min = std::min(t_min, ts_ns(e, "ts") + f.shift_ns);
    }
  }
  if (t_min == INT64_MAX) t_min = 0;
  json out = json::array();
  for (auto& f : files) {
    for (auto e : f.doc["traceEvents"]) {
      if (e.value("ph", "") != "M") {
        const int64_t t = ts_ns(e, "ts") + f.shift_ns - t_min;
        e["ts"] = static_cast<double>(t) / 1000.0;
      }
      e["pid"] = f.pid;
      if (e.value("name", "") == "process_sort_index") e["args"]["sort_index"] = f.pid;
      out.push_back(std::move(e));
    }
  }
  return out;
}

struct Agg {
  uint64_t count = 0, bytes = 0;
  int64_t ns = 0, max_ns = 0;
  // A run of calls folded into one event (args.calls) counts as its calls; its per-call average stands
  // for each of them in max_ns.
  void add(int64_t d, uint64_t b, uint64_t calls) {
    count += calls;
    ns += d;
    max_ns = std::max(max_ns, d / static_cast<int64_t>(calls));
    bytes += b;
  }
};

std::string ms(int64_t ns) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", static_cast<double>(ns) / 1e6);
  return buf;
}

void print_summary(const json& events, std::ostream& os, size_t top) {
  std::map<int, std::string> rows;  // pid -> the row's name ("agent 127.0.0.1:40123 ucx(tcp)")
  for (const auto& e : events) {
    if (e.value("ph", "") == "M" && e.value("name", "") == "process_name") {
      const std::string n = e.value("args", json::object()).value("name", std::string());
      rows[e.value("pid", -1)] = n.substr(0, n.find(" ("));  // without the host
    }
  }
  const auto who = [&](int pid) {
    const auto it = rows.find(pid);
    return it != rows.end() && pid >= kAgentRow ? it->second : "rank " + std::to_string(pid);
  };
  std::map<std::string, Agg> by_kind;        // name
  std::map<std::pair<int, int>, Agg> by_peer;  // (rank, peer): data movement and sync with a peer
  struct Wait {
    int64_t ns;
    int rank;
    std::string text;
  };
  std::vector<Wait> waits;
  std::vector<std::string> failures;
  std::map<int, int64_t> rank_span;
  for (const auto& e : events) {
    const std::string ph = e.value("ph", "");
    const int rank = e.value("pid", -1);
    const json args = e.value("args", json::object());
    const std::string name = e.value("name", "");
    if (ph == "i") {
      failures.push_back(who(rank) + ": " + name + ": " + args.value("detail", std::string()));
      continue;
    }
    if (ph != "X") continue;
    const int64_t d = ts_ns(e, "dur");
    const uint64_t bytes = args.value("bytes", uint64_t{0});
    const std::string cat = e.value("cat", "");
    const uint64_t calls = std::max<uint64_t>(1, args.value("calls", uint64_t{1}));
    by_kind[cat == "wait" ? "blocked: " + args.value("on", std::string("?")) : name].add(d, bytes, calls);
    if (args.contains("peer") && cat != "wait") by_peer[{rank, args["peer"].get<int>()}].add(d, bytes, calls);
    if (cat == "wait" || name == "wait") {
      std::string text = name == "wait" ? "wait " + args.value("detail", std::string()) + " " +
                                              args.value("cmp", std::string()) + " " +
                                              std::to_string(args.value("expected", int64_t{0}))
                                        : "blocked on " + args.value("on", std::string("?"));
      if (args.contains("peer")) text += " (peer " + std::to_string(args["peer"].get<int>()) + ")";
      if (args.value("failed", false)) text += " [failed]";
      waits.push_back({d, rank, std::move(text)});
    }
  }
  os << "time per operation kind (all ranks):\n";
  os << "  kind                              count     total ms       avg us       max us        bytes\n";
  std::vector<std::pair<std::string, Agg>> kinds(by_kind.begin(), by_kind.end());
  std::sort(kinds.begin(), kinds.end(), [](const auto& a, const auto& b) { return a.second.ns > b.second.ns; });
  for (const auto& [k, a] : kinds) {
    char line[256];
    std::snprintf(line, sizeof line, "  %-30s %8llu %12s %12.2f %12.2f %12llu\n", k.c_str(),
                  static_cast<unsigned long long>(a.count), ms(a.ns).c_str(),
                  a.count ? static_cast<double>(a.ns) / 1e3 / static_cast<double>(a.count) : 0.0,
                  static_cast<double>(a.max_ns) / 1e3, static_cast<unsigned long long>(a.bytes));
    os << line;
  }
  os << "time per peer (operations naming a peer, by rank -> peer):\n";
  for (const auto& [rp, a] : by_peer) {
    char line[160];
    std::snprintf(line, sizeof line, "  %s -> peer %d: %llu ops, %s ms, %llu bytes\n", who(rp.first).c_str(), rp.second,
                  static_cast<unsigned long long>(a.count), ms(a.ns).c_str(), static_cast<unsigned long long>(a.bytes));
    os << line;
  }
  std::sort(waits.begin(), waits.end(), [](const Wait& a, const Wait& b) { return a.ns > b.ns; });
  os << "longest waits:\n";
  for (size_t i = 0; i < waits.size() && i < top; ++i) {
    os << "  " << ms(waits[i].ns) << " ms  " << who(waits[i].rank) << ": " << waits[i].text << "\n";
  }
  if (waits.empty()) os << "  (none)\n";
  os << "failures: " << (failures.empty() ? "none" : std::to_string(failures.size())) << "\n";
  for (const auto& f : failures) os << "  " << f << "\n";
}

// A merged file or a directory of rank files.
json events_of(const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    auto files = load_dir(path);
    return merged_events(files);
  }
  json doc = load(path);
  if (!doc.contains("traceEvents")) die(path + ": no traceEvents (not a Chrome trace)");
  return doc["traceEvents"];
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"rwin-trace: merge the ranks' RWIN_TRACE files into one timeline and summarise it", "rwin-trace"};
  rwin::cli::setup(app, rwin::version());
  app.require_subcommand(1);
  std::string dir, out, input;
  bool quiet = false;
  size_t top = 10;
  auto* merge = app.add_subcommand("merge", "one Chrome Trace Event file of every rank (Perfetto, chrome://tracing)");
  merge->add_option("dir", dir, "the RWIN_TRACE directory")->required();
  merge->add_option("-o,--output", out, "the merged file (default: DIR/job.json)");
  merge->add_flag("-q,--quiet", quiet, "no summary");
  merge->add_option("--top", top, "longest waits listed")->transform(rwin::cli::Count(0, 100000));
  auto* summary = app.add_subcommand("summary", "time per operation kind and per peer, the longest waits, the failures");
  summary->add_option("input", input, "a merged file or an RWIN_TRACE directory")->required();
  summary->add_option("--top", top, "longest waits listed")->transform(rwin::cli::Count(0, 100000));
  auto* bars = app.add_subcommand("bars", "rank, start us, end us, category, name per span (for gnuplot)");
  bars->add_option("input", input, "a merged file or an RWIN_TRACE directory")->required();
  rwin::cli::parse_or_exit(app, argc, argv);

  try {
    if (*merge) {
      auto files = load_dir(dir);
      json doc;
      doc["traceEvents"] = merged_events(files);
      doc["displayTimeUnit"] = "ns";
      json ranks = json::array(), agents = json::object(), shifts = json::object();
      for (const auto& f : files) {
        if (f.agent.empty()) {
          ranks.push_back(f.rank);
        } else {
          agents[std::to_string(f.pid)] = f.agent;
        }
        shifts[std::to_string(f.pid)] = f.shift_ns;
      }
      doc["otherData"] = {{"rwin_merged", 1}, {"ranks", ranks}, {"agents", agents}, {"clock_shift_ns", shifts}};
      if (out.empty()) out = (fs::path(dir) / "job.json").string();
      const std::string tmp = out + ".tmp";
      {
        std::ofstream o(tmp);
        if (!o) die("cannot write " + tmp);
        o << doc.dump() << "\n";
        if (!o) die("writing " + tmp + " failed");
      }
      fs::rename(tmp, out);
      std::cout << "rwin-trace: " << ranks.size() << " rank(s), " << agents.size() << " agent(s), "
                << doc["traceEvents"].size() << " events -> " << out
                << "\n";
      if (!quiet) print_summary(doc["traceEvents"], std::cout, top);
    } else if (*summary) {
      print_summary(events_of(input), std::cout, top);
    } else if (*bars) {
      for (const auto& e : events_of(input)) {
        if (e.value("ph", "") != "X") continue;
        const double t0 = e.value("ts", 0.0), d = e.value("dur", 0.0);
        std::string name = e.value("name", "");
        std::replace(name.begin(), name.end(), ' ', '_');
        std::printf("%d %.3f %.3f %s %s\n", e.value("pid", -1), t0, t0 + d, e.value("cat", "").c_str(), name.c_str());
      }
    }
  } catch (const std::exception& e) {
    die(e.what());
  }
  return 0;
}
