// The bootstrap store's server: one poll() thread, authentication, rank leases and failure
// events, parked get/wait. Wire format: wire.h.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <cstdio>
#include <cstring>
#include <map>
#include <set>
#include <unordered_map>

#include "bootstrap/auth.h"
#include "bootstrap/bootstrap.h"
#include "bootstrap/parse_number.h"
#include "bootstrap/wire.h"
#include "bootstrap/socket_util.h"
#include "common/log.h"

namespace rwin::bootstrap {

using namespace std::chrono_literals;
using wire::Clock;
using detail::Fd;
using detail::set_nodelay;
using detail::sockaddr_text;
using detail::err_text;

// ---------------------------------------------------------------------------------------------
// Server

namespace {

constexpr size_t kReadChunk = 64 << 10;
// Before authentication a connection may hold at most one hello-sized frame.
constexpr size_t kPreAuthBuffer = wire::kHeaderSize + wire::kHelloBody;
// A connection whose request has started but stalls this long is a truncated frame or a
// slowloris; an authenticated connection that has sent nothing at all is indistinguishable from
// an idle rank between operations and is kept.
constexpr auto kStalledFrame = 60s;
// A parked (blocked get/wait) client may not pipeline more than this behind its request.
constexpr size_t kMaxBufferedWhileParked = 1 << 20;
// Lines about strangers (failed handshakes, garbage) per second; the rest are counted.
constexpr int kStrangerLinesPerSecond = 10;

struct Conn {
  uint64_t id = 0;
  Fd fd;
  std::string peer;
  std::vector<uint8_t> in;
  std::vector<uint8_t> out;
  size_t out_off = 0;
  Clock::time_point accepted;
  Clock::time_point last_input;
  bool dead = false;
  bool close_after_write = false;  // a refusal is sent, then the connection closes
  wire::ConnState state = wire::ConnState::ExpectHello;
  wire::Hello hello;
  uint8_t server_nonce[wire::kNonce] = {};
  int rank = -1;  // bound rank of an authenticated lease (or the rank a data client named)
  bool said_goodbye = false;
  // Parked request (blocking get or wait): keys still missing.
  bool parked = false;
  wire::Op parked_op = wire::Op::Get;
  std::string get_key;
  std::vector<std::string> waiting;  // unique keys this connection is registered under
  size_t missing = 0;

  bool authenticated() const {
    return state == wire::ConnState::Data || state == wire::ConnState::Lease;
  }
};

struct RankSlot {
  enum class State { Live, Left, Failed } state = State::Live;
  std::string peer;  // address its lease came from
};

}  // namespace

struct TcpStoreServer::Impl {
  Fd listen_fd;
  Fd wake_fd;
  uint16_t port = 0;
  std::string label;
  StoreServerConfig cfg;
  std::thread thread;

  // Touched only by the server thread.
  std::unordered_map<std::string, std::vector<uint8_t>> data;
  uint64_t stored_bytes = 0;
  std::unordered_map<std::string, std::vector<uint64_t>> waiters;  // key -> parked conn ids
  std::map<uint64_t, std::unique_ptr<Conn>> conns;
  std::deque<uint64_t> unauth_order;  // ids in accept order; stale ids are skipped
  size_t n_unauth = 0;
  size_t n_auth = 0;
  std::map<int, RankSlot> ranks;
  std::vector<std::pair<int, std::string>> failed;  // (rank, how), in order of failure
  std::vector<uint64_t> ready;  // conns unparked this round whose buffered input must be processed
  uint64_t next_id = 1;
  Clock::time_point accept_paused_until{};
  Clock::time_point log_window{};
  int log_lines = 0;
  uint64_t log_suppressed = 0;

  // Shared with wait_until_ranks_left().
  mutable std::mutex m;
  mutable std::condition_variable cv;
  std::set<int> live_ranks;

