// rwin's log: levels and subsystems chosen by RWIN_LOG_LEVEL / RWIN_LOG_SUBSYS, written to stderr or
// RWIN_LOG_FILE by spdlog (only log.cpp includes spdlog: nothing of it reaches other headers).
//
//   RWIN_LOG(Info, Core, "chunk %zu bytes, depth %d", chunk, depth);
//
// Each line: "[time] rwin HOST:PID [RANK] LEVEL SUBSYS: message" (RANK is "-" until a Context knows
// it). The macro tests the level first: a disabled line costs one relaxed load and a compare, and
// neither formats nor evaluates its arguments.
#pragma once

#include <atomic>
#include <string>

namespace rwin::log {

enum class Level : int { Trace = 0, Debug, Info, Warn, Error, Off };
enum class Subsys : int { Bootstrap = 0, Ucx, Verbs, Core };
inline constexpr int kSubsysCount = 4;

namespace detail {
// Least level written per subsystem; -1 until configured, so the first line configures (write()).
extern std::atomic<int> g_threshold[kSubsysCount];
}  // namespace detail

inline bool enabled(Level level, Subsys s) noexcept {
  return static_cast<int>(level) >= detail::g_threshold[static_cast<int>(s)].load(std::memory_order_relaxed);
}

// printf-style; configures the log on first use and checks the level again.
void write(Level level, Subsys s, const char* fmt, ...) noexcept __attribute__((format(printf, 3, 4)));

// Reads RWIN_LOG_LEVEL, RWIN_LOG_SUBSYS and RWIN_LOG_FILE once per process. Returns "" or the
// message naming the first bad one, which is also logged once as a warning: a bad logging knob
// does not stop a job, its default applies. The first Context calls it so the warning comes early.
const std::string& configure();

// The rank printed on every later line (a Context sets it once known).
void set_rank(int rank) noexcept;

const char* level_name(Level l) noexcept;
const char* subsys_name(Subsys s) noexcept;

}  // namespace rwin::log

#define RWIN_LOG(level, subsys, ...)                                                                    \
  do {                                                                                                  \
    if (::rwin::log::enabled(::rwin::log::Level::level, ::rwin::log::Subsys::subsys)) {                 \
      ::rwin::log::write(::rwin::log::Level::level, ::rwin::log::Subsys::subsys, __VA_ARGS__);           \
    }                                                                                                   \
  } while (0)
