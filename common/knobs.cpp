#include "common/knobs.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <mutex>
#include <stdexcept>

#include <unistd.h>  // environ

#include "common/log.h"

namespace rwin::knobs {
namespace {

using K = Kind;

// Every RWIN_* variable rwin reads or its launchers set. Default texts are docs/CONFIG.md's.
constexpr Knob kTable[] = {
    // bootstrap: who am I, where is the rendezvous
    {"RWIN_RANK", K::Int, "from the launcher, else 0", "0..2147483647", "bootstrap",
     "this process's rank (set by rwinrun; else Open MPI, PMI or Slurm variables)"},
    {"RWIN_NRANKS", K::Int, "from the launcher, else 1", "1..2147483647", "bootstrap",
     "the job's size (set by rwinrun; else Open MPI, PMI or Slurm variables)"},
    {"RWIN_ROOT", K::String, "set by rwinrun", "host:port", "bootstrap",
     "address of the bootstrap store; rank 0 serves it (derived from the launcher where possible)"},
    {"RWIN_JOB_KEY", K::String, "set by rwinrun", "any non-empty string", "bootstrap",
     "the job's secret: the bootstrap store serves only clients that prove they know it"},
    {"RWIN_BOOTSTRAP", K::Enum, "auto", "pmix|tcp|auto", "bootstrap",
     "how ranks exchange addresses: PMIx put/fence/get, rwin's TCP store, or PMIx when a PMIx server is found"},
    {"RWIN_IFNAME", K::String, "the interface that routes to the root", "an interface name", "bootstrap",
     "network interface for the bootstrap and UCX tcp"},
    {"RWIN_STARTUP_TIMEOUT_MS", K::Int, "60000", "1..86400000", "core",
     "deadline of the rendezvous (every rank's arrival at the store)"},
    {"RWIN_TIMEOUT_MS", K::Int, "60000", "1..86400000", "core",
     "default deadline of every blocking operation and later bootstrap call"},
    // transport choice and tuning
    {"RWIN_TRANSPORT", K::Enum, "auto", "auto|ucx|tcp|mixed|verbs", "core",
     "the transport (tcp: rwin's own sockets, docs/TCP.md; mixed: UCX on each host, tcp across; auto: ucx on one "
     "host or where every host has RDMA, else mixed)"},
    {"RWIN_HOST_ID", K::String, "the kernel's boot id", "1-255 characters, no white space", "core",
     "this rank's host: ranks with equal ids share one (their CPUs, shared memory; mixed's choice per peer)"},
    {"RWIN_TCP_OWNER_SERVES", K::Enum, "1", "1|0", "transport",
     "tcp: a rank waiting inside rwin serves its own arrivals (0: only its receiver thread does)"},
    {"RWIN_TCP_SOCKETS", K::Int, "1", "1..4", "transport",
     "tcp: connections from each rank to each other; Writes of at least RWIN_TCP_STRIPE_MIN go round-robin over them"},
    {"RWIN_TCP_DUPLEX", K::Bool, "1", "0|1", "transport",
     "tcp: one connection per pair of ranks carrying both ways (unstriped pairs), or one per direction"},
    {"RWIN_TCP_STRIPE_MIN", K::Size, "64K", "1..1073741824", "transport",
     "tcp: smallest Write striped over the connections to a peer (smaller ones, and every other request, use the first)"},
    {"RWIN_TCP_PARK", K::Bool, "1", "0|1", "transport",
     "tcp: a rank's duplex sockets leave its epoll set while it serves them itself, back when its receiver thread takes over"},
    {"RWIN_TCP_RECEIVER_SPIN_US", K::Int, "50", "0..100000", "transport",
     "tcp: how long the receiver thread keeps polling after serving a passive target (0 when oversubscribed)"},
    {"RWIN_TCP_CONGESTION", K::String, "auto", "auto|system|an algorithm the kernel has", "transport",
     "tcp: congestion control of the data connections (auto: cubic where the kernel's default is bbr, whose pacing "
     "delays bursts; system: the kernel's)"},
    {"RWIN_IB_DEVICE", K::String, "first device with an active port", "a verbs device name", "transport",
     "verbs device (e.g. rxe0)"},
    {"RWIN_IB_PORT", K::Int, "1", "1..255", "transport", "verbs port"},
    {"RWIN_GID_INDEX", K::Int, "auto", "0..1023", "transport",
     "verbs GID index (auto: a RoCE v2 IPv4-mapped GID)"},
    {"RWIN_IB_GID_TYPE", K::Enum, "auto", "auto|roce-v2|roce-v1|ib", "transport",
     "verbs: only GIDs of this type (auto: RoCE v2 IPv4-mapped, then any RoCE v2, then any)"},
    {"RWIN_IB_GID_SUBNET", K::String, "any", "a.b.c.d/n or IPv6/n", "transport",
     "verbs: only GIDs in this prefix (like NCCL_IB_ADDR_RANGE)"},
    {"RWIN_IB_TC", K::Int, "0", "0..255", "transport", "verbs: GRH traffic class (RoCE v2: DSCP << 2 | ECN)"},
    {"RWIN_IB_SL", K::Int, "0", "0..15", "transport", "verbs: service level (IB SL; RoCE priority)"},
    {"RWIN_IB_HOP_LIMIT", K::Int, "64", "1..255", "transport", "verbs: GRH hop limit (IP TTL)"},
    {"RWIN_IB_TIMEOUT", K::Int, "18", "1..31", "transport", "verbs: RC ack timeout, 4.096 us * 2^n"},
    {"RWIN_IB_RETRY_CNT", K::Int, "6", "0..7", "transport", "verbs: RC retransmissions before a peer fails"},
    {"RWIN_IB_FORK_SAFE", K::Enum, "auto", "auto|1|0", "transport",
     "verbs: ibv_fork_init() before any verbs resource (auto: where the kernel does not copy pinned pages on fork)"},
    {"RWIN_IB_HCA", K::String, "RWIN_IB_DEVICE, else the first usable device", "NAME[:PORT],... (=exact, ^exclude)",
     "transport", "verbs: devices to stripe over, as NCCL_IB_HCA (at most 4)"},
    {"RWIN_VERBS_QPS_PER_PEER", K::Int, "1", "1..16", "transport",
     "verbs: RC queue pairs to each peer; Writes/Reads of at least RWIN_VERBS_STRIPE_MIN go round-robin over them"},
    {"RWIN_VERBS_STRIPE_MIN", K::Size, "64K", "1..2147483648", "transport",
     "verbs: smallest Write/Read striped over the queue pairs of a peer (smaller ones use the first)"},
    {"RWIN_UCX_RMA", K::Enum, "auto", "auto|native|am", "transport",
     "ucx: how RMA reaches a peer (auto: direct on mapped shm, am over tcp, native on RDMA)"},
    {"RWIN_UCX_TCP_ZCOPY", K::Bool, "0", "0|1", "transport", "ucx without RDMA devices: allow zero-copy tcp sends"},
    {"RWIN_AGENT_UCX_WAKEUP", K::Bool, "1", "0|1", "transport",
     "agents over ucx: idle progress sleeps on UCX's wake-up descriptor (0: polls on a timer)"},
    {"RWIN_CHUNK_BYTES", K::Size, "ucx 1 MiB, tcp 1 MiB, verbs 128 KiB", "1..18446744073709551615", "core",
     "largest piece a put/get is cut into"},
    {"RWIN_PIPELINE_DEPTH", K::Int, "ucx 4, tcp 8, verbs 32", "1..4096", "core", "chunks of one transfer in flight"},
    {"RWIN_ACCUMULATE_STAGING_BYTES", K::Size, "4M", "1..1099511627776", "core",
     "put(Add) staging inbox per rank, for peers not mapped into each other's memory"},
    {"RWIN_REG_CACHE", K::Bool, "1", "0|1", "core", "cache registrations of caller memory (verbs)"},
    {"RWIN_HUGEPAGES", K::Enum, "auto", "off|thp|hugetlbfs|auto", "transport",
     "verbs: huge pages for window buffers (auto: THP for buffers >= 2 MiB)"},
    {"RWIN_STATS", K::Bool, "0", "0|1", "core", "print each context's counters (Context::stats) to stderr when it ends"},
    {"RWIN_TRACE", K::String, "off", "a directory", "core",
     "write each context's timeline (Chrome Trace Event JSON) to DIR/rwin-trace-rank<R>-pid<P>.json when it ends"},
    {"RWIN_TRACE_MAX_EVENTS", K::Int, "1000000", "1..4294967296", "core",
     "events a context's trace keeps (later ones are counted as dropped)"},
    {"RWIN_METRICS", K::String, "off", "[http://]HOST:PORT, :PORT, file:PATH or off", "core",
     "agents: serve Prometheus metrics over HTTP GET /metrics at HOST:PORT (:PORT = 127.0.0.1), or rewrite file PATH"},
    {"RWIN_METRICS_INTERVAL_MS", K::Int, "1000", "1..86400000", "core",
     "agents: how often RWIN_METRICS=file:PATH rewrites the file"},
    {"RWIN_SPIN_US", K::Int, "200", "0..1000000", "core",
     "how long a wait spins before yielding (0 when oversubscribed)"},
    // collectives
    {"RWIN_COLL_CHUNK_BYTES", K::Size, "256 KiB", "64..1073741824", "core", "collectives: payload bytes per message"},
    {"RWIN_COLL_SLOTS", K::Int, "auto", "auto|1..64", "core",
     "collectives: scratch slots per peer (auto: 256 KiB per peer's worth, 8 to 64)"},
    {"RWIN_COLL_LINES", K::Int, "64", "0..64", "core",
     "collectives: lines per peer for broadcasts of up to 64 bytes on a team all in shared memory (0: none)"},
    {"RWIN_ALLREDUCE_MESH_MAX", K::Size, "8 KiB", "0..4611686018427387904", "core",
     "allreduce Auto: Mesh up to this many bytes, Ring above"},
    {"RWIN_COLL_BRUCK_MAX", K::Size, "64 KiB", "0..4611686018427387904", "core",
     "collectives on 3+ members not all in shared memory: Bruck's log-depth rounds up to this many bytes"},
    {"RWIN_COLL_COPY_MAX", K::Size, "64 KiB (verbs: 16 KiB)", "0..1073741824", "core",
     "collectives: a message's payload up to this many bytes is copied into the outbox (the call then waits for no ack)"},
    {"RWIN_COLL_PULL_MIN", K::Size, "8 KiB", "0..4611686018427387904", "core",
     "allgather, all_to_all, all_to_all_v (per pair), reduce_scatter, allreduce (ring), broadcast (from 16x) in shared memory, and inside each host the chain along the hosts: blocks of at least this many bytes are read from the members' windows; 0: never"},
    {"RWIN_COLL_HIER_MAX", K::Size, "16 KiB", "0..4611686018427387904", "core",
     "collectives on a team across hosts: allreduce, reduce_scatter up to this many bytes (all_to_all stages 4x, allgather rows and broadcast 16x) through one leader per host, and the team barrier; 0: never"},
    {"RWIN_COLL_CHAIN_LANES", K::Int, "auto", "auto|1..1024", "core",
     "allreduce above RWIN_COLL_HIER_MAX on a team across hosts that hold runs of consecutive ranks: how many members of each host fold a share of the vector along the hosts (auto: the fewest CPUs any host gives the job)"},
    {"RWIN_ALLREDUCE", K::Enum, "auto", "auto|mesh|ring|bruck", "core", "forces the allreduce algorithm of Auto calls"},
    {"RWIN_COLL_TUNING", K::String, "unset: the built-in rules", "a JSON file (docs/CONFIG.md, \"Collective tuning\")", "core",
     "collectives: rules tried before the built-in ones that pick each call's algorithm"},
    // logging (common/log.h)
    {"RWIN_LOG_LEVEL", K::Enum, "warn", "error|warn|info|debug|trace", "log", "least severe level logged"},
    {"RWIN_LOG_SUBSYS", K::String, "all", "comma list of bootstrap,ucx,verbs,core", "log",
     "subsystems whose info/debug/trace lines are logged"},
    {"RWIN_LOG_FILE", K::String, "stderr", "a path; %h = host, %p = pid", "log", "where log lines go"},
};

// Variables of rwin's own test, benchmark and build scripts: not the library's, not warned about.
constexpr const char* kScriptPrefixes[] = {
    "RWIN_RXE_",  "RWIN_NETNS_", "RWIN_MPIRUN_", "RWIN_SLURM_",   "RWIN_FAULTS_", "RWIN_NETIF_TEST_",
    "RWIN_PYTEST_", "RWIN_TEST_", "RWIN_IN_GUEST", "RWIN_SKIP_RXE", "RWIN_FUZZ",   "RWIN_PYTHON",
    "RWIN_BUILD_",  "RWIN_SANITIZE", "RWIN_WERROR", "RWIN_JOBS",  "RWIN_MODE",    "RWIN_UNIT_",
    "RWIN_MP_",     "RWIN_SCRIPT_",  "RWIN_BENCH_", "RWIN_PERF_",
};

struct Recorded {
  std::string value;
  Source source;
};

std::mutex& mu() {
  static std::mutex m;
  return m;
}
std::map<std::string, Recorded, std::less<>>& recorded() {
  static std::map<std::string, Recorded, std::less<>> r;
  return r;
}

const Knob& must_find(const char* name) {
  const Knob* k = find(name);
  if (!k) throw std::logic_error(std::string("rwin: ") + name + " is read but not in the knob table (common/knobs.cpp)");
  return *k;
}

}  // namespace

std::span<const Knob> table() noexcept { return kTable; }

const Knob* find(std::string_view name) noexcept {
  for (const Knob& k : kTable) {
    if (name == k.name) return &k;
  }
  return nullptr;
}

const char* kind_name(Kind k) noexcept {
  switch (k) {
    case Kind::Size: return "size";
    case Kind::Int: return "int";
    case Kind::Enum: return "enum";
    case Kind::String: return "string";
    case Kind::Bool: return "bool";
  }
  return "?";
}

const char* source_name(Source s) noexcept {
  switch (s) {
    case Source::Default: return "default";
    case Source::Environment: return "environment";
    case Source::Code: return "code";
  }
  return "?";
}

const char* env(const char* name, bool empty_is_unset) {
  const Knob& k = must_find(name);
  const char* v = std::getenv(k.name);
  if (!v || (!*v && empty_is_unset)) return nullptr;
  std::lock_guard<std::mutex> lock(mu());
  auto& r = recorded()[k.name];
  // A value set in code stays the answer: the environment does not override it.
  if (r.source != Source::Code) r = {v, Source::Environment};
  return v;
}

void set_in_code(const char* name, std::string value) {
  const Knob& k = must_find(name);
  std::lock_guard<std::mutex> lock(mu());
  recorded()[k.name] = {std::move(value), Source::Code};
}

std::vector<Setting> settings() {
  std::vector<Setting> out;
  std::lock_guard<std::mutex> lock(mu());
  for (const Knob& k : kTable) {
    if (auto it = recorded().find(k.name); it != recorded().end() && it->second.source == Source::Code) {
      out.push_back({&k, it->second.value, Source::Code});
    } else if (const char* v = std::getenv(k.name); v && *v) {
      out.push_back({&k, v, Source::Environment});
    } else {
      out.push_back({&k, k.default_text, Source::Default});
    }
  }
  return out;
}

std::span<const char* const> script_prefixes() noexcept { return kScriptPrefixes; }

size_t edit_distance(std::string_view a, std::string_view b) noexcept {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

std::vector<Unknown> unknown_variables(char** envp) {
  std::vector<Unknown> out;
  for (char** e = envp; e && *e; ++e) {
    const std::string_view entry(*e);
    if (entry.substr(0, 5) != "RWIN_") continue;
    const size_t eq = entry.find('=');
    const std::string_view name = entry.substr(0, eq);
    if (find(name)) continue;
    if (std::any_of(std::begin(kScriptPrefixes), std::end(kScriptPrefixes),
                    [&](const char* p) { return name.substr(0, std::string_view(p).size()) == p; })) {
      continue;
    }
    const Knob* best = &kTable[0];
    size_t best_d = SIZE_MAX;
    for (const Knob& k : kTable) {
      const size_t d = edit_distance(name, k.name);
      if (d < best_d) best_d = d, best = &k;
    }
    out.push_back({std::string(name), eq == std::string_view::npos ? "" : std::string(entry.substr(eq + 1)),
                   best->name});
  }
  return out;
}

std::string unknown_message(const Unknown& u) {
  return u.name + "=" + u.value + " is not an rwin variable; did you mean " + u.closest + "?";
}

void warn_unknown_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    for (const Unknown& u : unknown_variables(environ)) RWIN_LOG(Warn, Core, "%s", unknown_message(u).c_str());
  });
}

}  // namespace rwin::knobs
