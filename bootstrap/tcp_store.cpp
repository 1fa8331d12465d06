// TCP key-value store: HostPort parsing, the one-thread poll() server and the blocking client.
// Wire format: see wire.h.
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
#include <cstdio>
#include <cstring>
#include <map>
#include <set>
#include <unordered_map>

#include "bootstrap/bootstrap.h"
#include "bootstrap/parse_number.h"
#include "bootstrap/wire.h"

namespace rwin::bootstrap {

using namespace std::chrono_literals;
using wire::Clock;

namespace {

std::string err_text(int e) { return std::strerror(e); }

// One owner per socket descriptor.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(o.release()) {}
  Fd& operator=(Fd&& o) noexcept {
    if (this != &o) reset(o.release());
    return *this;
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { reset(); }
  int get() const { return fd_; }
  int release() {
    int f = fd_;
    fd_ = -1;
    return f;
  }
  void reset(int f = -1) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = f;
  }
  explicit operator bool() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

std::string sockaddr_text(const sockaddr* sa) {
  char host[INET6_ADDRSTRLEN] = "?";
  uint16_t port = 0;
  if (sa->sa_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(sa);
    inet_ntop(AF_INET, &in->sin_addr, host, sizeof host);
    port = ntohs(in->sin_port);
    return std::string(host) + ":" + std::to_string(port);
  }
  if (sa->sa_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(sa);
    inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof host);
    port = ntohs(in6->sin6_port);
    return "[" + std::string(host) + "]:" + std::to_string(port);
  }
  return "?";
}

void set_nodelay(int fd) {
  // Store requests are small and latency-bound request/response pairs: Nagle would add ~40 ms
  // per round trip against delayed ACKs.
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// HostPort

HostPort HostPort::parse(const std::string& text) {
  auto bad = [&](const std::string& why) {
    return BootstrapError(BootstrapError::Kind::Config,
                          "bad address '" + text + "': " + why + " (expected host:port or [ipv6]:port)");
  };
  HostPort hp;
  std::string port_text;
  if (!text.empty() && text[0] == '[') {
    const auto close = text.find(']');
    if (close == std::string::npos) throw bad("missing ']'");
    hp.host = text.substr(1, close - 1);
    if (close + 1 >= text.size() || text[close + 1] != ':') throw bad("missing ':port' after ']'");
    port_text = text.substr(close + 2);
  } else {
    const auto colon = text.rfind(':');
    if (colon == std::string::npos) throw bad("missing ':port'");
    hp.host = text.substr(0, colon);
    if (hp.host.find(':') != std::string::npos) throw bad("ipv6 hosts need brackets");
    port_text = text.substr(colon + 1);
  }
  if (hp.host.empty()) throw bad("empty host");
  if (port_text.empty()) throw bad("empty port");
  // Port 0 (any free port) parses; only a job of one can use it, which Bootstrap checks.
  int value = 0;
  const std::string why = parse_int_in(port_text, 0, 65535, value);
  if (!why.empty()) throw bad("port '" + port_text + "' is not a port number: " + why);
  hp.port = static_cast<uint16_t>(value);
  return hp;
}

std::string HostPort::str() const {
  if (host.find(':') != std::string::npos) return "[" + host + "]:" + std::to_string(port);
  return host + ":" + std::to_string(port);
}

// ---------------------------------------------------------------------------------------------
// Server

namespace {

constexpr size_t kMaxConnections = 4096;
constexpr size_t kReadChunk = 64 << 10;
// A connection whose request has started but stalls this long is a truncated frame or a
// slowloris; a connection that has sent nothing at all is indistinguishable from an idle client
// between operations and is kept.
constexpr auto kStalledFrame = 60s;
// A parked (blocked get/wait) client may not pipeline more than this behind its request.
constexpr size_t kMaxBufferedWhileParked = 1 << 20;

struct Conn {
  uint64_t id = 0;
  Fd fd;
  std::string peer;
  std::vector<uint8_t> in;
  std::vector<uint8_t> out;
  size_t out_off = 0;
  Clock::time_point last_input;
  bool dead = false;
  // Parked request (blocking get or wait): keys still missing.
  bool parked = false;
  wire::Op parked_op = wire::Op::Get;
  std::string get_key;
  std::vector<std::string> waiting;  // unique keys this connection is registered under
  size_t missing = 0;
};

}  // namespace

struct TcpStoreServer::Impl {
  Fd listen_fd;
  Fd wake_fd;
  uint16_t port = 0;
  std::thread thread;

  // Touched only by the server thread.
  std::unordered_map<std::string, std::vector<uint8_t>> data;
  std::unordered_map<std::string, std::vector<uint64_t>> waiters;  // key -> parked conn ids
  std::map<uint64_t, std::unique_ptr<Conn>> conns;
  std::vector<uint64_t> ready;  // conns unparked this round whose buffered input must be processed
  uint64_t next_id = 1;
  Clock::time_point accept_paused_until{};

  void run();
  void accept_all();
  void on_readable(Conn& c);
  void on_writable(Conn& c);
  void process(Conn& c);
  bool handle(Conn& c, wire::Request req);
  void respond(Conn& c, wire::Status st, const void* body, size_t len);
  void respond_error(Conn& c, const std::string& msg) { respond(c, wire::Status::Error, msg.data(), msg.size()); }
  void park(Conn& c, wire::Op op, std::vector<std::string> missing_keys);
  void key_created(const std::string& key);
  void unpark_complete(Conn& c);
  void drop(Conn& c, const std::string& why);
  void reap();
};

TcpStoreServer::TcpStoreServer(const std::string& bind_host, uint16_t port) : impl_(std::make_unique<Impl>()) {
  const std::string label = (bind_host.empty() ? std::string("0.0.0.0") : bind_host) + ":" + std::to_string(port);
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  hints.ai_family = AF_UNSPEC;
  const bool any = bind_host.empty() || bind_host == "0.0.0.0";
  if (any) hints.ai_family = AF_INET;
  addrinfo* res = nullptr;
  const std::string port_text = std::to_string(port);
  const int gai = getaddrinfo(any ? nullptr : bind_host.c_str(), port_text.c_str(), &hints, &res);
  if (gai != 0) {
    throw BootstrapError(BootstrapError::Kind::Config,
                         "store server: cannot resolve bind address " + label + ": " + gai_strerror(gai));
  }
  int last_errno = 0;
  const char* last_call = "socket";
  for (addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) {
    Fd fd(::socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol));
    if (!fd) {
      last_errno = errno, last_call = "socket";
      continue;
    }
    // A restarted job must be able to reuse the root port while old connections sit in TIME_WAIT.
    int one = 1;
    setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (ai->ai_family == AF_INET6) {
      int zero = 0;  // "::" should also accept IPv4 clients
      setsockopt(fd.get(), IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
    }
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
    throw BootstrapError(BootstrapError::Kind::Connection,
                         "store server: " + std::string(last_call) + " " + label + " failed: " + err_text(last_errno));
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
    std::fprintf(stderr, "rwin store: cannot wake the server thread: %s\n", std::strerror(errno));
  }
  impl_->thread.join();
}

uint16_t TcpStoreServer::port() const noexcept { return impl_->port; }

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
    // Wake once a second to expire stalled frames; otherwise poll() only returns on activity.
    const int rc = ::poll(fds.data(), fds.size(), 1000);
    if (rc < 0 && errno != EINTR) {
      std::fprintf(stderr, "rwin store: poll failed: %s; server stops\n", std::strerror(errno));
      return;
    }
    if (fds[0].revents != 0) return;
    if (fds[1].revents & POLLIN) accept_all();
    for (size_t i = 0; i < order.size(); ++i) {
      Conn& c = *order[i];
      const short re = fds[i + 2].revents;
      if (c.dead || re == 0) continue;
      if (re & (POLLERR | POLLNVAL)) {
        drop(c, "socket error");
        continue;
      }
      if (re & POLLOUT) on_writable(c);
      if (!c.dead && (re & (POLLIN | POLLRDHUP | POLLHUP))) on_readable(c);
    }
    while (!ready.empty()) {
      auto ids = std::move(ready);
      ready.clear();
      for (uint64_t id : ids) {
        auto it = conns.find(id);
        if (it != conns.end() && !it->second->dead) process(*it->second);
      }
    }
    const auto now = Clock::now();
    for (auto& [id, c] : conns) {
      if (!c->dead && !c->parked && !c->in.empty() && now - c->last_input > kStalledFrame) {
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
      std::fprintf(stderr, "rwin store: accept failed: %s; pausing accepts for 100 ms\n", std::strerror(errno));
      accept_paused_until = Clock::now() + 100ms;
      return;
    }
    auto c = std::make_unique<Conn>();
    c->fd.reset(fd);
    c->peer = sockaddr_text(reinterpret_cast<sockaddr*>(&ss));
    if (conns.size() >= kMaxConnections) {
      std::fprintf(stderr, "rwin store: refusing connection from %s: %zu connections open\n", c->peer.c_str(),
                   conns.size());
      continue;
    }
    set_nodelay(fd);
    c->id = next_id++;
    c->last_input = Clock::now();
    conns.emplace(c->id, std::move(c));
  }
}

void TcpStoreServer::Impl::on_readable(Conn& c) {
  // Bounded per round so one fast sender cannot starve the others.
  for (size_t total = 0; total < (4u << 20);) {
    const size_t old = c.in.size();
    c.in.resize(old + kReadChunk);
    const ssize_t n = ::recv(c.fd.get(), c.in.data() + old, kReadChunk, 0);
    if (n <= 0) {
      c.in.resize(old);
      if (n == 0) {
        // Orderly close. A client that closes mid-frame sent a truncated request: say so.
        if (!c.in.empty() && !c.parked) {
          drop(c, "connection closed inside a request (" + std::to_string(c.in.size()) + " bytes buffered)");
        } else {
          drop(c, "");
        }
        return;
      }
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) break;
      drop(c, "recv failed: " + err_text(errno));
      return;
    }
    c.in.resize(old + static_cast<size_t>(n));
    c.last_input = Clock::now();
    total += static_cast<size_t>(n);
  }
  if (c.parked) {
    if (c.in.size() > kMaxBufferedWhileParked) drop(c, "sent more than 1 MiB while its request was blocked");
    return;
  }
  process(c);
}