  void run();
  void accept_all();
  void on_readable(Conn& c);
  void on_writable(Conn& c);
  void process(Conn& c);
  bool handle(Conn& c, wire::Request& rq);
  bool handle_hello(Conn& c, const wire::Request& rq);
  bool handle_auth(Conn& c, const wire::Request& rq);
  void respond(Conn& c, wire::Status st, const void* body, size_t len);
  void respond_error(Conn& c, const std::string& msg) { respond(c, wire::Status::Error, msg.data(), msg.size()); }
  void refuse(Conn& c, const std::string& msg) {
    respond_error(c, msg);
    c.close_after_write = true;
  }
  void respond_peer_failed(Conn& c);
  void park(Conn& c, wire::Op op, std::vector<std::string> missing_keys);
  void key_created(const std::string& key);
  void unpark_complete(Conn& c);
  void unpark_failed(Conn& c);
  void forget_waits(Conn& c);
  void rank_failed(Conn& c, const std::string& how);
  void drop(Conn& c, const std::string& why);
  void drop_quietly(Conn& c);
  // Drops `c` for `why`: a rank's connection with a log line (and a failure event for a lease), a
  // stranger's through the rate-limited stranger log.
  void close_for(Conn& c, const std::string& why);
  void reap();
  void log_stranger(const std::string& line);
  bool account(size_t old_size, size_t new_size, bool created, Conn& c, const std::string& key);
};

namespace {
bool is_wildcard(const sockaddr* sa) {
  if (sa->sa_family == AF_INET) {
    return reinterpret_cast<const sockaddr_in*>(sa)->sin_addr.s_addr == htonl(INADDR_ANY);
  }
  if (sa->sa_family == AF_INET6) {
    return IN6_IS_ADDR_UNSPECIFIED(&reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr) != 0;
  }
  return false;
}
}  // namespace

TcpStoreServer::TcpStoreServer(const std::string& bind_host, uint16_t port, const StoreServerConfig& cfg)
    : impl_(std::make_unique<Impl>()) {
  impl_->cfg = cfg;
  const std::string label = HostPort{bind_host, port}.str();
  impl_->label = label;
  if (bind_host.empty()) {
    throw BootstrapError(BootstrapError::Kind::Config,
                         "store server: no bind address (the store listens on the root's address only)");
  }
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  hints.ai_family = AF_UNSPEC;
  addrinfo* res = nullptr;
  const std::string port_text = std::to_string(port);
  const int gai = getaddrinfo(bind_host.c_str(), port_text.c_str(), &hints, &res);
  if (gai != 0) {
    throw BootstrapError(BootstrapError::Kind::Config,
                         "store server: cannot resolve bind address " + label + ": " + gai_strerror(gai));
  }
  int last_errno = 0;
  const char* last_call = "socket";
  std::string last_addr;
  bool wildcard = false;
  for (addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) {
    if (is_wildcard(ai->ai_addr)) {
      wildcard = true;
      continue;
    }
    last_addr = sockaddr_text(ai->ai_addr);
    Fd fd(::socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol));
    if (!fd) {
      last_errno = errno, last_call = "socket";
      continue;
    }
    // A restarted job must be able to reuse the root port while old connections sit in TIME_WAIT.
    int one = 1;
    setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd.get(), ai->ai_addr, ai->ai_addrlen) != 0) {
      last_errno = errno, last_call = "bind";
      continue;
    }
    if (::listen(fd.get(), 1024) != 0) {
      last_errno = errno, last_call = "listen";
      continue;
    }
    impl_->listen_fd = std::move(fd);
    break;
  }
  freeaddrinfo(res);
  if (!impl_->listen_fd) {
    if (wildcard && last_addr.empty()) {
      throw BootstrapError(BootstrapError::Kind::Config,
                           "store server: " + label +
                               " is a wildcard address; the store listens only on the address RWIN_ROOT names");
    }
    if (last_errno == EADDRNOTAVAIL) {
      throw BootstrapError(BootstrapError::Kind::Config,
                           "store server: " + label + " (" + last_addr +
                               ") is not an address of this machine: RWIN_ROOT must name the host of rank 0, "
                               "which serves the store there");
    }
    throw BootstrapError(BootstrapError::Kind::Connection, "store server: " + std::string(last_call) + " " + label +
                                                               " failed: " + err_text(last_errno));
  }
  sockaddr_storage ss{};
  socklen_t sl = sizeof ss;
  getsockname(impl_->listen_fd.get(), reinterpret_cast<sockaddr*>(&ss), &sl);
  impl_->port = ss.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port)
                                         : ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
  impl_->wake_fd.reset(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!impl_->wake_fd) {
    throw BootstrapError(BootstrapError::Kind::Connection, "store server: eventfd failed: " + err_text(errno));
  }
  impl_->thread = std::thread([impl = impl_.get()] { impl->run(); });
}

