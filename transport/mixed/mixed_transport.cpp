// The mixed transport: one transport per peer, chosen by where the peer runs.
//
// Why: on a host without RDMA devices UCX reaches the ranks of its own host through shared memory (a
// put is a memcpy into the peer's mapped window) but the ranks of other hosts only through UCX 1.13's tcp,
// which copies every byte into and out of its own buffers and applies nothing while the target is away
// (docs/TCP.md). rwin's own tcp transport has the faster cross-host path and the passive target, but no
// shared memory. A job across such hosts wants both, per peer: UCX for the ranks on this host, own tcp
// for the others.
//
// How: both transports connect to every rank (collectively, so every rank must build the same pair),
// and each peer's work goes to one of them, chosen once from TransportConfig::host_of. A window is
// allocated by UCX (so that shared memory can map it) and exposed through tcp too (its receiver thread
// lands other hosts' writes, reads and atomics in the same bytes); its key carries both transports'
// keys and a peer unpacks the one it will use. Ordering is per peer and a peer uses one transport, so
// each transport's ordering rules hold unchanged. Atomics stay atomic against each other: UCX's
// shared-memory atomics and tcp's target-applied ones are both CPU atomics on the same word
// (Capabilities::cpu_atomics is the AND of both).
#include "transport/mixed/mixed_transport.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "transport/tcp/tcp_transport.h"
#include "transport/ucx/ucx_transport.h"

namespace rwin::transport {
namespace {

constexpr uint32_t kKeyMagic = 0x584d5752;  // "RWMX": tells a mixed key from another transport's

// A region of both transports over the same bytes: UCX's own (allocate) or the caller's (registered
// with both). tcp's goes first when it ends, so its receiver thread stops touching the bytes before
// UCX unmaps them.
class MixedRegion final : public MemoryRegion {
 public:
  MixedRegion(std::unique_ptr<MemoryRegion> ucx, std::unique_ptr<MemoryRegion> tcp)
      : ucx_(std::move(ucx)), tcp_(std::move(tcp)) {
    addr_ = ucx_->addr();
    bytes_ = ucx_->bytes();
  }
  ~MixedRegion() override { tcp_.reset(); }
  // magic, UCX's key length, UCX's key, tcp's key (absent when the job runs on one host).
  std::vector<uint8_t> packed_key() const override {
    const std::vector<uint8_t> u = ucx_->packed_key();
    const std::vector<uint8_t> t = tcp_ ? tcp_->packed_key() : std::vector<uint8_t>{};
    std::vector<uint8_t> out(8);
    const uint32_t len = static_cast<uint32_t>(u.size());
    std::memcpy(out.data(), &kKeyMagic, 4);
    std::memcpy(out.data() + 4, &len, 4);
    out.insert(out.end(), u.begin(), u.end());
    out.insert(out.end(), t.begin(), t.end());
    return out;
  }
  MemoryRegion* ucx() const noexcept { return ucx_.get(); }
  MemoryRegion* tcp() const noexcept { return tcp_.get(); }

 private:
  std::unique_ptr<MemoryRegion> ucx_;
  std::unique_ptr<MemoryRegion> tcp_;
};

// A peer's window as the transport that reaches that peer sees it.
class MixedKey final : public RemoteKey {
 public:
  explicit MixedKey(std::unique_ptr<RemoteKey> sub) : sub_(std::move(sub)) {
    base_ = sub_->base();
    bytes_ = sub_->bytes();
  }
  const RemoteKey* sub() const noexcept { return sub_.get(); }

 private:
  std::unique_ptr<RemoteKey> sub_;
};

class MixedTransport final : public Transport {
 public:
  explicit MixedTransport(const TransportConfig& cfg) : nranks_(cfg.nranks) {
    if (cfg.dynamic_peers) {
      throw TransportError("mixed: no run-time peers (an agent picks ucx or tcp: AgentOptions::transport)");
    }
    if (!cfg.host_of.empty() && cfg.host_of.size() != static_cast<size_t>(cfg.nranks)) {
      throw TransportError("mixed: host_of names " + std::to_string(cfg.host_of.size()) + " ranks in a job of " +
                           std::to_string(cfg.nranks));
    }
    via_tcp_.assign(static_cast<size_t>(nranks_), false);
    for (int p = 0; p < nranks_ && !cfg.host_of.empty(); ++p) {
      via_tcp_[static_cast<size_t>(p)] = cfg.host_of[static_cast<size_t>(p)] != cfg.host_of[static_cast<size_t>(cfg.rank)];
    }
    // Whether the job spans hosts is the same on every rank (the same host_of), so every rank makes the
    // same transports and their collective connects pair up.
    const bool spans = !cfg.host_of.empty() && std::any_of(cfg.host_of.begin(), cfg.host_of.end(),
                                                           [&cfg](int h) { return h != cfg.host_of.front(); });
    TransportConfig u = cfg;
    u.name = "ucx";
    ucx_ = make_ucx_transport(u);
    if (spans) {
      TransportConfig t = cfg;
      t.name = "tcp";
      t.lanes_across_hosts_only = true;  // striping's lanes where tcp carries data, not to this host's ranks
      tcp_ = make_tcp_transport(t);
    }
    for (bool b : via_tcp_) remote_ += b ? 1 : 0;
  }

