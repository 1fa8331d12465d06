// The agent's implementation (AgentImpl, agent_impl.h): construction (listener, transport), regions
// and their revocation, imports and first-use connections, put/get/notify/flush, local signal waits.
// The public calls of rwin/agent.h that wrap these are in agent_calls.cpp.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>

#include "agent/agent_impl.h"
#include "backoff.h"
#include "bootstrap/auth.h"
#include "bootstrap/bootstrap.h"
#include "common/knobs.h"
#include "common/log.h"
#include "common/parse_number.h"

namespace rwin {

namespace tp = transport;
using bootstrap::detail::Fd;
using namespace std::chrono_literals;

namespace {

std::string hex_token(const agent::Token& t) {
  static const char* d = "0123456789abcdef";
  std::string s;
  for (uint8_t b : t) {
    s += d[b >> 4];
    s += d[b & 15];
  }
  return s;
}

long long ms(std::chrono::milliseconds m) { return static_cast<long long>(m.count()); }

// A blocking call spins and yields this long (as Backoff does) before it sleeps on the transport's
// wake-up descriptor: a sleep costs a wake-up of ~10 us or more, fine once a wait is long anyway.
constexpr auto kSpinBeforeSleep = 2ms;

}  // namespace

// Binds and listens (non-blocking, close-on-exec) on the first address `addr` resolves to.
Fd listen_on(const std::string& addr, const std::string& what, std::string& bound) {
  bootstrap::HostPort hp;
  try {
    hp = bootstrap::HostPort::parse(addr);
  } catch (const std::exception& e) {
    throw Error(ErrorCode::InvalidArgument, what + ": " + e.what());
  }
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* res = nullptr;
  const std::string port = std::to_string(hp.port);
  const int gai = getaddrinfo(hp.host.c_str(), port.c_str(), &hints, &res);
  if (gai != 0) throw Error(ErrorCode::InvalidArgument, what + ": cannot resolve '" + addr + "': " + gai_strerror(gai));
  Fd fd;
  std::string err = "no address";
  for (addrinfo* ai = res; ai && !fd; ai = ai->ai_next) {
    Fd s(::socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol));
    if (!s) {
      err = std::string("socket: ") + std::strerror(errno);
      continue;
    }
    int one = 1;
    setsockopt(s.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(s.get(), ai->ai_addr, ai->ai_addrlen) != 0) {
      err = std::string("bind: ") + std::strerror(errno);
      continue;
    }
    if (::listen(s.get(), 128) != 0) {
      err = std::string("listen: ") + std::strerror(errno);
      continue;
    }
    fd = std::move(s);
  }
  freeaddrinfo(res);
  if (!fd) throw Error(ErrorCode::InvalidArgument, what + ": cannot listen on " + addr + ": " + err);
  sockaddr_storage ss{};
  socklen_t sl = sizeof ss;
  getsockname(fd.get(), reinterpret_cast<sockaddr*>(&ss), &sl);
  hp.port = ss.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port)
                                     : ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
  bound = hp.str();
  return fd;
}

RemoteRegionState::~RemoteRegionState() {
  if (!key) return;
  if (auto a = agent.lock()) {
    CallLock lk(*a);
    if (a->closed) {
      (void)key.release();  // the transport is gone: its key handle with it (close() resets live ones)
    } else {
      key.reset();
    }
  } else {
    (void)key.release();
  }
}

