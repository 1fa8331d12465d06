// RWIN_TRACE: the per-rank Chrome Trace Event file (trace.h). Written by hand, like the RWIN_STATS line:
// a flat list of events whose only strings are names and messages, escaped here.
#include "trace.h"

#include <sys/stat.h>
#include <unistd.h>

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

Tracer::Tracer(std::string dir, int r, int n) : rank(r), nranks(n), created_ns_(now()) {
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
  events_.reserve(std::min<size_t>(max_events_, 4096));
  char name[256] = {};
  (void)::gethostname(name, sizeof name - 1);
  host_ = name;
  path_ = dir + "/rwin-trace-rank" + std::to_string(rank) + "-pid" + std::to_string(::getpid()) + ".json";
}

void Tracer::add(TraceEvent&& e) {
  if (events_.size() >= max_events_) {
    ++dropped_;
    return;
  }
  events_.push_back(std::move(e));
}

void Tracer::instant(const char* name, const char* cat, int peer, std::string detail) {
  TraceEvent e;
  e.t0 = now();
  e.name = name;
  e.cat = cat;
  e.peer = peer;
  e.detail = std::move(detail);
  e.instant = true;
  add(std::move(e));
}

void Tracer::sync_point(uint64_t t, std::string clock_id) {
  sync_ns_ = t;
  clock_id_ = std::move(clock_id);
}

void Tracer::write() noexcept {
  try {
    const std::string r = std::to_string(rank);
    std::string out;
    out.reserve(256 + events_.size() * 160);
    out += "{\"traceEvents\":[\n";
    out += "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":" + r + ",\"tid\":0,\"args\":{\"name\":";
    escape(out, "rank " + r + (host_.empty() ? std::string() : " (" + host_ + ")"));
    out += "}},\n{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":" + r + ",\"tid\":0,\"args\":{\"sort_index\":" + r + "}}";
    for (const TraceEvent& e : events_) {
      out += ",\n{\"name\":";
      escape(out, e.name);
      out += ",\"cat\":";
      escape(out, e.cat);
      out += e.instant ? ",\"ph\":\"i\",\"s\":\"p\",\"ts\":" : ",\"ph\":\"X\",\"ts\":";
      micros(out, e.t0);
      if (!e.instant) {
        out += ",\"dur\":";
        micros(out, e.dur);
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
      if (!e.detail.empty()) {
        key("detail");
        escape(out, e.detail);
      }
      if (e.failed) {
        key("failed");
        out += "true";
      }
      out += "}}";
    }
    out += "\n],\n\"displayTimeUnit\":\"ns\",\n\"otherData\":{\"rwin_trace\":1,\"rank\":" + r +
           ",\"nranks\":" + std::to_string(nranks) + ",\"pid\":" + std::to_string(::getpid()) + ",\"host\":";
    escape(out, host_);
    out += ",\"clock\":\"CLOCK_MONOTONIC\",\"clock_id\":";
    escape(out, clock_id_);
    out += ",\"sync_ns\":" + std::to_string(sync_ns_) +
           ",\"created_ns\":" + std::to_string(created_ns_) + ",\"events\":" + std::to_string(events_.size()) +
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