TcpStoreServer::~TcpStoreServer() {
  if (!impl_ || !impl_->thread.joinable()) return;
  const uint64_t one = 1;
  // The eventfd wakes poll() at once; the loop sees it and returns.
  if (::write(impl_->wake_fd.get(), &one, sizeof one) < 0) {
    RWIN_LOG(Warn, Bootstrap, "rwin store: cannot wake the server thread: %s", std::strerror(errno));
  }
  impl_->thread.join();
}

uint16_t TcpStoreServer::port() const noexcept { return impl_->port; }

bool TcpStoreServer::wait_until_ranks_left(int except_rank, Clock::time_point deadline) const {
  std::unique_lock<std::mutex> lk(impl_->m);
  return impl_->cv.wait_until(lk, deadline, [&] {
    for (int r : impl_->live_ranks) {
      if (r != except_rank) return false;
    }
    return true;
  });
}

void TcpStoreServer::Impl::log_stranger(const std::string& line) {
  const auto now = Clock::now();
  if (now - log_window >= 1s) {
    if (log_suppressed > 0) {
      RWIN_LOG(Warn, Bootstrap, "rwin store: (%llu more lines about unauthenticated connections suppressed)",
               static_cast<unsigned long long>(log_suppressed));
    }
    log_window = now;
    log_lines = 0;
    log_suppressed = 0;
  }
  if (log_lines++ < kStrangerLinesPerSecond) {
    RWIN_LOG(Warn, Bootstrap, "rwin store: %s", line.c_str());
  } else {
    ++log_suppressed;
  }
}

void TcpStoreServer::Impl::run() {
  std::vector<pollfd> fds;
  std::vector<Conn*> order;
  for (;;) {
    fds.clear();
    order.clear();
    fds.push_back({wake_fd.get(), POLLIN, 0});
    const bool accepting = Clock::now() >= accept_paused_until;
    fds.push_back({listen_fd.get(), static_cast<short>(accepting ? POLLIN : 0), 0});
    for (auto& [id, c] : conns) {
      short ev = 0;
      if (c->out_off < c->out.size()) {
        ev = POLLOUT;  // back-pressure: read more only once the reply is out
      } else {
        ev = POLLIN | POLLRDHUP;
      }
      fds.push_back({c->fd.get(), ev, 0});
      order.push_back(c.get());
    }
    // Wake once a second to expire handshakes and stalled frames; otherwise poll() only returns
    // on activity.
    const int rc = ::poll(fds.data(), fds.size(), 1000);
    if (rc < 0 && errno != EINTR) {
      RWIN_LOG(Warn, Bootstrap, "rwin store: poll failed: %s; server stops", std::strerror(errno));
      return;
    }
    if (fds[0].revents != 0) return;
    for (size_t i = 0; i < order.size(); ++i) {
      Conn& c = *order[i];
      const short re = fds[i + 2].revents;
      if (c.dead || re == 0) continue;
      if (re & POLLOUT) on_writable(c);
      if (!c.dead && (re & (POLLIN | POLLRDHUP | POLLHUP | POLLERR))) on_readable(c);
      if (!c.dead && (re & POLLNVAL)) drop(c, "socket error");
    }
    // Accept after serving the ranks: a flood of strangers must not delay the ranks' replies.
    if (fds[1].revents & POLLIN) accept_all();
    while (!ready.empty()) {
      auto ids = std::move(ready);
      ready.clear();
      for (uint64_t id : ids) {
        auto it = conns.find(id);
        if (it == conns.end() || it->second->dead) continue;
        process(*it->second);
        // Pushed events and failure replies go out now, not at the next wake-up.
        if (!it->second->dead && it->second->out_off < it->second->out.size()) on_writable(*it->second);
      }
    }
    const auto now = Clock::now();
    for (auto& [id, c] : conns) {
      if (c->dead) continue;
      if (!c->authenticated() && now - c->accepted > kAuthDeadline) {
        log_stranger("closing connection from " + c->peer + ": not authenticated within " +
                     std::to_string(kAuthDeadline.count()) + " s");
        drop_quietly(*c);
      } else if (!c->parked && !c->in.empty() && now - c->last_input > kStalledFrame) {
        drop(*c, "incomplete request stalled for " + std::to_string(kStalledFrame.count()) + " s");
      }
    }
    reap();
  }
}

