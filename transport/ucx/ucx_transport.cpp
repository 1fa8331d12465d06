// UCX (ucp) transport.
//
// Design notes:
//  * Window memory is allocated by UCX (ucp_mem_map with ALLOCATE). Only memory UCX allocates can
//    be reached through the posix/sysv shared-memory transports; registered malloc memory makes
//    UCP fall back to active-message emulation even on one node (see shared perf baselines).
//  * One worker per process, one endpoint per rank (self included), created from worker
//    addresses exchanged through the bootstrap.
//  * Each peer is reached in one of three modes, chosen at connect() (TransportConfig::ucx_rma):
//    - direct (auto only): the peer's memory is mapped into this process by UCX (ucp_rkey_ptr on
//      its probe region succeeds: posix/sysv on the same host). Put, get and atomics are CPU
//      copies and __atomic operations on the mapping (ucx_direct.h), done before post() returns,
//      as OpenSHMEM's shmem_ptr path does; UCX does the same copies underneath, so this only drops
//      its request machinery (~40 ns of an 8-byte put). A later atomic is ordered after earlier
//      stores, so write_then_atomic_ordered(peer) is true and a notify needs no flush.
//    - native: ucp_put/get/atomic_op_nbx. Puts and atomics to the same endpoint are NOT ordered by
//      UCX, so write_then_atomic_ordered(peer) is false and the core flushes the endpoint
//      (ucp_ep_flush_nbx) before a notify that follows unflushed writes, and only then.
//      ucp_worker_fence is cheaper over tcp but in 1.13 it is a weak, per-interface fence with no
//      promise across the lanes one endpoint may use for RMA and AMO, so it is not used.
//    - am: rwin's own ordered protocol on UCP active messages (see "am mode" below). Used where
//      UCX itself would emulate RMA with active messages (tcp): doing it ourselves lets the
//      target order atomics after writes, so the core needs no round-trip flush before a notify,
//      and a put is one message instead of UCX's emulation. Measured over tcp loopback (rwin-perf,
//      p50): put+notify 8 B ~7.5 us (one batched message, see "batching"; ~12.5 before it) vs
//      ~45 native, 1 MiB put_bw ~3400-3800 vs ~600 MiB/s, put_bw 8 B ~0.8-1.0 us per op (~5
//      unbatched). TCP busy-poll ping-pong one way (rwin_tcp_ref) measured 3.3 us alongside: the
//      rest of the gap is UCX's per-message cost.
//  * "auto" picks direct where the probe maps, and am for a peer when its probe region's rkey gives no direct pointer
//    (ucp_rkey_ptr fails: not shared memory) and the host has no RDMA device (so UCX could only
//    use tcp, where RMA is emulated); native otherwise. Chosen over parsing ucp_ep_print_info for
//    rma_am/amo_am lanes because that text is a debugging format with no stability promise,
//    while rkey_ptr and /sys/class/infiniband are stable facts. Limit: a host with an RDMA device
//    but UCX_TLS=tcp stays native under auto; RWIN_UCX_RMA=am forces the am mode there.
//  * Both modes need the target to progress (ucp_worker_progress from poll()), so capabilities()
//    reports needs_target_progress and the core polls while it waits.
//  * Endpoints use UCP_ERR_HANDLING_MODE_NONE (see create_ep for why); a dead peer is found by the
//    core's deadlines, and a failed request or endpoint makes that peer failed (sticky).
//
// am mode protocol (three AM ids: requests, batches of requests, replies):
//  * Every request carries a fixed header {magic, op, sender rank, seq, target address, length,
//    operand, compare, token}. seq counts requests per (sender -> target) from 0.
//    Write: header + payload, eager up to kEagerMax, above it UCP's choice (rendezvous over tcp);
//    completes at local send completion.
//    AtomicAdd: header only; completes at local send completion.
//    Read / FetchAdd / Swap / CompareSwap / Flush: header; the target answers with a reply
//    {token, status, old value} (+ the data for Read). The token is a key in awaiting_, so a
//    reply for an abandoned or unknown token is ignored, never dereferenced.
//  * Ordering at the target, per sender: messages are admitted strictly in seq order (one that
//    arrives early is held, copied or as its rendezvous descriptor, until its turn). A Write is
//    applied at once (eager: memcpy into the window; rendezvous: ucp_am_recv_data_nbx straight
//    into the window, counted as pending until its callback), unless it overlaps a rendezvous
//    write from that sender still pending: then it waits for it (the older data must not land
//    over the newer). Any other op
//    waits while rendezvous writes from that sender are pending, and once something waits,
//    everything after it from that sender queues behind it (per-sender FIFO). Hence an atomic
//    lands after every earlier write, and write_then_atomic_ordered(peer) is true for am peers.
//  * Batching (initiator): a Write of at most kStageMax bytes is not sent: its header and payload
//    are appended to the peer's batch (Peer::stage) and it completes at once, its source copied.
//    The batch leaves as ONE message (kAmBatchId, header AmBatch, data = the requests back to
//    back) when a non-Write op is posted to that peer (appended first: put + notify is one
//    message, and the op completes with the batch's send), before a Write too large to stage
//    (order kept by seq anyway), or when the next Write would push it past kBatchMax. poll()
//    never sends it: the core's blocking put polls until its Write completes and the user then
//    notifies, so sending from poll would split the pair into two messages again, and over tcp
//    each message costs the sender a send syscall (~7 us on loopback). transport.h allows this:
//    a put is only promised visible after notify/fence/quiet/barrier, and each of those posts a
//    non-Write op or a Flush to the peer (core/src/context.cpp: notify posts its atomic; quiet,
//    fence and barrier flush every peer with unflushed writes; ~Context barriers; freeing a
//    window barriers). The destructor still sends what a healthy peer has staged before closing
//    the endpoints, for a shutdown whose barrier failed. A failed batch send fails the peer
//    (sticky); the appended op, if any, completes with the error, and the Writes that already
//    completed surface through the peer failure at the next op, as for any lost Write.
//  * Batching (target): each request of a batch is admitted exactly as if it had come alone (own
//    seq, own validation), so an out-of-window Write in a batch is dropped alone: nothing of it is
//    written, the requests before and after it apply, and the sender's next Flush fails. Only a
//    broken framing (a header that is not a request, a payload running past the data) stops the
//    parse: what follows cannot be located, and it is named on stderr.
//  * Atomics use __atomic builtins (std::atomic_ref) on the 8-byte word, so they are atomic
//    against shm peers' native atomics and the owner's loads.
//  * Every [addr, addr+len) is checked against the live windows of this transport (a registry
//    UcxMemory joins and leaves); anything else is dropped with one line on stderr, fetching ops
//    and Reads get a "rejected" reply, and the sender's next Flush fails.
//  * Replies are queued in the AM callback and sent from poll() after progress (UCX forbids some
//    calls inside callbacks); poll() retries those UCX could not take yet.
#include "transport/ucx/ucx_transport.h"

#include <ucp/api/ucp.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "bootstrap/bootstrap.h"
#include "transport/ucx/ucx_am_wire.h"
#include "transport/ucx/ucx_blob.h"
#include "transport/ucx/ucx_direct.h"
#include "common/log.h"

namespace rwin::transport {
namespace {

constexpr uint16_t kAmRequestId = 17;
constexpr uint16_t kAmReplyId = 18;
constexpr uint16_t kAmBatchId = 19;  // several requests in one message (staged small writes + the op after)
constexpr size_t kProbeBytes = 4096;
// am payloads up to this size go eager (UCP_AM_SEND_FLAG_EAGER); larger ones are UCP's choice
// (rendezvous over tcp). UCP's own threshold over tcp lies near 64 KiB, and a rendezvous costs
// several steps that each need the target to progress. Measured over tcp loopback (rwin-perf
// put_bw, MiB/s, noisy shared host): 64 KiB 246 rendezvous vs ~3000 eager; 256 KiB ~920 vs
// ~3500; 512 KiB ~3000-4300 eager; 1 MiB rendezvous ~2100-2500 vs eager ~1500-1700. Eager costs
// one extra copy at the target and a UCP buffer of the message size there, hence the bound.
// UCX_RNDV_THRESH set by the user disables this (eager_max_ = 0): the choice is then UCP's.
constexpr size_t kEagerMax = 512 << 10;
constexpr size_t kMaxEarly = 1 << 16;  // bound on out-of-order messages held per sender
// am Writes up to kStageMax bytes are copied into the peer's batch at post() and complete at once;
// the batch leaves as one message with the next non-Write op to that peer (see "batching" in the
// notes). kBatchMax bounds one batch (headers + payloads): it is always sent eager, so the
// target needs at most this much UCP buffer per batch, and a full batch leaves by itself.
constexpr size_t kStageMax = 8 << 10;
constexpr size_t kBatchMax = 64 << 10;

std::string status_text(ucs_status_t s) { return ucs_status_string(s); }

bool have_rdma_devices() {
  std::error_code ec;
  std::filesystem::directory_iterator it("/sys/class/infiniband", ec);
  return !ec && it != std::filesystem::directory_iterator();
}

std::string hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "%llx", static_cast<unsigned long long>(v));
  return buf;
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

// The live windows of one transport: the am target writes only inside these. Shared with every
// UcxMemory so a region may outlive the transport without a dangling back pointer.
struct Registry {
  std::map<uint64_t, uint64_t> ranges;  // base -> bytes
  bool contains(uint64_t addr, uint64_t len) const {
    auto it = ranges.upper_bound(addr);
    if (it == ranges.begin()) return false;
    --it;
    const uint64_t off = addr - it->first;
    return off <= it->second && len <= it->second - off;
  }
};

// Every MemoryRegion this transport hands out: the UCX memory handle passed with a Write/Read's
// local side (ucp_put/get_nbx skip a registration-cache lookup with it), null for caller memory.
class UcxRegion : public MemoryRegion {
 public:
  ucp_mem_h memh() const noexcept { return memh_; }