  // tcp first (its receiver thread), then UCX, whose memory the regions hold.
  ~MixedTransport() override { tcp_.reset(); }

  std::string describe() const override {
    if (!tcp_) return "mixed(" + ucx_->describe() + ", every rank on this host)";
    return "mixed(" + ucx_->describe() + " on this host, " + tcp_->describe() + " to " + std::to_string(remote_) +
           " of " + std::to_string(nranks_) + " ranks on other hosts)";
  }

  Capabilities capabilities() const override { return caps_; }

  void connect(bootstrap::Bootstrap& bs) override {
    ucx_->connect(bs);
    if (tcp_) tcp_->connect(bs);
    caps_ = ucx_->capabilities();
    if (!tcp_) return;
    const Capabilities t = tcp_->capabilities();
    caps_.max_message_bytes = std::min(caps_.max_message_bytes, t.max_message_bytes);
    caps_.write_then_atomic_ordered = false;  // per peer
    caps_.needs_target_progress = caps_.needs_target_progress || t.needs_target_progress;
    caps_.native_set = caps_.native_set && t.native_set;
    caps_.local_needs_registration = caps_.local_needs_registration || t.local_needs_registration;
    caps_.cpu_atomics = caps_.cpu_atomics && t.cpu_atomics;
    // The pipeline's defaults are the cross-host path's: shared memory copies at memory speed at any chunk.
    caps_.default_chunk_bytes = t.default_chunk_bytes;
    caps_.default_pipeline_depth = t.default_pipeline_depth;
    // put(Add) is one path for the whole context (core/src/accumulate.cpp): a peer whose window is mapped
    // here is added in place, any other gets Op::Accumulate when the capability is on. Only tcp's peers
    // can take Accumulate, so it is on only when every UCX peer is mapped; otherwise every unmapped peer
    // is staged (the target's progress applies it), as over UCX alone.
    bool ucx_all_mapped = true;
    for (int p = 0; p < nranks_; ++p) {
      if (!via_tcp_[static_cast<size_t>(p)] && ucx_->rma_mode(p) != "direct") ucx_all_mapped = false;
    }
    caps_.max_add_bytes = ucx_all_mapped ? t.max_add_bytes : 0;
  }

  std::unique_ptr<MemoryRegion> allocate(size_t bytes) override {
    auto u = ucx_->allocate(bytes);
    std::unique_ptr<MemoryRegion> t;
    if (tcp_) t = tcp_->expose_memory(u->addr(), u->bytes());
    return std::make_unique<MixedRegion>(std::move(u), std::move(t));
  }

  std::unique_ptr<MemoryRegion> register_memory(void* addr, size_t bytes) override {
    auto u = ucx_->register_memory(addr, bytes);
    std::unique_ptr<MemoryRegion> t;
    if (tcp_) t = tcp_->register_memory(addr, bytes);
    return std::make_unique<MixedRegion>(std::move(u), std::move(t));
  }

  std::unique_ptr<RemoteKey> unpack_key(int peer, std::span<const uint8_t> packed) override {
    uint32_t magic = 0, len = 0;
    if (packed.size() >= 8) {
      std::memcpy(&magic, packed.data(), 4);
      std::memcpy(&len, packed.data() + 4, 4);
    }
    if (packed.size() < 8 || magic != kKeyMagic || len > packed.size() - 8) {
      throw TransportError("mixed: key from rank " + std::to_string(peer) + " (" + std::to_string(packed.size()) +
                           " bytes) is not a mixed transport's key (every rank must use the same RWIN_TRANSPORT)");
    }
    const auto ucx_part = packed.subspan(8, len);
    const auto tcp_part = packed.subspan(8 + len);
    if (!tcp_ || !via(peer)) return std::make_unique<MixedKey>(ucx_->unpack_key(peer, ucx_part));
    if (tcp_part.empty()) {
      throw TransportError("mixed: key from rank " + std::to_string(peer) +
                           " carries no tcp key, but that rank runs on another host");
    }
    return std::make_unique<MixedKey>(tcp_->unpack_key(peer, tcp_part));
  }