void TcpStoreServer::Impl::accept_all() {
  for (;;) {
    sockaddr_storage ss{};
    socklen_t sl = sizeof ss;
    int fd = ::accept4(listen_fd.get(), reinterpret_cast<sockaddr*>(&ss), &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR || errno == ECONNABORTED) return;
      // Out of descriptors: stop accepting for a moment instead of spinning on a ready listener.
      RWIN_LOG(Warn, Bootstrap, "rwin store: accept failed: %s; pausing accepts for 100 ms", std::strerror(errno));
      accept_paused_until = Clock::now() + 100ms;
      return;
    }
    auto c = std::make_unique<Conn>();
    c->fd.reset(fd);
    c->peer = sockaddr_text(reinterpret_cast<sockaddr*>(&ss));
    // Strangers compete only with strangers: the oldest unauthenticated connection makes room,
    // so a flood of idle connections delays a rank's handshake by at most one round.
    while (n_unauth >= kMaxUnauthenticated && !unauth_order.empty()) {
      const uint64_t oldest = unauth_order.front();
      unauth_order.pop_front();
      auto it = conns.find(oldest);
      if (it == conns.end() || it->second->dead || it->second->authenticated()) continue;
      log_stranger("closing connection from " + it->second->peer + ": " + std::to_string(kMaxUnauthenticated) +
                   " unauthenticated connections open, the oldest goes");
      drop_quietly(*it->second);
    }
    set_nodelay(fd);
    c->id = next_id++;
    c->accepted = c->last_input = Clock::now();
    ++n_unauth;
    unauth_order.push_back(c->id);
    conns.emplace(c->id, std::move(c));
  }
}

void TcpStoreServer::Impl::on_readable(Conn& c) {
  bool eof = false;
  // Bounded per round so one fast sender cannot starve the others.
  for (size_t total = 0; total < (4u << 20);) {
    const size_t old = c.in.size();
    // A stranger's buffer never grows beyond one hello frame.
    const size_t want = c.authenticated() ? kReadChunk : kPreAuthBuffer - std::min(old, kPreAuthBuffer);
    if (want == 0) break;
    c.in.resize(old + want);
    const ssize_t n = ::recv(c.fd.get(), c.in.data() + old, want, 0);
    if (n <= 0) {
      c.in.resize(old);
      if (n == 0) {
        eof = true;
        break;
      }
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) break;
      const std::string why = "recv failed: " + err_text(errno);
      close_for(c, why);
      return;
    }
    c.in.resize(old + static_cast<size_t>(n));
    c.last_input = Clock::now();
    total += static_cast<size_t>(n);
  }
  if (c.parked) {
    if (eof) {
      drop(c, "");
    } else if (c.in.size() > kMaxBufferedWhileParked) {
      drop(c, "sent more than 1 MiB while its request was blocked");
    }
    return;
  }
  process(c);
  if (eof && !c.dead) {
    // Orderly close. A client that closes mid-frame sent a truncated request: say so.
    if (!c.in.empty()) {
      const std::string why =
          "connection closed inside a request (" + std::to_string(c.in.size()) + " bytes buffered)";
      close_for(c, why);
    } else {
      drop(c, "");
    }
  }
}