AgentImpl::AgentImpl(const AgentOptions& o) : opt(o) {
  if (opt.op_timeout <= 0ms || opt.connect_timeout <= 0ms || opt.keepalive_interval <= 0ms ||
      opt.keepalive_timeout <= opt.keepalive_interval) {
    throw Error(ErrorCode::InvalidArgument,
                "agent: bad timeouts (op_timeout " + std::to_string(ms(opt.op_timeout)) + " ms, connect_timeout " +
                    std::to_string(ms(opt.connect_timeout)) + " ms, keepalive_interval " +
                    std::to_string(ms(opt.keepalive_interval)) + " ms, keepalive_timeout " +
                    std::to_string(ms(opt.keepalive_timeout)) +
                    " ms): each must be > 0 and keepalive_timeout > keepalive_interval");
  }
  // Metrics: the option, else RWIN_METRICS; checked before anything is made, started last.
  std::string metrics_spec = opt.metrics, metrics_source = "AgentOptions::metrics";
  if (metrics_spec.empty()) {
    if (const char* v = knobs::env("RWIN_METRICS")) metrics_spec = v, metrics_source = "RWIN_METRICS";
  } else {
    knobs::set_in_code("RWIN_METRICS", metrics_spec);
  }
  // A malformed spec throws here, before anything is made; "off" turns the variable's off too.
  const MetricsSpec parsed = MetricsExporter::parse(metrics_spec, metrics_source);
  if (!parsed.http && !parsed.file) metrics_spec.clear();
  auto metrics_interval = opt.metrics_interval;
  if (!metrics_spec.empty()) {
    if (metrics_interval < 0ms) {
      throw Error(ErrorCode::InvalidArgument, "agent: metrics_interval " + std::to_string(ms(metrics_interval)) +
                                                  " ms: must be > 0 (0: RWIN_METRICS_INTERVAL_MS, default 1000)");
    }
    if (metrics_interval == 0ms) {
      metrics_interval = 1000ms;
      if (const char* v = knobs::env("RWIN_METRICS_INTERVAL_MS")) {
        uint64_t n = 0;
        const std::string why = common::parse_u64_in(v, 1, 86400000, n);
        if (!why.empty()) {
          throw Error(ErrorCode::InvalidArgument, std::string("RWIN_METRICS_INTERVAL_MS='") + v +
                                                      "' is not an integer in [1, 86400000] (" + why +
                                                      "); expected decimal digits only (milliseconds)");
        }
        metrics_interval = std::chrono::milliseconds(n);
      }
    }
    if (const std::string why = check_metric_labels(opt.metrics_labels); !why.empty()) {
      throw Error(ErrorCode::InvalidArgument, "agent: metrics_labels: " + why);
    }
  }
  listen_fd = listen_on(opt.listen, "agent: listen", address);
  bootstrap::auth::random_bytes(token.data(), token.size());

  tp::TransportConfig cfg;
  cfg.name = opt.transport;
  cfg.ib_device = opt.ib_device;
  cfg.ib_port = opt.ib_port;
  cfg.gid_index = opt.gid_index;
  cfg.rank = 0;
  cfg.nranks = 0;
  cfg.ucx_rma = "am";  // run-time peers are reached in am mode only (transport/ucx/ucx_dynamic.cpp)
  cfg.dynamic_peers = true;
  cfg.ucx_wakeup = true;  // RWIN_AGENT_UCX_WAKEUP=0 polls on a timer instead (docs/AGENT.md)
  if (const char* w = knobs::env("RWIN_AGENT_UCX_WAKEUP")) cfg.ucx_wakeup = std::string(w) != "0";
  {
    // rwin's tcp transport listens where the control socket does: whoever reaches one reaches the
    // other (a wildcard address leaves the choice to RWIN_IFNAME or the routes).
    sockaddr_storage ss{};
    socklen_t sl = sizeof ss;
    char ip[INET_ADDRSTRLEN] = {};
    if (getsockname(listen_fd.get(), reinterpret_cast<sockaddr*>(&ss), &sl) == 0 && ss.ss_family == AF_INET) {
      const auto& sin = *reinterpret_cast<const sockaddr_in*>(&ss);
      if (sin.sin_addr.s_addr != htonl(INADDR_ANY) && inet_ntop(AF_INET, &sin.sin_addr, ip, sizeof ip)) cfg.listen_host = ip;
    }
  }
  try {
    if (cfg.name == "verbs") cfg.verbs = tp::VerbsParams::from_env();
    tr = tp::make_transport(cfg);
    caps = tr->capabilities();
    scratch_mr = tr->register_memory(scratch, sizeof scratch);
    if (caps.local_needs_registration) {
      tp::Transport* t = tr.get();
      regcache = std::make_unique<RegCache>([t](void* a, size_t b) { return t->register_memory(a, b); });
    }
  } catch (const tp::TransportError& e) {
    throw Error(ErrorCode::Transport, "agent " + address + ": " + e.what());
  }
  wake_fd = Fd(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!wake_fd) throw Error(ErrorCode::Transport, "agent " + address + ": eventfd: " + std::strerror(errno));
  describe = "agent " + address + " " + tr->describe();
  last_control = AgentClock::now();
  if (!metrics_spec.empty()) {
    // Every sample carries agent="<control address>", then the caller's labels (a Domain's rank).
    std::vector<std::pair<std::string, std::string>> labels{{"agent", address}};
    labels.insert(labels.end(), opt.metrics_labels.begin(), opt.metrics_labels.end());
    metrics = MetricsExporter::start(
        metrics_spec, metrics_source, metrics_interval,
        [this, labels, t = tr->describe()] { return render_metrics(counters, labels, t); }, describe);
    RWIN_LOG(Info, Core, "rwin: %s: metrics at %s", describe.c_str(), metrics->address().c_str());
  }
  RWIN_LOG(Info, Core, "rwin: %s: listening", describe.c_str());
  trace = detail::Tracer::for_agent(address, describe);
}

