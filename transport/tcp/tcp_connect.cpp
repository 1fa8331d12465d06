// The tcp transport's life: construction, regions and keys, the collective connect() (listener,
// endpoint exchange, authenticated dial to every rank) and the bounded teardown.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <system_error>

#include "bootstrap/auth.h"
#include "bootstrap/bootstrap.h"
#include "bootstrap/netif.h"
#include "common/knobs.h"
#include "common/log.h"
#include "common/parse_number.h"
#include "transport/tcp/tcp_transport.h"
#include "transport/tcp/tcp_transport_impl.h"

namespace rwin::transport {

std::unique_ptr<Transport> make_tcp_transport(const TransportConfig& cfg) {
  return std::make_unique<tcp::TcpTransport>(cfg);
}

namespace tcp {

using Clock = std::chrono::steady_clock;

namespace {

std::string addr_text(uint32_t ipv4_net, uint16_t port) {
  char buf[INET_ADDRSTRLEN] = {};
  in_addr a{};
  a.s_addr = ipv4_net;
  ::inet_ntop(AF_INET, &a, buf, sizeof buf);
  return std::string(buf) + ":" + std::to_string(port);
}

int ms_left(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left <= 0 ? 0 : static_cast<int>(std::min<long long>(left, 1000));
}

// Blocking-with-deadline I/O on a non-blocking socket (connect() only; the data path never blocks).
void io_all(int fd, void* buf, size_t n, bool sending, Clock::time_point deadline, const std::string& what) {
  char* p = static_cast<char*>(buf);
  size_t done = 0;
  while (done < n) {
    const ssize_t r = sending ? ::send(fd, p + done, n - done, MSG_NOSIGNAL | MSG_DONTWAIT)
                              : ::recv(fd, p + done, n - done, MSG_DONTWAIT);
    if (r > 0) {
      done += static_cast<size_t>(r);
      continue;
    }
    if (r == 0) throw TransportError(what + ": the connection was closed");
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) throw TransportError(what + ": " + errno_text(errno));
    if (Clock::now() >= deadline) throw TransportError(what + ": no progress before the start-up deadline");
    pollfd pfd{fd, static_cast<short>(sending ? POLLOUT : POLLIN), 0};
    (void)::poll(&pfd, 1, ms_left(deadline));
  }
}

}  // namespace

// ---- regions ----------------------------------------------------------------------------------

TcpRegion::TcpRegion(std::shared_ptr<RegionTable> table, size_t bytes) : table_(std::move(table)) {
  try {
    buf_ = pages::PageBuffer(std::max<size_t>(bytes, 1), pages::huge_mode_from_env());
  } catch (const std::invalid_argument& e) {
    throw TransportError(std::string("tcp: ") + e.what());
  } catch (const std::system_error& e) {
    throw TransportError("tcp: allocating " + std::to_string(bytes) + " bytes failed: " + e.what());
  }
  addr_ = buf_.data();
  bytes_ = bytes;
  std::lock_guard<std::mutex> g(table_->mu);
  id_ = table_->next_id++;
  table_->live[id_] = {static_cast<char*>(addr_), bytes_, nullptr};
}

TcpRegion::TcpRegion(std::shared_ptr<RegionTable> table, void* addr, size_t bytes, bool exposed)
    : table_(std::move(table)) {
  addr_ = addr;
  bytes_ = bytes;
  if (!exposed) return;
  std::lock_guard<std::mutex> g(table_->mu);
  id_ = table_->next_id++;
  table_->live[id_] = {static_cast<char*>(addr_), bytes_, nullptr};
}

TcpRegion::~TcpRegion() {
  if (id_ == 0) return;
  // Taking the mutex waits for a receive into this region that is under way; once the entry is
  // gone the receiver thread discards what peers still send for it.
  std::lock_guard<std::mutex> g(table_->mu);
  table_->live.erase(id_);
}

std::vector<uint8_t> TcpRegion::packed_key() const {
  if (id_ == 0) {
    throw TransportError("tcp: caller memory registered for local use (" + std::to_string(bytes_) +
                         " bytes) has no remote key");
  }
  tcpw::PackedKey k;
  k.region = id_;
  k.base = reinterpret_cast<uint64_t>(addr_);
  k.bytes = bytes_;
  std::vector<uint8_t> out(sizeof k);
  std::memcpy(out.data(), &k, sizeof k);
  return out;
}

void RxBuffer::compact() noexcept {
  if (begin == 0) return;
  std::memmove(data.get(), data.get() + begin, end - begin);
  end -= begin;
  begin = 0;
}

// ---- the transport ----------------------------------------------------------------------------

TcpTransport::TcpTransport(const TransportConfig& cfg)
    : rank_(cfg.rank), nranks_(cfg.nranks), run_time_(cfg.dynamic_peers), ifname_(cfg.ifname) {
  host_of_ = cfg.host_of;
  lanes_across_hosts_only_ = cfg.lanes_across_hosts_only;
  if (run_time_) {
    rank_ = nranks_ = 0;
    peers_.resize(kMaxRunTimePeers);  // empty slots, filled by add_peer()
  } else {
    if (nranks_ <= 0 || rank_ < 0 || rank_ >= nranks_) {
      throw TransportError("tcp: rank " + std::to_string(rank_) + " of " + std::to_string(nranks_));
    }
    peers_.reserve(static_cast<size_t>(nranks_));
    for (int p = 0; p < nranks_; ++p) peers_.push_back(std::make_unique<Peer>());
    npeers_.store(nranks_, std::memory_order_release);
  }
  if (run_time_ && !cfg.listen_host.empty()) {
    bind_addr_ = cfg.listen_host;
  } else if (!ifname_.empty()) {
    for (const auto& [name, addr] : bootstrap::list_ipv4_interfaces()) {
      if (name == ifname_) {
        bind_addr_ = addr;
        break;
      }
    }
    if (bind_addr_.empty()) throw TransportError("tcp: interface '" + ifname_ + "' has no IPv4 address (RWIN_IFNAME)");
  } else {
    try {
      std::string how;
      bind_addr_ = bootstrap::choose_serve_address("", how);
    } catch (const bootstrap::BootstrapError& e) {
      throw TransportError(std::string("tcp: no address to listen on: ") + e.what());
    }
  }
  if (const char* v = knobs::env("RWIN_TCP_OWNER_SERVES")) {
    const std::string t = v;
    if (t != "0" && t != "1") throw TransportError("tcp: RWIN_TCP_OWNER_SERVES is '" + t + "' (want 0 or 1)");
    owner_serves_ = t == "1";
  }
  if (const char* v = knobs::env("RWIN_TCP_SOCKETS"); v && !run_time_) {  // run-time peers: one connection
    uint64_t n = 0;
    if (const std::string why = common::parse_u64_in(v, 1, tcpw::kMaxSockets, n); !why.empty()) {
      throw TransportError(std::string("tcp: RWIN_TCP_SOCKETS is '") + v + "': " + why + " (connections to each rank)");
    }
    sockets_ = static_cast<int>(n);
  }
  if (const char* v = knobs::env("RWIN_TCP_DUPLEX")) {
    const std::string t = v;
    if (t != "0" && t != "1") throw TransportError("tcp: RWIN_TCP_DUPLEX is '" + t + "' (want 0 or 1)");
    duplex_ = t == "1";
  }
  if (const char* v = knobs::env("RWIN_TCP_PARK")) {
    const std::string t = v;
    if (t != "0" && t != "1") throw TransportError("tcp: RWIN_TCP_PARK is '" + t + "' (want 0 or 1)");
    park_ = t == "1";
  }
  if (const char* v = knobs::env("RWIN_TCP_STRIPE_MIN")) {
    uint64_t n = 0;
    std::string why = common::parse_size(v, n);
    if (why.empty() && (n == 0 || n > tcpw::kMaxFrameBytes)) why = "outside [1, 1 GiB]";
    if (!why.empty()) throw TransportError(std::string("tcp: RWIN_TCP_STRIPE_MIN is '") + v + "': " + why + " (bytes)");
    stripe_min_ = n;
  }
  if (const char* v = knobs::env("RWIN_TCP_RECEIVER_SPIN_US")) {
    uint64_t us = 0;
    if (const std::string why = common::parse_u64_in(v, 0, 100000, us); !why.empty()) {
      throw TransportError(std::string("tcp: RWIN_TCP_RECEIVER_SPIN_US is '") + v + "': " + why + " (microseconds)");
    }
    receiver_spin_ns_ = static_cast<int64_t>(us) * 1000;
  }
  congestion_ = resolve_congestion(knobs::env("RWIN_TCP_CONGESTION"));
  try {
    bootstrap::auth::random_bytes(secret_, sizeof secret_);
  } catch (const bootstrap::BootstrapError& e) {
    throw TransportError(std::string("tcp: ") + e.what());
  }
  if (run_time_) {
    // Peers come and go for the transport's whole life: listen now, and keep listening.
    notify_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (notify_fd_ < 0) throw TransportError("tcp: eventfd: " + errno_text(errno));
    try {
      start_listening();
    } catch (...) {
      quiesce(false);  // the destructor does not run for a constructor that threw
      throw;
    }
    connected_ = true;
  }
}

TcpTransport::~TcpTransport() { quiesce(false); }

std::string TcpTransport::describe() const {
  return "tcp(" + bind_addr_ + (port_ ? ":" + std::to_string(port_) : std::string()) + ")";
}

std::string TcpTransport::who(int p) const {
  const std::string& where = peers_[static_cast<size_t>(p)]->where;
  return (run_time_ ? "tcp(" + bind_addr_ + ":" + std::to_string(port_) + "): run-time peer " + std::to_string(p)
                    : "tcp: rank " + std::to_string(rank_) + " -> peer " + std::to_string(p)) +
         (where.empty() ? std::string() : " (" + where + ")");
}

Capabilities TcpTransport::capabilities() const {
  Capabilities c;
  c.max_message_bytes = tcpw::kMaxFrameBytes;
  c.write_then_atomic_ordered = true;  // one socket carries a rank's requests to a peer, applied in order
  c.needs_target_progress = false;     // the receiver thread serves
  c.native_set = true;                 // the target swaps with a CPU atomic
  c.default_chunk_bytes = size_t{1} << 20;
  c.default_pipeline_depth = 8;
  c.local_needs_registration = false;
  c.cpu_atomics = true;  // the target applies atomics with CPU atomics
  c.max_add_bytes = tcpw::kMaxAddFrameBytes;  // put(Add) lands without the target's owner (WriteAdd)
  return c;
}

void TcpTransport::accept_adds(MemoryRegion& region, std::shared_ptr<const RegionAdder> adder) {
  auto* r = dynamic_cast<TcpRegion*>(&region);
  if (r == nullptr || r->id() == 0) return;
  std::lock_guard<std::mutex> g(regions_->mu);
  auto it = regions_->live.find(r->id());
  if (it != regions_->live.end()) it->second.adder = std::move(adder);
}

// A job's rank reaches its own windows with the CPU, as UCX's direct mode reaches a peer's shared
// memory: a put to itself is a memcpy, not a frame through a loopback socket and back. Its CPU
// atomics are atomic against the ones the receive side applies for other ranks (cpu_atomics).
std::string TcpTransport::rma_mode(int peer) const { return !run_time_ && peer == rank_ ? "direct" : "native"; }

void* TcpTransport::mapped(int peer, const RemoteKey& key, uint64_t remote_addr, size_t bytes) const noexcept {
  if (run_time_ || peer != rank_) return nullptr;
  const auto* k = dynamic_cast<const TcpKey*>(&key);
  if (k == nullptr) return nullptr;
  std::lock_guard<std::mutex> g(regions_->mu);
  const auto it = regions_->live.find(k->region());
  if (it == regions_->live.end() || reinterpret_cast<uint64_t>(it->second.base) != k->base() ||
      !tcpw::inside(k->base(), it->second.bytes, remote_addr, bytes)) {
    return nullptr;
  }
  return reinterpret_cast<void*>(remote_addr);
}

std::unique_ptr<MemoryRegion> TcpTransport::allocate(size_t bytes) {
  return std::make_unique<TcpRegion>(regions_, bytes);
}

std::unique_ptr<MemoryRegion> TcpTransport::register_memory(void* addr, size_t bytes) {
  if (addr == nullptr || bytes == 0) {
    throw TransportError(describe() + ": register_memory(" + std::to_string(reinterpret_cast<uintptr_t>(addr)) +
                         ", " + std::to_string(bytes) + " bytes): empty range");
  }
  return std::make_unique<TcpRegion>(regions_, addr, bytes, false);
}

std::unique_ptr<RemoteKey> TcpTransport::unpack_key(int peer, std::span<const uint8_t> packed) {
  tcpw::PackedKey k;
  if (packed.size() != sizeof k) {
    throw TransportError(describe() + ": key from rank " + std::to_string(peer) + " has " + std::to_string(packed.size()) +
                         " bytes (a tcp key has " + std::to_string(sizeof k) + "): not a tcp transport's key");
  }
  std::memcpy(&k, packed.data(), sizeof k);
  if (k.magic != tcpw::kMagic || k.version != tcpw::kVersion || k.region == 0) {
    throw TransportError(describe() + ": key from rank " + std::to_string(peer) + " is not a tcp key of version " +
                         std::to_string(tcpw::kVersion));
  }
  return std::make_unique<TcpKey>(k.region, k.base, k.bytes);
}

void TcpTransport::wake() noexcept {
  if (wake_fd_ < 0) return;
  const uint64_t one = 1;
  ssize_t r;
  do {
    r = ::write(wake_fd_, &one, sizeof one);
  } while (r < 0 && errno == EINTR);
}

void TcpTransport::start_listening() {
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  if (::inet_pton(AF_INET, bind_addr_.c_str(), &sa.sin_addr) != 1) {
    throw TransportError("tcp: '" + bind_addr_ + "' is not an IPv4 address to listen on");
  }
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0) throw TransportError("tcp: socket: " + errno_text(errno));
  socklen_t len = sizeof sa;
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 || ::listen(listen_fd_, 1024) != 0 ||
      ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&sa), &len) != 0) {
    throw TransportError("tcp: listening on " + bind_addr_ + ": " + errno_text(errno));
  }
  port_ = ntohs(sa.sin_port);
  ipv4_ = sa.sin_addr.s_addr;
  epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
  wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  nap_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (epoll_fd_ < 0 || wake_fd_ < 0 || nap_fd_ < 0) throw TransportError("tcp: epoll/eventfd: " + errno_text(errno));
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = tag(kWake, 0);
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &ev);
  ev.data.u64 = tag(kListen, 0);
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, listen_fd_, &ev);
  receiver_ = std::thread([this] { receiver_main(); });
}

