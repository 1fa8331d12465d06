// UCX (ucp) transport.
//
// Design notes:
//  * Window memory is allocated by UCX (ucp_mem_map with ALLOCATE). Only memory UCX allocates can
//    be reached through the posix/sysv shared-memory transports; registered malloc memory makes
//    UCP fall back to active-message emulation even on one node (see shared perf baselines).
//  * One worker per process, one endpoint per rank (self included), created from worker
//    addresses exchanged through the bootstrap.
//  * Puts and atomics to the same endpoint are NOT ordered by UCX, so capabilities() reports
//    write_then_atomic_ordered = false and the core flushes the endpoint (ucp_ep_flush_nbx)
//    before a notify that follows unflushed writes, and only then. ucp_worker_fence is cheaper
//    over tcp (bench/RESULTS.md measured 27 vs 43 us for raw put+notify) but in 1.13 it is a
//    weak, per-interface fence (uct_iface_fence on each interface) with no promise across the
//    lanes one endpoint may use for RMA and AMO (UCX later added a "strong" fence mode for this
//    reason), so it is not used: correct first.
//  * Over tcp UCX emulates RMA and atomics with active messages that the target must progress,
//    so capabilities() reports needs_target_progress and the core polls while it waits.
//  * Endpoints use UCP_ERR_HANDLING_MODE_NONE (see create_ep for why); a dead peer is found by the
//    core's deadlines, and a failed request or endpoint makes that peer failed (sticky).
#include "transport/ucx/ucx_transport.h"

#include <ucp/api/ucp.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <string>
#include <vector>

#include "bootstrap/bootstrap.h"

namespace rwin::transport {
namespace {

constexpr uint32_t kKeyMagic = 0x52574b55;   // "RWKU": rwin key, ucx
constexpr uint32_t kAddrMagic = 0x52574155;  // "RWAU": rwin address, ucx
constexpr uint16_t kBlobVersion = 1;

std::string status_text(ucs_status_t s) { return ucs_status_string(s); }

bool have_rdma_devices() {
  std::error_code ec;
  std::filesystem::directory_iterator it("/sys/class/infiniband", ec);
  return !ec && it != std::filesystem::directory_iterator();
}

// RAII owners, one per native handle. Deleters are noexcept and only log.
struct ContextDeleter {
  void operator()(ucp_context_h c) const noexcept { ucp_cleanup(c); }
};
struct WorkerDeleter {
  void operator()(ucp_worker_h w) const noexcept { ucp_worker_destroy(w); }
};
using ContextPtr = std::unique_ptr<std::remove_pointer_t<ucp_context_h>, ContextDeleter>;
using WorkerPtr = std::unique_ptr<std::remove_pointer_t<ucp_worker_h>, WorkerDeleter>;

// Little helpers to write/read the versioned blobs.
void put_u32(std::vector<uint8_t>& b, uint32_t v) { b.insert(b.end(), reinterpret_cast<uint8_t*>(&v), reinterpret_cast<uint8_t*>(&v) + 4); }
void put_u64(std::vector<uint8_t>& b, uint64_t v) { b.insert(b.end(), reinterpret_cast<uint8_t*>(&v), reinterpret_cast<uint8_t*>(&v) + 8); }
template <class T>
T get_pod(std::span<const uint8_t> b, size_t off) {
  T v;
  std::memcpy(&v, b.data() + off, sizeof(T));
  return v;
}

class UcxTransport;

class UcxMemory final : public MemoryRegion {
 public:
  UcxMemory(ucp_context_h ctx, size_t bytes) : ctx_(ctx) {
    ucp_mem_map_params_t p{};
    p.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH | UCP_MEM_MAP_PARAM_FIELD_FLAGS;
    p.address = nullptr;
    p.length = bytes;
    p.flags = UCP_MEM_MAP_ALLOCATE;
    ucs_status_t s = ucp_mem_map(ctx, &p, &memh_);
    if (s != UCS_OK) {
      throw TransportError("ucx: ucp_mem_map(ALLOCATE, " + std::to_string(bytes) + " bytes) failed: " + status_text(s));
    }
    ucp_mem_attr_t attr{};
    attr.field_mask = UCP_MEM_ATTR_FIELD_ADDRESS | UCP_MEM_ATTR_FIELD_LENGTH;
    s = ucp_mem_query(memh_, &attr);
    if (s != UCS_OK) {
      ucp_mem_unmap(ctx_, memh_);
      throw TransportError("ucx: ucp_mem_query failed: " + status_text(s));
    }
    addr_ = attr.address;
    bytes_ = bytes;
    std::memset(addr_, 0, bytes_);
    void* packed = nullptr;
    size_t packed_len = 0;
    s = ucp_rkey_pack(ctx_, memh_, &packed, &packed_len);
    if (s != UCS_OK) {
      ucp_mem_unmap(ctx_, memh_);
      throw TransportError("ucx: ucp_rkey_pack failed: " + status_text(s));
    }
    key_.reserve(24 + packed_len);
    put_u32(key_, kKeyMagic);
    put_u32(key_, kBlobVersion);
    put_u64(key_, reinterpret_cast<uint64_t>(addr_));
    put_u64(key_, bytes_);
    put_u64(key_, packed_len);
    const auto* pb = static_cast<const uint8_t*>(packed);
    key_.insert(key_.end(), pb, pb + packed_len);
    ucp_rkey_buffer_release(packed);
  }
  ~UcxMemory() override {
    ucs_status_t s = ucp_mem_unmap(ctx_, memh_);
    if (s != UCS_OK) std::fprintf(stderr, "rwin: ucx: ucp_mem_unmap failed: %s\n", ucs_status_string(s));
  }
  std::vector<uint8_t> packed_key() const override { return key_; }
  ucp_mem_h memh() const noexcept { return memh_; }