void AgentImpl::start() {
  if (opt.progress_thread) thread = std::thread([this] { thread_main(); });
}

void AgentImpl::close() noexcept {
  stop.store(true);
  if (thread.joinable()) {
    if (wake_fd) (void)::eventfd_write(wake_fd.get(), 1);  // out of its sleep
    thread.join();
  }
  std::lock_guard lk(mu);
  if (closed) return;
  try {
    // Peers learn of an orderly close before the EOF (best effort: a full socket drops it).
    for (auto& [id, c] : conns) {
      if (c->state != Conn::State::Ready) continue;
      agent::Msg bye;
      bye.type = agent::MsgType::Bye;
      send(*c, bye);
    }
    for (auto& s : slots) {
      if (s.live) {
        s.live->live = false;
        s.live->mr.reset();
        s.live.reset();
      }
    }
    for (auto& w : imports) {
      if (auto r = w.lock()) r->key.reset();
    }
    scratch_mr.reset();
    regcache.reset();
    conns.clear();  // closes every control socket: peers see EOF
    if (tr) tr->quiesce(false);
    tr.reset();
    listen_fd.reset();
  } catch (const std::exception& e) {
    RWIN_LOG(Warn, Core, "rwin: %s: error while closing: %s", describe.c_str(), e.what());
  } catch (...) {
  }
  closed = true;
  // Nothing is registered or connected any more; the file form's last write says so.
  counters.regions.store(0, std::memory_order_relaxed);
  for (auto& p : counters.peers) p.store(0, std::memory_order_relaxed);
  if (metrics) metrics->stop();
  if (trace) trace->write();  // never throws
}

void AgentImpl::fail(ErrorCode code, const std::string& msg) const { throw Error(code, describe + ": " + msg); }

void AgentImpl::sync_reg_cache_counters() noexcept {
  if (!regcache) return;
  counters.reg_cache_hits.store(regcache->stats().hits, std::memory_order_relaxed);
  counters.reg_cache_misses.store(regcache->stats().misses, std::memory_order_relaxed);
}

std::string AgentImpl::region_name(const RemoteRegionState& r) const {
  return "region " + std::to_string(r.id) + " generation " + std::to_string(r.gen) + " of agent " + r.peer;
}

// ---- regions ------------------------------------------------------------------------------------

Region AgentImpl::register_memory(void* data, size_t bytes) {
  if (closed) fail(ErrorCode::UseAfterFree, "register_memory: the agent is closed");
  if (data == nullptr || bytes == 0) {
    fail(ErrorCode::InvalidArgument, "register_memory(" + std::string(data ? "ptr" : "nullptr") + ", " +
                                         std::to_string(bytes) + " bytes): need memory and bytes > 0");
  }
  uint32_t id;
  if (!free_slots.empty()) {
    id = free_slots.back();
    free_slots.pop_back();
  } else {
    id = static_cast<uint32_t>(slots.size());
    slots.emplace_back();
  }
  auto st = std::make_shared<RegionState>();
  st->agent = weak_from_this();
  st->data = data;
  st->bytes = bytes;
  st->id = id;
  st->gen = ++slots[id].gen;
  try {
    st->mr = tr->expose_memory(data, bytes);
  } catch (const tp::TransportError& e) {
    free_slots.push_back(id);
    fail(ErrorCode::Transport, "register_memory(" + std::to_string(bytes) + " bytes): " + e.what());
  }
  agent::Descriptor d;
  d.transport = opt.transport;
  d.address = address;
  d.token = token;
  d.region_id = id;
  d.generation = st->gen;
  d.base = reinterpret_cast<uint64_t>(data);
  d.bytes = bytes;
  d.key = st->mr->packed_key();
  st->desc = agent::encode(d);
  st->live = true;
  slots[id].live = st;
  ++live_regions;
  counters.regions.fetch_add(1, std::memory_order_relaxed);
  Region r;
  r.s_ = std::move(st);
  return r;
}