void TcpTransport::dial(int p, const tcpw::Endpoint& e, const uint8_t* key_bytes, tcpw::HelloKind kind, int32_t src,
                        int32_t dst, Clock::time_point deadline, int lane) {
  const std::string what = who(p) + (lane > 0 ? ": connect lane " + std::to_string(lane) : std::string(": connect"));
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) throw TransportError(what + ": socket: " + errno_text(errno));
  struct Closer {  // until the connection is p's
    int& fd;
    ~Closer() {
      if (fd >= 0) ::close(fd);
    }
  } closer{fd};
  tune_data_socket(fd, congestion_);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_addr.s_addr = e.ipv4;
  to.sin_port = htons(e.port);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) != 0 && errno != EINPROGRESS) {
    throw TransportError(what + ": " + errno_text(errno));
  }
  pollfd pfd{fd, POLLOUT, 0};
  while (::poll(&pfd, 1, ms_left(deadline)) == 0) {
    if (Clock::now() >= deadline) throw TransportError(what + ": no answer before the deadline");
  }
  int err = 0;
  socklen_t el = sizeof err;
  ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el);
  if (err != 0) throw TransportError(what + ": " + errno_text(err));

  tcpw::Hello h;
  h.kind = lane > 0 ? tcpw::lane_kind(lane) : static_cast<uint16_t>(kind);
  h.src = src;
  h.dst = dst;
  bootstrap::auth::random_bytes(h.nonce, sizeof h.nonce);
  io_all(fd, &h, sizeof h, true, deadline, what + " (hello)");
  tcpw::Challenge c;
  io_all(fd, &c, sizeof c, false, deadline, what + " (challenge)");
  if (c.magic != tcpw::kMagic || c.status != static_cast<uint16_t>(tcpw::HandshakeStatus::Ok)) {
    throw TransportError(what + ": refused by the listener (status " + std::to_string(c.status) +
                         (run_time_ ? "; an endpoint of another agent, one already used, or a peer it dropped?)"
                                    : "; a listener of another job or version?)"));
  }
  const tcpw::Transcript t(h.nonce, c.nonce, src, dst);
  const std::string key(reinterpret_cast<const char*>(key_bytes), tcpw::kSecret);
  tcpw::Proof proof;
  const auto mac = bootstrap::auth::hmac(key, "rwin-tcp-client", t.bytes);
  std::memcpy(proof.mac, mac.data(), mac.size());
  io_all(fd, &proof, sizeof proof, true, deadline, what + " (proof)");
  tcpw::Accept a;
  io_all(fd, &a, sizeof a, false, deadline, what + " (accept)");
  const auto want = bootstrap::auth::hmac(key, "rwin-tcp-server", t.bytes);
  if (a.magic != tcpw::kMagic || a.status != 0 || !bootstrap::auth::equal(a.mac, want.data(), want.size())) {
    throw TransportError(what + ": the listener did not prove it is " +
                         (run_time_ ? std::string("the peer whose endpoint this is") : "rank " + std::to_string(p) + " of this job"));
  }
  Peer& P = *peers_[static_cast<size_t>(p)];
  if (lane > 0) {  // p's from here (quiesce() closes it); nothing comes back on a lane, so no epoll
    P.lane_out[lane - 1].fd = fd;
    P.nlanes = lane;
    fd = -1;
    return;
  }
  if (duplex(p)) {  // both ways on it: the receive side reads it as p's requests (and its replies)
    std::lock_guard<std::mutex> g(rx_mu_);
    P.out_fd = P.in_fd = fd;
    fd = -1;
    epoll_event iev{};
    iev.events = EPOLLIN;
    iev.data.u64 = tag(kIn, static_cast<uint32_t>(p));
    if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, P.in_fd, &iev) != 0) throw TransportError(what + ": epoll: " + errno_text(errno));
    return;
  }
  // p's from here: quiesce() closes it. Set before the epoll registration that lets the receive side
  // look, and under rx_mu_: the receiver thread's spin reads the peers' sockets (serve_direct).
  std::lock_guard<std::mutex> g(rx_mu_);
  peers_[static_cast<size_t>(p)]->out_fd = fd;
  fd = -1;
  epoll_event oev{};
  oev.events = EPOLLIN;
  oev.data.u64 = tag(kOut, static_cast<uint32_t>(p));
  if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, peers_[static_cast<size_t>(p)]->out_fd, &oev) != 0) {
    throw TransportError(what + ": epoll: " + errno_text(errno));
  }
}

