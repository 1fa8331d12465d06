// The bootstrap store's clients: the blocking TcpStore (data connection) and the StoreLease
// (liveness), both authenticated. Wire format: wire.h.
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

namespace rwin::bootstrap {

using namespace std::chrono_literals;
using wire::Clock;
using detail::Fd;
using detail::set_nodelay;
using detail::sockaddr_text;
using detail::err_text;

// ---------------------------------------------------------------------------------------------
// Client

namespace {

// Moves exactly `n` bytes (send: out of `p`, else into it) before `deadline`.
enum class Io { Ok, Timeout, Closed, Failed };

Io transfer_exact(int fd, uint8_t* p, size_t n, Clock::time_point deadline, int& err, bool send) {
  size_t done = 0;
  while (done < n) {
    pollfd pf{fd, static_cast<short>(send ? POLLOUT : POLLIN), 0};
    const int rc = ::poll(&pf, 1, wire::ms_left(deadline));
    if (rc < 0) {
      if (errno == EINTR) continue;
      err = errno;
      return Io::Failed;
    }
    if (rc == 0) return Io::Timeout;
    const ssize_t k = send ? ::send(fd, p + done, n - done, MSG_NOSIGNAL) : ::recv(fd, p + done, n - done, 0);
    if (k < 0) {
      if (errno == EAGAIN || errno == EINTR) continue;
      err = errno;
      return err == EPIPE || err == ECONNRESET ? Io::Closed : Io::Failed;
    }
    if (k == 0 && !send) return Io::Closed;
    done += static_cast<size_t>(k);
  }
  return Io::Ok;
}

Io send_all(int fd, const uint8_t* p, size_t n, Clock::time_point deadline, int& err) {
  return transfer_exact(fd, const_cast<uint8_t*>(p), n, deadline, err, true);  // only read when sending
}

Io recv_exact(int fd, uint8_t* p, size_t n, Clock::time_point deadline, int& err) {
  return transfer_exact(fd, p, n, deadline, err, false);
}

struct Frame {
  uint16_t status = 0;
  std::vector<uint8_t> body;
};

// Reads one response frame. Returns Io::Ok with `f` filled, or the failure; `why` is set for a
// frame that is not an rwin store's (Io::Failed with err 0).
Io recv_frame(int fd, Clock::time_point deadline, uint32_t max_body, Frame& f, int& err, std::string& why) {
  uint8_t h[wire::kHeaderSize];
  Io r = recv_exact(fd, h, sizeof h, deadline, err);
  if (r != Io::Ok) return r;
  const uint32_t magic = wire::load_u32(h);
  const uint16_t version = wire::load_u16(h + 4);
  const uint32_t len = wire::load_u32(h + 8);
  if (magic != wire::kMagic || version != wire::kVersion) {
    err = 0;
    why = "reply has bad magic/version (not an rwin store of this version?)";
    return Io::Failed;
  }
  if (len > max_body) {
    err = 0;
    why = "reply length " + std::to_string(len) + " exceeds the limit of " + std::to_string(max_body);
    return Io::Failed;
  }
  f.status = wire::load_u16(h + 6);
  f.body.resize(len);
  return len ? recv_exact(fd, f.body.data(), len, deadline, err) : Io::Ok;
}

std::string failures_text(const std::vector<std::pair<int, std::string>>& fs) {
  std::string s;
  for (size_t i = 0; i < fs.size() && i < 8; ++i) {
    s += (i ? "; " : "") + std::string("rank ") + std::to_string(fs[i].first) + " failed (" + fs[i].second + ")";
  }
  if (fs.size() > 8) s += " and " + std::to_string(fs.size() - 8) + " more";
  return s;
}

// Parses a PeerFailed body; false if malformed.
bool parse_failures(const std::vector<uint8_t>& body, std::vector<std::pair<int, std::string>>& out) {
  wire::Reader r(body.data(), body.size());
  uint32_t count = 0;
  if (!r.u32(count) || count > body.size() / 8) return false;
  for (uint32_t i = 0; i < count; ++i) {
    uint32_t rank = 0;
    std::string how;
    if (!r.u32(rank) || !r.str(how, 4096)) return false;
    out.emplace_back(static_cast<int>(rank), how);
  }
  return r.done();
}

const char* role_name(wire::Role role) { return role == wire::Role::Lease ? "lease" : "store connection"; }

struct HandshakeRetry {};  // connection closed during the handshake: worth another try

// One authenticated connection: TCP connect with retries (the server may start later), then the
// mutual challenge-response. A refusal (wrong key, duplicate rank, a server that cannot prove the
// key) throws Config at once; a connection the server closed mid-handshake (e.g. it was busy
// shedding strangers) is retried until `deadline`.
Fd open_authenticated(const HostPort& server, const std::string& label, Clock::time_point deadline,
                      const StoreClientConfig& cfg, wire::Role role) {
  const auto started = Clock::now();
  auto backoff = 10ms;
  int last_errno = ECONNREFUSED;
  std::string last_what = "connect";
  auto budget_text = [&] {
    return std::to_string(std::chrono::duration_cast<Millis>(deadline - started).count()) + " ms";
  };
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
    Fd connected;
    for (addrinfo* ai = res; ai != nullptr && !connected; ai = ai->ai_next) {
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
        connected = std::move(s);
      } else {
        last_errno = errno, last_what = "connect";
      }
    }
    if (res) freeaddrinfo(res);
    if (connected) {
      // Handshake (wire.h). Only the hello goes out before the server proved it knows the key.
      const std::string what = std::string(role_name(role)) + " handshake with " + label;
      wire::Hello hello;
      auth::random_bytes(hello.nonce, sizeof hello.nonce);
      hello.rank = cfg.rank < 0 ? wire::kNoRank : static_cast<uint32_t>(cfg.rank);
      hello.nranks = static_cast<uint32_t>(std::max(0, cfg.nranks));
      hello.role = static_cast<uint16_t>(role);
      hello.flags = cfg.job_key.empty() ? 0 : wire::kFlagHasKey;
      auto w = wire::start_frame(static_cast<uint16_t>(wire::Op::Hello));
      w.bytes(hello.nonce, sizeof hello.nonce);
      w.u32(hello.rank);
      w.u32(hello.nranks);
      w.u16(hello.role);
      w.u16(hello.flags);
      wire::finish_frame(w);
      int err = 0;
      std::string why;
      Frame f;
      auto io_fail = [&](Io r, const char* step) {
        if (r == Io::Timeout) {
          throw BootstrapError(BootstrapError::Kind::Timeout,
                               what + " timed out (" + step + ") within " + budget_text() + " (server not answering)");
        }
        if (r == Io::Closed) {
          last_what = what + ": server closed the connection (" + step + ")";
          last_errno = 0;
          throw HandshakeRetry{};
        }
        throw BootstrapError(why.empty() ? BootstrapError::Kind::Connection : BootstrapError::Kind::Protocol,
                             what + " (" + step + "): " + (why.empty() ? err_text(err) : why));
      };
      try {
        Io r = send_all(connected.get(), w.buf().data(), w.buf().size(), deadline, err);
        if (r != Io::Ok) io_fail(r, "sending hello");
        r = recv_frame(connected.get(), deadline, 4096, f, err, why);
        if (r != Io::Ok) io_fail(r, "reading the challenge");
        if (f.status == static_cast<uint16_t>(wire::Status::Error)) {
          throw BootstrapError(BootstrapError::Kind::Config,
                               what + " refused: " + std::string(f.body.begin(), f.body.end()));
        }
        if (f.status != static_cast<uint16_t>(wire::Status::Ok) || f.body.size() != wire::kHelloReplyBody) {
          throw BootstrapError(BootstrapError::Kind::Protocol, what + ": malformed challenge (not an rwin store?)");
        }
        const uint8_t* server_nonce = f.body.data();
        const auto t = wire::transcript(hello.nonce, server_nonce, hello);
        const auto expect = auth::hmac(cfg.job_key, "rwin-store-server", t);
        if (!auth::equal(expect.data(), f.body.data() + wire::kNonce, wire::kMac)) {
          throw BootstrapError(BootstrapError::Kind::Config,
                               what + ": the server did not prove it knows the job key (RWIN_JOB_KEY differs from "
                                      "rank 0's, or this is not the job's store); nothing else was sent to it");
        }
        const auto mac = auth::hmac(cfg.job_key, "rwin-store-client", t);
        auto a = wire::start_frame(static_cast<uint16_t>(wire::Op::Auth));
        a.bytes(mac.data(), mac.size());
        wire::finish_frame(a);
        r = send_all(connected.get(), a.buf().data(), a.buf().size(), deadline, err);
        if (r != Io::Ok) io_fail(r, "sending the proof");
        r = recv_frame(connected.get(), deadline, 4096, f, err, why);
        if (r != Io::Ok) io_fail(r, "reading the verdict");
        if (f.status == static_cast<uint16_t>(wire::Status::Error)) {
          throw BootstrapError(BootstrapError::Kind::Config,
                               what + " refused: " + std::string(f.body.begin(), f.body.end()));
        }
        if (f.status != static_cast<uint16_t>(wire::Status::Ok) || !f.body.empty()) {
          throw BootstrapError(BootstrapError::Kind::Protocol, what + ": malformed verdict");
        }
        return connected;
      } catch (const HandshakeRetry&) {
        // fall through to the retry below
      }
    }
    if (Clock::now() >= deadline) break;
    // The server may not be listening yet (rank 0 starts it while others already dial): retry.
    std::this_thread::sleep_for(std::min<Millis>(backoff, Millis(wire::ms_left(deadline))));
    backoff = std::min<Millis>(backoff * 2, 500ms);
  }
  throw BootstrapError(BootstrapError::Kind::Connection,
                       "cannot connect to store at " + label + " within " + budget_text() + ": " + last_what +
                           (last_errno ? ": " + err_text(last_errno) : std::string()));
}

}  // namespace

