// RWIN_TRACE: the per-rank Chrome Trace Event file (trace.h). Written by hand, like the RWIN_STATS line:
// a flat list of events whose only strings are names and messages, escaped here.
#include "trace.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "common/knobs.h"
#include "common/parse_number.h"
#include "rwin/rwin.h"

namespace rwin::detail {

namespace {

void escape(std::string& out, const std::string& s) {
  out += '"';
  for (const char ch : s) {
    const auto u = static_cast<unsigned char>(ch);
    if (ch == '"' || ch == '\\') {
      out += '\\';
      out += ch;
    } else if (u < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", u);
      out += buf;
    } else {
      out += ch;  // UTF-8 passes through; a stray byte >= 0x80 is the caller's name as given
    }
  }
  out += '"';
}

// Microseconds with three decimals (Chrome's unit), from nanoseconds, without a double's rounding.
void micros(std::string& out, uint64_t ns) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%llu.%03llu", static_cast<unsigned long long>(ns / 1000),
                static_cast<unsigned long long>(ns % 1000));
  out += buf;
}

void mkdirs(const std::string& dir) {
  for (size_t i = 1; i <= dir.size(); ++i) {
    if (i < dir.size() && dir[i] != '/') continue;
    const std::string part = dir.substr(0, i);
    if (::mkdir(part.c_str(), 0777) != 0 && errno != EEXIST) {
      throw Error(ErrorCode::InvalidArgument, "RWIN_TRACE='" + dir + "': cannot create directory '" + part +
                                                  "': " + std::strerror(errno));
    }
  }
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    throw Error(ErrorCode::InvalidArgument, "RWIN_TRACE='" + dir + "' is not a directory");
  }
  if (::access(dir.c_str(), W_OK) != 0) {
    throw Error(ErrorCode::InvalidArgument, "RWIN_TRACE='" + dir + "': directory not writable: " + std::strerror(errno));
  }
}

}  // namespace

std::unique_ptr<Tracer> Tracer::from_env(int rank, int nranks) {
  const char* dir = knobs::env("RWIN_TRACE");
  if (!dir) return nullptr;
  return std::make_unique<Tracer>(dir, rank, nranks);
}

std::unique_ptr<Tracer> Tracer::for_agent(const std::string& address, const std::string& label) {
  const char* dir = knobs::env("RWIN_TRACE");
  if (!dir) return nullptr;
  static std::atomic<int> seq{0};  // agents of this process
  auto t = std::make_unique<Tracer>(dir, -1, 0);
  t->agent_ = address;
  t->label_ = label;
  t->path_ = t->path_.substr(0, t->path_.rfind('/') + 1) + "rwin-trace-agent-pid" + std::to_string(::getpid()) + "-" +
             std::to_string(seq.fetch_add(1)) + ".json";
  return t;
}

Tracer::Tracer(std::string dir, int r, int n) : rank(r), nranks(n) {
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  mkdirs(dir);
  uint64_t max = 1000000;
  if (const char* v = knobs::env("RWIN_TRACE_MAX_EVENTS")) {
    const std::string why = common::parse_u64_in(v, 1, uint64_t{1} << 32, max);
    if (!why.empty()) {
      throw Error(ErrorCode::InvalidArgument, std::string("RWIN_TRACE_MAX_EVENTS='") + v + "' is not an integer in [1, " +
                                                  std::to_string(uint64_t{1} << 32) + "] (" + why + ")");
    }
  }
  max_events_ = static_cast<size_t>(max);
  blocks_.push_back(std::make_unique<TraceEvent[]>(std::min(max_events_, kBlock)));  // value-initialised: touched
  ready_ = std::min(max_events_, kBlock);
  anchor_ = TickAnchor{};
  char name[256] = {};
  (void)::gethostname(name, sizeof name - 1);
  host_ = name;
  path_ = dir + "/rwin-trace-rank" + std::to_string(rank) + "-pid" + std::to_string(::getpid()) + ".json";
}

TraceEvent* Tracer::open_slow() noexcept {
  if (count_ < max_events_) {
    try {  // the next block, value-initialised whole here rather than page by page inside timed work
      blocks_.push_back(std::make_unique<TraceEvent[]>(kBlock));
      ready_ = std::min(max_events_, blocks_.size() * kBlock);
      return open();
    } catch (...) {  // out of memory while tracing: the event is lost, the program is not
    }
  }
  ++dropped_;
  scratch_ = TraceEvent{};
  return &scratch_;
}