void TcpTransport::connect(bootstrap::Bootstrap& bs) {
  if (connected_) throw TransportError(describe() + ": connect() called twice");
  if (run_time_) throw TransportError(describe() + ": a transport with run-time peers connects each with connect_peer()");
  const auto deadline = Clock::now() + bs.startup_timeout();

  // Listen before publishing the endpoint, so every dial finds someone.
  start_listening();

  tcpw::JobEndpoint me;
  me.e.port = port_;
  me.e.rank = rank_;
  me.e.ipv4 = ipv4_;
  me.sockets = static_cast<uint32_t>(sockets_);
  me.duplex = duplex_ ? 1 : 0;
  std::memcpy(me.e.secret, secret_, sizeof secret_);
  const auto all = bs.allgather(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(&me), sizeof me));
  std::memset(me.e.secret, 0, sizeof me.e.secret);
  std::vector<tcpw::Endpoint> eps(static_cast<size_t>(nranks_));
  for (int p = 0; p < nranks_; ++p) {
    const auto& b = all[static_cast<size_t>(p)];
    tcpw::Endpoint& e = eps[static_cast<size_t>(p)];
    if (b.size() != sizeof(tcpw::JobEndpoint)) {
      throw TransportError(describe() + ": rank " + std::to_string(p) + " published " + std::to_string(b.size()) +
                           " bytes, not a tcp endpoint (every rank must use RWIN_TRANSPORT=tcp of one rwin version)");
    }
    tcpw::JobEndpoint je;
    std::memcpy(&je, b.data(), sizeof je);
    e = je.e;
    if (e.magic != tcpw::kMagic || e.version != tcpw::kVersion || e.rank != p) {
      throw TransportError(describe() + ": rank " + std::to_string(p) + " published a tcp endpoint of another version (" +
                           std::to_string(e.version) + ", this rank speaks " + std::to_string(tcpw::kVersion) + ")");
    }
    if (je.sockets != static_cast<uint32_t>(sockets_)) {
      throw TransportError(describe() + ": rank " + std::to_string(rank_) + " has RWIN_TCP_SOCKETS=" + std::to_string(sockets_) +
                           " but rank " + std::to_string(p) + " has " + std::to_string(je.sockets) +
                           " (every rank of a job must open as many connections to each other)");
    }
    if (je.duplex != (duplex_ ? 1u : 0u)) {
      throw TransportError(describe() + ": rank " + std::to_string(rank_) + " has RWIN_TCP_DUPLEX=" + (duplex_ ? "1" : "0") +
                           " but rank " + std::to_string(p) + " has " + std::to_string(je.duplex) +
                           " (every rank of a job must connect the same way)");
    }
    std::lock_guard<std::mutex> g(conn_mu_);  // fail() on the receiver thread reads it
    peers_[static_cast<size_t>(p)]->where = addr_text(e.ipv4, e.port);
  }

  // Dial everyone (self included), starting after this rank so that not all ranks knock on rank 0 at
  // once; a duplex pair's first connection only from its lower rank.
  for (int i = 1; i <= nranks_; ++i) {
    const int p = (rank_ + i) % nranks_;
    const tcpw::Endpoint& e = eps[static_cast<size_t>(p)];
    if (!duplex(p) || rank_ < p) dial(p, e, e.secret, tcpw::HelloKind::Collective, rank_, p, deadline);
    // Striping: the lanes (none to itself: it reaches its own windows directly).
    for (int lane = 1; lane < sockets_ && lanes_to(p); ++lane) {
      dial(p, e, e.secret, tcpw::HelloKind::Collective, rank_, p, deadline, lane);
    }
  }

  // Wait until every rank's requests can reach this one, on every lane (duplex pairs: the lower ranks'
  // connections; this rank's own to the higher ones are up).
  int want = 0;
  for (int p = 0; p < nranks_; ++p) want += (!duplex(p) || p < rank_ ? 1 : 0) + (lanes_to(p) ? sockets_ - 1 : 0);
  std::unique_lock<std::mutex> lk(conn_mu_);
  while (in_connected_ < want) {
    if (conn_cv_.wait_until(lk, deadline) == std::cv_status::timeout && in_connected_ < want) {
      std::string missing;
      for (int p = 0; p < nranks_; ++p) {
        const Peer& P = *peers_[static_cast<size_t>(p)];
        bool all_in = P.in_fd >= 0;
        for (int lane = 1; lane < sockets_ && lanes_to(p); ++lane) all_in = all_in && P.lane_in[lane - 1].fd >= 0;
        if (!all_in) missing += (missing.empty() ? "" : ", ") + std::to_string(p);
      }
      throw TransportError(describe() + ": rank " + std::to_string(rank_) + ": no authenticated connection from rank(s) " +
                           missing + " before the start-up deadline");
    }
  }
  lk.unlock();
  close_listener_ = true;  // every rank is in: strangers have nothing left to knock on
  wake();
  connected_ = true;
  RWIN_LOG(Debug, Core, "%s: rank %d connected to %d ranks (%d connection(s) to each other, %s, congestion control %s)",
           describe().c_str(), rank_, nranks_, sockets_, duplex_ ? "duplex where unstriped" : "one per direction",
           congestion_.empty() ? "the kernel's" : congestion_.c_str());
}