// Revocation: the transport forgets the region first (from here its target refuses the range),
// then every importer is told and acknowledges once a Flush of its own showed that no write it
// issued can still land. An importer that does not answer within op_timeout is failed (its
// transport peer closed), so nothing of it arrives later either.
void AgentImpl::deregister(RegionState& r) {
  if (closed || !r.live) return;
  r.live = false;
  r.mr.reset();
  Slot& s = slots[r.id];
  auto keep = std::move(s.live);  // `r` may be owned only by the slot
  free_slots.push_back(r.id);
  --live_regions;
  counters.regions.fetch_sub(1, std::memory_order_relaxed);
  counters.op(AgentOp::Deregister, 0);  // revoked here, whether or not every importer acknowledges
  PendingRevoke pr{r.id, r.gen, {}};
  for (uint64_t cid : r.importers) {
    auto it = conns.find(cid);
    if (it == conns.end() || it->second->state != Conn::State::Ready) continue;
    agent::Msg m;
    m.type = agent::MsgType::Revoke;
    m.region_id = r.id;
    m.generation = r.gen;
    send(*it->second, m);
    if (it->second->state == Conn::State::Ready) pr.conns.insert(cid);
  }
  r.importers.clear();
  if (pr.conns.empty()) return;
  revokes.push_back(&pr);
  const auto deadline = AgentClock::now() + opt.op_timeout;
  detail::Backoff bo;
  try {
    const auto t0 = AgentClock::now();
    while (!pr.conns.empty() && AgentClock::now() < deadline) {
      progress_once(true);
      if (!pr.conns.empty() && AgentClock::now() - t0 > kSpinBeforeSleep && sleep_locked(deadline, false)) continue;
      bo.idle();
    }
  } catch (...) {
    std::erase(revokes, &pr);
    throw;
  }
  std::erase(revokes, &pr);
  for (uint64_t cid : std::set<uint64_t>(pr.conns)) {
    auto it = conns.find(cid);
    if (it == conns.end()) continue;
    fail_conn(*it->second, "did not acknowledge the revocation of region " + std::to_string(r.id) + " generation " +
                               std::to_string(r.gen) + " within " + std::to_string(ms(opt.op_timeout)) +
                               " ms (op_timeout): disconnected");
  }
}

// ---- connections and imports --------------------------------------------------------------------