 private:
  ucp_context_h ctx_;
  ucp_mem_h memh_ = nullptr;
  std::vector<uint8_t> key_;
};

class UcxRemoteKey final : public RemoteKey {
 public:
  UcxRemoteKey(ucp_rkey_h rkey, uint64_t base, size_t bytes) : rkey_(rkey) {
    base_ = base;
    bytes_ = bytes;
  }
  ~UcxRemoteKey() override { ucp_rkey_destroy(rkey_); }
  ucp_rkey_h get() const noexcept { return rkey_; }

 private:
  ucp_rkey_h rkey_;
};

// One in-flight request. Owned by the transport's pool; user_data of the UCX request points here.
struct Pending {
  UcxTransport* self = nullptr;
  uint64_t cookie = 0;
  Op op = Op::Write;
  int peer = -1;
  size_t bytes = 0;
  uint64_t remote_addr = 0;
  uint64_t operand = 0;  // atomic operand: must stay valid until completion
  uint64_t reply = 0;    // atomic reply (swap value in for CSWAP)
  void* user_reply = nullptr;
};

class UcxTransport final : public Transport {
 public:
  explicit UcxTransport(const TransportConfig& cfg) : rank_(cfg.rank), nranks_(cfg.nranks) {
    ucp_config_t* config = nullptr;
    ucs_status_t s = ucp_config_read(nullptr, nullptr, &config);
    if (s != UCS_OK) throw TransportError("ucx: ucp_config_read failed: " + status_text(s));
    // Keep UCX's tcp on the interface that reaches the root (a host may have several). Only where
    // the user did not choose devices and no RDMA device exists: NET_DEVICES would hide those.
    const char* devices = std::getenv("UCX_NET_DEVICES");
    if (!cfg.ifname.empty() && (devices == nullptr || *devices == '\0') && !have_rdma_devices()) {
      ucp_config_modify(config, "NET_DEVICES", cfg.ifname.c_str());
      net_device_ = cfg.ifname;
    }
    ucp_params_t params{};
    params.field_mask = UCP_PARAM_FIELD_FEATURES;
    params.features = UCP_FEATURE_RMA | UCP_FEATURE_AMO64 | UCP_FEATURE_AMO32;
    ucp_context_h ctx = nullptr;
    s = ucp_init(&params, config, &ctx);
    ucp_config_release(config);
    if (s != UCS_OK) throw TransportError("ucx: ucp_init failed: " + status_text(s));
    context_.reset(ctx);

    ucp_worker_params_t wp{};
    wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    wp.thread_mode = UCS_THREAD_MODE_SINGLE;  // a Context is used by one thread at a time
    ucp_worker_h worker = nullptr;
    s = ucp_worker_create(context_.get(), &wp, &worker);
    if (s != UCS_OK) throw TransportError("ucx: ucp_worker_create failed: " + status_text(s));
    worker_.reset(worker);
    const char* tls = std::getenv("UCX_TLS");
    tls_ = tls && *tls ? tls : "all";
    peers_.resize(static_cast<size_t>(nranks_));
  }