void Tracer::end_later(TraceEvent* e, uint64_t stamp) noexcept {
  e->t0 = stamp;
  e->dur = 0;
  e->later = true;
  if (e == &scratch_ || count_ < 2 || e != &blocks_[(count_ - 1) / kBlock][(count_ - 1) % kBlock]) return;
  TraceEvent& p = blocks_[(count_ - 2) / kBlock][(count_ - 2) % kBlock];
  const bool same = p.later && !p.failed && !e->failed && p.name == e->name && p.cat == e->cat && p.peer == e->peer &&
                    p.sig_name == e->sig_name && p.sig_word == e->sig_word && p.sig_op == e->sig_op &&
                    p.sig_value == e->sig_value && p.sig_i == e->sig_i && p.sig_j == e->sig_j && p.sig_n == e->sig_n &&
                    p.detail == 0 && e->detail == 0 && p.calls < UINT16_MAX && stamp >= p.t0 + p.dur &&
                    stamp - (p.t0 + p.dur) <= fold_gap_;
  if (!same) return;
  p.dur = stamp - p.t0;
  p.bytes += e->bytes;
  p.chunks += e->chunks;
  ++p.calls;
  *e = TraceEvent{};  // the next open() hands this slot out again, as a fresh one
  --count_;
}

void Tracer::end_held(const char* name, const char* cat, int peer, uint64_t bytes, uint32_t chunks, bool failed,
                      uint64_t stamp) noexcept {
  if (holding_) {
    TraceEvent& p = held_;
    if (p.name == name && p.cat == cat && p.peer == peer && !p.failed && !failed && p.calls < UINT16_MAX &&
        stamp >= p.t0 + p.dur && stamp - (p.t0 + p.dur) <= fold_gap_) {
      p.dur = stamp - p.t0;
      p.bytes += bytes;
      p.chunks += chunks;
      ++p.calls;
      return;
    }
    commit_held();
  }
  held_ = TraceEvent{};
  held_.t0 = stamp;
  held_.name = name;
  held_.cat = cat;
  held_.peer = peer;
  held_.bytes = bytes;
  held_.chunks = chunks;
  held_.failed = failed;
  held_.later = true;
  holding_ = true;
}

void Tracer::commit_held() noexcept {
  holding_ = false;
  *open() = held_;
}

void Tracer::instant(const char* name, const char* cat, int peer, std::string detail) {
  TraceEvent e;
  e.t0 = stamp();
  e.name = name;
  e.cat = cat;
  e.peer = peer;
  e.detail = text(std::move(detail));
  e.instant = true;
  add(e);
}

uint32_t Tracer::text(std::string s) {
  texts_.push_back(std::move(s));
  return static_cast<uint32_t>(texts_.size());
}

void Tracer::sync_point(uint64_t t, std::string clock_id) {
  sync_ns_ = t;
  clock_id_ = std::move(clock_id);
  set_fold_gap(anchor_.ns_per_tick());  // the rate over start-up: milliseconds at least
}

void Tracer::set_fold_gap(long double ns_per_tick) noexcept {
  if (ns_per_tick > 0) fold_gap_ = std::max<uint64_t>(1, static_cast<uint64_t>(kFoldGapNs / ns_per_tick + 0.5L));
}