Conn& AgentImpl::connect_to(const std::string& addr, const agent::Token& tok) {
  const std::string key = addr + "/" + hex_token(tok);
  if (auto it = outbound_.find(key); it != outbound_.end()) {
    auto c = conns.find(it->second);
    if (c != conns.end() && c->second->state == Conn::State::Ready) return *c->second;
    outbound_.erase(it);  // failed before: a new import connects afresh
  }
  const auto start = AgentClock::now();
  const auto deadline = start + opt.connect_timeout;
  bootstrap::HostPort hp;
  try {
    hp = bootstrap::HostPort::parse(addr);
  } catch (const std::exception& e) {
    fail(ErrorCode::InvalidArgument, std::string("import_region: descriptor address: ") + e.what());
  }
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* res = nullptr;
  const std::string port = std::to_string(hp.port);
  const int gai = getaddrinfo(hp.host.c_str(), port.c_str(), &hints, &res);
  if (gai != 0) fail(ErrorCode::PeerFailed, "cannot resolve agent " + addr + ": " + gai_strerror(gai));
  Fd fd;
  std::string err = "no address";
  for (addrinfo* ai = res; ai && !fd; ai = ai->ai_next) {
    Fd s(::socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol));
    if (!s) {
      err = std::string("socket: ") + std::strerror(errno);
      continue;
    }
    int rc = ::connect(s.get(), ai->ai_addr, ai->ai_addrlen);
    if (rc != 0 && errno == EINPROGRESS) {
      pollfd p{s.get(), POLLOUT, 0};
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - AgentClock::now()).count();
      const int prc = ::poll(&p, 1, static_cast<int>(std::max<long long>(1, left)));
      int e = ETIMEDOUT;
      if (prc == 1) {
        socklen_t el = sizeof e;
        getsockopt(s.get(), SOL_SOCKET, SO_ERROR, &e, &el);
      } else if (prc < 0) {
        e = errno;
      }
      rc = e == 0 ? 0 : -1;
      errno = e;
    }
    if (rc == 0) {
      bootstrap::detail::set_nodelay(s.get());
      fd = std::move(s);
    } else {
      err = std::string("connect: ") + std::strerror(errno);
    }
  }
  freeaddrinfo(res);
  if (!fd) {
    fail(ErrorCode::PeerFailed, "cannot connect to agent " + addr + " (" + err + ", connect_timeout " +
                                    std::to_string(ms(opt.connect_timeout)) + " ms)");
  }
  auto owned = std::make_unique<Conn>();
  Conn& c = *owned;
  c.id = next_conn++;
  c.outbound = true;
  c.fd = std::move(fd);
  c.label = addr;
  c.sock = addr;
  c.key = key;
  c.deadline = deadline;
  c.last_rx = c.last_tx = AgentClock::now();
  c.state = Conn::State::AwaitWelcome;
  conns.emplace(c.id, std::move(owned));
  outbound_[key] = c.id;
  agent::Msg hello;
  hello.type = agent::MsgType::Hello;
  hello.token = tok;
  hello.text = address;
  try {
    c.tpeer = tr->add_peer();
    hello.endpoint = tr->local_endpoint(c.tpeer);
  } catch (const tp::TransportError& e) {
    fail_conn(c, std::string("transport: ") + e.what());
    fail(ErrorCode::Transport, "connecting to agent " + addr + ": " + e.what());
  }
  send(c, hello);
  detail::Backoff bo;
  while (c.state != Conn::State::Ready && c.state != Conn::State::Failed) {
    progress_once(true);
    if (AgentClock::now() > deadline) {
      fail_conn(c, "handshake did not finish within " + std::to_string(ms(opt.connect_timeout)) +
                       " ms (connect_timeout)");
      break;
    }
    bo.idle();
  }
  if (c.state == Conn::State::Failed) fail(ErrorCode::PeerFailed, "connecting to agent " + addr + ": " + c.error);
  const auto us = std::chrono::duration_cast<std::chrono::microseconds>(AgentClock::now() - start).count();
  RWIN_LOG(Debug, Core, "rwin: %s: connected to agent %s in %lld us (transport peer %d)", describe.c_str(), addr.c_str(),
           static_cast<long long>(us), c.tpeer);
  return c;
}

RemoteRegion AgentImpl::import_region(std::span<const uint8_t> bytes) {
  if (closed) fail(ErrorCode::UseAfterFree, "import_region: the agent is closed");
  std::string why;
  auto d = agent::decode_descriptor(bytes, why);
  if (!d) fail(ErrorCode::InvalidArgument, "import_region: " + why);
  if (d->transport != opt.transport) {
    fail(ErrorCode::InvalidArgument, "import_region: the descriptor is of a '" + d->transport +
                                         "' agent (region " + std::to_string(d->region_id) + " of " + d->address +
                                         "), this agent runs '" + opt.transport + "'");
  }
  Conn& c = connect_to(d->address, d->token);
  const std::string name = "region " + std::to_string(d->region_id) + " generation " + std::to_string(d->generation) +
                           " of agent " + d->address;
  // Is it live? The owner records us as an importer before it answers, so a later deregister
  // reaches us.
  agent::Msg m;
  m.type = agent::MsgType::Import;
  m.req = next_req++;
  m.region_id = d->region_id;
  m.generation = d->generation;
  import_replies[m.req] = -1;
  send(c, m);
  const auto deadline = AgentClock::now() + opt.op_timeout;
  detail::Backoff bo;
  int status = -1;
  while ((status = import_replies[m.req]) < 0) {
    if (c.state == Conn::State::Failed) {
      import_replies.erase(m.req);
      fail(ErrorCode::PeerFailed, "import_region of " + name + ": peer agent " + c.label + " failed: " + c.error);
    }
    if (AgentClock::now() > deadline) {
      import_replies.erase(m.req);
      fail(ErrorCode::Timeout, "import_region of " + name + ": no answer from agent " + c.label + " within " +
                                   std::to_string(ms(opt.op_timeout)) + " ms (op_timeout)");
    }
    progress_once(true);
    bo.idle();
  }
  import_replies.erase(m.req);
  if (status != 0) {
    fail(ErrorCode::UseAfterFree, "import_region: " + name + " was deregistered by its owner (stale descriptor)");
  }
  auto st = std::make_shared<RemoteRegionState>();
  st->agent = weak_from_this();
  st->conn = c.id;
  st->peer = c.label;
  st->id = d->region_id;
  st->gen = d->generation;
  st->base = d->base;
  st->bytes = d->bytes;
  try {
    st->key = tr->unpack_key(c.tpeer, d->key);
  } catch (const tp::TransportError& e) {
    fail(ErrorCode::Transport, "import_region of " + name + ": " + e.what());
  }
  std::erase_if(imports, [](const auto& w) { return w.expired(); });
  imports.push_back(st);
  RemoteRegion r;
  r.s_ = std::move(st);
  return r;
}