 protected:
  ucp_mem_h memh_ = nullptr;
};

class UcxMemory final : public UcxRegion {
 public:
  UcxMemory(ucp_context_h ctx, size_t bytes, std::shared_ptr<Registry> registry)
      : ctx_(ctx), registry_(std::move(registry)) {
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
    const auto* pb = static_cast<const uint8_t*>(packed);
    raw_key_.assign(pb, pb + packed_len);
    ucp_rkey_buffer_release(packed);
    key_ = ucx_blob::pack_key(reinterpret_cast<uint64_t>(addr_), bytes_, raw_key_);
    if (registry_) registry_->ranges[reinterpret_cast<uint64_t>(addr_)] = bytes_;
  }
  ~UcxMemory() override {
    if (registry_) registry_->ranges.erase(reinterpret_cast<uint64_t>(addr_));
    ucs_status_t s = ucp_mem_unmap(ctx_, memh_);
    if (s != UCS_OK) RWIN_LOG(Warn, Ucx, "rwin: ucx: ucp_mem_unmap failed: %s", ucs_status_string(s));
  }
  UcxMemory(const UcxMemory&) = delete;
  UcxMemory& operator=(const UcxMemory&) = delete;
  std::vector<uint8_t> packed_key() const override { return key_; }
  const std::vector<uint8_t>& raw_key() const noexcept { return raw_key_; }

 private:
  ucp_context_h ctx_;
  std::shared_ptr<Registry> registry_;
  std::vector<uint8_t> key_;
  std::vector<uint8_t> raw_key_;  // ucp_rkey_pack output alone (the probe's goes into the address blob)
};

// Caller memory as a local region (register_memory): registers nothing. Every mode takes any local
// pointer: native passes it to ucp_put/get_nbx without a memh (UCX registers through its own
// hooked registration cache where a zero-copy protocol needs it, or copies); am sends it as the
// payload of ucp_am_send_nbx, copies it into a batch, or receives a Read's reply into it
// (memcpy or ucp_am_recv_data_nbx); direct copies with the CPU (ucx_direct.h).
class UcxCallerMemory final : public UcxRegion {
 public:
  UcxCallerMemory(void* addr, size_t bytes) {
    addr_ = addr;
    bytes_ = bytes;
  }
  std::vector<uint8_t> packed_key() const override {
    throw TransportError("ucx: caller memory registered with register_memory() is local only: it has no key for peers");
  }
};

class UcxRemoteKey final : public RemoteKey {
 public:
  UcxRemoteKey(ucp_rkey_h rkey, uint64_t base, size_t bytes) : rkey_(rkey) {
    base_ = base;
    bytes_ = bytes;
  }
  ~UcxRemoteKey() override { ucp_rkey_destroy(rkey_); }
  ucp_rkey_h get() const noexcept { return rkey_; }
  // Direct peers: this process's address of the peer's byte 0 (ucp_rkey_ptr), else null.
  char* mapped() const noexcept { return mapped_; }
  void set_mapped(void* p) noexcept { mapped_ = static_cast<char*>(p); }

 private:
  ucp_rkey_h rkey_;
  char* mapped_ = nullptr;
};

// Wire headers and pure checks of the am mode: ucx_am_wire.h.
using ucx_am::AmBatch;
using ucx_am::AmReply;
using ucx_am::AmRequest;
using ucx_am::AmStatus;
using ucx_am::kAmMagic;

class UcxTransport;

// One posted Work. Owned by the transport (all_); user_data of its UCX requests points here. It
// returns to the pool only when every event it waits for (send completion, reply, reply data)
// has happened, so no UCX callback can see it reused.
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
  void* local = nullptr;  // am Read destination
  int waits = 0;          // events still to come
  ucs_status_t status = UCS_OK;
  const char* why = nullptr;  // failure text that is not a UCX status
  uint64_t token = 0;         // am: key in awaiting_ while a reply is expected
  AmRequest req;              // am: the header, valid until the send completes (no COPY_HEADER in 1.13)
};

// One peer's staged requests (am mode), then the message carrying them. Owned by the transport
// (batches_); user_data of its send points here, and it returns to the pool only after that
// send completed, so the buffer UCX reads stays put.
struct Batch {
  UcxTransport* self = nullptr;
  int peer = -1;
  AmBatch hdr;                // the wire header, valid until the send completes
  std::vector<uint8_t> buf;   // requests back to back
  uint32_t writes = 0;        // staged Writes in buf (already completed to the caller)
  Pending* tail = nullptr;    // the non-Write op that closed the batch: owed its send completion
};

// A reply the target owes; heap owned until its send completes.
struct OutReply {
  UcxTransport* self = nullptr;
  int to = -1;
  AmReply hdr;
  const void* data = nullptr;  // Read: the window bytes (stable while the window lives)
  size_t len = 0;
};

// Context of one rendezvous receive into a window at the target.
struct RecvCtx {
  UcxTransport* self = nullptr;
  int sender = -1;
  uint64_t addr = 0;
  uint64_t len = 0;
  bool posting = false;   // inside ucp_am_recv_data_nbx
  bool finished = false;  // its callback ran while posting (UCX does that for a failed endpoint)
};

// A request message at the target that cannot be applied yet (early or queued behind a
// pending rendezvous): its header and either its copied payload or its rendezvous descriptor.
struct Held {
  AmRequest h;
  std::vector<uint8_t> payload;
  void* desc = nullptr;  // rendezvous descriptor (ours until recv or release)
  uint64_t rndv_len = 0;
};

class UcxTransport final : public Transport {
 public:
  explicit UcxTransport(const TransportConfig& cfg)
      : rank_(cfg.rank), nranks_(cfg.nranks), rma_mode_(cfg.ucx_rma.empty() ? "auto" : cfg.ucx_rma) {
    if (rma_mode_ != "auto" && rma_mode_ != "native" && rma_mode_ != "am") {
      throw TransportError("ucx: rma mode '" + rma_mode_ + "' is not one of auto, native, am");
    }
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
    // Without RDMA devices UCX reaches remote peers over tcp. In UCX 1.13 a peer dying while a
    // zero-copy tcp send to it is in flight crashed survivors inside ucp_worker_progress (assertions
    // tcp_ep.c:939 PUT_TX_WAITING_ACK and uct_iface.h:884 comp->count > 0; fault suite on a loaded
    // host, a few percent of kill trials): so by default UCP copies instead (ZCOPY_THRESH=inf; a
    // UCT option such as TCP_PUT_ENABLE cannot be set through the ucp config: UCX warns it invalid).
    // Costs tcp bandwidth (bench/RESULTS.md); RWIN_UCX_TCP_ZCOPY=1 or the user's own
    // UCX_ZCOPY_THRESH take it back.
    if (!cfg.ucx_tcp_zcopy && !have_rdma_devices()) {
      const char* zt = std::getenv("UCX_ZCOPY_THRESH");
      if (zt == nullptr || *zt == '\0') {
        const ucs_status_t zs = ucp_config_modify(config, "ZCOPY_THRESH", "inf");
        safe_tcp_ = zs == UCS_OK;
        if (zs != UCS_OK) RWIN_LOG(Warn, Ucx, "rwin: ucx: cannot set ZCOPY_THRESH=inf: %s", ucs_status_string(zs));
      }
    }
    ucp_params_t params{};
    params.field_mask = UCP_PARAM_FIELD_FEATURES;
    params.features = UCP_FEATURE_RMA | UCP_FEATURE_AMO64 | UCP_FEATURE_AMO32;
    // The am feature only where am may be used, so "native" is exactly the former configuration.
    if (rma_mode_ != "native") params.features |= UCP_FEATURE_AM;
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
    inbound_.resize(static_cast<size_t>(nranks_));
    const char* rt = std::getenv("UCX_RNDV_THRESH");
    if (rt && *rt) eager_max_ = 0;  // the user tunes UCP's choice: leave it to UCP entirely
    if (rma_mode_ != "native") {
      set_am_handler(kAmRequestId, &UcxTransport::on_am_request);
      set_am_handler(kAmReplyId, &UcxTransport::on_am_reply);
      set_am_handler(kAmBatchId, &UcxTransport::on_am_batch);
    }
  }