void Tracer::write() noexcept {
  if (holding_) commit_held();
  try {
    // A rank's row is its rank; an agent's the process id (rwin-trace merge renumbers them).
    const std::string r = agent_.empty() ? std::to_string(rank) : std::to_string(::getpid());
    // Ticks to ns: the line through the anchor and this moment (exact for clock_gettime).
    const long double per_tick = anchor_.ns_per_tick();
    // One monotone map for both ends, so a span that ends on its parent's tick (a wait and its blocked
    // part) ends on the same nanosecond in the file.
    const auto ns_of = [&](uint64_t tick) -> uint64_t {
      const long double d = static_cast<long double>(static_cast<int64_t>(tick - anchor_.tick0)) * per_tick;
      return static_cast<uint64_t>(static_cast<long double>(anchor_.ns0) + d);
    };
    const auto at = [&](const TraceEvent& e) -> uint64_t { return e.ns ? e.t0 : ns_of(e.t0); };
    const auto length = [&](const TraceEvent& e) -> uint64_t {
      return e.ns ? e.dur : ns_of(e.t0 + e.dur) - ns_of(e.t0);
    };
    std::string out;
    out.reserve(256 + count_ * 160);
    out += "{\"traceEvents\":[\n";
    out += "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":" + r + ",\"tid\":0,\"args\":{\"name\":";
    escape(out, (agent_.empty() ? "rank " + r : label_) + (host_.empty() ? std::string() : " (" + host_ + ")"));
    out += "}},\n{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":" + r + ",\"tid\":0,\"args\":{\"sort_index\":" + r + "}}";
    for (size_t i = 0; i < count_; ++i) {
      const TraceEvent& e = blocks_[i / kBlock][i % kBlock];
      out += ",\n{\"name\":";
      escape(out, e.name);
      out += ",\"cat\":";
      escape(out, e.cat);
      out += e.instant ? ",\"ph\":\"i\",\"s\":\"p\",\"ts\":" : ",\"ph\":\"X\",\"ts\":";
      micros(out, at(e));
      if (!e.instant) {
        out += ",\"dur\":";
        micros(out, length(e));
      }
      out += ",\"pid\":" + r + ",\"tid\":0,\"args\":{";
      bool first = true;
      auto key = [&](const char* k) {
        if (!first) out += ',';
        first = false;
        out += '"';
        out += k;
        out += "\":";
      };
      if (e.peer >= 0) {
        key("peer");
        out += std::to_string(e.peer);
      }
      if (e.bytes) {
        key("bytes");
        out += std::to_string(e.bytes);
      }
      if (e.chunks) {
        key("chunks");
        out += std::to_string(e.chunks);
      }
      if (e.cmp) {
        key("cmp");
        escape(out, e.cmp);
        key("expected");
        out += std::to_string(e.expected);
      }
      if (e.on) {
        key("on");
        escape(out, e.on);
      }
      if (e.sig_name && e.sig_name <= texts_.size()) {
        std::string d;
        if (e.sig_op) d = std::string(e.sig_op) + " " + std::to_string(e.sig_value) + " on ";
        d += "'" + texts_[e.sig_name - 1] + "' ";
        d += e.sig_word ? "word " + std::to_string(e.sig_j)
                        : "element [" + std::to_string(e.sig_i) + ", " + std::to_string(e.sig_j) + "]";
        if (e.sig_n > 1) d += " (slice of " + std::to_string(e.sig_n) + ")";
        key("detail");
        escape(out, d);
      } else if (e.detail && e.detail <= texts_.size()) {
        key("detail");
        escape(out, texts_[e.detail - 1]);
      }
      if (e.calls > 1) {
        key("calls");
        out += std::to_string(e.calls);
      }
      if (e.failed) {
        key("failed");
        out += "true";
      }
      out += "}}";
    }
    out += "\n],\n\"displayTimeUnit\":\"ns\",\n\"otherData\":{\"rwin_trace\":1,\"rank\":" + std::to_string(rank) +
           ",\"nranks\":" + std::to_string(nranks) + ",\"pid\":" + std::to_string(::getpid()) + ",\"host\":";
    escape(out, host_);
    if (!agent_.empty()) {
      out += ",\"agent\":";
      escape(out, agent_);
      out += ",\"label\":";
      escape(out, label_);
    }
    out += ",\"clock\":\"CLOCK_MONOTONIC\",\"timer\":";
    escape(out, ticks::tsc() ? "tsc" : "clock_gettime");
    out += ",\"clock_id\":";
    escape(out, clock_id_);
    out += ",\"sync_ns\":" + std::to_string(sync_ns_) +
           ",\"created_ns\":" + std::to_string(anchor_.ns0) + ",\"events\":" + std::to_string(count_) +
           ",\"dropped\":" + std::to_string(dropped_) + "}}\n";
    // Written whole under a temporary name, then renamed: a reader never sees half a file.
    const std::string tmp = path_ + ".tmp";
    FILE* f = std::fopen(tmp.c_str(), "w");
    if (!f) {
      std::fprintf(stderr, "rwin: rank %d: RWIN_TRACE: cannot write %s: %s\n", rank, tmp.c_str(), std::strerror(errno));
      return;
    }
    const bool ok = std::fwrite(out.data(), 1, out.size(), f) == out.size();
    if (std::fclose(f) != 0 || !ok || std::rename(tmp.c_str(), path_.c_str()) != 0) {
      std::fprintf(stderr, "rwin: rank %d: RWIN_TRACE: writing %s failed: %s\n", rank, path_.c_str(), std::strerror(errno));
      (void)std::remove(tmp.c_str());
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rwin: rank %d: RWIN_TRACE: %s\n", rank, e.what());
  }
}

}  // namespace rwin::detail