// ---- data path ------------------------------------------------------------------------------------

RemoteRegionState& AgentImpl::use(const RemoteRegion& h, const char* op, uint64_t off, uint64_t n) {
  if (closed) fail(ErrorCode::UseAfterFree, std::string(op) + ": the agent is closed");
  if (!h.s_) fail(ErrorCode::InvalidArgument, std::string(op) + ": empty RemoteRegion handle");
  RemoteRegionState& r = *h.s_;
  if (r.agent.lock().get() != this) {
    fail(ErrorCode::InvalidArgument, std::string(op) + ": " + region_name(r) + " was imported by another agent");
  }
  const std::string what = std::string(op) + " of " + std::to_string(n) + " bytes at offset " + std::to_string(off);
  if (r.stale) fail(ErrorCode::UseAfterFree, what + ": " + region_name(r) + " was deregistered by its owner (stale)");
  if (off > r.bytes || n > r.bytes - off) {
    fail(ErrorCode::OutOfBounds, what + ": outside " + region_name(r) + " (" + std::to_string(r.bytes) + " bytes)");
  }
  Conn& c = conn_of(r);
  if (c.state != Conn::State::Ready) {
    fail(ErrorCode::PeerFailed, what + " into " + region_name(r) + ": peer agent " + c.label + " failed: " + c.error);
  }
  return r;
}

Conn& AgentImpl::conn_of(const RemoteRegionState& r) {
  auto it = conns.find(r.conn);
  if (it == conns.end()) fail(ErrorCode::PeerFailed, region_name(r) + ": its connection is closed");
  return *it->second;
}

void AgentImpl::post(Conn& c, tp::Work w, Track& t, const std::string& what) {
  w.peer = c.tpeer;
  w.cookie = next_cookie++;
  const auto deadline = AgentClock::now() + opt.op_timeout;
  for (;;) {
    if (c.state != Conn::State::Ready) {
      fail(ErrorCode::PeerFailed, what + ": peer agent " + c.label + " failed: " + c.error);
    }
    const tp::PostResult r = tr->post(w);
    if (r == tp::PostResult::Ok) {
      tracks[w.cookie] = &t;
      t.cookies.push_back(w.cookie);
      ++t.inflight;
      if (w.op != tp::Op::Read && w.op != tp::Op::Flush) c.unflushed = true;
      return;
    }
    if (r == tp::PostResult::PeerFailed) {
      const std::string e = tr->peer_error(c.tpeer);
      fail_conn(c, "transport: " + e);
      fail(ErrorCode::PeerFailed, what + ": peer agent " + c.label + " failed: " + e);
    }
    if (r != tp::PostResult::Busy) {  // done inside post(): no completion follows
      if (w.op != tp::Op::Read && w.op != tp::Op::Flush) c.unflushed = true;
      return;
    }
    progress_once(false);
    if (AgentClock::now() > deadline) {
      fail(ErrorCode::Timeout, what + ": the transport to agent " + c.label + " stayed busy for " +
                                   std::to_string(ms(opt.op_timeout)) + " ms (op_timeout)");
    }
  }
}

// Waits until at most `until` of t's work is in flight; throws on a failure or the deadline.
void AgentImpl::wait_track(Track& t, Conn& c, AgentClock::time_point deadline, const std::string& what, int until) {
  detail::Backoff bo;
  const auto t0 = AgentClock::now();
  while (t.inflight > until && t.error.empty()) {
    if (c.state == Conn::State::Failed) break;
    progress_once(false);
    if (t.inflight <= until || !t.error.empty()) break;
    const auto now = AgentClock::now();
    if (now > deadline) {
      fail(ErrorCode::Timeout, what + " to agent " + c.label + " did not complete within " +
                                   std::to_string(ms(opt.op_timeout)) + " ms (op_timeout)");
    }
    if (now - t0 > kSpinBeforeSleep && sleep_locked(deadline, true)) continue;
    bo.idle();
  }
  if (!t.error.empty()) {
    fail_conn(c, "transport: " + t.error);
    fail(ErrorCode::PeerFailed, what + ": peer agent " + c.label + " failed: " + t.error);
  }
  if (c.state == Conn::State::Failed && t.inflight > until) {
    fail(ErrorCode::PeerFailed, what + ": peer agent " + c.label + " failed: " + c.error);
  }
}