  ~UcxTransport() override {
    quiesce(false);  // the core has quiesced already; this covers a transport used on its own
    for (OutReply* r : replies_) delete r;
    for (OutReply* r : replies_sent_) delete r;
    for (RecvCtx* r : recvs_) delete r;
  }

  std::string describe() const override {
    std::string s = "ucx(" + tls_ + (net_device_.empty() ? "" : " on " + net_device_);
    int am = 0, direct = 0;
    for (const auto& p : peers_) {
      am += p.am ? 1 : 0;
      direct += p.direct ? 1 : 0;
    }
    if (direct == nranks_) {
      s += ", direct shm";
    } else if (direct > 0) {
      s += ", direct shm to " + std::to_string(direct) + " of " + std::to_string(nranks_) + " peers";
    }
    if (am == nranks_ && am > 0) {
      s += ", am rma";
    } else if (am > 0) {
      s += ", am rma to " + std::to_string(am) + " of " + std::to_string(nranks_) + " peers";
    }
    if (safe_tcp_ && am > 0) s += ", copied tcp sends";
    return s + ")";
  }

  Capabilities capabilities() const override {
    Capabilities c;
    c.max_message_bytes = SIZE_MAX;  // UCX fragments internally; the core still chunks to pipeline
    c.write_then_atomic_ordered = false;  // per peer: write_then_atomic_ordered(peer)
    c.needs_target_progress = true;  // true over tcp; harmless (one progress call) over shm
    c.native_set = true;             // UCP_ATOMIC_OP_SWAP / the am target's exchange
    c.local_needs_registration = false;  // any local pointer (UcxCallerMemory)
    return c;
  }

  std::string rma_mode(int peer) const override {
    if (peer < 0 || peer >= nranks_) return "native";
    const Peer& p = peers_[static_cast<size_t>(peer)];
    return p.direct ? "direct" : p.am ? "am" : "native";
  }

  bool write_then_atomic_ordered(int peer) const override {
    return peer >= 0 && peer < nranks_ && (peers_[static_cast<size_t>(peer)].am || peers_[static_cast<size_t>(peer)].direct);
  }

  void connect(bootstrap::Bootstrap& bs) override {
    // The probe region tells a peer whether it reaches us through shared memory (see the notes).
    if (rma_mode_ == "auto") probe_ = std::make_unique<UcxMemory>(context_.get(), kProbeBytes, nullptr);
    ucp_address_t* addr = nullptr;
    size_t addr_len = 0;
    ucs_status_t s = ucp_worker_get_address(worker_.get(), &addr, &addr_len);
    if (s != UCS_OK) throw TransportError("ucx: ucp_worker_get_address failed: " + status_text(s));
    // Blob (ucx_blob.h): the worker address and, under auto, the probe region's base and key.
    const std::vector<uint8_t> blob = ucx_blob::pack_addr(
        std::span(reinterpret_cast<const uint8_t*>(addr), addr_len),
        probe_ ? reinterpret_cast<uint64_t>(probe_->addr()) : 0,
        probe_ ? std::span<const uint8_t>(probe_->raw_key()) : std::span<const uint8_t>());
    ucp_worker_release_address(worker_.get(), addr);

    const auto all = bs.allgather(blob);
    for (int p = 0; p < nranks_; ++p) {
      const auto& b = all[static_cast<size_t>(p)];
      const auto bad = [&] {
        return TransportError("ucx: rank " + std::to_string(rank_) + ": malformed worker address from rank " +
                              std::to_string(p) + " (" + std::to_string(b.size()) + " bytes)");
      };
      const auto a = ucx_blob::parse_addr(b);
      if (!a) throw bad();
      Peer& peer = peers_[static_cast<size_t>(p)];
      peer.ep = create_ep(p, a->address.data());
      peer.am = choose_am(p, peer.ep, a->probe_base, a->probe_key.data(), a->probe_key.size(), peer.direct);
      any_am_ = any_am_ || peer.am;
      RWIN_LOG(Debug, Ucx, "ucx(%s): rank %d -> peer %d: endpoint created (%zu-byte worker address), rma mode %s%s", tls_.c_str(),
               rank_, p, a->address.size(), peer.direct ? "direct" : peer.am ? "am" : "native",
               a->probe_key.empty() ? "" : ", probe key received");
      if (peer.am && p != rank_) {
        // An am peer is reached over tcp: give it an endpoint with peer-failure handling. With
        // MODE_NONE, UCX 1.13's tcp transport asserted (tcp_ep.c:939, PUT_TX_WAITING_ACK) in a
        // survivor's progress when other ranks vanished mid-transfer (fault suite, loaded host).
        // The probe endpoint closes with a flush (every rank is alive and progressing in wire-up).
        if (ucp_ep_h h = create_ep(p, b.data() + 16, UCP_ERR_HANDLING_MODE_PEER, true)) {
          ucp_request_param_t param{};
          ucs_status_ptr_t r = ucp_ep_close_nbx(peer.ep, &param);
          if (r && UCS_PTR_IS_PTR(r)) closing_reqs_.push_back(r);
          peer.ep = h;
        }
      }
    }
    wire_up(bs);
    RWIN_LOG(Debug, Ucx, "ucx(%s): rank %d: wired up to %d ranks", tls_.c_str(), rank_, nranks_);
  }

  std::unique_ptr<MemoryRegion> allocate(size_t bytes) override {
    return std::make_unique<UcxMemory>(context_.get(), bytes, registry_);
  }

  std::unique_ptr<MemoryRegion> register_memory(void* addr, size_t bytes) override {
    if (addr == nullptr || bytes == 0) {
      char where[64];
      std::snprintf(where, sizeof where, "%p", addr);
      throw TransportError("ucx: rank " + std::to_string(rank_) + ": cannot register caller memory at " + where +
                           ", " + std::to_string(bytes) + " bytes: empty range");
    }
    return std::make_unique<UcxCallerMemory>(addr, bytes);
  }

  std::unique_ptr<RemoteKey> unpack_key(int peer, std::span<const uint8_t> b) override {
    if (peer < 0 || peer >= nranks_ || !peers_[static_cast<size_t>(peer)].ep) {
      throw TransportError("ucx: unpack_key for unknown peer " + std::to_string(peer));
    }
    const auto k = ucx_blob::parse_key(b);
    if (!k) {
      throw TransportError("ucx: rank " + std::to_string(rank_) + ": malformed memory key from rank " +
                           std::to_string(peer) + " (" + std::to_string(b.size()) + " bytes)");
    }
    ucp_rkey_h rkey = nullptr;
    ucs_status_t s = ucp_ep_rkey_unpack(peers_[static_cast<size_t>(peer)].ep, k->raw.data(), &rkey);
    if (s != UCS_OK) {
      throw TransportError("ucx: rank " + std::to_string(rank_) + ": ucp_ep_rkey_unpack for rank " +
                           std::to_string(peer) + " failed: " + status_text(s));
    }
    auto key = std::make_unique<UcxRemoteKey>(rkey, k->base, k->bytes);
    if (peers_[static_cast<size_t>(peer)].direct) {
      void* ptr = nullptr;
      s = ucp_rkey_ptr(rkey, key->base(), &ptr);
      if (s != UCS_OK) {  // the probe of this peer mapped; a window that does not is a UCX surprise
        throw TransportError("ucx: rank " + std::to_string(rank_) + ": window of rank " + std::to_string(peer) +
                             " is not mapped (ucp_rkey_ptr: " + status_text(s) +
                             ") though the peer's probe region was; set RWIN_UCX_RMA=native");
      }
      key->set_mapped(ptr);
    }
    return key;
  }

  void* mapped(int peer, const RemoteKey& key, uint64_t remote_addr, size_t bytes) const noexcept override {
    if (peer < 0 || peer >= nranks_ || !peers_[static_cast<size_t>(peer)].direct) return nullptr;
    const auto& rk = static_cast<const UcxRemoteKey&>(key);
    if (!rk.mapped() || remote_addr < rk.base() || remote_addr - rk.base() > rk.bytes() ||
        bytes > rk.bytes() - (remote_addr - rk.base())) {
      return nullptr;
    }
    return rk.mapped() + (remote_addr - rk.base());
  }

  PostResult post(const Work& w) override {
    Peer& peer = peers_[static_cast<size_t>(w.peer)];
    if (!peer.error.empty()) return PostResult::PeerFailed;
    if (peer.direct) {  // done before returning: loads, stores and atomics on the mapped window
      const auto* rk = static_cast<const UcxRemoteKey*>(w.rkey);
      // A Flush has no address (a caller may still pass a key): no pointer is formed for it.
      ucx_direct::apply(w, rk && w.op != Op::Flush ? rk->mapped() + (w.remote_addr - rk->base()) : nullptr);
      done_.push_back(Completion{w.cookie, true, {}});
      return PostResult::Ok;
    }
    Pending* p = take();
    p->self = this;
    p->cookie = w.cookie;
    p->op = w.op;
    p->peer = w.peer;
    p->bytes = w.op == Op::Write || w.op == Op::Read ? w.bytes : (w.op == Op::Flush ? 0 : 8);
    p->remote_addr = w.remote_addr;
    p->user_reply = nullptr;
    p->local = nullptr;
    p->status = UCS_OK;
    p->why = nullptr;
    p->token = 0;
    p->waits = 1;
    if (peer.am) {
      post_am(peer, p, w);
    } else {
      post_native(peer, p, w);
    }
    return PostResult::Ok;
  }