struct TcpStore::Impl {
  HostPort server;
  std::string label;
  Millis connect_timeout;
  StoreClientConfig cfg;
  Fd fd;
  // Sticky: once the connection failed (not merely timed out) every later call reports it.
  std::string broken;

  void connect(Clock::time_point deadline) {
    fd = open_authenticated(server, label, deadline, cfg, wire::Role::Data);
  }
  void ensure_connected(Clock::time_point deadline);
  [[noreturn]] void fail(BootstrapError::Kind kind, const std::string& msg) {
    fd.reset();
    if (kind != BootstrapError::Kind::Timeout) broken = msg;
    throw BootstrapError(kind, msg);
  }
  // Sends one request and returns the response body. `what` describes the call for messages.
  std::vector<uint8_t> call(wire::Writer& frame, Clock::time_point deadline, const std::string& what,
                            const std::string& timeout_msg);
  Millis io_timeout() const { return cfg.op_timeout.count() > 0 ? cfg.op_timeout : connect_timeout; }
};

void TcpStore::Impl::ensure_connected(Clock::time_point deadline) {
  if (!broken.empty()) {
    throw BootstrapError(BootstrapError::Kind::Connection,
                         "store connection to " + label + " is unusable after an earlier failure: " + broken);
  }
  // After a timed-out get/wait the old connection was closed (the server may still answer it
  // later, which would desynchronise the stream); open a fresh one within what is left.
  if (!fd) connect(deadline);
}