  PostResult post(const Work& w) override {
    Transport& t = route(w.peer);
    Work x = w;
    if (w.local_mr) {
      const auto* r = static_cast<const MixedRegion*>(w.local_mr);
      x.local_mr = &t == tcp_.get() ? r->tcp() : r->ucx();
    }
    if (w.rkey) x.rkey = static_cast<const MixedKey*>(w.rkey)->sub();
    return t.post(x);
  }

  void poll(std::vector<Completion>& out) override {
    ucx_->poll(out);
    if (tcp_) tcp_->poll(out);
  }

  std::string peer_error(int peer) const override { return route(peer).peer_error(peer); }

  TransportCounters counters() const override {
    TransportCounters c = ucx_->counters();
    if (!tcp_) return c;
    const TransportCounters t = tcp_->counters();
    c.wrs += t.wrs;
    c.doorbells += t.doorbells;
    c.signaled += t.signaled;
    c.inline_wrs += t.inline_wrs;
    c.cqes += t.cqes;
    c.drained += t.drained;
    c.striped += t.striped;
    c.fence_reads += t.fence_reads;
    return c;
  }

  std::string rma_mode(int peer) const override { return route(peer).rma_mode(peer); }
  bool write_then_atomic_ordered(int peer) const override { return route(peer).write_then_atomic_ordered(peer); }

  void* mapped(int peer, const RemoteKey& key, uint64_t remote_addr, size_t bytes) const noexcept override {
    const auto* k = dynamic_cast<const MixedKey*>(&key);
    if (k == nullptr) return nullptr;
    return route(peer).mapped(peer, *k->sub(), remote_addr, bytes);
  }

  // Both: neither may touch the peer again.
  void fail_peer(int peer, const std::string& why) noexcept override {
    if (tcp_) tcp_->fail_peer(peer, why);
    ucx_->fail_peer(peer, why);
  }

  void quiesce(bool graceful) noexcept override {
    if (tcp_) tcp_->quiesce(graceful);
    ucx_->quiesce(graceful);
  }

  void accept_adds(MemoryRegion& region, std::shared_ptr<const RegionAdder> adder) override {
    if (!tcp_ || caps_.max_add_bytes == 0) return;
    auto* r = dynamic_cast<MixedRegion*>(&region);
    if (r != nullptr && r->tcp() != nullptr) tcp_->accept_adds(*r->tcp(), std::move(adder));
  }

  // tcp's sleep ends at an arrival from another host; one from this host (a store into shared memory)
  // raises nothing anywhere, so it is seen when the sleep's bound ends, as it would be by nanosleep.
  bool idle_wait(std::chrono::microseconds max) noexcept override {
    return tcp_ ? tcp_->idle_wait(max) : ucx_->idle_wait(max);
  }
  uint64_t arrivals() const noexcept override { return ucx_->arrivals() + (tcp_ ? tcp_->arrivals() : 0); }
  void set_oversubscribed(bool yes) noexcept override {
    ucx_->set_oversubscribed(yes);
    if (tcp_) tcp_->set_oversubscribed(yes);
  }
  void sync_arrivals() noexcept override {
    ucx_->sync_arrivals();
    if (tcp_) tcp_->sync_arrivals();
  }
  void owner_away() noexcept override {
    ucx_->owner_away();
    if (tcp_) tcp_->owner_away();
  }

 private:
  bool via(int peer) const noexcept {
    return tcp_ && peer >= 0 && peer < nranks_ && via_tcp_[static_cast<size_t>(peer)];
  }
  // Out-of-range peers go to UCX, which reports them.
  Transport& route(int peer) const noexcept { return via(peer) ? *tcp_ : *ucx_; }

  int nranks_ = 0;
  int remote_ = 0;             // ranks on other hosts
  std::vector<bool> via_tcp_;  // per rank: on another host
  std::unique_ptr<Transport> ucx_;
  std::unique_ptr<Transport> tcp_;  // null: every rank on this host
  Capabilities caps_;
};

}  // namespace

std::unique_ptr<Transport> make_mixed_transport(const TransportConfig& cfg) {
  return std::make_unique<MixedTransport>(cfg);
}

}  // namespace rwin::transport