void AgentImpl::put(const RemoteRegion& dst, uint64_t off, const void* src, size_t n) {
  transfer(tp::Op::Write, dst, off, const_cast<void*>(src), n);
}

void AgentImpl::get(void* dst, const RemoteRegion& src, uint64_t off, size_t n) {
  transfer(tp::Op::Read, src, off, dst, n);
}

// put (Write: `local` is the source) and get (Read: `local` is the destination), cut into chunks
// with the transport's pipeline depth in flight.
void AgentImpl::transfer(tp::Op op, const RemoteRegion& remote, uint64_t off, void* local, size_t n) {
  const bool put = op == tp::Op::Write;
  const char* name = put ? "put" : "get";
  struct Sync {
    AgentImpl& a;
    ~Sync() { a.sync_reg_cache_counters(); }
  } sync{*this};
  RemoteRegionState& r = use(remote, name, off, n);
  if (n == 0) return;
  if (local == nullptr) {
    fail(ErrorCode::InvalidArgument,
         std::string(name) + " of " + std::to_string(n) + " bytes: " + (put ? "src" : "dst") + " is null");
  }
  Conn& c = conn_of(r);
  const std::string what = std::string(name) + " of " + std::to_string(n) + " bytes at offset " + std::to_string(off) +
                           (put ? " into " : " from ") + region_name(r);
  // Verbs: through the registration cache (a repeated buffer costs no ibv_reg_mr), pinned until
  // this call ends; elsewhere a region that registers nothing.
  std::unique_ptr<tp::MemoryRegion> own;
  const tp::MemoryRegion* mr = nullptr;
  struct Unpin {
    RegCache* cache;
    const tp::MemoryRegion*& mr;
    ~Unpin() {
      if (cache && mr) cache->release(mr);
    }
  } unpin{regcache.get(), mr};
  try {
    if (regcache) {
      mr = regcache->acquire(local, n);
    } else {
      own = tr->register_memory(local, n);
      mr = own.get();
    }
  } catch (const tp::TransportError& e) {
    fail(ErrorCode::Transport, what + ": " + e.what());
  }
  const size_t chunk = std::max<size_t>(1, std::min(caps.max_message_bytes, caps.default_chunk_bytes));
  const int depth = std::max(1, caps.default_pipeline_depth);
  const auto deadline = AgentClock::now() + opt.op_timeout;
  Track t(*this);
  for (size_t pos = 0; pos < n; pos += chunk) {
    wait_track(t, c, deadline, what, depth - 1);
    // Revoked while we wait: the owner refuses the rest anyway; stop here with the clear error.
    if (r.stale) fail(ErrorCode::UseAfterFree, what + ": revoked by its owner after " + std::to_string(pos) + " bytes");
    tp::Work w;
    w.op = op;
    w.local = static_cast<char*>(local) + pos;
    w.local_mr = mr;
    w.remote_addr = r.base + off + pos;
    w.rkey = r.key.get();
    w.bytes = std::min(chunk, n - pos);
    post(c, w, t, what);
  }
  wait_track(t, c, deadline, what, 0);
}

void AgentImpl::notify(const RemoteRegion& sig, uint64_t off, int64_t value, NotifyOp op) {
  RemoteRegionState& r = use(sig, "notify", off, 8);
  const std::string what = std::string("notify (") + (op == NotifyOp::Set ? "set" : "add") + " " +
                           std::to_string(value) + ") of the signal word at offset " + std::to_string(off) + " of " +
                           region_name(r);
  if ((r.base + off) % 8 != 0) fail(ErrorCode::Misaligned, what + ": not 8-byte aligned");
  Conn& c = conn_of(r);
  tp::Work w;
  w.op = op == NotifyOp::Set ? tp::Op::Swap : tp::Op::AtomicAdd;
  w.remote_addr = r.base + off;
  w.rkey = r.key.get();
  w.bytes = 8;
  w.operand = static_cast<uint64_t>(value);
  if (op == NotifyOp::Set) {
    w.local = scratch;
    w.local_mr = scratch_mr.get();
  }
  Track t(*this);
  post(c, w, t, what);
  wait_track(t, c, AgentClock::now() + opt.op_timeout, what, 0);
}

