// rwin::Context: start-up (bootstrap, transport connect) and the bounded shutdown.
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>

#include "bootstrap/netif.h"
#include "common/knobs.h"
#include "common/log.h"
#include "bootstrap/pmix.h"
#include "collectives/coll_worker.h"
#include "collectives/team_state.h"
#include "caller_store.h"
#include "context_impl.h"
#include "stats.h"
#include "ops.h"
#include "startup.h"

namespace rwin {

using namespace detail;  // the core's internal types (context_impl.h, ops.h)

// How a bootstrap failure reaches the user: a peer that died is PeerFailed, as on the data path.
ErrorCode detail::error_code(const bootstrap::BootstrapError& e) {
  switch (e.kind()) {
    case bootstrap::BootstrapError::Kind::Timeout:
      return ErrorCode::Timeout;
    case bootstrap::BootstrapError::Kind::PeerFailed:
      return ErrorCode::PeerFailed;
    default:
      return ErrorCode::Bootstrap;
  }
}

// ---------------------------------------------------------------------------------------------
// ContextImpl: data path

ContextImpl::~ContextImpl() {
  if (bs) bs->set_while_waiting(nullptr);  // the transport goes before the bootstrap
  // First make sure nothing can write into our memory any more (a dead or late peer's data
  // still in a socket, a rendezvous receive, a queue pair), then release it.
  // Team handles may outlive the context: they only ever see a null context from now on.
  for (auto& w : teams) {
    if (auto t = w.lock()) {
      t->ctx = nullptr;
      t->c = nullptr;
    }
  }
  world_team.reset();
  // Remote keys belong to the transport's worker: they go while it still exists.
  for (auto& b : buffers) {
    b->mapped.clear();
    b->rkeys.clear();
  }
  if (staging) staging->rkeys.clear();
  if (tp) tp->quiesce(!degraded);
  for (auto& b : buffers) b->release();
  buffers.clear();
  if (regcache) {
    for (const auto* mr : nbi_pins) regcache->release(mr);
    nbi_pins.clear();
    regcache.reset();
  }
  graveyard.clear();
  staging.reset();
  scratch.reset();
}

namespace {

// This machine's identity for counting the job's ranks per host: RWIN_HOST_ID when set (checked by
// options_from_env), else the kernel's boot id (containers and network namespaces of one machine share
// it, and its CPUs), else the host name.
std::string host_identity() {
  if (const char* v = knobs::env("RWIN_HOST_ID")) return v;
  std::string id;
  std::ifstream("/proc/sys/kernel/random/boot_id") >> id;
  if (!id.empty()) return id;
  char name[256] = {};
  gethostname(name, sizeof name - 1);
  return name;
}

bool have_rdma_devices() {
  std::error_code ec;
  std::filesystem::directory_iterator it("/sys/class/infiniband", ec);
  return !ec && it != std::filesystem::directory_iterator();
}

// What each rank tells the others before any transport exists: its host, the transport it was asked
// for, whether it sees an RDMA device, and the CPUs it may run on.
struct RankPlace {
  std::string host;
  std::string transport;  // as asked ("auto" included)
  bool rdma = false;
  bool have_mask = false;
  cpu_set_t mask{};
};

// Collective (one bootstrap allgather). Wire form: "<host>\n<transport>\n<0|1>\n<affinity mask bytes>",
// no mask when the kernel would not say. Host and transport hold no newline (options_from_env).
std::vector<RankPlace> gather_places(ContextImpl& c) {
  RankPlace me;
  me.host = host_identity();
  me.transport = c.opt.transport;
  me.rdma = have_rdma_devices();
  me.have_mask = sched_getaffinity(0, sizeof me.mask, &me.mask) == 0;
  std::string head = me.host + "\n" + me.transport + "\n" + (me.rdma ? "1" : "0") + "\n";
  std::vector<uint8_t> blob(head.begin(), head.end());
  if (me.have_mask) {
    const auto* m = reinterpret_cast<const uint8_t*>(&me.mask);
    blob.insert(blob.end(), m, m + sizeof me.mask);
  }
  const auto all = c.bs->allgather(blob);
  std::vector<RankPlace> out;
  for (size_t r = 0; r < all.size(); ++r) {
    const auto& h = all[r];
    RankPlace p;
    auto at = h.begin();
    std::string fields[3];
    for (auto& f : fields) {
      const auto nl = std::find(at, h.end(), uint8_t('\n'));
      if (nl == h.end()) {
        throw Error(ErrorCode::Bootstrap, c.who() + ": rank " + std::to_string(r) +
                                              " published a malformed host record (" + std::to_string(h.size()) +
                                              " bytes): every rank must run the same rwin version");
      }
      f.assign(at, nl);
      at = nl + 1;
    }
    p.host = fields[0];
    p.transport = fields[1];
    p.rdma = fields[2] == "1";
    if (static_cast<size_t>(h.end() - at) == sizeof(cpu_set_t)) {
      std::memcpy(&p.mask, &*at, sizeof p.mask);
      p.have_mask = true;
    }
    out.push_back(std::move(p));
  }
  return out;
}

// RWIN_TRANSPORT=auto (the default): UCX when the job runs on one host (its shared memory) or every
// host has an RDMA device (UCX drives it); otherwise "mixed": UCX inside each host, rwin's own tcp
// between hosts (transport/mixed, docs/TCP.md "Across hosts"). The same answer on every rank: it
// depends only on what every rank published.
std::string resolve_transport(const std::string& asked, const std::vector<RankPlace>& all) {
  if (asked != "auto") return asked;
  const bool spans = std::any_of(all.begin(), all.end(), [&](const RankPlace& p) { return p.host != all[0].host; });
  const bool all_rdma = std::all_of(all.begin(), all.end(), [](const RankPlace& p) { return p.rdma; });
  return !spans || all_rdma ? "ucx" : "mixed";
}

// Sets c.opt.transport to what this rank's setting resolves to, after checking that every rank's does
// the same (a rank on another transport would otherwise fail inside a transport's connect, or hang in
// an allgather the others never make). Returns each rank's host as a number (first appearance order).
std::vector<int> choose_transport(ContextImpl& c, const std::vector<RankPlace>& all) {
  const std::string mine = resolve_transport(c.opt.transport, all);
  for (size_t r = 0; r < all.size(); ++r) {
    const std::string theirs = resolve_transport(all[r].transport, all);
    if (theirs != mine) {
      throw Error(ErrorCode::InvalidArgument,
                  c.who() + ": rank " + std::to_string(r) + " uses transport '" + theirs + "' (RWIN_TRANSPORT=" +
                      all[r].transport + "), this rank '" + mine + "' (RWIN_TRANSPORT=" + c.opt.transport +
                      "): every rank of a job must use the same one");
    }
  }
  c.opt.transport = mine;
  std::vector<int> host_of;
  std::vector<std::string> seen;
  for (const auto& p : all) {
    auto it = std::find(seen.begin(), seen.end(), p.host);
    if (it == seen.end()) it = seen.insert(seen.end(), p.host);
    host_of.push_back(static_cast<int>(it - seen.begin()));
  }
  return host_of;
}

// Sets the process-wide spin window (backoff.h) from Options::spin_us, or by comparing
// the ranks on this host with the CPUs they may use together: the union of their affinity masks,
// not this process's own. A launcher that binds each rank to a core (Open MPI does for small jobs,
// rwin-perf pins rank r to CPU r) leaves every rank one CPU; counted alone, that looked
// oversubscribed, the spin fell to 0, and every wait that met a busy CPU handed its time slice away:
// 8 B put_lat beside one CPU hog per core averaged 0.8-2.5 ms instead of 1-7 us (bench/RESULTS.md
// "Waiting when the CPUs are shared").
// Returns which ranks share this host (for the start-up log line).
std::vector<bool> choose_spin(ContextImpl& c, const std::vector<RankPlace>& all) {
  const std::string& me = all[static_cast<size_t>(c.rank)].host;
  std::vector<bool> same_host;
  cpu_set_t here_cpus;
  CPU_ZERO(&here_cpus);
  bool masks_known = true;
  int here = 0;
  for (const auto& p : all) {
    const bool same = p.host == me;
    same_host.push_back(same);
    if (!same) continue;
    ++here;
    if (!p.have_mask) {
      masks_known = false;
      continue;
    }
    cpu_set_t theirs = p.mask;
    CPU_OR(&here_cpus, &here_cpus, &theirs);
  }
  const int cpus = masks_known ? CPU_COUNT(&here_cpus) : 0;
  c.ranks_here = here;
  c.cpus_here = cpus;
  // Every host's CPUs for the job (its ranks' affinity masks together): the collectives' chain takes a
  // lane per CPU of the host with the fewest (hier_chain_lanes), which every rank must compute alike.
  std::vector<std::string> hosts;
  std::vector<cpu_set_t> masks;
  bool all_known = true;
  for (const auto& p : all) {
    all_known = all_known && p.have_mask;
    auto it = std::find(hosts.begin(), hosts.end(), p.host);
    if (it == hosts.end()) {
      hosts.push_back(p.host);
      masks.emplace_back();
      CPU_ZERO(&masks.back());
      it = hosts.end() - 1;
    }
    cpu_set_t theirs = p.mask;
    cpu_set_t& m = masks[static_cast<size_t>(it - hosts.begin())];
    CPU_OR(&m, &m, &theirs);
  }
  c.min_host_cpus = 0;
  for (size_t k = 0; k < masks.size() && all_known; ++k) {
    const int n = CPU_COUNT(&masks[k]);
    c.min_host_cpus = k == 0 ? n : std::min(c.min_host_cpus, n);
  }
  const bool oversubscribed = cpus > 0 && here > cpus;
  c.tp->set_oversubscribed(oversubscribed);
  g_spin_us.store(c.opt.spin_us >= 0 ? static_cast<uint32_t>(c.opt.spin_us) : oversubscribed ? 0u : 200u,
                  std::memory_order_relaxed);
  return same_host;
}

// "direct" or "direct x2, am x1": the modes of a set of peers, in order of first appearance.
std::string modes_text(const std::vector<std::string>& modes) {
  std::vector<std::pair<std::string, int>> counts;
  for (const auto& m : modes) {
    auto it = std::find_if(counts.begin(), counts.end(), [&](const auto& e) { return e.first == m; });
    if (it == counts.end()) counts.emplace_back(m.empty() ? "?" : m, 1);
    else ++it->second;
  }
  if (counts.size() == 1) return counts[0].first;
  std::string s;
  for (const auto& [m, n] : counts) s += (s.empty() ? "" : ", ") + m + " x" + std::to_string(n);
  return s;
}

// At info: how this rank reaches itself, the peers on its host and the others, and the data-path
// sizes it settled on.
void log_startup(const ContextImpl& c, const std::vector<bool>& same_host) {
  if (!log::enabled(log::Level::Info, log::Subsys::Core)) return;
  std::vector<std::string> local, remote;
  for (int p = 0; p < c.nranks; ++p) {
    if (p == c.rank) continue;
    (same_host[static_cast<size_t>(p)] ? local : remote).push_back(c.tp->rma_mode(p));
  }
  std::string kinds = "self: " + modes_text({c.tp->rma_mode(c.rank)});
  kinds += "; same host (" + std::to_string(local.size()) + " peers): " + (local.empty() ? "-" : modes_text(local));
  kinds += "; other hosts (" + std::to_string(remote.size()) + " peers): " + (remote.empty() ? "-" : modes_text(remote));
  RWIN_LOG(Info, Core, "rank %d of %d: transport %s; %s", c.rank, c.nranks, c.tp->describe().c_str(), kinds.c_str());
  RWIN_LOG(Info, Core, "rank %d: chunk %zu bytes (%s), pipeline depth %d (%s), spin %u us (%d ranks on %d CPUs here)",
           c.rank, c.opt.chunk_bytes, c.chunk_from.c_str(), c.opt.pipeline_depth, c.depth_from.c_str(),
           g_spin_us.load(std::memory_order_relaxed), c.ranks_here, c.cpus_here);
}

// The PMIx bootstrap (bootstrap/pmix.h): rank and size from the launcher's PMIx server, the store's
// address and job key handed out through it. Never a job of one by mistake: a PMIx job of one in an
// environment whose launcher variables name more ranks is refused.
void pmix_start(ContextImpl& c, const bootstrap::BootstrapConfig& bc) {
  c.pmix = bootstrap::PmixSession::process_session(bc.startup_timeout);
  const int rank = c.pmix->rank();
  const int nranks = c.pmix->nranks();
  auto mismatch = [&](const char* what, int asked, int got) {
    throw Error(ErrorCode::InvalidArgument, std::string("Options::") + what + " is " + std::to_string(asked) +
                                                " but the PMIx server (namespace " + c.pmix->nspace() + ") says " +
                                                std::to_string(got));
  };
  if (c.opt.rank >= 0 && c.opt.rank != rank) mismatch("rank", c.opt.rank, rank);
  if (c.opt.nranks >= 0 && c.opt.nranks != nranks) mismatch("nranks", c.opt.nranks, nranks);
  if (nranks == 1) {
    std::optional<bootstrap::LaunchEnv> other;
    try {
      other = bootstrap::LaunchEnv::detect();
    } catch (const bootstrap::BootstrapError&) {
      // Malformed launcher variables say nothing reliable about the size; PMIx has spoken.
    }
    if (other && other->nranks > 1) {
      throw Error(ErrorCode::InvalidArgument,
                  "the PMIx server (namespace " + c.pmix->nspace() + ") says this is a job of 1, but " + other->how +
                      " (" + other->source + ") names a job of " + std::to_string(other->nranks) +
                      ": refusing to run as a job of 1; launch under the launcher that set those variables, or set "
                      "RWIN_BOOTSTRAP=tcp with RWIN_ROOT=host:port");
    }
  }
  c.opt.rank = rank;
  c.opt.nranks = nranks;
  std::string root;
  std::string root_how;
  c.bs = c.pmix->bootstrap(bc, root, root_how);
  c.launch.root = root;
  c.launch.rank = rank;
  c.launch.nranks = nranks;
  c.launch.source = "pmix";
  c.launch.how = "rank and size from PMIx (namespace " + c.pmix->nspace() + ", PMIX_JOB_SIZE=" +
                 std::to_string(nranks) + "), root " + root_how;
  log::set_rank(rank);
  RWIN_LOG(Info, Bootstrap, "rank %d of %d from launcher pmix (namespace %s); root %s from %s", rank, nranks,
           c.pmix->nspace().c_str(), root.c_str(), root_how.c_str());
  // The store's address; the key stays in the bootstrap (options() does not show it).
  c.opt.root = root;
}

// The rest of start-up, after the rendezvous (both constructors).
void start_data_path(ContextImpl& c);

}  // namespace

// ---------------------------------------------------------------------------------------------
// Context

Context::Context(const Options& options) : impl_(std::make_unique<ContextImpl>()) {
  ContextImpl& c = *impl_;
  c.born_ns = Tracer::now();
  c.uncaught_at_start = std::uncaught_exceptions();
  log::configure();            // a bad RWIN_LOG_* knob is warned about now, not at the first line
  knobs::warn_unknown_once();  // a misspelt RWIN_* variable, before anything uses the defaults
  c.opt = detail::options_from_env(options, &c.launch);
  try {
    bootstrap::BootstrapConfig bc;
    bc.startup_timeout = c.opt.startup_timeout;
    bc.op_timeout = c.opt.op_timeout;
    bc.job_key = c.opt.job_key;
    if (c.opt.bootstrap == "pmix") {
      pmix_start(c, bc);
    } else {
      c.bs = std::make_unique<bootstrap::Bootstrap>(c.opt.rank, c.opt.nranks, bootstrap::HostPort::parse(c.opt.root), bc);
    }
    RWIN_LOG(Debug, Bootstrap, "rank %d of %d: joined the bootstrap store at %s%s", c.opt.rank, c.opt.nranks,
             c.opt.root.c_str(), c.opt.rank == 0 ? " (serving it)" : "");
  } catch (const bootstrap::BootstrapError& e) {
    RWIN_LOG(Debug, Bootstrap, "rank %d of %d: bootstrap at %s failed: %s", c.opt.rank, c.opt.nranks, c.opt.root.c_str(),
             e.what());
    throw Error(error_code(e), e.what());
  }
  start_data_path(c);
}

Context::Context(std::shared_ptr<Store> store, int rank, int nranks, const Options& options)
    : impl_(std::make_unique<ContextImpl>()) {
  ContextImpl& c = *impl_;
  c.born_ns = Tracer::now();
  c.uncaught_at_start = std::uncaught_exceptions();
  log::configure();
  knobs::warn_unknown_once();
  const std::string head = "rwin::Context(store, rank " + std::to_string(rank) + ", nranks " + std::to_string(nranks) + ")";
  if (!store) throw Error(ErrorCode::InvalidArgument, head + ": the store is a null pointer");
  if (nranks < 1 || rank < 0 || rank >= nranks) {
    throw Error(ErrorCode::InvalidArgument, head + ": rank " + std::to_string(rank) + " is outside a job of " +
                                                std::to_string(nranks) + " ranks");
  }
  auto disagree = [&](const char* field, int given) {
    throw Error(ErrorCode::InvalidArgument, head + ": Options::" + field + " is " + std::to_string(given) +
                                                ", which disagrees with the rank and size given with the store");
  };
  if (options.rank >= 0 && options.rank != rank) disagree("rank", options.rank);
  if (options.nranks >= 0 && options.nranks != nranks) disagree("nranks", options.nranks);
  if (!options.root.empty() || !options.bootstrap.empty()) {
    throw Error(ErrorCode::InvalidArgument, head + ": Options::" + (options.root.empty() ? "bootstrap" : "root") +
                                                " is set, but the store given is the rendezvous (leave it empty)");
  }
  Options base = options;
  base.rank = rank;
  base.nranks = nranks;
  c.opt = detail::options_from_env(base, &c.launch, /*caller_store=*/true);
  try {
    bootstrap::BootstrapConfig bc;
    bc.startup_timeout = c.opt.startup_timeout;
    bc.op_timeout = c.opt.op_timeout;
    c.bs = std::make_unique<bootstrap::Bootstrap>(rank, nranks, adapt_store(std::move(store)), bc, "the caller's store");
  } catch (const bootstrap::BootstrapError& e) {
    RWIN_LOG(Debug, Bootstrap, "rank %d of %d: bootstrap on the caller's store failed: %s", rank, nranks, e.what());
    throw Error(error_code(e), e.what());
  }
  start_data_path(c);
}

namespace {
// Transport, connect, sizes.
void start_data_path(ContextImpl& c) {
  c.rank = c.opt.rank;
  c.nranks = c.opt.nranks;
  c.peers.resize(static_cast<size_t>(c.nranks));
  c.peer_stats.resize(static_cast<size_t>(c.nranks));
  c.trace = Tracer::from_env(c.rank, c.nranks);
  if (c.trace) {  // the rendezvous so far, as one span (the tracer exists from here on)
    TraceEvent e;
    e.t0 = c.born_ns;
    e.dur = Tracer::now() - c.born_ns;
    e.ns = true;
    e.name = "bootstrap";
    e.cat = "startup";
    e.detail = c.trace->text(c.opt.bootstrap.empty() ? std::string("tcp store") : c.opt.bootstrap);
    c.trace->add(e);
  }
  TraceSpan connect_span(c.trace.get(), "connect", "startup");
  std::vector<bool> same_host(static_cast<size_t>(c.nranks), false);
  std::vector<RankPlace> places;
  transport::TransportConfig tc;
  try {
    places = gather_places(c);
    // Every rank leaves that allgather at about the same moment: the trace's cross-host alignment.
    if (c.trace) c.trace->sync_point(Tracer::now(), host_identity());
    tc.host_of = choose_transport(c, places);
    c.host_of = tc.host_of;
  } catch (const bootstrap::BootstrapError& e) {
    throw Error(error_code(e), c.who() + ": exchanging hosts: " + e.what());
  }
  tc.name = c.opt.transport;
  tc.ib_device = c.opt.ib_device;
  tc.ib_port = c.opt.ib_port;
  tc.gid_index = c.opt.gid_index;
  tc.rank = c.rank;
  tc.nranks = c.nranks;
  tc.ucx_rma = c.opt.ucx_rma;
  tc.ucx_tcp_zcopy = c.opt.ucx_tcp_zcopy == 1;
  if (tc.name == "ucx" || tc.name == "tcp" || tc.name == "mixed") {
    // The interface that reaches the root carries UCX's (or rwin's own) tcp traffic too. Asked for by name
    // (RWIN_IFNAME), a wrong one is an error; found by routing, a failure just leaves UCX's default.
    // On a caller's store there is no root to route to: RWIN_IFNAME or UCX's own choice.
    try {
      if (!c.opt.root.empty()) {
        tc.ifname = bootstrap::choose_interface(bootstrap::HostPort::parse(c.opt.root).host);
      } else if (knobs::env("RWIN_IFNAME")) {
        tc.ifname = bootstrap::choose_interface("127.0.0.1");  // RWIN_IFNAME wins over the host
      }
    } catch (const bootstrap::BootstrapError& e) {
      if (knobs::env("RWIN_IFNAME")) throw Error(ErrorCode::Bootstrap, c.who() + ": " + e.what());
    }
  }
  try {
    if (tc.name == "verbs") tc.verbs = transport::VerbsParams::from_env();
    c.tp = transport::make_transport(tc);
    c.tp->connect(*c.bs);
    same_host = choose_spin(c, places);
    c.caps = c.tp->capabilities();
    c.chunk_from = c.opt.chunk_bytes == 0 ? "the transport's default" : "RWIN_CHUNK_BYTES / Options";
    c.depth_from = c.opt.pipeline_depth <= 0 ? "the transport's default" : "RWIN_PIPELINE_DEPTH / Options";
    if (c.opt.chunk_bytes == 0) c.opt.chunk_bytes = c.caps.default_chunk_bytes;
    if (c.opt.pipeline_depth <= 0) c.opt.pipeline_depth = c.caps.default_pipeline_depth;
    c.scratch = c.tp->allocate(kScratchWords * 8);
    c.start_staging();
    if (c.caps.local_needs_registration) {  // verbs (lkeys); UCX takes any local pointer as it is
      transport::Transport* tp = c.tp.get();
      c.regcache = std::make_unique<RegCache>([tp](void* addr, size_t bytes) { return tp->register_memory(addr, bytes); });
    }
  } catch (const transport::TransportError& e) {
    RWIN_LOG(Debug, Core, "%s: transport set-up failed: %s", c.who().c_str(), e.what());
    throw Error(ErrorCode::Transport, c.who() + ": " + e.what());
  } catch (const bootstrap::BootstrapError& e) {
    RWIN_LOG(Debug, Core, "%s: transport connect failed in the bootstrap: %s", c.who().c_str(), e.what());
    throw Error(error_code(e), c.who() + ": transport connect: " + e.what());
  }
  for (int p = 0; p < c.nranks; ++p) {
    PeerState& ps = c.peers[static_cast<size_t>(p)];
    ps.ordered = c.tp->write_then_atomic_ordered(p);
    ps.direct = c.tp->rma_mode(p) == "direct";
  }
  c.all_direct = std::all_of(c.peers.begin(), c.peers.end(), [](const PeerState& ps) { return ps.direct; });
  // From now on the bootstrap's collectives (window allocation, allgather) keep the transport moving
  // while they wait: a send of ours still queued in it may be what a late peer is waiting for.
  c.bs->set_while_waiting([&c] {
    c.progress();
    sched_yield();
  });
  log_startup(c, same_host);
}
}  // namespace

Context::~Context() {
  if (!impl_) return;
  ContextImpl& c = *impl_;
  // Started collectives first (each ends by its deadline): peers count on this member, and the
  // context is the worker's until they finished.
  c.stop_coll_worker();
  try {
    if (stats_from_env() == 1) {
      const std::string line = "rwin-stats " + detail::stats_json(stats(), c.rank) + "\n";
      (void)std::fwrite(line.data(), 1, line.size(), stderr);  // one write: ranks share the terminal
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rwin: rank %d: RWIN_STATS: %s\n", c.rank, e.what());
  }
  // Bounded: a dead peer must not keep us here; other ranks may still be reading our memory,
  // hence the barrier before anything is released. Never throws (out of memory while leaving:
  // the lease then just closes, which the others also read as this rank failing).
  try {
    const auto bound = std::min<std::chrono::milliseconds>(c.opt.op_timeout, std::chrono::milliseconds(10000));
    c.watch_now();
    auto peer_failed = [&c] {
      bool any = !c.known_failures.empty();
      for (const auto& p : c.peers) any = any || !p.failed.empty();
      return any;
    };
    auto known_dead = [&c](int p) {
      return std::any_of(c.known_failures.begin(), c.known_failures.end(), [p](const KnownFailure& f) { return f.rank == p; });
    };
    bool broken_link = false;  // a transport failure towards a rank the store still counts alive
    for (int p = 0; p < c.nranks; ++p) broken_link = broken_link || (!c.peers[static_cast<size_t>(p)].failed.empty() && !known_dead(p));
    const bool unwinding = std::uncaught_exceptions() > c.uncaught_at_start;
    // This rank's own error: an exception unwinding through here, a timeout (degraded with no peer
    // failure), or a broken link to a live rank. Having seen another rank die is not one: a rank that
    // ends normally after that meets the other survivors and leaves normally (docs/CONTRACT.md).
    const bool timed_out = c.degraded && !peer_failed();
    const bool own_error = unwinding || broken_link || timed_out;
    const bool healthy = !c.degraded && !peer_failed();
    bool met = false;
    if (healthy || !own_error) {
      try {
        TraceSpan span(c.trace.get(), "shutdown barrier", "startup");
        c.leave_barrier(bound);  // every rank; a rank that fails meanwhile is not waited for
        met = true;
      } catch (const std::exception& e) {
        RWIN_LOG(Warn, Core, "rwin: %s: shutdown: %s", c.who().c_str(), e.what());
      }
    }
    // A job that lost a peer drops its connections without a flush (~ContextImpl): what this rank
    // sent to the survivors was flushed by the barrier, and the dead ones will not answer.
    if (!met || peer_failed()) c.degraded = true;
    // Leaving after an error of its own (or a barrier that could not complete): say so at once (the
    // store tells the others this rank failed, and why), so a survivor still putting to us, or
    // waiting on us, ends now instead of at its deadline.
    if ((!met || (unwinding && peer_failed())) && c.bs) {
      std::string why;
      if (!c.known_failures.empty()) why = c.failure_text(c.known_failures.front().rank);
      for (size_t p = 0; why.empty() && p < c.peers.size(); ++p) {
        if (!c.peers[p].failed.empty()) why = c.peer_failed_text(static_cast<int>(p), c.peers[p].failed);
      }
      // Say which of this rank's own errors it was: the store passes it to every survivor.
      if (why.empty() && timed_out) why = "an operation timed out (RWIN_TIMEOUT_MS=" + std::to_string(c.opt.op_timeout.count()) + ")";
      if (why.empty() && unwinding) why = "its program raised an error while its rwin context was open (that rank's output says which)";
      if (why.empty()) why = "its shutdown barrier did not complete within " + std::to_string(bound.count()) + " ms";
      c.bs->abandon_lease(why);
    }
  } catch (...) {
    c.degraded = true;
  }
  if (c.trace) c.trace->write();  // after the shutdown barrier: the file holds it
}

int Context::rank() const noexcept { return impl_->rank; }
int Context::size() const noexcept { return impl_->nranks; }
std::string Context::transport_name() const {
  impl_->check_owner("transport_name");  // the transport's state: the worker's while lent
  return impl_->tp->describe();
}
std::string Context::rma_mode(int peer) const {
  impl_->check_owner("rma_mode");
  if (peer < 0 || peer >= impl_->nranks) {
    throw Error(ErrorCode::InvalidArgument, impl_->who() + ": rma_mode: peer " + std::to_string(peer) +
                                                " is not a rank of this job (0.." + std::to_string(impl_->nranks - 1) + ")");
  }
  return impl_->tp->rma_mode(peer);
}
const Options& Context::options() const noexcept { return impl_->opt; }

std::vector<std::vector<uint8_t>> Context::allgather(const std::vector<uint8_t>& mine) {
  impl_->check_owner("allgather");
  try {
    return impl_->bs->allgather(mine);
  } catch (const bootstrap::BootstrapError& e) {
    throw impl_->store_error(e, impl_->who() + ": allgather");
  }
}

}  // namespace rwin
