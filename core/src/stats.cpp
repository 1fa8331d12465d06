// Context::stats() (rwin.h, docs/OBSERVING.md): the counters the data path keeps (peer_stats: transfer.cpp,
// accumulate.cpp, signals.cpp, atomics.cpp, progress.cpp; own_stats: waits, tests, quiet, barrier) with
// the registration cache's and the transport's, and the RWIN_STATS=1 line printed when a context ends.
#include "stats.h"

#include <algorithm>
#include <cstdio>

#include "context_impl.h"

namespace rwin {

namespace {

void add(PeerStats& t, const PeerStats& p) {
  t.puts += p.puts;
  t.put_bytes += p.put_bytes;
  t.put_adds += p.put_adds;
  t.put_add_bytes += p.put_add_bytes;
  t.gets += p.gets;
  t.get_bytes += p.get_bytes;
  t.chunks += p.chunks;
  t.notifies += p.notifies;
  t.fetching_atomics += p.fetching_atomics;
  t.fences += p.fences;
}

void field(std::string& out, const char* name, uint64_t v) {
  if (out.back() != '{') out += ',';
  out += '"';
  out += name;
  out += "\":";
  out += std::to_string(v);
}

std::string peer_json(const PeerStats& p) {
  std::string o = "{";
  field(o, "puts", p.puts);
  field(o, "put_bytes", p.put_bytes);
  field(o, "put_adds", p.put_adds);
  field(o, "put_add_bytes", p.put_add_bytes);
  field(o, "gets", p.gets);
  field(o, "get_bytes", p.get_bytes);
  field(o, "chunks", p.chunks);
  field(o, "notifies", p.notifies);
  field(o, "fetching_atomics", p.fetching_atomics);
  field(o, "fences", p.fences);
  return o + "}";
}

}  // namespace

Stats Context::stats() const {
  const detail::ContextImpl& c = *impl_;
  c.check_owner("stats");
  Stats s = c.own_stats;
  if (c.wait_ticks != c.wait_ticks_reported) {
    c.wait_ns_reported += std::max<uint64_t>(1, c.clock.to_ns(c.wait_ticks - c.wait_ticks_reported));
    c.wait_ticks_reported = c.wait_ticks;
  }
  s.wait_ns = c.wait_ns_reported;
  s.peers = c.peer_stats;
  for (const PeerStats& p : s.peers) add(s.total, p);
  for (size_t p = 0; p < c.peers.size(); ++p) {
    const bool known = std::any_of(c.known_failures.begin(), c.known_failures.end(),
                                   [p](const detail::KnownFailure& f) { return f.rank == static_cast<int>(p); });
    if (known || !c.peers[p].failed.empty()) ++s.failed_peers;
  }
  if (c.regcache) {
    s.reg_cache_hits = c.regcache->stats().hits;
    s.reg_cache_misses = c.regcache->stats().misses;
  }
  if (c.tp) {
    const transport::TransportCounters t = c.tp->counters();
    s.wrs = t.wrs;
    s.doorbells = t.doorbells;
    s.signaled = t.signaled;
    s.inline_wrs = t.inline_wrs;
    s.cqes = t.cqes;
    s.drained = t.drained;
    s.striped = t.striped;
    s.fence_reads = t.fence_reads;
  }
  return s;
}

std::string detail::stats_json(const Stats& s, int rank) {
  std::string o = "{";
  field(o, "rank", static_cast<uint64_t>(rank));
  o += ",\"total\":" + peer_json(s.total);
  field(o, "waits", s.waits);
  field(o, "waits_blocked", s.waits_blocked);
  field(o, "wait_ns", s.wait_ns);
  field(o, "tests", s.tests);
  field(o, "tests_satisfied", s.tests_satisfied);
  field(o, "quiets", s.quiets);
  field(o, "barriers", s.barriers);
  field(o, "failed_peers", s.failed_peers);
  field(o, "reg_cache_hits", s.reg_cache_hits);
  field(o, "reg_cache_misses", s.reg_cache_misses);
  field(o, "wrs", s.wrs);
  field(o, "doorbells", s.doorbells);
  field(o, "signaled", s.signaled);
  field(o, "inline_wrs", s.inline_wrs);
  field(o, "cqes", s.cqes);
  field(o, "drained", s.drained);
  field(o, "striped", s.striped);
  field(o, "fence_reads", s.fence_reads);
  o += ",\"peers\":[";
  for (size_t p = 0; p < s.peers.size(); ++p) o += (p ? "," : "") + peer_json(s.peers[p]);
  return o + "]}";
}

}  // namespace rwin
