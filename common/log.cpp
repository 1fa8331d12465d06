// spdlog, header-only and private to this file (CMake: FMT_HEADER_ONLY), so librwin needs neither
// libspdlog nor libfmt at run time and no spdlog type appears in a header.
#include "common/log.h"

#include <unistd.h>

#include <cstdarg>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string_view>

#include <spdlog/logger.h>
#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_sinks.h>

#include "common/knobs.h"

namespace rwin::log {

std::atomic<int> detail::g_threshold[kSubsysCount] = {-1, -1, -1, -1};

namespace {

constexpr const char* kLevelNames[] = {"trace", "debug", "info", "warn", "error"};
constexpr const char* kSubsysNames[] = {"bootstrap", "ucx", "verbs", "core"};

std::atomic<int> g_rank{-1};
std::string g_host;
std::shared_ptr<spdlog::logger> g_logger;  // set once by configure(), then only read
std::string g_error;

std::string hostname() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0) return "?";
  return name;
}

// %h -> host, %p -> pid, %% -> %; anything else stays as written.
std::string expand(std::string_view pattern) {
  std::string out;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] == '%' && i + 1 < pattern.size()) {
      const char c = pattern[i + 1];
      if (c == 'h') { out += g_host; ++i; continue; }
      if (c == 'p') { out += std::to_string(getpid()); ++i; continue; }
      if (c == '%') { out += '%'; ++i; continue; }
    }
    out += pattern[i];
  }
  return out;
}

// The first bad knob's message wins; later ones are still parsed (their defaults apply).
void fail(std::string why) {
  if (g_error.empty()) g_error = std::move(why);
}

int parse_level(const char* text) {
  if (!text) return static_cast<int>(Level::Warn);
  for (int i = 0; i < 5; ++i) {
    if (std::string_view(text) == kLevelNames[i]) return i;
  }
  fail(std::string("RWIN_LOG_LEVEL='") + text + "' is not a log level; expected error, warn, info, debug or trace");
  return static_cast<int>(Level::Warn);
}

// Which subsystems' lines below warn are written; warnings and errors always are (as NCCL_DEBUG_SUBSYS).
void parse_subsys(const char* text, bool (&on)[kSubsysCount]) {
  for (bool& b : on) b = true;
  if (!text || std::string_view(text) == "all") return;
  bool chosen[kSubsysCount] = {};
  std::string_view rest(text);
  while (true) {
    const size_t comma = rest.find(',');
    const std::string_view name = rest.substr(0, comma);
    int found = -1;
    for (int i = 0; i < kSubsysCount; ++i) {
      if (name == kSubsysNames[i]) found = i;
    }
    if (found < 0) {
      fail(std::string("RWIN_LOG_SUBSYS='") + text + "': unknown subsystem '" + std::string(name) +
           "'; expected all or a comma list of bootstrap, ucx, verbs, core");
      return;  // all stay on
    }
    chosen[found] = true;
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  for (int i = 0; i < kSubsysCount; ++i) on[i] = chosen[i];
}

void emit(Level level, Subsys s, const std::string& text) {
  const int rank = g_rank.load(std::memory_order_relaxed);
  // getpid() per line: a forked child (Python tests fork workers) prints its own.
  g_logger->info("{}:{} [{}] {} {}: {}", g_host, static_cast<long>(getpid()),
                 rank < 0 ? std::string("-") : std::to_string(rank), kLevelNames[static_cast<int>(level)],
                 kSubsysNames[static_cast<int>(s)], text);
}

void do_configure() {
  g_host = hostname();
  const int level = parse_level(knobs::env("RWIN_LOG_LEVEL"));
  bool on[kSubsysCount];
  parse_subsys(knobs::env("RWIN_LOG_SUBSYS"), on);
  spdlog::sink_ptr sink;
  if (const char* file = knobs::env("RWIN_LOG_FILE")) {
    const std::string path = expand(file);
    try {
      sink = std::make_shared<spdlog::sinks::basic_file_sink_mt>(path, false);
    } catch (const std::exception& e) {
      fail(std::string("RWIN_LOG_FILE='") + file + "': cannot open '" + path + "' for appending: " + e.what());
    }
  }
  if (!sink) sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
  auto logger = std::make_shared<spdlog::logger>("rwin", std::move(sink));
  logger->set_pattern("[%Y-%m-%d %H:%M:%S.%e] rwin %v");
  logger->set_level(spdlog::level::trace);  // filtering is ours (g_threshold)
  logger->flush_on(spdlog::level::trace);   // every line: the next thing may be a crash or _exit
  g_logger = std::move(logger);
  for (int i = 0; i < kSubsysCount; ++i) {
    const int t = on[i] ? level : std::max(level, static_cast<int>(Level::Warn));
    detail::g_threshold[i].store(t, std::memory_order_relaxed);
  }
  // A bad logging knob does not stop the job: one warning, and its default applies.
  if (!g_error.empty()) emit(Level::Warn, Subsys::Core, g_error + " (using the default)");
}

}  // namespace

const std::string& configure() {
  static std::once_flag once;
  std::call_once(once, do_configure);
  return g_error;
}

void set_rank(int rank) noexcept { g_rank.store(rank, std::memory_order_relaxed); }

const char* level_name(Level l) noexcept {
  const int i = static_cast<int>(l);
  return i >= 0 && i < 5 ? kLevelNames[i] : "off";
}
const char* subsys_name(Subsys s) noexcept { return kSubsysNames[static_cast<int>(s)]; }

void write(Level level, Subsys s, const char* fmt, ...) noexcept {
  try {
    configure();
    if (!enabled(level, s)) return;
    char small[512];
    va_list ap;
    va_start(ap, fmt);
    va_list again;
    va_copy(again, ap);
    const int n = std::vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    std::string text;
    if (n >= 0 && static_cast<size_t>(n) >= sizeof small) {
      text.resize(static_cast<size_t>(n) + 1);
      std::vsnprintf(text.data(), text.size(), fmt, again);
      text.resize(static_cast<size_t>(n));
    } else {
      text = n >= 0 ? small : fmt;
    }
    va_end(again);
    emit(level, s, text);
  } catch (...) {
    // Logging never takes the process down (it is called from destructors and callbacks).
  }
}

}  // namespace rwin::log