  void poll(std::vector<Completion>& out) override {
    if (quiesced_) {
      for (auto& c : done_) out.push_back(std::move(c));
      done_.clear();
      return;
    }
    // Work that finished inline (shm puts, most small ops) is handed back without touching the
    // worker; otherwise a few rounds of progress, as one call may advance a protocol by one step.
    // The core polls again while it waits, so targets of emulated ops still progress.
    // With am peers, a round that queued a reply or completed work stops the loop: the reply
    // leaves (and the completion returns) one progress syscall sooner.
    if (done_.empty()) {
      for (int i = 0; i < 4 && ucp_worker_progress(worker_.get()) != 0; ++i) {
        if (any_am_ && (!replies_.empty() || !done_.empty())) break;
      }
    }
    if (!closing_reqs_.empty()) reap_closes();
    if (am_work_) {
      drain_backlogs();
      send_replies();
      fail_abandoned();
      am_work_ = !replies_.empty() || backlog_count_ > 0;
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

  void fail_peer(int p, const std::string& why) noexcept override {
    if (p < 0 || p >= nranks_ || quiesced_) return;
    Peer& peer = peers_[static_cast<size_t>(p)];
    if (peer.error.empty()) peer.error = why;
    peer_failed_ = true;  // poll() fails the work still waiting for this peer's replies
    am_work_ = true;
    if (peer.stage) {  // its writes already completed to the caller; nobody will receive them
      batch_pool_.push_back(peer.stage);
      peer.stage = nullptr;
    }
    release_inbound(p);
    if (peer.ep && !peer.direct) {
      // Force: a dead peer acknowledges nothing. UCX cancels the endpoint's requests (their
      // callbacks run from later progress) and closes its sockets, so nothing more arrives from it.
      ucp_request_param_t param{};
      param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
      param.flags = UCP_EP_CLOSE_FLAG_FORCE;
      ucs_status_ptr_t r = ucp_ep_close_nbx(peer.ep, &param);
      if (r && UCS_PTR_IS_PTR(r)) closing_reqs_.push_back(r);
      peer.ep = nullptr;
    }
    // A direct (shared-memory) peer keeps its endpoint until quiesce(): no request of ours waits
    // on it (every direct op completes inside post()), and its mapping of our memory stays valid
    // for as long as it lives, whatever we do.
  }

  void quiesce(bool graceful) noexcept override {
    if (quiesced_) return;
    // Staged writes completed to the caller: they leave before the endpoints close (the core's
    // shutdown barrier flushes them already).
    for (auto& peer : peers_) {
      if (graceful && peer.stage && peer.error.empty() && peer.ep) send_stage(peer, nullptr);
    }
    // Descriptors we still hold go back to UCX while the worker exists.
    for (int p = 0; p < nranks_; ++p) release_inbound(p);
    close_endpoints(graceful);
    // Callbacks UCX runs while the worker is destroyed must touch nothing but their request.
    closing_ = true;
    probe_.reset();
    // With the worker gone no socket, shared-memory queue or rendezvous receive is left that
    // could write into a window: the core may now unmap them (ucp_mem_unmap needs the context
    // only, which lives on).
    worker_.reset();
    quiesced_ = true;
    for (int p = 0; p < nranks_; ++p) {
      Peer& peer = peers_[static_cast<size_t>(p)];
      if (peer.error.empty()) {
        peer.error = "ucx(" + tls_ + "): rank " + std::to_string(rank_) + " -> peer " + std::to_string(p) +
                     ": transport closed (context shutting down)";
      }
    }
  }

 private:
  struct Peer {
    ucp_ep_h ep = nullptr;
    std::string error;
    bool am = false;        // reached through the am protocol
    bool direct = false;    // shared memory mapped here: plain loads, stores, atomics (ucx_direct.h)
    uint64_t out_seq = 0;   // next request sequence number to this peer
    Batch* stage = nullptr; // am: requests staged for the next message to this peer (see batching)
  };
  // What the target tracks per sender (am mode).
  struct Inbound {
    uint64_t next_seq = 0;           // the next sequence number to admit
    std::map<uint64_t, Held> early;  // arrived before their turn
    std::deque<Held> backlog;        // admitted, waiting (behind pending rendezvous writes)
    int rndv_pending = 0;            // rendezvous writes whose data has not landed yet
    bool rejected = false;           // something was dropped since the sender's last Flush
  };
  struct ErrArg {
    UcxTransport* self;
    int peer;
  };

  void set_am_handler(uint16_t id, ucp_am_recv_callback_t cb) {
    ucp_am_handler_param_t hp{};
    hp.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB | UCP_AM_HANDLER_PARAM_FIELD_ARG |
                    UCP_AM_HANDLER_PARAM_FIELD_FLAGS;
    hp.id = id;
    hp.flags = UCP_AM_FLAG_WHOLE_MSG;
    hp.cb = cb;
    hp.arg = this;
    const ucs_status_t s = ucp_worker_set_am_recv_handler(worker_.get(), &hp);
    if (s != UCS_OK) throw TransportError("ucx: ucp_worker_set_am_recv_handler failed: " + status_text(s));
  }

  // Also sets `direct` for a peer whose memory UCX maps into this process (auto only).
  bool choose_am(int peer, ucp_ep_h ep, uint64_t probe_base, const uint8_t* probe_key, uint64_t probe_len,
                 bool& direct) {
    direct = false;
    if (rma_mode_ == "native") return false;
    if (rma_mode_ == "am") return true;
    // No probe: the peer runs "native" or "am". Native RMA reaches both (an "am" rank still serves
    // UCX's emulation); am messages would find no handler at a "native" rank.
    if (probe_len == 0) return false;
    ucp_rkey_h rkey = nullptr;
    const ucs_status_t s = ucp_ep_rkey_unpack(ep, probe_key, &rkey);
    if (s != UCS_OK) {
      throw TransportError("ucx: rank " + std::to_string(rank_) + ": ucp_ep_rkey_unpack of the probe key of rank " +
                           std::to_string(peer) + " failed: " + status_text(s));
    }
    void* ptr = nullptr;
    const bool shared = ucp_rkey_ptr(rkey, probe_base, &ptr) == UCS_OK;
    ucp_rkey_destroy(rkey);
    if (shared) {
      direct = true;
      return false;
    }
    return !have_rdma_devices();
  }

  // ---- native path (unchanged protocol) ----
  void post_native(Peer& peer, Pending* p, const Work& w) {
    ucp_request_param_t param{};
    param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    param.cb.send = &UcxTransport::on_send_done;
    param.user_data = p;
    ucp_rkey_h rkey = w.rkey ? static_cast<const UcxRemoteKey*>(w.rkey)->get() : nullptr;
    const ucp_mem_h memh = w.local_mr ? static_cast<const UcxRegion*>(w.local_mr)->memh() : nullptr;
    if (memh && (w.op == Op::Write || w.op == Op::Read)) {
      // Window memory is UCX's own: passing its handle skips a registration-cache lookup. Caller
      // memory (no handle) goes without one: UCX looks it up or copies.
      param.op_attr_mask |= UCP_OP_ATTR_FIELD_MEMH;
      param.memh = memh;
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
    sent(p, req);
  }

  // Accounts for the request a send-like call returned: immediate, failed or in flight.
  void sent(Pending* p, ucs_status_ptr_t req) {
    if (req == nullptr) {
      step(p, UCS_OK);
    } else if (UCS_PTR_IS_ERR(req)) {
      step(p, UCS_PTR_STATUS(req));
    }
    // else: on_send_done steps it.
  }

  // ---- am path: initiator ----
  void post_am(Peer& peer, Pending* p, const Work& w) {
    AmRequest& h = p->req;
    h = AmRequest{};
    h.op = static_cast<uint8_t>(w.op);
    h.sender = rank_;
    h.seq = peer.out_seq++;
    h.addr = w.remote_addr;
    h.len = p->bytes;
    h.operand = w.operand;
    h.compare = w.compare;
    const void* payload = nullptr;
    size_t count = 0;
    switch (w.op) {
      case Op::Write:
        payload = w.local;
        count = w.bytes;
        break;
      case Op::AtomicAdd:
        break;
      case Op::Read:
        p->local = w.local;
        break;
      case Op::FetchAdd:
      case Op::Swap:
      case Op::CompareSwap:
        p->user_reply = w.local;  // may be null for Swap
        break;
      case Op::Flush:
        break;
    }
    if (w.op != Op::Write && w.op != Op::AtomicAdd) {
      p->token = h.token = ++last_token_;
      awaiting_.emplace(p->token, p);
      p->waits = 2;  // send completion and reply
    }
    if (w.op == Op::Write && count <= kStageMax) {
      // Staged: copied now, so the source is reusable and the Write completes (transport.h).
      if (peer.stage && peer.stage->buf.size() + sizeof(AmRequest) + count > kBatchMax) send_stage(peer, nullptr);
      if (!peer.stage) peer.stage = take_batch(p->peer);
      append(*peer.stage, h, payload, count);
      peer.stage->writes++;
      step(p, UCS_OK);
      return;
    }
    if (peer.stage) {
      if (w.op == Op::Write) {
        send_stage(peer, nullptr);  // a large write leaves after the staged ones (seq order anyway)
      } else {
        append(*peer.stage, h, nullptr, 0);  // put + notify: one message
        send_stage(peer, p);
        return;
      }
    }
    ucp_request_param_t param{};
    param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_FLAGS;
    param.cb.send = &UcxTransport::on_send_done;
    param.user_data = p;
    param.flags = count <= eager_max_ ? UCP_AM_SEND_FLAG_EAGER : 0;
    sent(p, ucp_am_send_nbx(peer.ep, kAmRequestId, &p->req, sizeof(AmRequest), payload, count, &param));
  }

  static void append(Batch& b, const AmRequest& h, const void* payload, size_t count) {
    ucx_am::append_request(b.buf, h, payload, count);
    b.hdr.count++;
  }

  Batch* take_batch(int peer) {
    Batch* b = nullptr;
    if (batch_pool_.empty()) {
      batches_.push_back(std::make_unique<Batch>());
      b = batches_.back().get();
      b->buf.reserve(kBatchMax);
    } else {
      b = batch_pool_.back();
      batch_pool_.pop_back();
    }
    b->self = this;
    b->peer = peer;
    b->hdr = AmBatch{};
    b->hdr.sender = rank_;
    b->buf.clear();
    b->writes = 0;
    b->tail = nullptr;
    return b;
  }

  // Sends the peer's staged batch as one eager message; `tail` (the op appended last, if any)
  // completes with that send. Eager always, even where UCX_RNDV_THRESH leaves writes to UCP: the
  // batch is bounded (kBatchMax) and the target parses it in its callback.
  void send_stage(Peer& peer, Pending* tail) {
    Batch* b = peer.stage;
    peer.stage = nullptr;
    b->tail = tail;
    b->hdr.bytes = b->buf.size();
    ucp_request_param_t param{};
    param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_FLAGS;
    param.cb.send = &UcxTransport::on_batch_sent;
    param.user_data = b;
    param.flags = UCP_AM_SEND_FLAG_EAGER;
    ucs_status_ptr_t req =
        ucp_am_send_nbx(peer.ep, kAmBatchId, &b->hdr, sizeof(AmBatch), b->buf.data(), b->buf.size(), &param);
    if (req == nullptr) {
      batch_done(b, UCS_OK);
    } else if (UCS_PTR_IS_ERR(req)) {
      batch_done(b, UCS_PTR_STATUS(req));
    }
    // else: on_batch_sent finishes it.
  }

  static void on_batch_sent(void* request, ucs_status_t status, void* user_data) {
    auto* b = static_cast<Batch*>(user_data);
    UcxTransport* self = b->self;
    ucp_request_free(request);
    if (self->closing_) return;
    self->batch_done(b, status);
  }

  // The staged Writes completed at post(); a failed send fails the peer (their loss surfaces at
  // the next op to it) and the tail op with it.
  void batch_done(Batch* b, ucs_status_t status) {
    Pending* tail = b->tail;
    if (status != UCS_OK) {
      Peer& peer = peers_[static_cast<size_t>(b->peer)];
      const std::string e = "ucx(" + tls_ + ", am rma): rank " + std::to_string(rank_) + " -> peer " +
                            std::to_string(b->peer) + ": batch of " + std::to_string(b->hdr.count) + " requests (" +
                            std::to_string(b->writes) + " staged writes, " + std::to_string(b->buf.size()) +
                            " bytes) failed: " + status_text(status);
      RWIN_LOG(Warn, Ucx, "rwin: %s", e.c_str());
      if (peer.error.empty()) peer.error = e;
      peer_failed_ = true;
      am_work_ = true;
      if (tail) tail->why = "the batch message carrying it failed";
    }
    b->tail = nullptr;
    batch_pool_.push_back(b);
    if (tail) step(tail, status);
  }

  static ucs_status_t on_am_reply(void* arg, const void* header, size_t header_length, void* data, size_t length,
                                  const ucp_am_recv_param_t* param) {
    return static_cast<UcxTransport*>(arg)->handle_reply(header, header_length, data, length, param);
  }

  ucs_status_t handle_reply(const void* header, size_t header_length, void* data, size_t length,
                            const ucp_am_recv_param_t* param) {
    if (closing_) return UCS_OK;
    AmReply r;
    if (!ucx_am::decode_header(header, header_length, r)) {
      RWIN_LOG(Warn, Ucx, "rwin: ucx am: rank %d: dropped a reply with a %zu-byte header (expected %zu)", rank_,
               header_length, sizeof(AmReply));
      return UCS_OK;
    }
    auto it = awaiting_.find(r.token);
    // No entry: a reply to work already failed (peer error) or never posted; ignore it.
    if (r.magic != kAmMagic || it == awaiting_.end()) return UCS_OK;
    Pending* p = it->second;
    if (r.sender != p->peer || r.op != static_cast<uint8_t>(p->op)) {
      RWIN_LOG(Warn, Ucx, "rwin: ucx am: rank %d: dropped a reply for token %llu claiming rank %d op %u", rank_,
               static_cast<unsigned long long>(r.token), r.sender, unsigned{r.op});
      return UCS_OK;
    }
    awaiting_.erase(it);
    if (r.status != static_cast<uint8_t>(AmStatus::Ok)) {
      p->why = "rejected by the target: address range outside its windows";
      step(p, UCS_ERR_INVALID_ADDR);
      return UCS_OK;
    }
    const bool rndv = (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) != 0;
    if (p->op == Op::Read) {
      if (length != p->bytes) {
        p->why = "reply length differs from the request";
        step(p, UCS_ERR_MESSAGE_TRUNCATED);
        return UCS_OK;  // a rendezvous descriptor we do not receive is dropped by UCX
      }
      if (rndv) {
        ucp_request_param_t rp{};
        rp.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
        rp.cb.recv_am = &UcxTransport::on_read_data;
        rp.user_data = p;
        ucs_status_ptr_t req = ucp_am_recv_data_nbx(worker_.get(), data, p->local, length, &rp);
        if (req == nullptr) {
          step(p, UCS_OK);
        } else if (UCS_PTR_IS_ERR(req)) {
          step(p, UCS_PTR_STATUS(req));
        }
        return UCS_INPROGRESS;  // UCX owns the descriptor now
      }
      if (length > 0) std::memcpy(p->local, data, length);
    } else {
      p->reply = r.value;
    }
    step(p, UCS_OK);
    return UCS_OK;
  }

  static void on_read_data(void* request, ucs_status_t status, size_t, void* user_data) {
    auto* p = static_cast<Pending*>(user_data);
    ucp_request_free(request);
    if (p->self->closing_) return;
    p->self->step(p, status);
  }

  // Work waiting for a reply from a failed peer would wait forever: fail it.
  void fail_abandoned() {
    if (!peer_failed_) return;
    peer_failed_ = false;
    std::vector<Pending*> dead;
    for (auto& [token, p] : awaiting_) {
      if (!peers_[static_cast<size_t>(p->peer)].error.empty()) dead.push_back(p);
    }
    for (Pending* p : dead) {
      awaiting_.erase(p->token);
      p->why = "no reply: the peer failed";
      p->waits--;  // the reply that will not come
      if (p->status == UCS_OK) p->status = UCS_ERR_ENDPOINT_TIMEOUT;
      if (p->waits == 0) finish(p);
    }
  }

  // ---- am path: target ----
  static ucs_status_t on_am_request(void* arg, const void* header, size_t header_length, void* data, size_t length,
                                    const ucp_am_recv_param_t* param) {
    return static_cast<UcxTransport*>(arg)->handle_request(header, header_length, data, length, param);
  }

  ucs_status_t handle_request(const void* header, size_t header_length, void* data, size_t length,
                              const ucp_am_recv_param_t* param) {
    if (closing_) return UCS_OK;
    AmRequest h;
    if (!ucx_am::decode_header(header, header_length, h)) {
      RWIN_LOG(Warn, Ucx, "rwin: ucx am: rank %d: dropped a request with a %zu-byte header (expected %zu)", rank_,
               header_length, sizeof(AmRequest));
      return UCS_OK;  // a rendezvous descriptor we neither keep nor receive is dropped by UCX
    }
    if (!ucx_am::well_formed(h, nranks_)) {
      report_malformed(h);
      return UCS_OK;
    }
    return admit(h, data, length, (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) != 0);
  }

  void report_malformed(const AmRequest& h) const {
    RWIN_LOG(Warn, Ucx, "rwin: ucx am: rank %d: dropped a malformed request (magic 0x%x, version %u, sender %d, op %u)",
             rank_, h.magic, unsigned{h.version}, h.sender, unsigned{h.op});
  }

  static ucs_status_t on_am_batch(void* arg, const void* header, size_t header_length, void* data, size_t length,
                                  const ucp_am_recv_param_t* param) {
    return static_cast<UcxTransport*>(arg)->handle_batch(header, header_length, data, length, param);
  }

  // A batch is its requests in order, each admitted exactly as if it had come alone (own
  // sequence number, own validation: an out-of-window Write is dropped and reported at the next
  // Flush, the requests around it still apply). Parsing stops only where the framing itself is
  // broken (a header that is not a request, a payload running past the message): nothing after
  // that point can be located, and it is named on stderr.
  ucs_status_t handle_batch(const void* header, size_t header_length, void* data, size_t length,
                            const ucp_am_recv_param_t* param) {
    if (closing_) return UCS_OK;
    AmBatch b;
    const bool have_header = ucx_am::decode_header(header, header_length, b);
    if (!have_header || !ucx_am::well_formed(b, nranks_, length) || (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) != 0) {
      RWIN_LOG(Warn, Ucx,
               "rwin: ucx am: rank %d: dropped a malformed batch (%zu-byte header, sender %d, %zu data bytes%s)",
               rank_, header_length, have_header ? b.sender : -1, length,
               (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) != 0 ? ", rendezvous" : "");
      return UCS_OK;  // a rendezvous descriptor we do not receive is dropped by UCX
    }
    auto* d = static_cast<uint8_t*>(data);
    const ucx_am::BatchWalk w =
        ucx_am::walk_batch(d, length, nranks_, [&](const AmRequest& h, size_t payload_at, size_t plen) {
          if (h.sender == b.sender) {
            admit(h, d + payload_at, plen, /*rndv=*/false);
          } else {
            RWIN_LOG(Warn, Ucx, "rwin: ucx am: rank %d: dropped %s claiming rank %d in a batch from rank %d", rank_,
                     op_name(static_cast<Op>(h.op)), h.sender, b.sender);
          }
        });
    if (w.malformed) report_malformed(w.bad);
    if (!w.complete(length, b.count)) {
      RWIN_LOG(Warn, Ucx,
               "rwin: ucx am: rank %d: batch from rank %d broken after %u of %u requests (byte %zu of %zu); "
               "the rest is dropped",
               rank_, b.sender, w.count, b.count, w.off, length);
    }
    return UCS_OK;
  }

  // Admits one well-formed request in sequence order: applies it, holds it (early) or queues it
  // behind pending rendezvous writes. Returns what the AM callback returns for its data.
  ucs_status_t admit(const AmRequest& h, void* data, size_t length, bool rndv) {
    Inbound& in = inbound_[static_cast<size_t>(h.sender)];
    if (h.seq != in.next_seq) {
      if (h.seq < in.next_seq || in.early.count(h.seq) != 0 || in.early.size() >= kMaxEarly) {
        RWIN_LOG(Warn, Ucx, "rwin: ucx am: rank %d: dropped %s from rank %d with sequence %llu (expected %llu, %zu held)",
                 rank_, op_name(static_cast<Op>(h.op)), h.sender, static_cast<unsigned long long>(h.seq),
                 static_cast<unsigned long long>(in.next_seq), in.early.size());
        return UCS_OK;
      }
      in.early.emplace(h.seq, hold(h, data, length, rndv));
      return rndv ? UCS_INPROGRESS : UCS_OK;
    }
    ++in.next_seq;
    ucs_status_t ret = UCS_OK;
    if (!in.backlog.empty() || must_wait(h, in)) {
      in.backlog.push_back(hold(h, data, length, rndv));
      ++backlog_count_;
      am_work_ = true;
      ret = rndv ? UCS_INPROGRESS : UCS_OK;
    } else if (rndv) {
      ret = receive_write(h, data, length, /*in_callback=*/true) ? UCS_INPROGRESS : UCS_OK;
    } else {
      apply(h, data, length);
    }
    // Messages that arrived early and are now in turn.
    for (auto it = in.early.find(in.next_seq); it != in.early.end(); it = in.early.find(in.next_seq)) {
      Held held = std::move(it->second);
      in.early.erase(it);
      ++in.next_seq;
      in.backlog.push_back(std::move(held));
      ++backlog_count_;
      am_work_ = true;
    }
    // The backlog is drained from poll(), outside this callback.
    return ret;
  }

  // Whether an in-turn request must wait for the sender's pending rendezvous writes: every
  // non-Write does (ordering), and so does a Write overlapping one of them, or the older
  // rendezvous data could land over it (the later of two writes to the same bytes must win).
  // Only writes to the same bytes serialize (rwin-perf put_bw 1 MiB, blocking puts to one
  // address, stayed within noise: 3430-3710 vs 3480-3840 MiB/s before).
  bool must_wait(const AmRequest& h, const Inbound& in) const {
    if (in.rndv_pending == 0) return false;
    if (h.op != static_cast<uint8_t>(Op::Write)) return true;
    for (const RecvCtx* r : recvs_) {
      if (r->sender == h.sender && h.addr < r->addr + r->len && r->addr < h.addr + h.len) return true;
    }
    return false;
  }

  Held hold(const AmRequest& h, void* data, size_t length, bool rndv) {
    Held x;
    x.h = h;
    if (rndv) {
      x.desc = data;
      x.rndv_len = length;
    } else if (length > 0) {
      const auto* d = static_cast<const uint8_t*>(data);
      x.payload.assign(d, d + length);
    }
    return x;
  }

  void release_held(Held& h) {
    if (h.desc) ucp_am_data_release(worker_.get(), h.desc);
    h.desc = nullptr;
  }

  // Frees the force-close requests of failed peers' endpoints that have finished.
  void reap_closes() noexcept {
    std::erase_if(closing_reqs_, [](ucs_status_ptr_t r) {
      if (ucp_request_check_status(r) == UCS_INPROGRESS) return false;
      ucp_request_free(r);
      return true;
    });
  }

  // Gives back every rendezvous descriptor held for `sender` and forgets its queued requests.
  void release_inbound(int sender) noexcept {
    Inbound& in = inbound_[static_cast<size_t>(sender)];
    for (auto& [seq, h] : in.early) release_held(h);
    for (auto& h : in.backlog) release_held(h);
    backlog_count_ -= std::min(backlog_count_, in.backlog.size());
    in.early.clear();
    in.backlog.clear();
  }

  // Applies what waits in front of `sender`'s backlog: writes always, others once no rendezvous
  // write from that sender is pending. Called from poll(), outside UCX callbacks.
  void drain(int sender) {
    Inbound& in = inbound_[static_cast<size_t>(sender)];
    while (!in.backlog.empty()) {
      Held& x = in.backlog.front();
      if (must_wait(x.h, in)) return;
      Held cur = std::move(x);
      in.backlog.pop_front();
      --backlog_count_;
      if (cur.desc) {
        void* desc = cur.desc;
        cur.desc = nullptr;  // receive_write takes it
        receive_write(cur.h, desc, cur.rndv_len, /*in_callback=*/false);
      } else {
        apply(cur.h, cur.payload.data(), cur.payload.size());
      }
    }
  }

  void drain_backlogs() {
    if (backlog_count_ == 0) return;
    for (int s = 0; s < nranks_; ++s) {
      if (!inbound_[static_cast<size_t>(s)].backlog.empty()) drain(s);
    }
  }

  void reject(const AmRequest& h, uint64_t data_len, const char* why) {
    RWIN_LOG(Warn, Ucx,
             "rwin: ucx am: rank %d: dropped %s from rank %d at address 0x%llx length %llu (%llu data bytes): %s",
             rank_, op_name(static_cast<Op>(h.op)), h.sender, static_cast<unsigned long long>(h.addr),
             static_cast<unsigned long long>(h.len), static_cast<unsigned long long>(data_len), why);
    inbound_[static_cast<size_t>(h.sender)].rejected = true;
  }

  // Starts the rendezvous receive of a Write straight into the window. Returns whether UCX took
  // the descriptor (the handler then returns UCS_INPROGRESS). A dropped descriptor is released
  // here unless we are inside the handler, where returning UCS_OK drops it.
  bool receive_write(const AmRequest& h, void* desc, uint64_t length, bool in_callback) {
    if (length != h.len || !registry_->contains(h.addr, h.len)) {
      reject(h, length, length != h.len ? "data length differs from the header" : "outside every window");
      if (!in_callback) ucp_am_data_release(worker_.get(), desc);
      return false;
    }
    // Counted before the call: UCX may run the callback inside it (a failed endpoint's receive is
    // purged at once) and still return the request; the callback then settles the count.
    auto* ctx = new RecvCtx{this, h.sender, h.addr, h.len};
    recvs_.push_back(ctx);
    ++inbound_[static_cast<size_t>(h.sender)].rndv_pending;
    ucp_request_param_t rp{};
    rp.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    rp.cb.recv_am = &UcxTransport::on_write_data;
    rp.user_data = ctx;
    ctx->posting = true;
    ucs_status_ptr_t req = ucp_am_recv_data_nbx(worker_.get(), desc, reinterpret_cast<void*>(h.addr), length, &rp);
    ctx->posting = false;
    if (ctx->finished) {
      delete ctx;
    } else if (req == nullptr) {
      write_landed(ctx, UCS_OK);
    } else if (UCS_PTR_IS_ERR(req)) {
      write_landed(ctx, UCS_PTR_STATUS(req));
    }
    return true;
  }

  // A rendezvous write's data landed (or failed): uncount it; frees `ctx` unless it is still
  // being posted (receive_write frees it then).
  void write_landed(RecvCtx* ctx, ucs_status_t status) {
    std::erase(recvs_, ctx);
    Inbound& in = inbound_[static_cast<size_t>(ctx->sender)];
    --in.rndv_pending;
    if (status != UCS_OK) write_data_failed(ctx->sender, ctx->addr, ctx->len, status);
    if (!in.backlog.empty()) am_work_ = true;  // poll() drains what may go now
    if (ctx->posting) {
      ctx->finished = true;
    } else {
      delete ctx;
    }
  }

  static void on_write_data(void* request, ucs_status_t status, size_t, void* user_data) {
    auto* ctx = static_cast<RecvCtx*>(user_data);
    UcxTransport* self = ctx->self;
    ucp_request_free(request);
    if (self->closing_) return;  // the destructor frees ctx
    self->write_landed(ctx, status);
  }

  void write_data_failed(int sender, uint64_t addr, uint64_t len, ucs_status_t status) {
    Peer& peer = peers_[static_cast<size_t>(sender)];
    const std::string e = "ucx(" + tls_ + "): rank " + std::to_string(rank_) + " <- peer " + std::to_string(sender) +
                          ": Write of " + std::to_string(len) + " bytes at address 0x" + hex(addr) +
                          " (rendezvous receive) failed: " + status_text(status);
    RWIN_LOG(Warn, Ucx, "rwin: %s", e.c_str());
    if (peer.error.empty()) peer.error = e;
    peer_failed_ = true;
    am_work_ = true;
  }

  // Applies an in-turn, non-rendezvous request.
  void apply(const AmRequest& h, const void* data, size_t length) {
    const Op op = static_cast<Op>(h.op);
    Inbound& in = inbound_[static_cast<size_t>(h.sender)];
    switch (op) {
      case Op::Write:
        if (length != h.len) return reject(h, length, "data length differs from the header");
        if (!registry_->contains(h.addr, h.len)) return reject(h, length, "outside every window");
        if (length > 0) std::memcpy(reinterpret_cast<void*>(h.addr), data, length);
        return;
      case Op::Read:
        if (!registry_->contains(h.addr, h.len)) {
          reject(h, length, "outside every window");
          return queue_reply(h, AmStatus::Rejected, 0, nullptr, 0);
        }
        return queue_reply(h, AmStatus::Ok, 0, reinterpret_cast<const void*>(h.addr), h.len);
      case Op::Flush: {
        const AmStatus st = in.rejected ? AmStatus::Rejected : AmStatus::Ok;
        in.rejected = false;
        return queue_reply(h, st, 0, nullptr, 0);
      }
      case Op::AtomicAdd:
      case Op::FetchAdd:
      case Op::Swap:
      case Op::CompareSwap:
        break;
    }
    if (h.len != 8 || h.addr % 8 != 0 || !registry_->contains(h.addr, 8)) {
      reject(h, length, h.addr % 8 != 0 ? "atomic address not 8-byte aligned" : "outside every window");
      if (op != Op::AtomicAdd) queue_reply(h, AmStatus::Rejected, 0, nullptr, 0);
      return;
    }
    std::atomic_ref<uint64_t> word(*reinterpret_cast<uint64_t*>(h.addr));
    uint64_t old = 0;
    switch (op) {
      case Op::AtomicAdd:
        word.fetch_add(h.operand);
        return;
      case Op::FetchAdd:
        old = word.fetch_add(h.operand);
        break;
      case Op::Swap:
        old = word.exchange(h.operand);
        break;
      default: {  // CompareSwap
        old = h.compare;
        word.compare_exchange_strong(old, h.operand);
        break;
      }
    }
    queue_reply(h, AmStatus::Ok, old, nullptr, 0);
  }

  void queue_reply(const AmRequest& h, AmStatus st, uint64_t value, const void* data, size_t len) {
    auto* r = new OutReply;
    r->self = this;
    r->to = h.sender;
    r->hdr.op = h.op;
    r->hdr.status = static_cast<uint8_t>(st);
    r->hdr.sender = rank_;
    r->hdr.token = h.token;
    r->hdr.value = value;
    r->data = data;
    r->len = len;
    replies_.push_back(r);
    am_work_ = true;
  }

  // Sends queued replies (outside UCX callbacks). Keeps those UCX cannot take yet for next poll().
  void send_replies() {
    while (!replies_.empty()) {
      OutReply* r = replies_.front();
      Peer& peer = peers_[static_cast<size_t>(r->to)];
      if (!peer.error.empty() || !peer.ep) {  // nobody to answer
        replies_.pop_front();
        delete r;
        continue;
      }
      if (r->data && !registry_->contains(reinterpret_cast<uint64_t>(r->data), r->len)) {
        // The window went away between the request and now: answer, but send nothing from it.
        r->hdr.status = static_cast<uint8_t>(AmStatus::Rejected);
        r->data = nullptr;
        r->len = 0;
      }
      ucp_request_param_t param{};
      param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_FLAGS;
      param.cb.send = &UcxTransport::on_reply_sent;
      param.user_data = r;
      param.flags = r->len <= eager_max_ ? UCP_AM_SEND_FLAG_EAGER : 0;
      ucs_status_ptr_t req = ucp_am_send_nbx(peer.ep, kAmReplyId, &r->hdr, sizeof(AmReply), r->data, r->len, &param);
      if (UCS_PTR_IS_ERR(req) && UCS_PTR_STATUS(req) == UCS_ERR_NO_RESOURCE) return;  // retry at next poll()
      replies_.pop_front();
      if (req == nullptr) {
        delete r;
      } else if (UCS_PTR_IS_ERR(req)) {
        reply_failed(r, UCS_PTR_STATUS(req));
        delete r;
      } else {
        replies_sent_.push_back(r);
      }
    }
  }

  static void on_reply_sent(void* request, ucs_status_t status, void* user_data) {
    auto* r = static_cast<OutReply*>(user_data);
    UcxTransport* self = r->self;
    ucp_request_free(request);
    if (self->closing_) return;  // the destructor frees r
    auto& v = self->replies_sent_;
    for (size_t i = 0; i < v.size(); ++i) {
      if (v[i] == r) {
        v[i] = v.back();
        v.pop_back();
        break;
      }
    }
    if (status != UCS_OK) self->reply_failed(r, status);
    delete r;
  }

  void reply_failed(const OutReply* r, ucs_status_t status) {
    Peer& peer = peers_[static_cast<size_t>(r->to)];
    const std::string e = "ucx(" + tls_ + "): rank " + std::to_string(rank_) + " -> peer " + std::to_string(r->to) +
                          ": reply to " + op_name(static_cast<Op>(r->hdr.op)) + " of " + std::to_string(r->len) +
                          " bytes failed: " + status_text(status);
    RWIN_LOG(Warn, Ucx, "rwin: %s", e.c_str());
    if (peer.error.empty()) peer.error = e;
    peer_failed_ = true;
    am_work_ = true;
  }

  // ---- shared ----
  ucp_ep_h create_ep(int peer, const uint8_t* address, ucp_err_handling_mode_t mode = UCP_ERR_HANDLING_MODE_NONE,
                     bool may_fail = false) {
    err_args_.push_back(ErrArg{this, peer});
    ucp_ep_params_t ep{};
    ep.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                    UCP_EP_PARAM_FIELD_ERR_HANDLER;
    ep.address = reinterpret_cast<const ucp_address_t*>(address);
    // Error handling mode NONE by default, deliberately: in UCX 1.13 the shared-memory transports
    // (posix, sysv, self) have no peer-failure handler, so asking for MODE_PEER makes UCP route every
    // operation, even between two processes on one node, over tcp active messages (measured with
    // UCX_LOG_LEVEL=info: "rma_am(tcp/lo) amo_am(tcp/lo)"). Peers that talk am over tcp anyway get
    // MODE_PEER (see connect). A dead peer is caught by the bootstrap lease in any case.
    ep.err_mode = mode;
    ep.err_handler.cb = &UcxTransport::on_ep_error;
    ep.err_handler.arg = &err_args_.back();
    ucp_ep_h h = nullptr;
    const ucs_status_t s = ucp_ep_create(worker_.get(), &ep, &h);
    if (s != UCS_OK && may_fail) return nullptr;
    if (s != UCS_OK) {
      throw TransportError("ucx(" + tls_ + "): rank " + std::to_string(rank_) + ": ucp_ep_create to rank " +
                           std::to_string(peer) + " failed: " + status_text(s));
    }
    return h;
  }

  static void on_ep_error(void* arg, ucp_ep_h, ucs_status_t status) {
    auto* a = static_cast<ErrArg*>(arg);
    UcxTransport* self = a->self;
    if (self->closing_) return;
    Peer& peer = self->peers_[static_cast<size_t>(a->peer)];
    if (peer.error.empty()) {
      peer.error = "ucx(" + self->tls_ + "): rank " + std::to_string(self->rank_) + " -> peer " +
                   std::to_string(a->peer) + ": endpoint failed: " + status_text(status);
    }
    self->peer_failed_ = true;
    self->am_work_ = true;
  }

  static void on_send_done(void* request, ucs_status_t status, void* user_data) {
    auto* p = static_cast<Pending*>(user_data);
    UcxTransport* self = p->self;
    ucp_request_free(request);
    if (self->closing_) return;
    self->step(p, status);
  }

  // One awaited event of `p` happened; completes it after the last one. A failed send also
  // gives up on the reply (it may never come), unless the reply's data is already arriving.
  void step(Pending* p, ucs_status_t status) {
    if (status != UCS_OK && p->status == UCS_OK) p->status = status;
    if (status != UCS_OK && p->token != 0 && awaiting_.erase(p->token) != 0) p->waits--;
    if (--p->waits == 0) finish(p);
  }

  void finish(Pending* p) {
    Completion c;
    c.cookie = p->cookie;
    c.ok = p->status == UCS_OK;
    if (c.ok) {
      if (p->user_reply) std::memcpy(p->user_reply, &p->reply, 8);
    } else {
      Peer& peer = peers_[static_cast<size_t>(p->peer)];
      c.error = "ucx(" + tls_ + (peer.am ? ", am rma" : "") + "): rank " + std::to_string(rank_) + " -> peer " +
                std::to_string(p->peer) + ": " + op_name(p->op) + " of " + std::to_string(p->bytes) +
                " bytes at remote address 0x" + hex(p->remote_addr) + " failed: " +
                (p->why ? std::string(p->why) + " (" + status_text(p->status) + ")" : status_text(p->status));
      if (peer.error.empty()) peer.error = c.error;
      peer_failed_ = true;
      am_work_ = true;
    }
    p->token = 0;
    done_.push_back(std::move(c));
    pool_.push_back(p);
  }

  Pending* take() {
    if (pool_.empty()) {
      all_.push_back(std::make_unique<Pending>());
      return all_.back().get();
    }
    Pending* p = pool_.back();
    pool_.pop_back();
    return p;
  }

  // Finishes UCX's wire-up to every peer before connect() returns. Over tcp an endpoint is half
  // made until the two workers exchange wire-up messages during progress; left to the first
  // operation, a peer that dies before then leaves the endpoint mid-wire-up, and tearing that down
  // trips an assertion inside UCX 1.13 (wireup_ep.c: pending_count == 0; seen in the dead-peer
  // contract tests). A flush per endpoint completes its wire-up; a barrier through the store that
  // keeps progressing lets every rank answer its peers' wire-up until all are done.
  void wire_up(bootstrap::Bootstrap& bs) {
    const auto deadline = std::chrono::steady_clock::now() + bs.startup_timeout();
    std::vector<ucs_status_ptr_t> reqs(static_cast<size_t>(nranks_), nullptr);
    for (int p = 0; p < nranks_; ++p) {
      ucp_request_param_t param{};
      ucs_status_ptr_t r = ucp_ep_flush_nbx(peers_[static_cast<size_t>(p)].ep, &param);
      if (UCS_PTR_IS_ERR(r)) {
        throw TransportError("ucx(" + tls_ + "): rank " + std::to_string(rank_) + ": wire-up flush to rank " +
                             std::to_string(p) + " failed: " + status_text(UCS_PTR_STATUS(r)));
      }
      reqs[static_cast<size_t>(p)] = r;
    }
    auto release_all = [&] {
      for (auto& r : reqs) {
        if (r != nullptr) ucp_request_free(r);  // an unfinished one completes (or is purged) later
        r = nullptr;
      }
    };
    for (int p = 0; p < nranks_; ++p) {
      ucs_status_ptr_t& r = reqs[static_cast<size_t>(p)];
      while (r != nullptr && ucp_request_check_status(r) == UCS_INPROGRESS) {
        ucp_worker_progress(worker_.get());
        if (std::chrono::steady_clock::now() > deadline) {
          release_all();
          throw TransportError("ucx(" + tls_ + "): rank " + std::to_string(rank_) + ": wire-up to rank " +
                               std::to_string(p) + " did not finish within " + std::to_string(bs.startup_timeout().count()) +
                               " ms");
        }
      }
      if (r != nullptr) {
        const ucs_status_t st = ucp_request_check_status(r);
        ucp_request_free(r);
        r = nullptr;
        if (st != UCS_OK) {
          release_all();
          throw TransportError("ucx(" + tls_ + "): rank " + std::to_string(rank_) + ": wire-up flush to rank " +
                               std::to_string(p) + " failed: " + status_text(st));
        }
      }
    }
    const auto left = deadline - std::chrono::steady_clock::now();
    bs.barrier(std::chrono::duration_cast<bootstrap::Millis>(std::max(left, decltype(left)::zero())),
               [this] { ucp_worker_progress(worker_.get()); });
  }

  // Flush-close every healthy endpoint, force-close failed ones; bounded by 1 s in all (a stopped
  // peer never acknowledges a flush: shutdown must not wait for it).
  void close_endpoints(bool graceful) noexcept {
    std::vector<ucs_status_ptr_t> reqs = std::move(closing_reqs_);
    closing_reqs_.clear();
    for (auto& peer : peers_) {
      if (!peer.ep) continue;
      ucp_request_param_t param{};
      param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
      param.flags = graceful && peer.error.empty() ? 0 : UCP_EP_CLOSE_FLAG_FORCE;
      ucs_status_ptr_t r = ucp_ep_close_nbx(peer.ep, &param);
      if (r && UCS_PTR_IS_PTR(r)) reqs.push_back(r);
      peer.ep = nullptr;
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
    for (ucs_status_ptr_t r : reqs) {
      // Not graceful: no progress at all (see quiesce); the worker's destruction releases the rest.
      while (graceful && ucp_request_check_status(r) == UCS_INPROGRESS && std::chrono::steady_clock::now() < deadline) {
        ucp_worker_progress(worker_.get());
      }
      if (graceful && ucp_request_check_status(r) == UCS_INPROGRESS) {
        RWIN_LOG(Warn, Ucx, "rwin: ucx: rank %d: endpoint close did not finish within 1 s; releasing it", rank_);
      }
      ucp_request_free(r);
    }
  }

  int rank_;
  int nranks_;
  std::string rma_mode_;    // "auto" | "native" | "am"
  std::string tls_;
  std::string net_device_;  // the tcp interface we restricted UCX to, if any
  bool safe_tcp_ = false;   // zero-copy tcp sends turned off (see the constructor)
  bool closing_ = false;    // set in quiesce() before the worker goes
  bool quiesced_ = false;   // quiesce() ran: no worker, no endpoints
  bool am_work_ = false;    // poll() has am housekeeping to do
  bool any_am_ = false;     // some peer is reached in am mode
  bool peer_failed_ = false;  // a peer failed since fail_abandoned() last looked
  std::shared_ptr<Registry> registry_ = std::make_shared<Registry>();
  std::vector<std::unique_ptr<Pending>> all_;  // every Pending ever made; outlives the worker
  std::vector<std::unique_ptr<Batch>> batches_;  // every Batch ever made; outlives the worker
  // Declaration order is teardown order reversed: context outlives worker outlives endpoints.
  ContextPtr context_;
  WorkerPtr worker_;
  std::unique_ptr<UcxMemory> probe_;
  std::vector<Peer> peers_;
  std::deque<ErrArg> err_args_;  // stable addresses for the error-handler argument
  std::vector<Pending*> pool_;
  std::vector<ucs_status_ptr_t> closing_reqs_;  // force-closes of failed peers' endpoints in flight
  std::vector<Batch*> batch_pool_;  // batches not staged and not in flight
  std::vector<Completion> done_;
  // am mode
  std::vector<Inbound> inbound_;                    // per sender, at this target
  size_t eager_max_ = kEagerMax;  // am messages up to this size are sent eager (see kEagerMax)
  size_t backlog_count_ = 0;                        // messages in all backlogs
  uint64_t last_token_ = 0;
  std::unordered_map<uint64_t, Pending*> awaiting_;  // token -> work waiting for its reply
  std::deque<OutReply*> replies_;                   // queued, not yet handed to UCX
  std::vector<OutReply*> replies_sent_;             // handed to UCX, send not complete
  std::vector<RecvCtx*> recvs_;                     // rendezvous receives into windows in flight
};

}  // namespace

std::unique_ptr<Transport> make_ucx_transport(const TransportConfig& cfg) {
  return std::make_unique<UcxTransport>(cfg);
}

}  // namespace rwin::transport