// ---- run-time peers (the agent) ---------------------------------------------------------------

int TcpTransport::add_peer() {
  if (!run_time_) throw TransportError(describe() + ": add_peer() needs a transport made for run-time peers");
  if (quiesced_) throw TransportError(describe() + ": add_peer() after the transport was shut down");
  const int p = npeers_.load(std::memory_order_relaxed);
  if (p >= kMaxRunTimePeers) {
    throw TransportError(describe() + ": " + std::to_string(kMaxRunTimePeers) + " run-time peers added already (indices are never reused)");
  }
  auto peer = std::make_unique<Peer>();
  try {
    bootstrap::auth::random_bytes(peer->secret, sizeof peer->secret);
  } catch (const bootstrap::BootstrapError& e) {
    throw TransportError(std::string("tcp: ") + e.what());
  }
  peers_[static_cast<size_t>(p)] = std::move(peer);
  npeers_.store(p + 1, std::memory_order_release);  // the slot is filled before the receive side may look
  return p;
}

std::vector<uint8_t> TcpTransport::local_endpoint(int peer) {
  if (!run_time_ || peer < 0 || peer >= peer_count()) {
    throw TransportError(describe() + ": local_endpoint(" + std::to_string(peer) + "): no such run-time peer");
  }
  tcpw::Endpoint me;
  me.port = port_;
  me.rank = peer;  // how the reader names itself when it dials us
  me.ipv4 = ipv4_;
  std::memcpy(me.secret, peers_[static_cast<size_t>(peer)]->secret, sizeof me.secret);
  std::vector<uint8_t> out(sizeof me);
  std::memcpy(out.data(), &me, sizeof me);
  std::memset(me.secret, 0, sizeof me.secret);
  return out;
}