void TcpStoreServer::Impl::process(Conn& c) {
  size_t off = 0;
  // Stops while a reply is still queued: a client pipelining requests without reading replies
  // must not make the server buffer unbounded output; on_writable resumes once the reply is out.
  while (!c.dead && !c.parked && !c.close_after_write && c.out_off == c.out.size() &&
         c.in.size() - off >= wire::kHeaderSize) {
    wire::Header h;
    std::string why;
    const auto hr = wire::decode_header(c.in.data() + off, c.in.size() - off, c.state, h, why);
    if (hr == wire::HeaderResult::NeedMore) break;
    if (hr != wire::HeaderResult::Ok) {
      close_for(c, why);
      return;
    }
    if (c.in.size() - off - wire::kHeaderSize < h.body_len) break;  // wait for the rest of the frame
    const auto op = static_cast<wire::Op>(h.op);
    wire::Request rq;
    bool ok = wire::decode_request(op, c.in.data() + off + wire::kHeaderSize, h.body_len, rq);
    if (ok) ok = handle(c, rq);
    if (!ok) {
      const std::string why2 =
          std::string("malformed ") + wire::op_name(op) + " body of " + std::to_string(h.body_len) + " bytes";
      if (c.authenticated()) {
        drop(c, why2);
      } else {
        log_stranger("closing connection from " + c.peer + ": " + why2);
        drop_quietly(c);
      }
      return;
    }
    off += wire::kHeaderSize + h.body_len;
  }
  if (c.dead) return;
  if (off > 0) c.in.erase(c.in.begin(), c.in.begin() + static_cast<ptrdiff_t>(off));
  if (c.out_off < c.out.size()) on_writable(c);
}

bool TcpStoreServer::Impl::handle_hello(Conn& c, const wire::Request& rq) {
  const bool client_has_key = (rq.hello.flags & wire::kFlagHasKey) != 0;
  if (client_has_key != !cfg.job_key.empty()) {
    log_stranger("closing connection from " + c.peer + ": " +
                 (client_has_key ? "client has a job key, this store has none" : "client has no job key"));
    refuse(c, client_has_key ? "this store runs without a job key but the client has one (RWIN_JOB_KEY differs "
                               "between ranks?)"
                             : "this store requires the job key: set RWIN_JOB_KEY to the job's key");
    return true;
  }
  c.hello = rq.hello;
  auth::random_bytes(c.server_nonce, sizeof c.server_nonce);
  const auto t = wire::transcript(c.hello.nonce, c.server_nonce, c.hello);
  const auto mac = auth::hmac(cfg.job_key, "rwin-store-server", t);
  uint8_t reply[wire::kHelloReplyBody];
  std::memcpy(reply, c.server_nonce, wire::kNonce);
  std::memcpy(reply + wire::kNonce, mac.data(), wire::kMac);
  respond(c, wire::Status::Ok, reply, sizeof reply);
  c.state = wire::ConnState::ExpectAuth;
  return true;
}

bool TcpStoreServer::Impl::handle_auth(Conn& c, const wire::Request& rq) {
  const auto t = wire::transcript(c.hello.nonce, c.server_nonce, c.hello);
  const auto want = auth::hmac(cfg.job_key, "rwin-store-client", t);
  if (!auth::equal(want.data(), rq.mac, wire::kMac)) {
    log_stranger("closing connection from " + c.peer + ": authentication failed (wrong job key)");
    refuse(c, "authentication failed: wrong job key (RWIN_JOB_KEY)");
    return true;
  }
  // From here on the client proved it knows the key: its claims deserve precise answers.
  const bool lease = c.hello.role == static_cast<uint16_t>(wire::Role::Lease);
  const bool has_rank = c.hello.rank != wire::kNoRank;
  const std::string who = has_rank ? "rank " + std::to_string(c.hello.rank) : std::string("a client");
  if (cfg.nranks > 0 && has_rank &&
      (c.hello.nranks != static_cast<uint32_t>(cfg.nranks) || c.hello.rank >= static_cast<uint32_t>(cfg.nranks))) {
    const std::string msg = who + " of " + std::to_string(c.hello.nranks) + " from " + c.peer +
                            " does not fit this job of " + std::to_string(cfg.nranks) + " ranks; refused";
    RWIN_LOG(Warn, Bootstrap, "rwin store: %s", msg.c_str());
    refuse(c, msg);
    return true;
  }
  if ((lease && !has_rank) || (has_rank && c.hello.rank > 0x7FFFFFFFu)) {
    refuse(c, "a lease needs a rank");
    return true;
  }
  if (n_auth >= kMaxAuthenticated) {
    const std::string msg = "refusing " + who + " from " + c.peer + ": " + std::to_string(n_auth) +
                            " authenticated connections open";
    RWIN_LOG(Warn, Bootstrap, "rwin store: %s", msg.c_str());
    refuse(c, msg);
    return true;
  }
  const int rank = has_rank ? static_cast<int>(c.hello.rank) : -1;
  if (lease) {
    auto it = ranks.find(rank);
    if (it != ranks.end()) {
      const char* state = it->second.state == RankSlot::State::Live   ? ""
                          : it->second.state == RankSlot::State::Left ? " (and has left)"
                                                                      : " (and has failed)";
      const std::string msg = "rank " + std::to_string(rank) + " already joined from " + it->second.peer + state +
                              "; refusing " + c.peer;
      RWIN_LOG(Warn, Bootstrap, "rwin store: %s", msg.c_str());
      refuse(c, msg);
      return true;
    }
    ranks[rank] = RankSlot{RankSlot::State::Live, c.peer};
    {
      std::lock_guard<std::mutex> lk(m);
      live_ranks.insert(rank);
    }
  }
  --n_unauth;
  ++n_auth;
  c.rank = rank;
  c.state = lease ? wire::ConnState::Lease : wire::ConnState::Data;
  respond(c, wire::Status::Ok, nullptr, 0);
  if (lease) {
    // A late joiner learns of earlier failures at once.
    for (const auto& [r, how] : failed) {
      wire::Writer w;
      w.u32(static_cast<uint32_t>(r));
      w.str(how);
      respond(c, wire::Status::Event, w.buf().data(), w.buf().size());
    }
  }
  return true;
}