  ~UcxTransport() override {
    close_endpoints();
    // Requests still in flight were released by the forced close; return their records.
    for (Pending* p : in_flight_) delete p;
    for (Pending* p : pool_) delete p;
  }

  std::string describe() const override {
    return "ucx(" + tls_ + (net_device_.empty() ? "" : " on " + net_device_) + ")";
  }

  Capabilities capabilities() const override {
    Capabilities c;
    c.max_message_bytes = SIZE_MAX;  // UCX fragments internally; the core still chunks to pipeline
    c.write_then_atomic_ordered = false;
    c.needs_target_progress = true;  // true over tcp; harmless (one progress call) over shm
    c.native_set = true;             // UCP_ATOMIC_OP_SWAP
    return c;
  }

  void connect(bootstrap::Bootstrap& bs) override {
    ucp_address_t* addr = nullptr;
    size_t addr_len = 0;
    ucs_status_t s = ucp_worker_get_address(worker_.get(), &addr, &addr_len);
    if (s != UCS_OK) throw TransportError("ucx: ucp_worker_get_address failed: " + status_text(s));
    std::vector<uint8_t> blob;
    put_u32(blob, kAddrMagic);
    put_u32(blob, kBlobVersion);
    put_u64(blob, addr_len);
    const auto* ab = reinterpret_cast<const uint8_t*>(addr);
    blob.insert(blob.end(), ab, ab + addr_len);
    ucp_worker_release_address(worker_.get(), addr);

    const auto all = bs.allgather(blob);
    for (int p = 0; p < nranks_; ++p) {
      const auto& b = all[static_cast<size_t>(p)];
      if (b.size() < 16 || get_pod<uint32_t>(b, 0) != kAddrMagic || get_pod<uint32_t>(b, 4) != kBlobVersion ||
          get_pod<uint64_t>(b, 8) != b.size() - 16) {
        throw TransportError("ucx: rank " + std::to_string(rank_) + ": malformed worker address from rank " +
                             std::to_string(p) + " (" + std::to_string(b.size()) + " bytes)");
      }
      peers_[static_cast<size_t>(p)].ep = create_ep(p, b.data() + 16);
    }
  }

  std::unique_ptr<MemoryRegion> allocate(size_t bytes) override {
    return std::make_unique<UcxMemory>(context_.get(), bytes);
  }

  std::unique_ptr<RemoteKey> unpack_key(int peer, std::span<const uint8_t> b) override {
    if (peer < 0 || peer >= nranks_ || !peers_[static_cast<size_t>(peer)].ep) {
      throw TransportError("ucx: unpack_key for unknown peer " + std::to_string(peer));
    }
    if (b.size() < 32 || get_pod<uint32_t>(b, 0) != kKeyMagic || get_pod<uint32_t>(b, 4) != kBlobVersion ||
        get_pod<uint64_t>(b, 24) != b.size() - 32) {
      throw TransportError("ucx: rank " + std::to_string(rank_) + ": malformed memory key from rank " +
                           std::to_string(peer) + " (" + std::to_string(b.size()) + " bytes)");
    }
    ucp_rkey_h rkey = nullptr;
    ucs_status_t s = ucp_ep_rkey_unpack(peers_[static_cast<size_t>(peer)].ep, b.data() + 32, &rkey);
    if (s != UCS_OK) {
      throw TransportError("ucx: rank " + std::to_string(rank_) + ": ucp_ep_rkey_unpack for rank " +
                           std::to_string(peer) + " failed: " + status_text(s));
    }
    return std::make_unique<UcxRemoteKey>(rkey, get_pod<uint64_t>(b, 8), get_pod<uint64_t>(b, 16));
  }

