// Context::stats() as one JSON object (the RWIN_STATS=1 line, Python's ctx.stats()): integers only,
// so written here rather than through a JSON library the core does not otherwise need.
#pragma once

#include <string>

#include "rwin/rwin.h"

namespace rwin {
int stats_from_env();  // RWIN_STATS (options.cpp): 1 = print the counters when a context ends
namespace detail {
// {"rank":0,"total":{...},"waits":...,"peers":[{...},...]}: the fields of Stats and PeerStats by name.
std::string stats_json(const Stats& s, int rank);
}  // namespace detail
}  // namespace rwin