bool TcpStoreServer::Impl::account(size_t old_size, size_t new_size, bool created, Conn& c, const std::string& key) {
  const uint64_t after = stored_bytes - old_size + new_size + (created ? key.size() : 0);
  if ((created && data.size() >= kMaxStoredKeys) || after > kMaxStoredBytes) {
    respond_error(c, "store full: " + std::to_string(data.size()) + " keys, " + std::to_string(stored_bytes) +
                         " bytes stored (limits " + std::to_string(kMaxStoredKeys) + " keys, " +
                         std::to_string(kMaxStoredBytes) + " bytes per job); key " + wire::quote_key(key) +
                         " not stored");
    return false;
  }
  stored_bytes = after;
  return true;
}

bool TcpStoreServer::Impl::handle(Conn& c, wire::Request& rq) {
  switch (rq.op) {
    case wire::Op::Hello:
      return handle_hello(c, rq);
    case wire::Op::Auth:
      return handle_auth(c, rq);
    case wire::Op::Goodbye: {
      if (!rq.reason.empty()) {  // leaving after an error: a failure, with its cause
        rank_failed(c, "it left the job after an error: " + rq.reason);
        c.said_goodbye = true;
        respond(c, wire::Status::Ok, nullptr, 0);
        return true;
      }
      c.said_goodbye = true;
      auto it = ranks.find(c.rank);
      if (it != ranks.end() && it->second.state == RankSlot::State::Live) it->second.state = RankSlot::State::Left;
      {
        std::lock_guard<std::mutex> lk(m);
        live_ranks.erase(c.rank);
      }
      cv.notify_all();
      respond(c, wire::Status::Ok, nullptr, 0);
      return true;
    }
    case wire::Op::Set: {
      auto it = data.find(rq.key);
      const bool created = it == data.end();
      if (!account(created ? 0 : it->second.size(), rq.value.size(), created, c, rq.key)) return true;
      if (created) {
        it = data.emplace(std::move(rq.key), std::move(rq.value)).first;
      } else {
        it->second = std::move(rq.value);
      }
      respond(c, wire::Status::Ok, nullptr, 0);
      if (created) key_created(it->first);
      return true;
    }
    case wire::Op::Get: {
      auto it = data.find(rq.key);
      if (it != data.end()) {
        respond(c, wire::Status::Ok, it->second.data(), it->second.size());
      } else if (!failed.empty()) {
        respond_peer_failed(c);  // the key may never come: say why instead of parking
      } else {
        c.get_key = rq.key;
        park(c, rq.op, {std::move(rq.key)});
      }
      return true;
    }
    case wire::Op::Add: {
      auto it = data.find(rq.key);
      if (it != data.end() && it->second.size() != 8) {
        respond_error(c, "key " + wire::quote_key(rq.key) + " holds " + std::to_string(it->second.size()) +
                             " bytes, not a 64-bit counter");
        return true;
      }
      const bool created = it == data.end();
      if (created && !account(0, 8, true, c, rq.key)) return true;
      uint64_t value = 0;
      if (!created) wire::Reader(it->second.data(), 8).u64(value);
      value += rq.delta;  // unsigned wrap-around = two's complement add, no signed overflow UB
      wire::Writer w;
      w.u64(value);
      auto& slot = data[rq.key];
      slot = w.buf();
      respond(c, wire::Status::Ok, slot.data(), slot.size());
      if (created) key_created(rq.key);
      return true;
    }
    case wire::Op::Check: {
      std::vector<uint8_t> out(rq.keys.size());
      for (size_t i = 0; i < rq.keys.size(); ++i) out[i] = data.count(rq.keys[i]) ? 1 : 0;
      respond(c, wire::Status::Ok, out.data(), out.size());
      return true;
    }
    case wire::Op::Wait: {
      std::set<std::string> missing;
      for (auto& k : rq.keys) {
        if (!data.count(k)) missing.insert(std::move(k));
      }
      if (missing.empty()) {
        respond(c, wire::Status::Ok, nullptr, 0);
      } else if (!failed.empty()) {
        respond_peer_failed(c);
      } else {
        park(c, rq.op, std::vector<std::string>(missing.begin(), missing.end()));
      }
      return true;
    }
  }
  return false;
}