  PostResult post(const Work& w) override {
    Peer& peer = peers_[static_cast<size_t>(w.peer)];
    if (!peer.error.empty()) return PostResult::PeerFailed;
    Pending* p = take();
    p->cookie = w.cookie;
    p->op = w.op;
    p->peer = w.peer;
    p->bytes = w.bytes;
    p->remote_addr = w.remote_addr;
    p->user_reply = nullptr;

    ucp_request_param_t param{};
    param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    param.cb.send = &UcxTransport::on_done;
    param.user_data = p;
    ucp_rkey_h rkey = w.rkey ? static_cast<const UcxRemoteKey*>(w.rkey)->get() : nullptr;
    if (w.local_mr && (w.op == Op::Write || w.op == Op::Read)) {
      // Window memory is UCX's own: passing its handle skips a registration-cache lookup.
      param.op_attr_mask |= UCP_OP_ATTR_FIELD_MEMH;
      param.memh = static_cast<const UcxMemory*>(w.local_mr)->memh();
    }
    ucs_status_ptr_t req = nullptr;
    switch (w.op) {
      case Op::Write:
        req = ucp_put_nbx(peer.ep, w.local, w.bytes, w.remote_addr, rkey, &param);
        break;
      case Op::Read:
        req = ucp_get_nbx(peer.ep, w.local, w.bytes, w.remote_addr, rkey, &param);
        break;
      case Op::AtomicAdd:
      case Op::FetchAdd:
      case Op::Swap:
      case Op::CompareSwap: {
        param.op_attr_mask |= UCP_OP_ATTR_FIELD_DATATYPE;
        param.datatype = ucp_dt_make_contig(8);
        ucp_atomic_op_t opcode = UCP_ATOMIC_OP_ADD;
        p->operand = w.operand;
        if (w.op != Op::AtomicAdd) {
          param.op_attr_mask |= UCP_OP_ATTR_FIELD_REPLY_BUFFER;
          param.reply_buffer = &p->reply;
          p->user_reply = w.local;  // copied out on completion (may be null for Swap)
        }
        if (w.op == Op::Swap) opcode = UCP_ATOMIC_OP_SWAP;
        if (w.op == Op::CompareSwap) {
          // CSWAP: buffer holds the expected value, reply_buffer the new value in, the old one out.
          opcode = UCP_ATOMIC_OP_CSWAP;
          p->operand = w.compare;
          p->reply = w.operand;
        }
        req = ucp_atomic_op_nbx(peer.ep, opcode, &p->operand, 1, w.remote_addr, rkey, &param);
        break;
      }
      case Op::Flush:
        req = ucp_ep_flush_nbx(peer.ep, &param);
        break;
    }
    if (req == nullptr) {
      finish(p, UCS_OK);
    } else if (UCS_PTR_IS_ERR(req)) {
      finish(p, UCS_PTR_STATUS(req));
    } else {
      in_flight_.push_back(p);
      p->self = this;
    }
    return PostResult::Ok;
  }

  void poll(std::vector<Completion>& out) override {
    // Work that finished inline (shm puts, most small ops) is handed back without touching the
    // worker; otherwise a few rounds of progress, as one call may advance a protocol by one step.
    // The core polls again while it waits, so targets of emulated ops still progress.
    if (done_.empty()) {
      for (int i = 0; i < 4 && ucp_worker_progress(worker_.get()) != 0; ++i) {
      }
    }
    if (!done_.empty()) {
      for (auto& c : done_) out.push_back(std::move(c));
      done_.clear();
    }
  }

  std::string peer_error(int peer) const override {
    if (peer < 0 || peer >= nranks_) return {};
    return peers_[static_cast<size_t>(peer)].error;
  }

 private:
  struct Peer {
    ucp_ep_h ep = nullptr;
    std::string error;
  };
  struct ErrArg {
    UcxTransport* self;
    int peer;
  };

  ucp_ep_h create_ep(int peer, const uint8_t* address) {
    err_args_.push_back(ErrArg{this, peer});
    ucp_ep_params_t ep{};
    ep.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                    UCP_EP_PARAM_FIELD_ERR_HANDLER;
    ep.address = reinterpret_cast<const ucp_address_t*>(address);
    // Error handling mode NONE, deliberately: in UCX 1.13 the shared-memory transports (posix,
    // sysv, self) have no peer-failure handler, so asking for MODE_PEER makes UCP route every
    // operation, even between two processes on one node, over tcp active messages (measured with
    // UCX_LOG_LEVEL=info: "rma_am(tcp/lo) amo_am(tcp/lo)"). A dead peer is caught instead by the
    // core's deadlines, and over tcp by the connection error UCX still reports to the handler.
    ep.err_mode = UCP_ERR_HANDLING_MODE_NONE;
    ep.err_handler.cb = &UcxTransport::on_ep_error;
    ep.err_handler.arg = &err_args_.back();
    ucp_ep_h h = nullptr;
    const ucs_status_t s = ucp_ep_create(worker_.get(), &ep, &h);
    if (s != UCS_OK) {
      throw TransportError("ucx(" + tls_ + "): rank " + std::to_string(rank_) + ": ucp_ep_create to rank " +
                           std::to_string(peer) + " failed: " + status_text(s));
    }
    return h;
  }