void TcpTransport::connect_peer(int peer, std::span<const uint8_t> remote_endpoint) {
  if (!run_time_ || peer < 0 || peer >= peer_count()) {
    throw TransportError(describe() + ": connect_peer(" + std::to_string(peer) + "): no such run-time peer");
  }
  Peer& P = *peers_[static_cast<size_t>(peer)];
  tcpw::Endpoint e;
  if (remote_endpoint.size() != sizeof e) {
    throw TransportError(who(peer) + ": its endpoint has " + std::to_string(remote_endpoint.size()) + " bytes (a tcp endpoint has " +
                         std::to_string(sizeof e) + "): the peer does not use rwin's tcp transport");
  }
  std::memcpy(&e, remote_endpoint.data(), sizeof e);
  if (e.magic != tcpw::kMagic || e.version != tcpw::kVersion) {
    throw TransportError(who(peer) + ": its endpoint is not a tcp endpoint of version " + std::to_string(tcpw::kVersion));
  }
  if (e.ipv4 == 0 || e.port == 0 || e.rank < 0) {
    throw TransportError(who(peer) + ": its endpoint names no address (" + addr_text(e.ipv4, e.port) + ", index " +
                         std::to_string(e.rank) + ")");
  }
  if (P.failed) throw TransportError(who(peer) + ": connect_peer() after the peer failed: " + peer_error(peer));
  if (P.out_fd >= 0) throw TransportError(who(peer) + ": connect_peer() called twice");
  {
    std::lock_guard<std::mutex> g(conn_mu_);  // fail() on the receiver thread reads it
    P.where = addr_text(e.ipv4, e.port);
  }
  dial(peer, e, e.secret, tcpw::HelloKind::RunTime, peer, e.rank, Clock::now() + kAuthDeadline);
  std::memset(e.secret, 0, sizeof e.secret);
}