void TcpStoreServer::Impl::respond(Conn& c, wire::Status st, const void* body, size_t len) {
  wire::Writer w = wire::start_frame(static_cast<uint16_t>(st));
  w.buf().reserve(wire::kHeaderSize + len);
  if (len > 0) w.bytes(body, len);
  wire::finish_frame(w);
  if (c.out_off == c.out.size()) {
    c.out = std::move(w.buf());
    c.out_off = 0;
  } else {
    c.out.insert(c.out.end(), w.buf().begin(), w.buf().end());
  }
}

void TcpStoreServer::Impl::respond_peer_failed(Conn& c) {
  wire::Writer w;
  w.u32(static_cast<uint32_t>(failed.size()));
  for (const auto& [r, how] : failed) {
    w.u32(static_cast<uint32_t>(r));
    w.str(how);
  }
  respond(c, wire::Status::PeerFailed, w.buf().data(), w.buf().size());
}

void TcpStoreServer::Impl::park(Conn& c, wire::Op op, std::vector<std::string> missing_keys) {
  c.parked = true;
  c.parked_op = op;
  c.missing = missing_keys.size();
  for (const auto& k : missing_keys) waiters[k].push_back(c.id);
  c.waiting = std::move(missing_keys);
}

void TcpStoreServer::Impl::key_created(const std::string& key) {
  auto it = waiters.find(key);
  if (it == waiters.end()) return;
  auto ids = std::move(it->second);
  waiters.erase(it);
  for (uint64_t id : ids) {
    auto ct = conns.find(id);
    if (ct == conns.end() || ct->second->dead || !ct->second->parked) continue;
    Conn& c = *ct->second;
    if (--c.missing == 0) unpark_complete(c);
  }
}

void TcpStoreServer::Impl::unpark_complete(Conn& c) {
  c.parked = false;
  c.waiting.clear();
  if (c.parked_op == wire::Op::Get) {
    const auto& v = data.at(c.get_key);
    respond(c, wire::Status::Ok, v.data(), v.size());
  } else {
    respond(c, wire::Status::Ok, nullptr, 0);
  }
  c.get_key.clear();
  ready.push_back(c.id);  // sends the reply and serves any request queued behind it
}

// Takes `c` off every key it was parked on.
void TcpStoreServer::Impl::forget_waits(Conn& c) {
  for (const auto& k : c.waiting) {
    auto it = waiters.find(k);
    if (it == waiters.end()) continue;
    auto& v = it->second;
    v.erase(std::remove(v.begin(), v.end(), c.id), v.end());
    if (v.empty()) waiters.erase(it);
  }
  c.waiting.clear();
}

void TcpStoreServer::Impl::unpark_failed(Conn& c) {
  forget_waits(c);
  c.parked = false;
  c.get_key.clear();
  respond_peer_failed(c);
  ready.push_back(c.id);
}