  static void on_ep_error(void* arg, ucp_ep_h, ucs_status_t status) {
    auto* a = static_cast<ErrArg*>(arg);
    Peer& peer = a->self->peers_[static_cast<size_t>(a->peer)];
    if (peer.error.empty()) {
      peer.error = "ucx(" + a->self->tls_ + "): rank " + std::to_string(a->self->rank_) + " -> peer " +
                   std::to_string(a->peer) + ": endpoint failed: " + status_text(status);
    }
  }

  static void on_done(void* request, ucs_status_t status, void* user_data) {
    auto* p = static_cast<Pending*>(user_data);
    UcxTransport* self = p->self;
    ucp_request_free(request);
    auto& v = self->in_flight_;
    for (size_t i = 0; i < v.size(); ++i) {
      if (v[i] == p) {
        v[i] = v.back();
        v.pop_back();
        break;
      }
    }
    self->finish(p, status);
  }

  void finish(Pending* p, ucs_status_t status) {
    Completion c;
    c.cookie = p->cookie;
    c.ok = status == UCS_OK;
    if (c.ok) {
      if (p->user_reply) std::memcpy(p->user_reply, &p->reply, 8);
    } else {
      Peer& peer = peers_[static_cast<size_t>(p->peer)];
      c.error = "ucx(" + tls_ + "): rank " + std::to_string(rank_) + " -> peer " + std::to_string(p->peer) + ": " +
                op_name(p->op) + " of " + std::to_string(p->bytes) + " bytes at remote address 0x" + hex(p->remote_addr) +
                " failed: " + status_text(status);
      if (peer.error.empty()) peer.error = c.error;
    }
    done_.push_back(std::move(c));
    pool_.push_back(p);
  }

  static std::string hex(uint64_t v) {
    char buf[24];
    std::snprintf(buf, sizeof buf, "%llx", static_cast<unsigned long long>(v));
    return buf;
  }

  Pending* take() {
    if (pool_.empty()) return new Pending();
    Pending* p = pool_.back();
    pool_.pop_back();
    return p;
  }

  // Flush-close every endpoint, bounded; force-close what does not finish (dead peers).
  void close_endpoints() noexcept {
    std::vector<ucs_status_ptr_t> reqs;
    for (auto& peer : peers_) {
      if (!peer.ep) continue;
      ucp_request_param_t param{};
      param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
      param.flags = peer.error.empty() ? 0 : UCP_EP_CLOSE_FLAG_FORCE;
      ucs_status_ptr_t r = ucp_ep_close_nbx(peer.ep, &param);
      if (r && UCS_PTR_IS_PTR(r)) reqs.push_back(r);
      peer.ep = nullptr;
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    for (ucs_status_ptr_t r : reqs) {
      while (ucp_request_check_status(r) == UCS_INPROGRESS && std::chrono::steady_clock::now() < deadline) {
        ucp_worker_progress(worker_.get());
      }
      if (ucp_request_check_status(r) == UCS_INPROGRESS) {
        std::fprintf(stderr, "rwin: ucx: rank %d: endpoint close did not finish within 2 s; releasing it\n", rank_);
      }
      ucp_request_free(r);
    }
  }

  int rank_;
  int nranks_;
  std::string tls_;
  std::string net_device_;  // the tcp interface we restricted UCX to, if any
  // Declaration order is teardown order reversed: context outlives worker outlives endpoints.
  ContextPtr context_;
  WorkerPtr worker_;
  std::vector<Peer> peers_;
  std::deque<ErrArg> err_args_;  // stable addresses for the error-handler argument
  std::vector<Pending*> in_flight_;
  std::vector<Pending*> pool_;
  std::vector<Completion> done_;
};

}  // namespace

std::unique_ptr<Transport> make_ucx_transport(const TransportConfig& cfg) {
  return std::make_unique<UcxTransport>(cfg);
}

}  // namespace rwin::transport