std::unique_ptr<MemoryRegion> TcpTransport::expose_memory(void* addr, size_t bytes) {
  if (addr == nullptr || bytes == 0) {
    throw TransportError(describe() + ": expose_memory(" + std::to_string(reinterpret_cast<uintptr_t>(addr)) + ", " +
                         std::to_string(bytes) + " bytes): empty range");
  }
  return std::make_unique<TcpRegion>(regions_, addr, bytes, true);
}

bool TcpTransport::arm() noexcept {
  if (notify_fd_ < 0) return false;
  uint64_t x;
  while (::read(notify_fd_, &x, sizeof x) > 0) {
  }
  for (int p : active_) {  // sends that only this thread's poll() finishes
    if (peers_[static_cast<size_t>(p)]->sendable()) return false;
  }
  if (!done_.empty() || cq_count_.load(std::memory_order_acquire) > 0) return false;
  // The receiver thread serves from now on: out of its nap at once, not when the nap would end
  // (up to kOwnerWindow after our last poll; measured: a passive agent's 4 KiB gets took ~500 us).
  owner_away();
  armed_.store(true);
  // Served since our last poll(): its effects (a peer's write into a watched word) may be what the
  // caller waits for, and raised no event (we were not armed). Checked after arming, so a round
  // served after this load raises the event instead (seq_cst on both sides).
  if (served_.load() != served_at_poll_) {
    armed_.store(false);
    return false;
  }
  return true;
}

