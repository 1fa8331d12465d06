// The UCX transport's private class and the types its files share. One file per mode and stage:
//   ucx_worker.cpp        context, worker, progress (poll), quiesce, the factory
//   ucx_connect.cpp       worker-address exchange, mode choice, endpoints, wire-up, peer failure
//   ucx_memory.cpp        window allocation, caller memory, keys, direct-mode mapping
//   ucx_post.cpp          post() by mode; the Pending life shared by native and am
//   ucx_native.cpp        native mode (ucp_put/get/atomic_op_nbx)
//   ucx_am_initiator.cpp  am mode, initiator (requests, batches, replies); ucx_am_wire.h: its wire format
//   ucx_am_target.cpp     am mode, target (admission, rendezvous writes, apply, replies)
//   ucx_direct.h          direct mode (CPU copies and atomics on UCX-mapped shared memory)
//
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
#pragma once

#include <ucp/api/ucp.h>

#include <cstdint>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "transport/transport.h"
#include "transport/ucx/ucx_am_wire.h"

namespace rwin::transport::ucx {

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
// Out-of-order messages held per sender are not bounded: each is a message the sender really has
// in flight, so the sender's own memory bounds them, and dropping one would lose an update and
// stall the sender until its deadline. Past this many a warning is logged once per sender.
constexpr size_t kEarlyWarn = 1 << 16;
// am Writes up to kStageMax bytes are copied into the peer's batch at post() and complete at once;
// the batch leaves as one message with the next non-Write op to that peer (see "batching" in the
// notes). kBatchMax bounds one batch (headers + payloads): it is always sent eager, so the
// target needs at most this much UCP buffer per batch, and a full batch leaves by itself.
constexpr size_t kStageMax = 8 << 10;
constexpr size_t kBatchMax = 64 << 10;

inline std::string status_text(ucs_status_t s) { return ucs_status_string(s); }

inline bool have_rdma_devices() {
  std::error_code ec;
  std::filesystem::directory_iterator it("/sys/class/infiniband", ec);
  return !ec && it != std::filesystem::directory_iterator();
}

inline std::string hex(uint64_t v) {
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
  UcxMemory(ucp_context_h ctx, size_t bytes, std::shared_ptr<Registry> registry);
  ~UcxMemory() override;
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

// UCX_TCP_TX_SEG_SIZE rwin asks for where the user set none (ucx_worker.cpp).
inline constexpr const char* kTcpTxSegSize = "64K";

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
  // ucx_worker.cpp: context, worker, lifecycle
  explicit UcxTransport(const TransportConfig& cfg);
  ~UcxTransport() override;
  std::string describe() const override;
  Capabilities capabilities() const override;
  std::string rma_mode(int peer) const override;
  bool write_then_atomic_ordered(int peer) const override;
  void poll(std::vector<Completion>& out) override;
  void quiesce(bool graceful) noexcept override;

  // ucx_connect.cpp: wire-up, endpoints, peer failure
  void connect(bootstrap::Bootstrap& bs) override;
  std::string peer_error(int peer) const override;
  void fail_peer(int p, const std::string& why) noexcept override;

  // ucx_memory.cpp: windows and keys
  std::unique_ptr<MemoryRegion> allocate(size_t bytes) override;
  std::unique_ptr<MemoryRegion> register_memory(void* addr, size_t bytes) override;
  std::unique_ptr<RemoteKey> unpack_key(int peer, std::span<const uint8_t> b) override;
  void* mapped(int peer, const RemoteKey& key, uint64_t remote_addr, size_t bytes) const noexcept override;

  // ucx_post.cpp: post() and the Pending life shared by native and am
  PostResult post(const Work& w) override;

  // ucx_dynamic.cpp: peers met at run time (TransportConfig::dynamic_peers), caller memory exposed
  int add_peer() override;
  std::vector<uint8_t> local_endpoint(int peer) override;
  void connect_peer(int peer, std::span<const uint8_t> remote_endpoint) override;
  std::unique_ptr<MemoryRegion> expose_memory(void* addr, size_t bytes) override;
  int wait_fd() const noexcept override { return event_fd_; }
  bool arm() noexcept override;

 private:
  friend struct AmTestAccess;  // tests/unit/test_ucx_am.cpp feeds handle_request() directly
  // Some peer is reached with UCX's native RMA while RDMA devices exist: its atomics may run on a
  // NIC, so atomics to direct (shared-memory) peers go through ucp_atomic_op_nbx too, never a CPU
  // atomic on the mapped word: UCX keeps every atomic of one context atomic against the others.
  bool nic_atomics_ = false;
  struct Peer {
    ucp_ep_h ep = nullptr;
    std::string error;
    bool am = false;        // reached through the am protocol
    bool direct = false;    // shared memory mapped here: plain loads, stores, atomics (ucx_direct.h)
    uint64_t out_seq = 0;   // next request sequence number to this peer
    Batch* stage = nullptr; // am: requests staged for the next message to this peer (see batching)
    int32_t self_id = -1;   // run-time peers: this transport's index at that peer (am sender field)
  };
  // What the target tracks per sender (am mode).
  struct Inbound {
    uint64_t next_seq = 0;           // the next sequence number to admit
    std::map<uint64_t, Held> early;  // arrived before their turn
    std::deque<Held> backlog;        // admitted, waiting (behind pending rendezvous writes)
    int rndv_pending = 0;            // rendezvous writes whose data has not landed yet
    bool rejected = false;           // something was dropped since the sender's last Flush
    bool warned_early = false;       // kEarlyWarn passed (logged once)
  };
  struct ErrArg {
    UcxTransport* self;
    int peer;
  };

  // The am sender field towards `peer`: our rank in a job, our index at that peer for run-time peers.
  int32_t sender_id(const Peer& p) const noexcept { return dynamic_ ? p.self_id : rank_; }

  // ucx_worker.cpp: context, worker, lifecycle
  void set_am_handler(uint16_t id, ucp_am_recv_callback_t cb);

  // ucx_connect.cpp: wire-up, endpoints, peer failure
  bool choose_am(int peer, ucp_ep_h ep, uint64_t probe_base, const uint8_t* probe_key, uint64_t probe_len,
                 bool& direct);
  void reap_closes() noexcept;
  ucp_ep_h create_ep(int peer, const uint8_t* address, ucp_err_handling_mode_t mode = UCP_ERR_HANDLING_MODE_NONE,
                     bool may_fail = false);
  static void on_ep_error(void* arg, ucp_ep_h, ucs_status_t status);
  void wire_up(bootstrap::Bootstrap& bs);
  void close_endpoints(bool graceful) noexcept;

  // ucx_post.cpp: post() and the Pending life shared by native and am
  void sent(Pending* p, ucs_status_ptr_t req);
  static void on_send_done(void* request, ucs_status_t status, void* user_data);
  void step(Pending* p, ucs_status_t status);
  void finish(Pending* p);
  Pending* take();

  // ucx_native.cpp: native mode
  void post_native(Peer& peer, Pending* p, const Work& w);

  // ucx_am_initiator.cpp: am mode, initiator
  void post_am(Peer& peer, Pending* p, const Work& w);
  static void append(Batch& b, const AmRequest& h, const void* payload, size_t count);
  Batch* take_batch(int peer);
  void send_stage(Peer& peer, Pending* tail);
  static void on_batch_sent(void* request, ucs_status_t status, void* user_data);
  void batch_done(Batch* b, ucs_status_t status);
  static ucs_status_t on_am_reply(void* arg, const void* header, size_t header_length, void* data, size_t length,
                                  const ucp_am_recv_param_t* param);
  ucs_status_t handle_reply(const void* header, size_t header_length, void* data, size_t length,
                            const ucp_am_recv_param_t* param);
  static void on_read_data(void* request, ucs_status_t status, size_t, void* user_data);
  void fail_abandoned();

  // ucx_am_target.cpp: am mode, target
  static ucs_status_t on_am_request(void* arg, const void* header, size_t header_length, void* data, size_t length,
                                    const ucp_am_recv_param_t* param);
  ucs_status_t handle_request(const void* header, size_t header_length, void* data, size_t length,
                              const ucp_am_recv_param_t* param);
  void report_malformed(const AmRequest& h) const;
  static ucs_status_t on_am_batch(void* arg, const void* header, size_t header_length, void* data, size_t length,
                                  const ucp_am_recv_param_t* param);
  ucs_status_t handle_batch(const void* header, size_t header_length, void* data, size_t length,
                            const ucp_am_recv_param_t* param);
  ucs_status_t admit(const AmRequest& h, void* data, size_t length, bool rndv);
  bool must_wait(const AmRequest& h, const Inbound& in) const;
  Held hold(const AmRequest& h, void* data, size_t length, bool rndv);
  void release_held(Held& h);
  void release_inbound(int sender) noexcept;
  void drain(int sender);
  void drain_backlogs();
  void reject(const AmRequest& h, uint64_t data_len, const char* why);
  bool receive_write(const AmRequest& h, void* desc, uint64_t length, bool in_callback);
  void write_landed(RecvCtx* ctx, ucs_status_t status);
  static void on_write_data(void* request, ucs_status_t status, size_t, void* user_data);
  void write_data_failed(int sender, uint64_t addr, uint64_t len, ucs_status_t status);
  void apply(const AmRequest& h, const void* data, size_t length);
  void queue_reply(const AmRequest& h, AmStatus st, uint64_t value, const void* data, size_t len);
  void send_replies();
  static void on_reply_sent(void* request, ucs_status_t status, void* user_data);
  void reply_failed(const OutReply* r, ucs_status_t status);

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
  bool dynamic_ = false;      // peers are added at run time (add_peer); nranks_ counts them
  int event_fd_ = -1;         // the worker's wakeup descriptor (dynamic_peers: UCP_FEATURE_WAKEUP), or -1
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

}  // namespace rwin::transport::ucx