void AgentImpl::flush_conn(Conn& c, const std::string& what) {
  if (c.state != Conn::State::Ready) {
    c.unflushed = false;  // reported once
    fail(ErrorCode::PeerFailed, what + ": peer agent " + c.label + " failed: " + c.error);
  }
  tp::Work w;
  w.op = tp::Op::Flush;
  Track t(*this);
  post(c, w, t, what);
  wait_track(t, c, AgentClock::now() + opt.op_timeout, what, 0);
  c.unflushed = false;
}

void AgentImpl::flush() {
  if (closed) fail(ErrorCode::UseAfterFree, "flush: the agent is closed");
  std::vector<Conn*> todo;
  for (auto& [id, c] : conns) {
    if (c->outbound && c->unflushed) todo.push_back(c.get());
  }
  // Post every Flush, then wait for all: one round trip, not one per peer.
  Track t(*this);
  std::string failed;
  for (Conn* c : todo) {
    if (c->state != Conn::State::Ready) {
      failed += (failed.empty() ? "" : "; ") + ("peer agent " + c->label + " failed: " + c->error);
      c->unflushed = false;
      continue;
    }
    tp::Work w;
    w.op = tp::Op::Flush;
    post(*c, w, t, "flush");
  }
  for (Conn* c : todo) {
    if (c->state == Conn::State::Ready) {
      wait_track(t, *c, AgentClock::now() + opt.op_timeout, "flush", 0);
      c->unflushed = false;
    }
  }
  if (!failed.empty()) fail(ErrorCode::PeerFailed, "flush: " + failed);
}

// ---- local signal words ---------------------------------------------------------------------------

bool AgentImpl::check(const Region& sig, uint64_t off, int64_t expected, WaitCmp cmp, const char* op) {
  if (!sig.s_) fail(ErrorCode::InvalidArgument, std::string(op) + ": empty Region handle");
  RegionState& r = *sig.s_;
  const std::string what = std::string(op) + " on the signal word at offset " + std::to_string(off) + " of region " +
                           std::to_string(r.id) + " generation " + std::to_string(r.gen);
  if (r.agent.lock().get() != this) fail(ErrorCode::InvalidArgument, what + ": the region belongs to another agent");
  if (!r.live) fail(ErrorCode::UseAfterFree, what + ": the region is deregistered");
  if (off > r.bytes || 8 > r.bytes - off) {
    fail(ErrorCode::OutOfBounds, what + ": outside the region (" + std::to_string(r.bytes) + " bytes)");
  }
  if ((reinterpret_cast<uintptr_t>(r.data) + off) % 8 != 0) fail(ErrorCode::Misaligned, what + ": not 8-byte aligned");
  auto* word = reinterpret_cast<int64_t*>(static_cast<char*>(r.data) + off);
  const int64_t v = std::atomic_ref<int64_t>(*word).load(std::memory_order_acquire);
  (void)cmp, (void)expected;
  return compare(v, cmp, expected);
}

void AgentImpl::wait(const Region& sig, uint64_t off, int64_t expected, WaitCmp cmp, std::chrono::milliseconds t) {
  const auto t0 = AgentClock::now();
  const auto deadline = t0 + t;
  detail::Backoff bo;
  while (!check(sig, off, expected, cmp, "wait")) {
    progress_once(false);
    if (check(sig, off, expected, cmp, "wait")) return;
    const auto now = AgentClock::now();
    if (now > deadline) {
      RegionState& r = *sig.s_;
      const auto* word = reinterpret_cast<int64_t*>(static_cast<char*>(r.data) + off);
      const int64_t v = std::atomic_ref<const int64_t>(*word).load(std::memory_order_acquire);
      fail(ErrorCode::Timeout, "wait on the signal word at offset " + std::to_string(off) + " of region " +
                                   std::to_string(r.id) + ": value " + std::to_string(v) + ", expected " +
                                   to_string(cmp) + " " + std::to_string(expected) + ", not within " +
                                   std::to_string(ms(t)) + " ms");
    }
    // A signal written through the transport (UCX: an am request we apply) wakes the sleep; one
    // written by the adapter (verbs) raises no event, so there the wait keeps polling (Backoff).
    if (now - t0 > kSpinBeforeSleep && sleep_locked(deadline, true)) continue;
    bo.idle();
  }
}

}  // namespace rwin