void TcpTransport::owner_away() noexcept {
  owner_seen_ns_.store(0, std::memory_order_seq_cst);
  // seq_cst against the thread's napping_ store then owner_seen_ns_ load: either it sees the owner
  // gone before it naps, or we see it napping and end the nap.
  if (nap_fd_ >= 0 && napping_.load(std::memory_order_seq_cst)) {
    const uint64_t one = 1;
    (void)::write(nap_fd_, &one, sizeof one);
  }
}

void TcpTransport::notify_owner() noexcept {
  served_.fetch_add(1);
  if (notify_fd_ >= 0 && armed_.exchange(false)) {
    const uint64_t one = 1;
    ssize_t r;
    do {
      r = ::write(notify_fd_, &one, sizeof one);
    } while (r < 0 && errno == EINTR);
  }
}

void TcpTransport::adopt_in_connection_for_fuzzing(int peer, int in_fd, bool duplex) {
  if (connected_ || peer < 0 || peer >= nranks_ || peer == rank_) throw TransportError("tcp: adopt_in_connection_for_fuzzing: bad use");
  if (epoll_fd_ < 0) epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
  if (epoll_fd_ < 0) throw TransportError("tcp: epoll: " + errno_text(errno));
  duplex_ = duplex;
  peers_[static_cast<size_t>(peer)]->in_fd = in_fd;
  if (duplex) {  // this rank's requests go on it too: post() works from here
    peers_[static_cast<size_t>(peer)]->out_fd = in_fd;
    connected_ = true;
  }
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = tag(kIn, static_cast<uint32_t>(peer));
  if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, in_fd, &ev) != 0) throw TransportError("tcp: epoll: " + errno_text(errno));
}