// A lease closed without a goodbye: the rank is gone. Tell every other lease and end every
// parked request now; only queue the frames here (the poll loop sends them), so a failing send
// to one lease cannot recurse into another failure while this one is being reported.
void TcpStoreServer::Impl::rank_failed(Conn& c, const std::string& how) {
  auto it = ranks.find(c.rank);
  if (it == ranks.end() || it->second.state != RankSlot::State::Live) return;
  it->second.state = RankSlot::State::Failed;
  failed.emplace_back(c.rank, how);
  RWIN_LOG(Warn, Bootstrap, "rwin store: rank %d failed: %s (lease from %s)", c.rank, how.c_str(), c.peer.c_str());
  wire::Writer w;
  w.u32(static_cast<uint32_t>(c.rank));
  w.str(how);
  // Leases first (they are flushed first from `ready`): a rank whose parked request fails
  // finds the event, with its details, already on its lease.
  for (auto& [id, o] : conns) {
    if (o->dead || o.get() == &c) continue;
    if (o->state == wire::ConnState::Lease && !o->said_goodbye) {
      respond(*o, wire::Status::Event, w.buf().data(), w.buf().size());
      ready.push_back(o->id);
    }
  }
  for (auto& [id, o] : conns) {
    if (!o->dead && o.get() != &c && o->parked) unpark_failed(*o);
  }
  {
    std::lock_guard<std::mutex> lk(m);
    live_ranks.erase(c.rank);
  }
  cv.notify_all();
}

void TcpStoreServer::Impl::on_writable(Conn& c) {
  while (c.out_off < c.out.size()) {
    const ssize_t n = ::send(c.fd.get(), c.out.data() + c.out_off, c.out.size() - c.out_off, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      if (errno == EINTR) continue;
      if (c.authenticated()) {
        drop(c, "send failed: " + err_text(errno));
      } else {
        drop_quietly(c);
      }
      return;
    }
    c.out_off += static_cast<size_t>(n);
  }
  c.out.clear();
  c.out.shrink_to_fit();  // a 256 MiB reply should not pin its buffer for the life of the conn
  c.out_off = 0;
  if (c.close_after_write) {
    drop_quietly(c);
    return;
  }
  if (!c.parked && !c.in.empty()) ready.push_back(c.id);
}

void TcpStoreServer::Impl::drop(Conn& c, const std::string& why) {
  if (c.dead) return;
  // An orderly close of a healthy connection is not news; everything else is one log line.
  if (!why.empty()) RWIN_LOG(Warn, Bootstrap, "rwin store: closing connection from %s: %s", c.peer.c_str(), why.c_str());
  if (c.state == wire::ConnState::Lease && !c.said_goodbye) {
    rank_failed(c, why.empty() ? "its bootstrap connection closed" : "its bootstrap connection failed: " + why);
  }
  drop_quietly(c);
}

void TcpStoreServer::Impl::close_for(Conn& c, const std::string& why) {
  if (c.authenticated()) {
    drop(c, why);
  } else {
    log_stranger("closing connection from " + c.peer + ": " + why);
    drop_quietly(c);
  }
}

void TcpStoreServer::Impl::drop_quietly(Conn& c) {
  if (c.dead) return;
  if (c.state == wire::ConnState::Lease && !c.said_goodbye) {
    rank_failed(c, "its bootstrap connection closed");
  }
  c.dead = true;
  if (c.authenticated()) {
    --n_auth;
  } else {
    --n_unauth;
  }
  forget_waits(c);
  c.in.clear();
  c.in.shrink_to_fit();
  c.out.clear();
  c.out.shrink_to_fit();
  c.fd.reset();
}

void TcpStoreServer::Impl::reap() {
  for (auto it = conns.begin(); it != conns.end();) {
    if (it->second->dead) {
      it = conns.erase(it);
    } else {
      ++it;
    }
  }
  // Stale ids (authenticated or dropped connections) must not accumulate.
  while (!unauth_order.empty()) {
    auto it = conns.find(unauth_order.front());
    if (it != conns.end() && !it->second->authenticated()) break;
    unauth_order.pop_front();
  }
}


}  // namespace rwin::bootstrap