std::vector<uint8_t> TcpStore::Impl::call(wire::Writer& frame, Clock::time_point deadline, const std::string& what,
                                          const std::string& timeout_msg) {
  try {
    ensure_connected(deadline);
  } catch (const BootstrapError& e) {
    if (e.kind() == BootstrapError::Kind::Timeout) throw BootstrapError(e.kind(), timeout_msg + " (reconnecting: " + e.what() + ")");
    throw;
  }
  wire::finish_frame(frame);
  int err = 0;
  Io r = send_all(fd.get(), frame.buf().data(), frame.buf().size(), deadline, err);
  Frame f;
  std::string why;
  if (r == Io::Ok) r = recv_frame(fd.get(), deadline, wire::kMaxReplyBody, f, err, why);
  if (r == Io::Timeout) fail(BootstrapError::Kind::Timeout, timeout_msg);
  if (r == Io::Closed) {
    fail(BootstrapError::Kind::Connection,
         what + " at " + label + ": server closed the connection (store server gone or rejected the request)");
  }
  if (r == Io::Failed) {
    if (!why.empty()) fail(BootstrapError::Kind::Protocol, what + " at " + label + ": " + why);
    fail(BootstrapError::Kind::Connection, what + " at " + label + ": " + err_text(err));
  }
  const auto status = static_cast<wire::Status>(f.status);
  if (status == wire::Status::Error) {
    // The request was well-formed but refused (e.g. add on a non-counter); the stream is fine.
    throw BootstrapError(BootstrapError::Kind::Protocol,
                         what + " at " + label + " refused by server: " + std::string(f.body.begin(), f.body.end()));
  }
  if (status == wire::Status::PeerFailed) {
    std::vector<std::pair<int, std::string>> fs;
    if (!parse_failures(f.body, fs)) fail(BootstrapError::Kind::Protocol, what + " at " + label + ": malformed failure reply");
    throw BootstrapError(BootstrapError::Kind::PeerFailed, what + " at " + label + " cannot finish: " + failures_text(fs));
  }
  if (status != wire::Status::Ok) fail(BootstrapError::Kind::Protocol, what + " at " + label + ": unknown reply status");
  return std::move(f.body);
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

TcpStore::TcpStore(const HostPort& server, Millis connect_timeout, const StoreClientConfig& cfg)
    : impl_(std::make_unique<Impl>()) {
  impl_->server = server;
  impl_->label = server.str();
  impl_->connect_timeout = non_negative(connect_timeout);
  impl_->cfg = cfg;
  impl_->cfg.op_timeout = non_negative(cfg.op_timeout);
  impl_->connect(Clock::now() + impl_->connect_timeout);
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

// ---------------------------------------------------------------------------------------------
// Lease

struct StoreLease::Impl {
  std::string label;
  Fd fd;
  std::vector<uint8_t> in;
  std::vector<PeerFailure> pending;  // learned while waiting for the goodbye ack
  bool reported_store_gone = false;
  bool acked = false;

  // Parses complete frames in `in`; events go to `out`.
  void parse(std::vector<PeerFailure>& out) {
    size_t off = 0;
    while (in.size() - off >= wire::kHeaderSize) {
      const uint8_t* h = in.data() + off;
      const uint32_t len = wire::load_u32(h + 8);
      if (wire::load_u32(h) != wire::kMagic || wire::load_u16(h + 4) != wire::kVersion || len > 64 * 1024) {
        store_gone(out, "the store at " + label + " sent a malformed lease frame");
        return;
      }
      if (in.size() - off - wire::kHeaderSize < len) break;
      const auto status = static_cast<wire::Status>(wire::load_u16(h + 6));
      wire::Reader r(h + wire::kHeaderSize, len);
      if (status == wire::Status::Event) {
        uint32_t rank = 0;
        std::string how;
        if (!r.u32(rank) || !r.str(how, 4096) || !r.done()) {
          store_gone(out, "the store at " + label + " sent a malformed failure event");
          return;
        }
        out.push_back(PeerFailure{static_cast<int>(rank), how, Clock::now()});
      } else if (status == wire::Status::Ok) {
        acked = true;
      }
      off += wire::kHeaderSize + len;
    }
    in.erase(in.begin(), in.begin() + static_cast<ptrdiff_t>(off));
  }
  void store_gone(std::vector<PeerFailure>& out, const std::string& how) {
    fd.reset();
    in.clear();
    if (reported_store_gone) return;
    reported_store_gone = true;
    out.push_back(PeerFailure{0, how, Clock::now()});
  }
  // One non-blocking read.
  void read_once(std::vector<PeerFailure>& out) {
    if (!fd) return;
    uint8_t buf[4096];
    const ssize_t n = ::recv(fd.get(), buf, sizeof buf, MSG_DONTWAIT);
    if (n > 0) {
      in.insert(in.end(), buf, buf + n);
      parse(out);
    } else if (n == 0) {
      store_gone(out, "the store at " + label + " (served by rank 0) closed the connection");
    } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
      store_gone(out, "the connection to the store at " + label + " (served by rank 0) failed: " + err_text(errno));
    }
  }
};

StoreLease::StoreLease(const HostPort& server, Millis connect_timeout, const StoreClientConfig& cfg)
    : impl_(std::make_unique<Impl>()) {
  impl_->label = server.str();
  impl_->fd = open_authenticated(server, impl_->label, Clock::now() + non_negative(connect_timeout), cfg,
                                 wire::Role::Lease);
}

StoreLease::~StoreLease() = default;

std::vector<PeerFailure> StoreLease::poll() {
  std::vector<PeerFailure> out = std::move(impl_->pending);
  impl_->pending.clear();
  impl_->read_once(out);
  return out;
}

void StoreLease::goodbye(Millis bound, const std::string& reason) noexcept {
  try {
    if (!impl_->fd) return;
    const auto deadline = Clock::now() + non_negative(bound);
    auto w = wire::start_frame(static_cast<uint16_t>(wire::Op::Goodbye));
    const size_t n = std::min<size_t>(reason.size(), wire::kMaxGoodbyeReason);
    w.bytes(reason.data(), n);
    wire::finish_frame(w);
    int err = 0;
    if (send_all(impl_->fd.get(), w.buf().data(), w.buf().size(), deadline, err) != Io::Ok) return;
    // Wait for the ack so the store has recorded the goodbye before this socket closes (events
    // that arrive meanwhile are kept for poll()).
    while (!impl_->acked && impl_->fd) {
      pollfd p{impl_->fd.get(), POLLIN, 0};
      const int rc = ::poll(&p, 1, wire::ms_left(deadline));
      if (rc == 0) return;
      if (rc < 0 && errno != EINTR) return;
      impl_->read_once(impl_->pending);
    }
  } catch (...) {
    // Out of memory while leaving: the store will see a close without a goodbye.
  }
}


}  // namespace rwin::bootstrap
