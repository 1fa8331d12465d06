// PMIx client session and the rendezvous over it (pmix.h).
#include "bootstrap/pmix.h"

#include <openssl/rand.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <set>
#include <thread>

#include "bootstrap/netif.h"
#include "common/knobs.h"

#ifdef RWIN_HAVE_PMIX
#include <pmix.h>
#endif

namespace rwin::bootstrap {

namespace {

// Newest first: a client of any PMIx version finds its server through one of these.
constexpr const char* kServerUriVars[] = {"PMIX_SERVER_URI41", "PMIX_SERVER_URI4", "PMIX_SERVER_URI3",
                                          "PMIX_SERVER_URI21", "PMIX_SERVER_URI2", "PMIX_SERVER_URI"};

const char* env_set(const char* name) {
  const char* v = std::getenv(name);
  return (v && *v) ? v : nullptr;
}

std::string join(const std::vector<std::string>& parts) {
  std::string s;
  for (size_t i = 0; i < parts.size(); ++i) s += (i ? ", " : "") + parts[i];
  return s;
}

// "PMIx variables seen: PMIX_NAMESPACE=x, PMIX_RANK=1; no PMIX_SERVER_URI* (no server advertised)".
std::string seen_text() {
  const auto seen = pmix_env_seen();
  std::string s = seen.empty() ? "no PMIx variables are set" : "PMIx variables seen: " + join(seen);
  bool uri = false;
  for (const char* v : kServerUriVars) uri = uri || env_set(v);
  if (!uri) s += "; no PMIX_SERVER_URI* variable (no PMIx server advertised its address)";
  return s;
}

}  // namespace

std::vector<std::string> pmix_env_seen() {
  std::vector<std::string> out;
  for (const char* v : {"PMIX_NAMESPACE", "PMIX_RANK"}) {
    if (const char* val = env_set(v)) out.push_back(std::string(v) + "=" + val);
  }
  for (const char* v : kServerUriVars) {
    if (const char* val = env_set(v)) out.push_back(std::string(v) + "=" + val);
  }
  return out;
}

std::shared_ptr<PmixSession> PmixSession::process_session(Millis timeout) {
  static std::mutex mu;
  static std::shared_ptr<PmixSession> session;  // destroyed (PMIx_Finalize) at exit
  const std::lock_guard<std::mutex> lock(mu);
  if (!session) session = std::make_shared<PmixSession>(timeout);
  return session;
}

bool pmix_server_advertised() {
  for (const char* v : kServerUriVars) {
    if (env_set(v)) return true;
  }
  return env_set("PMIX_NAMESPACE") && env_set("PMIX_RANK");
}

#ifndef RWIN_HAVE_PMIX

bool pmix_built_in() noexcept { return false; }

struct PmixSession::Impl {
  int rank = -1;
  int nranks = 0;
  std::string nspace;
};

namespace {
[[noreturn]] void built_without() {
  throw BootstrapError(BootstrapError::Kind::Config,
                       "PMIx: this rwin was built without PMIx (libpmix-dev / pkg-config 'pmix' was "
                       "missing at configure time); " + seen_text() +
                           ". Rebuild with libpmix-dev, or set RWIN_BOOTSTRAP=tcp and RWIN_ROOT=host:port");
}
}  // namespace

// A session cannot exist in this build: the constructor always throws, so nothing below runs.
PmixSession::PmixSession(Millis) { built_without(); }
PmixSession::~PmixSession() = default;
int PmixSession::rank() const noexcept { return impl_->rank; }
int PmixSession::nranks() const noexcept { return impl_->nranks; }
const std::string& PmixSession::nspace() const noexcept { return impl_->nspace; }
std::unique_ptr<Bootstrap> PmixSession::bootstrap(BootstrapConfig, std::string&, std::string&) { built_without(); }

#else

bool pmix_built_in() noexcept { return true; }

namespace {

using Clock = std::chrono::steady_clock;

// Seconds for PMIX_TIMEOUT (an int), rounded up, at least 1.
int timeout_seconds(std::chrono::milliseconds ms) {
  const long long s = (ms.count() + 999) / 1000;
  return static_cast<int>(std::clamp<long long>(s, 1, 86400));
}

// One pmix_value_t from PMIx_Get, released however the caller leaves.
struct ValuePtr {
  pmix_value_t* v = nullptr;
  ValuePtr() = default;
  ValuePtr(const ValuePtr&) = delete;
  ValuePtr& operator=(const ValuePtr&) = delete;
  ~ValuePtr() {
    if (v) PMIX_VALUE_RELEASE(v);
  }
};

// PMIx_Get bounded by `seconds` (PMIX_TIMEOUT): job-level keys are normally in the client's local
// store already, but a server asked for something it lacks may forward the request elsewhere.
pmix_status_t get_bounded(const pmix_proc_t& proc, const char* key, int seconds, ValuePtr& out) {
  pmix_info_t info;
  PMIX_INFO_LOAD(&info, PMIX_TIMEOUT, &seconds, PMIX_INT);
  const pmix_status_t rc = PMIx_Get(&proc, key, &info, 1, &out.v);
  PMIX_INFO_DESTRUCT(&info);
  return rc;
}

std::string status_text(pmix_status_t rc) { return std::string(PMIx_Error_string(rc)) + " (" + std::to_string(rc) + ")"; }

// PMIx reports sizes and node ids as one of several integer types depending on the server.
bool as_u64(const pmix_value_t* v, uint64_t& out) {
  switch (v->type) {
    case PMIX_UINT32: out = v->data.uint32; return true;
    case PMIX_UINT16: out = v->data.uint16; return true;
    case PMIX_UINT64: out = v->data.uint64; return true;
    case PMIX_SIZE: out = v->data.size; return true;
    case PMIX_INT: if (v->data.integer < 0) return false; out = static_cast<uint64_t>(v->data.integer); return true;
    case PMIX_UINT: out = v->data.uint; return true;
    default: return false;
  }
}


// Each rendezvous of a process gets its own PMIx key: a process that makes several Contexts makes
// them in the same order on every rank (they are collective), so the n-th uses "rwin.root.<n>" everywhere
// and never reads a value of an earlier one.
std::atomic<unsigned> g_rendezvous{0};

std::string fresh_job_key() {
  unsigned char raw[32];
  if (RAND_bytes(raw, sizeof raw) != 1) {
    throw BootstrapError(BootstrapError::Kind::Config, "PMIx: rank 0: RAND_bytes failed to make a job key");
  }
  static const char* hex = "0123456789abcdef";
  std::string key;
  for (unsigned char b : raw) {
    key += hex[b >> 4];
    key += hex[b & 15];
  }
  return key;
}

}  // namespace

struct PmixSession::Impl {
  pmix_proc_t me{};
  int rank = -1;
  int nranks = 0;
  std::string nspace;
  int get_s = 60;  // PMIX_TIMEOUT of the session's job-level gets
  bool all_local = false;
  std::string locality;  // how all_local was learned, for messages
  std::set<int> local_ranks;
};

namespace {

// PMIx_Init has no deadline of its own: against a server that accepts the connection and never
// answers (a listening socket that says nothing) it blocks for ever. So it runs on a thread of its
// own and the caller waits `timeout`; past it the thread is left behind (nothing interrupts it, and
// its state is shared, so it may still return) and every later start of the process fails at once.
struct InitCall {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  pmix_status_t rc = PMIX_ERROR;
  pmix_proc_t me{};
};
std::mutex g_hung_mu;
std::string g_hung;  // the error of a PMIx_Init that never returned, or empty

pmix_status_t init_bounded(pmix_proc_t& me, Millis timeout) {
  {
    const std::lock_guard<std::mutex> lk(g_hung_mu);
    if (!g_hung.empty()) throw BootstrapError(BootstrapError::Kind::Timeout, g_hung);
  }
  auto call = std::make_shared<InitCall>();
  std::thread([call] {
    pmix_proc_t p{};
    const pmix_status_t rc = PMIx_Init(&p, nullptr, 0);
    const std::lock_guard<std::mutex> lk(call->mu);
    call->rc = rc;
    call->me = p;
    call->done = true;
    call->cv.notify_all();
  }).detach();
  std::unique_lock<std::mutex> lk(call->mu);
  if (!call->cv.wait_for(lk, timeout, [&] { return call->done; })) {
    const std::string why = "PMIx_Init did not return within " + std::to_string(timeout.count()) +
                            " ms (the start-up timeout, RWIN_STARTUP_TIMEOUT_MS): no answer from the PMIx server at "
                            "the advertised address (a listener that never answers, or a hung server); " +
                            seen_text() + ". Is the server at that address this job's launcher?";
    const std::lock_guard<std::mutex> hl(g_hung_mu);
    g_hung = why;
    throw BootstrapError(BootstrapError::Kind::Timeout, why);
  }
  me = call->me;
  return call->rc;
}

}  // namespace

PmixSession::PmixSession(Millis timeout) : impl_(std::make_unique<Impl>()) {
  Impl& s = *impl_;
  s.get_s = timeout_seconds(timeout);
  const pmix_status_t rc = init_bounded(s.me, timeout);
  if (rc != PMIX_SUCCESS) {
    throw BootstrapError(BootstrapError::Kind::Config,
                         "PMIx_Init failed: " + status_text(rc) + "; " + seen_text() +
                             ". This process will not run as a job of 1: launch under a PMIx server (mpirun, srun --mpi=pmix), or set RWIN_BOOTSTRAP=tcp "
                             "with RWIN_ROOT=host:port, or use rwinrun");
  }
  s.nspace = s.me.nspace;
  s.rank = static_cast<int>(s.me.rank);
  auto fail = [&](const std::string& what) {
    PMIx_Finalize(nullptr, 0);
    throw BootstrapError(BootstrapError::Kind::Config, "PMIx (namespace " + s.nspace + ", rank " +
                                                           std::to_string(s.rank) + "): " + what);
  };
  pmix_proc_t wild;
  PMIX_LOAD_PROCID(&wild, s.me.nspace, PMIX_RANK_WILDCARD);
  uint64_t size = 0;
  {
    ValuePtr v;
    const pmix_status_t g = get_bounded(wild, PMIX_JOB_SIZE, s.get_s, v);
    if (g != PMIX_SUCCESS) fail("PMIx_Get(PMIX_JOB_SIZE) failed: " + status_text(g));
    if (!as_u64(v.v, size) || size < 1 || size > 1u << 30) fail("PMIX_JOB_SIZE is not a job size");
  }
  s.nranks = static_cast<int>(size);
  if (s.rank < 0 || s.rank >= s.nranks) {
    fail("rank " + std::to_string(s.rank) + " is outside the job size " + std::to_string(s.nranks));
  }
  // Which ranks share this node: PMIX_LOCAL_PEERS lists them ("0,1,2"); PMIX_LOCAL_SIZE counts them.
  {
    ValuePtr v;
    if (get_bounded(wild, PMIX_LOCAL_PEERS, s.get_s, v) == PMIX_SUCCESS && v.v->type == PMIX_STRING &&
        v.v->data.string) {
      const std::string peers = v.v->data.string;
      size_t i = 0;
      while (i < peers.size()) {
        const size_t comma = std::min(peers.find(',', i), peers.size());
        try {
          s.local_ranks.insert(std::stoi(peers.substr(i, comma - i)));
        } catch (const std::exception&) {
          // Not a number: leave the list incomplete; only the loopback shortcut depends on it.
        }
        i = comma + 1;
      }
    }
  }
  {
    ValuePtr v;
    uint64_t local = 0;
    if (get_bounded(wild, PMIX_LOCAL_SIZE, s.get_s, v) == PMIX_SUCCESS && as_u64(v.v, local)) {
      s.all_local = local == size;
      s.locality = "PMIX_LOCAL_SIZE=" + std::to_string(local) + " of PMIX_JOB_SIZE=" + std::to_string(size);
    } else {
      s.all_local = s.local_ranks.size() == size;
      s.locality = "PMIX_LOCAL_PEERS lists " + std::to_string(s.local_ranks.size()) + " of PMIX_JOB_SIZE=" +
                   std::to_string(size);
    }
  }
}

PmixSession::~PmixSession() {
  // A finalized client tells the server it left normally; Open MPI's mpirun reports one that exits
  // without it as a failed process.
  PMIx_Finalize(nullptr, 0);
}

int PmixSession::rank() const noexcept { return impl_->rank; }
int PmixSession::nranks() const noexcept { return impl_->nranks; }
const std::string& PmixSession::nspace() const noexcept { return impl_->nspace; }

std::unique_ptr<Bootstrap> PmixSession::bootstrap(BootstrapConfig cfg, std::string& root_text, std::string& root_how) {
  Impl& s = *impl_;
  const std::string key_name = "rwin.root." + std::to_string(g_rendezvous.fetch_add(1));
  const std::string head = "rank " + std::to_string(s.rank) + ": bootstrap through PMIx (namespace " + s.nspace + ")";
  const auto deadline = Clock::now() + cfg.startup_timeout;
  std::unique_ptr<TcpStoreServer> server;
  HostPort root;
  std::string job_key;
  if (s.rank == 0) {
    std::string host;
    std::string how;
    const char* ifname = knobs::env("RWIN_IFNAME");  // through the table: rwin-info shows its source
    if (s.all_local && !ifname) {
      host = "127.0.0.1";
      how = "loopback: every rank is on this node (" + s.locality + ")";
    } else {
      // A host of some other rank, so the address chosen is the one that routes there. A few ranks
      // are asked at most: a server that knows no host names answers every one the same.
      std::string peer_host;
      int asked = 0;
      for (int r = 1; r < s.nranks && peer_host.empty() && asked < 4; ++r) {
        if (s.local_ranks.count(r)) continue;
        ++asked;
        pmix_proc_t p;
        PMIX_LOAD_PROCID(&p, s.me.nspace, static_cast<pmix_rank_t>(r));
        ValuePtr v;
        if (get_bounded(p, PMIX_HOSTNAME, s.get_s, v) == PMIX_SUCCESS && v.v->type == PMIX_STRING &&
            v.v->data.string) {
          peer_host = v.v->data.string;
        }
      }
      try {
        host = choose_serve_address(peer_host, how);
      } catch (const BootstrapError& e) {
        const std::string why = s.all_local ? "RWIN_IFNAME is set" : "ranks run on other nodes (" + s.locality + ")";
        throw BootstrapError(e.kind(), head + ": " + why + ": " + e.what());
      }
    }
    job_key = fresh_job_key();
    try {
      server = std::make_unique<TcpStoreServer>(host, 0, StoreServerConfig{job_key, s.nranks});
    } catch (const BootstrapError& e) {
      throw BootstrapError(e.kind(), head + ": cannot serve the store on " + host + " (" + how + "): " + e.what());
    }
    root = HostPort{host, server->port()};
    root_how = "served by this rank on " + root.str() + " (" + how + "), published through PMIx";
    const std::string value = root.str() + " " + job_key;
    pmix_value_t v;
    PMIX_VALUE_LOAD(&v, value.c_str(), PMIX_STRING);
    pmix_status_t rc = PMIx_Put(PMIX_GLOBAL, key_name.c_str(), &v);
    PMIX_VALUE_DESTRUCT(&v);
    if (rc == PMIX_SUCCESS) rc = PMIx_Commit();
    if (rc != PMIX_SUCCESS) {
      throw BootstrapError(BootstrapError::Kind::Connection, head + ": publishing the root: PMIx_Put/PMIx_Commit of '" +
                                                                 key_name + "' failed: " + status_text(rc));
    }
  }
  // Everyone (rank 0 included, so its put is visible before anyone reads) fences, with a deadline.
  const int fence_s = timeout_seconds(cfg.startup_timeout);
  {
    pmix_info_t info[2];
    int timeout = fence_s;
    bool collect = true;
    PMIX_INFO_LOAD(&info[0], PMIX_TIMEOUT, &timeout, PMIX_INT);
    PMIX_INFO_LOAD(&info[1], PMIX_COLLECT_DATA, &collect, PMIX_BOOL);
    pmix_proc_t wild;
    PMIX_LOAD_PROCID(&wild, s.me.nspace, PMIX_RANK_WILDCARD);
    const pmix_status_t rc = PMIx_Fence(&wild, 1, info, 2);
    PMIX_INFO_DESTRUCT(&info[0]);
    PMIX_INFO_DESTRUCT(&info[1]);
    if (rc == PMIX_ERR_TIMEOUT) {
      throw BootstrapError(BootstrapError::Kind::Timeout,
                           head + ": PMIx_Fence timed out after " + std::to_string(fence_s) +
                               " s (the start-up timeout, RWIN_STARTUP_TIMEOUT_MS=" +
                               std::to_string(cfg.startup_timeout.count()) + "): some of the " +
                               std::to_string(s.nranks) + " ranks never reached the bootstrap");
    }
    if (rc != PMIX_SUCCESS) {
      throw BootstrapError(BootstrapError::Kind::Connection, head + ": PMIx_Fence failed: " + status_text(rc));
    }
  }
  if (s.rank != 0) {
    pmix_proc_t zero;
    PMIX_LOAD_PROCID(&zero, s.me.nspace, 0);
    // What the fence left of the start-up timeout, at least a second.
    const auto budget = std::max(Millis(1000), std::chrono::duration_cast<Millis>(deadline - Clock::now()));
    ValuePtr v;
    const pmix_status_t rc = get_bounded(zero, key_name.c_str(), timeout_seconds(budget), v);
    if (rc != PMIX_SUCCESS || v.v->type != PMIX_STRING || !v.v->data.string) {
      throw BootstrapError(BootstrapError::Kind::Connection,
                           head + ": reading rank 0's root ('" + key_name + "') failed: " +
                               (rc != PMIX_SUCCESS ? status_text(rc) : std::string("not a string")));
    }
    const std::string value = v.v->data.string;
    const size_t space = value.find(' ');
    if (space == std::string::npos || space + 1 >= value.size()) {
      throw BootstrapError(BootstrapError::Kind::Protocol,
                           head + ": rank 0's root ('" + key_name + "') is malformed: expected 'host:port key'");
    }
    root = HostPort::parse(value.substr(0, space));
    job_key = value.substr(space + 1);
    root_how = "rank 0's store at " + root.str() + ", read through PMIx";
  }
  root_text = root.str();
  cfg.job_key = job_key;
  cfg.serve = true;
  return std::make_unique<Bootstrap>(s.rank, s.nranks, root, cfg, std::move(server));
}

#endif  // RWIN_HAVE_PMIX

}  // namespace rwin::bootstrap