void TcpStoreServer::Impl::process(Conn& c) {
  size_t off = 0;
  // Stops while a reply is still queued: a client pipelining requests without reading replies
  // must not make the server buffer unbounded output; on_writable resumes once the reply is out.
  while (!c.dead && !c.parked && c.out_off == c.out.size() && c.in.size() - off >= wire::kHeaderSize) {
    const uint8_t* h = c.in.data() + off;
    const wire::Header hdr = wire::load_header(h);
    const uint16_t op = hdr.op;
    const uint32_t len = hdr.body_len;
    char why[160];
    switch (wire::check_request_header(hdr)) {
      case wire::HeaderCheck::Ok:
        break;
      case wire::HeaderCheck::BadMagic:
        std::snprintf(why, sizeof why, "bad magic 0x%08x (not an rwin store client?)", hdr.magic);
        drop(c, why);
        return;
      case wire::HeaderCheck::BadVersion:
        std::snprintf(why, sizeof why, "protocol version %u, server speaks %u", hdr.version, wire::kVersion);
        drop(c, why);
        return;
      case wire::HeaderCheck::UnknownOp:
        std::snprintf(why, sizeof why, "unknown op %u", op);
        drop(c, why);
        return;
      case wire::HeaderCheck::TooLong:
        std::snprintf(why, sizeof why, "%s body of %u bytes exceeds the %u-byte limit",
                      wire::op_name(static_cast<wire::Op>(op)), len, wire::max_body(op));
        drop(c, why);
        return;
    }
    if (c.in.size() - off - wire::kHeaderSize < len) break;  // wait for the rest of the frame
    wire::Request req;
    const bool ok = wire::decode_request_body(static_cast<wire::Op>(op), h + wire::kHeaderSize, len, req) &&
                    handle(c, std::move(req));
    if (!ok) {
      drop(c, std::string("malformed ") + wire::op_name(static_cast<wire::Op>(op)) + " body of " + std::to_string(len) +
                  " bytes");
      return;
    }
    off += wire::kHeaderSize + len;
  }
  if (off > 0) c.in.erase(c.in.begin(), c.in.begin() + static_cast<ptrdiff_t>(off));
  if (!c.dead && c.out_off < c.out.size()) on_writable(c);
}