void TcpTransport::adopt_lane_for_testing(int peer, int lane, int fd) {
  if (connected_ || peer < 0 || peer >= nranks_ || lane < 1 || lane >= tcpw::kMaxSockets || epoll_fd_ < 0) {
    throw TransportError("tcp: adopt_lane_for_testing: bad use (adopt the first connection first)");
  }
  Peer& P = *peers_[static_cast<size_t>(peer)];
  P.lane_in[lane - 1].fd = fd;
  P.has_lanes_in = true;
  sockets_ = std::max(sockets_, lane + 1);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = tag(kLane, lane_value(peer, lane));
  if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0) throw TransportError("tcp: epoll: " + errno_text(errno));
}

void TcpTransport::quiesce(bool graceful) noexcept {
  if (quiesced_) return;
  quiesced_ = true;
  if (graceful && connected_) {
    // What is queued leaves (a second at most), then a goodbye, so peers tell our close from a death.
    const auto until = Clock::now() + std::chrono::seconds(1);
    for (int p = 0; p < peer_count(); ++p) {
      Peer& P = *peers_[static_cast<size_t>(p)];
      if (P.failed || P.out_fd < 0) continue;
      SendItem bye;
      bye.hdr.type = static_cast<uint8_t>(tcpw::Req::Goodbye);
      P.sendq.push_back(std::move(bye));
      while (!P.failed && (!P.sendq.empty() || P.lanes_queued() > 0) && Clock::now() < until) {
        if (!flush_sends(p)) break;
        int fd = P.sendq.empty() ? -1 : P.out_fd;  // one that still has something to send
        for (int k = 0; k < P.nlanes && fd < 0; ++k) {
          if (!P.lane_out[k].sendq.empty()) fd = P.lane_out[k].fd;
        }
        if (fd >= 0) {
          pollfd pfd{fd, POLLOUT, 0};
          (void)::poll(&pfd, 1, 10);
        }
      }
    }
  }
  stop_ = true;
  owner_away();  // ends a nap now rather than when it would have (owner_nap.h: up to 800 us)
  wake();
  if (receiver_.joinable()) receiver_.join();
  // From here no thread touches a region or a caller's buffer.
  for (int p = 0; p < peer_count(); ++p) {
    Peer& P = *peers_[static_cast<size_t>(p)];
    {
      std::lock_guard<std::mutex> g(P.mu);
      if (!P.failed) {
        P.error = "the transport of rank " + std::to_string(rank_) + " was shut down";
        P.failed = true;
      }
      P.awaiting.clear();
    }
    P.sendq.clear();
    if (P.out_fd >= 0 && P.out_fd != P.in_fd) ::close(P.out_fd);  // a duplex connection is both
    if (P.in_fd >= 0) ::close(P.in_fd);
    P.out_fd = P.in_fd = -1;
    for (int k = 0; k < tcpw::kMaxSockets - 1; ++k) {
      P.lane_out[k].sendq.clear();
      for (int* fd : {&P.lane_out[k].fd, &P.lane_in[k].fd}) {
        if (*fd >= 0) ::close(*fd);
        *fd = -1;
      }
    }
  }
  for (auto& pc : pending_) ::close(pc.fd);
  pending_.clear();
  if (listen_fd_ >= 0) ::close(listen_fd_);
  if (epoll_fd_ >= 0) ::close(epoll_fd_);
  if (wake_fd_ >= 0) ::close(wake_fd_);
  if (notify_fd_ >= 0) ::close(notify_fd_);
  if (nap_fd_ >= 0) ::close(nap_fd_);
  listen_fd_ = epoll_fd_ = wake_fd_ = notify_fd_ = nap_fd_ = -1;
}

}  // namespace tcp
}  // namespace rwin::transport