// `req` is well-formed (wire::decode_request_body); false only for an op it does not serve.
bool TcpStoreServer::Impl::handle(Conn& c, wire::Request req) {
  const wire::Op op = req.op;
  switch (op) {
    case wire::Op::Set: {
      std::string& key = req.keys[0];
      std::vector<uint8_t>& value = req.value;
      auto [it, created] = data.insert_or_assign(std::move(key), std::move(value));
      respond(c, wire::Status::Ok, nullptr, 0);
      if (created) key_created(it->first);
      return true;
    }
    case wire::Op::Get: {
      std::string& key = req.keys[0];
      auto it = data.find(key);
      if (it != data.end()) {
        respond(c, wire::Status::Ok, it->second.data(), it->second.size());
      } else {
        c.get_key = key;
        park(c, op, {std::move(key)});
      }
      return true;
    }
    case wire::Op::Add: {
      const std::string& key = req.keys[0];
      const uint64_t delta = req.delta;
      auto it = data.find(key);
      if (it != data.end() && it->second.size() != 8) {
        respond_error(c, "key " + wire::quote_key(key) + " holds " + std::to_string(it->second.size()) +
                             " bytes, not a 64-bit counter");
        return true;
      }
      uint64_t value = 0;
      if (it != data.end()) wire::Reader(it->second.data(), 8).u64(value);
      value += delta;  // unsigned wrap-around = two's complement add, no signed overflow UB
      wire::Writer w;
      w.u64(value);
      const bool created = it == data.end();
      auto& slot = data[key];
      slot = w.buf();
      respond(c, wire::Status::Ok, slot.data(), slot.size());
      if (created) key_created(key);
      return true;
    }
    case wire::Op::Check:
    case wire::Op::Wait: {
      std::vector<std::string>& keys = req.keys;
      const auto count = static_cast<uint32_t>(keys.size());
      if (op == wire::Op::Check) {
        std::vector<uint8_t> out(count);
        for (uint32_t i = 0; i < count; ++i) out[i] = data.count(keys[i]) ? 1 : 0;
        respond(c, wire::Status::Ok, out.data(), out.size());
        return true;
      }
      std::set<std::string> missing;
      for (auto& k : keys) {
        if (!data.count(k)) missing.insert(std::move(k));
      }
      if (missing.empty()) {
        respond(c, wire::Status::Ok, nullptr, 0);
      } else {
        park(c, op, std::vector<std::string>(missing.begin(), missing.end()));
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

void TcpStoreServer::Impl::on_writable(Conn& c) {
  while (c.out_off < c.out.size()) {
    const ssize_t n = ::send(c.fd.get(), c.out.data() + c.out_off, c.out.size() - c.out_off, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      if (errno == EINTR) continue;
      drop(c, "send failed: " + err_text(errno));
      return;
    }
    c.out_off += static_cast<size_t>(n);
  }
  c.out.clear();
  c.out.shrink_to_fit();  // a 256 MiB reply should not pin its buffer for the life of the conn
  c.out_off = 0;
  if (!c.parked && !c.in.empty()) ready.push_back(c.id);
}

void TcpStoreServer::Impl::drop(Conn& c, const std::string& why) {
  if (c.dead) return;
  c.dead = true;
  // An orderly close of a healthy connection is not news; everything else is one log line.
  if (!why.empty()) std::fprintf(stderr, "rwin store: closing connection from %s: %s\n", c.peer.c_str(), why.c_str());
  for (const auto& k : c.waiting) {
    auto it = waiters.find(k);
    if (it == waiters.end()) continue;
    auto& v = it->second;
    v.erase(std::remove(v.begin(), v.end(), c.id), v.end());
    if (v.empty()) waiters.erase(it);
  }
  c.waiting.clear();
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
}

// ---------------------------------------------------------------------------------------------
// Client

namespace {
// set/add/check never block on other ranks, but the socket still needs a deadline (a wedged or
// unreachable server must not hang the caller forever).
constexpr Millis kMinIoTimeout = 30s;
// A reconnect after a timed-out get/wait: the server was up moments ago, so a long retry only
// delays the report of a server that has gone.
constexpr Millis kReconnectCap = 5s;
}  // namespace

struct TcpStore::Impl {
  HostPort server;
  std::string label;
  Millis connect_timeout;
  Fd fd;
  // Sticky: once the connection failed (not merely timed out) every later call reports it.
  std::string broken;

  void connect(Millis budget);
  void ensure_connected();
  [[noreturn]] void fail(BootstrapError::Kind kind, const std::string& msg) {
    fd.reset();
    if (kind != BootstrapError::Kind::Timeout) broken = msg;
    throw BootstrapError(kind, msg);
  }
  // Sends one request and returns the response body. `what` describes the call for messages.
  std::vector<uint8_t> call(wire::Writer& frame, Clock::time_point deadline, const std::string& what,
                            const std::string& timeout_msg);
  Millis io_timeout() const { return std::max(connect_timeout, kMinIoTimeout); }
};

void TcpStore::Impl::connect(Millis budget) {
  const auto deadline = Clock::now() + budget;
  auto backoff = 10ms;
  int last_errno = ECONNREFUSED;
  std::string last_what = "connect";
  for (;;) {
    addrinfo hints{};
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_family = AF_UNSPEC;
    hints.ai_flags = AI_NUMERICSERV;
    addrinfo* res = nullptr;
    const std::string port_text = std::to_string(server.port);
    const int gai = getaddrinfo(server.host.c_str(), port_text.c_str(), &hints, &res);
    if (gai == EAI_NONAME || gai == EAI_SERVICE || gai == EAI_FAMILY) {
      throw BootstrapError(BootstrapError::Kind::Config,
                           "cannot resolve store address " + label + ": " + gai_strerror(gai));
    }
    if (gai != 0) {
      last_what = std::string("resolve: ") + gai_strerror(gai);
      last_errno = 0;
    }
    for (addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) {
      Fd s(::socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol));
      if (!s) {
        last_errno = errno, last_what = "socket";
        continue;
      }
      int rc = ::connect(s.get(), ai->ai_addr, ai->ai_addrlen);
      if (rc != 0 && errno == EINPROGRESS) {
        pollfd p{s.get(), POLLOUT, 0};
        const int prc = ::poll(&p, 1, std::max(1, wire::ms_left(deadline)));
        if (prc == 1) {
          int err = 0;
          socklen_t el = sizeof err;
          getsockopt(s.get(), SOL_SOCKET, SO_ERROR, &err, &el);
          rc = err == 0 ? 0 : -1;
          errno = err;
        } else {
          const int e = prc == 0 ? ETIMEDOUT : errno;
          rc = -1;
          errno = e;
        }
      }
      if (rc == 0) {
        set_nodelay(s.get());
        fd = std::move(s);
        freeaddrinfo(res);
        return;
      }
      last_errno = errno, last_what = "connect";
    }
    if (res) freeaddrinfo(res);
    if (Clock::now() >= deadline) break;
    // The server may not be listening yet (rank 0 starts it while others already dial): retry.
    std::this_thread::sleep_for(std::min<Millis>(backoff, Millis(wire::ms_left(deadline))));
    backoff = std::min<Millis>(backoff * 2, 500ms);
  }
  throw BootstrapError(BootstrapError::Kind::Connection,
                       "cannot connect to store at " + label + " within " + std::to_string(budget.count()) +
                           " ms: " + last_what + (last_errno ? ": " + err_text(last_errno) : std::string()));
}

void TcpStore::Impl::ensure_connected() {
  if (!broken.empty()) {
    throw BootstrapError(BootstrapError::Kind::Connection,
                         "store connection to " + label + " is unusable after an earlier failure: " + broken);
  }
  // After a timed-out get/wait the old connection was closed (the server may still answer it
  // later, which would desynchronise the stream); open a fresh one.
  if (!fd) connect(std::min(connect_timeout, kReconnectCap));
}

std::vector<uint8_t> TcpStore::Impl::call(wire::Writer& frame, Clock::time_point deadline, const std::string& what,
                                          const std::string& timeout_msg) {
  ensure_connected();
  wire::finish_frame(frame);
  const auto& out = frame.buf();
  size_t sent = 0;
  std::vector<uint8_t> in(wire::kHeaderSize);
  size_t got = 0;
  bool have_header = false;
  for (;;) {
    const bool sending = sent < out.size();
    pollfd p{fd.get(), static_cast<short>(sending ? POLLOUT : POLLIN), 0};
    const int rc = ::poll(&p, 1, wire::ms_left(deadline));
    if (rc < 0) {
      if (errno == EINTR) continue;
      fail(BootstrapError::Kind::Connection, what + " at " + label + ": poll failed: " + err_text(errno));
    }
    if (rc == 0) fail(BootstrapError::Kind::Timeout, timeout_msg);
    if (sending) {
      const ssize_t n = ::send(fd.get(), out.data() + sent, out.size() - sent, MSG_NOSIGNAL);
      if (n < 0) {
        if (errno == EAGAIN || errno == EINTR) continue;
        fail(BootstrapError::Kind::Connection, what + " at " + label + ": send failed: " + err_text(errno));
      }
      sent += static_cast<size_t>(n);
      continue;
    }
    const ssize_t n = ::recv(fd.get(), in.data() + got, in.size() - got, 0);
    if (n < 0) {
      if (errno == EAGAIN || errno == EINTR) continue;
      fail(BootstrapError::Kind::Connection, what + " at " + label + ": recv failed: " + err_text(errno));
    }
    if (n == 0) {
      fail(BootstrapError::Kind::Connection,
           what + " at " + label + ": server closed the connection (store server gone or rejected the request)");
    }
    got += static_cast<size_t>(n);
    if (got < in.size()) continue;
    if (!have_header) {
      const uint32_t magic = wire::load_u32(in.data());
      const uint16_t version = wire::load_u16(in.data() + 4);
      const uint32_t len = wire::load_u32(in.data() + 8);
      if (magic != wire::kMagic || version != wire::kVersion) {
        fail(BootstrapError::Kind::Protocol,
             what + " at " + label + ": reply has bad magic/version (not an rwin store?)");
      }
      if (len > wire::kMaxValue + 64u) {
        fail(BootstrapError::Kind::Protocol,
             what + " at " + label + ": reply length " + std::to_string(len) + " exceeds the limit");
      }
      have_header = true;
      in.resize(wire::kHeaderSize + len);
      if (got < in.size()) continue;
    }
    const auto status = static_cast<wire::Status>(wire::load_u16(in.data() + 6));
    std::vector<uint8_t> body(in.begin() + wire::kHeaderSize, in.end());
    if (status == wire::Status::Error) {
      // The request was well-formed but refused (e.g. add on a non-counter); the stream is fine.
      throw BootstrapError(BootstrapError::Kind::Protocol,
                           what + " at " + label + " refused by server: " + std::string(body.begin(), body.end()));
    }
    if (status != wire::Status::Ok) {
      fail(BootstrapError::Kind::Protocol, what + " at " + label + ": unknown reply status");
    }
    return body;
  }
}

namespace {
void check_key(const std::string& key) {
  if (key.size() > wire::kMaxKey) {
    throw BootstrapError(BootstrapError::Kind::Config, "store key " + wire::quote_key(key) + " is " +
                                                           std::to_string(key.size()) + " bytes, limit is " +
                                                           std::to_string(wire::kMaxKey));
  }
}

std::string key_list(const std::vector<std::string>& keys) {
  std::string s;
  const size_t shown = std::min<size_t>(keys.size(), 8);
  for (size_t i = 0; i < shown; ++i) s += (i ? ", " : "") + wire::quote_key(keys[i]);
  if (keys.size() > shown) s += " and " + std::to_string(keys.size() - shown) + " more";
  return s;
}

Millis non_negative(Millis t) { return t.count() < 0 ? Millis(0) : t; }
}  // namespace

TcpStore::TcpStore(const HostPort& server, Millis connect_timeout) : impl_(std::make_unique<Impl>()) {
  impl_->server = server;
  impl_->label = server.str();
  impl_->connect_timeout = non_negative(connect_timeout);
  impl_->connect(impl_->connect_timeout);
}

TcpStore::~TcpStore() = default;

void TcpStore::set(const std::string& key, std::span<const uint8_t> value) {
  check_key(key);
  if (value.size() > wire::kMaxValue) {
    throw BootstrapError(BootstrapError::Kind::Config, "store set of key " + wire::quote_key(key) + ": value is " +
                                                           std::to_string(value.size()) + " bytes, limit is " +
                                                           std::to_string(wire::kMaxValue));
  }
  auto w = wire::start_frame(static_cast<uint16_t>(wire::Op::Set));
  w.buf().reserve(wire::kHeaderSize + 8 + key.size() + value.size());
  w.str(key);
  w.u32(static_cast<uint32_t>(value.size()));
  w.bytes(value.data(), value.size());
  const auto t = impl_->io_timeout();
  const std::string what = "store set of key " + wire::quote_key(key);
  impl_->call(w, Clock::now() + t, what,
              what + " (" + std::to_string(value.size()) + " bytes) at " + impl_->label + " timed out after " +
                  std::to_string(t.count()) + " ms");
}

Bytes TcpStore::get(const std::string& key, Millis timeout) {
  check_key(key);
  timeout = non_negative(timeout);
  auto w = wire::start_frame(static_cast<uint16_t>(wire::Op::Get));
  w.str(key);
  const std::string what = "store get of key " + wire::quote_key(key);
  return impl_->call(
      w, Clock::now() + timeout, what,
      what + " at " + impl_->label + " timed out after " + std::to_string(timeout.count()) + " ms (key never set)");
}

int64_t TcpStore::add(const std::string& key, int64_t delta) {
  check_key(key);
  auto w = wire::start_frame(static_cast<uint16_t>(wire::Op::Add));
  w.str(key);
  w.u64(static_cast<uint64_t>(delta));
  const auto t = impl_->io_timeout();
  const std::string what = "store add on key " + wire::quote_key(key);
  auto body = impl_->call(w, Clock::now() + t, what,
                          what + " at " + impl_->label + " timed out after " + std::to_string(t.count()) + " ms");
  uint64_t v = 0;
  wire::Reader r(body.data(), body.size());
  if (!r.u64(v) || !r.done()) {
    impl_->fail(BootstrapError::Kind::Protocol,
                what + " at " + impl_->label + ": reply of " + std::to_string(body.size()) + " bytes, expected 8");
  }
  return static_cast<int64_t>(v);
}

namespace {
wire::Writer key_list_frame(wire::Op op, const std::vector<std::string>& keys) {
  if (keys.size() > wire::kMaxKeysPerRequest) {
    throw BootstrapError(BootstrapError::Kind::Config, std::string("store ") + wire::op_name(op) + " of " +
                                                           std::to_string(keys.size()) + " keys exceeds the limit of " +
                                                           std::to_string(wire::kMaxKeysPerRequest));
  }
  auto w = wire::start_frame(static_cast<uint16_t>(op));
  w.u32(static_cast<uint32_t>(keys.size()));
  for (const auto& k : keys) {
    check_key(k);
    w.str(k);
  }
  if (w.buf().size() - wire::kHeaderSize > wire::kMaxKeyListBody) {
    throw BootstrapError(BootstrapError::Kind::Config, std::string("store ") + wire::op_name(op) +
                                                           ": key list exceeds " +
                                                           std::to_string(wire::kMaxKeyListBody) + " bytes");
  }
  return w;
}
}  // namespace

std::vector<bool> TcpStore::check(const std::vector<std::string>& keys) {
  auto w = key_list_frame(wire::Op::Check, keys);
  const auto t = impl_->io_timeout();
  const std::string what = "store check of " + std::to_string(keys.size()) + " keys";
  auto body = impl_->call(w, Clock::now() + t, what,
                          what + " at " + impl_->label + " timed out after " + std::to_string(t.count()) + " ms");
  if (body.size() != keys.size()) {
    impl_->fail(BootstrapError::Kind::Protocol, what + " at " + impl_->label + ": reply of " +
                                                    std::to_string(body.size()) + " bytes for " +
                                                    std::to_string(keys.size()) + " keys");
  }
  std::vector<bool> out(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) out[i] = body[i] != 0;
  return out;
}

void TcpStore::wait(const std::vector<std::string>& keys, Millis timeout) {
  timeout = non_negative(timeout);
  auto w = key_list_frame(wire::Op::Wait, keys);
  const std::string what = "store wait for " + key_list(keys);
  impl_->call(w, Clock::now() + timeout, what,
              "store wait at " + impl_->label + " timed out after " + std::to_string(timeout.count()) +
                  " ms for keys " + key_list(keys));
}

}  // namespace rwin::bootstrap
