// The verbs transport's private class. One file per lifecycle stage implements it:
//   verbs_device.cpp    device/port/GID choice
//   verbs_connect.cpp   construction, queue pairs, connect()
//   verbs_memory.cpp    allocate(), packed keys, unpack_key()
//   verbs_datapath.cpp  post(), poll(), failure handling
#pragma once

#include <infiniband/verbs.h>

#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "common/page_alloc.h"
#include "transport/transport.h"
#include "transport/verbs/verbs_blob.h"
#include "transport/verbs/verbs_device.h"
#include "transport/verbs/verbs_handles.h"

namespace rwin::transport::verbs {

// The transport's devices (RWIN_IB_HCA order): every region is registered on each of them.
using Devices = std::vector<std::shared_ptr<DeviceHandles>>;

class VerbsMemoryRegion final : public MemoryRegion {
 public:
  // Registers `bytes` (rounded up to whole pages) of fresh, zeroed, page-aligned memory on every
  // device of `devs`.
  VerbsMemoryRegion(Devices devs, size_t bytes, const std::string& who);
  // Registers the caller's [addr, addr + bytes). For local use only (register_memory): the device
  // may read it (Write source) and write it (Read destination, atomic results). With `remote`
  // (expose_memory) peers may also write, read and update it atomically through packed_key().
  // Owns the MR only: destroying the region deregisters, never frees.
  struct CallerMemory {
    bool remote = false;
  };
  VerbsMemoryRegion(CallerMemory, Devices devs, void* addr, size_t bytes, const std::string& who);
  std::vector<uint8_t> packed_key() const override;  // throws for local-only caller memory
  // The keys on device `rail` (an index into the transport's devices).
  uint32_t lkey(size_t rail = 0) const noexcept { return mrs_[rail]->lkey; }
  uint32_t rkey(size_t rail = 0) const noexcept { return mrs_[rail]->rkey; }
  size_t rails() const noexcept { return mrs_.size(); }
  // True when [p, p + n) lies inside this region.
  bool contains(const void* p, size_t n) const noexcept;

 private:
  // Registers [p, p + n) on every device; throws TransportError built by `fail(errno)`.
  template <class Fail>
  void register_all(void* p, size_t n, int access, const Fail& fail);
  // Declaration order is teardown order reversed: MRs first, then the memory, then the PDs/contexts.
  Devices devs_;
  pages::PageBuffer buf_;  // empty for caller memory
  std::vector<MrPtr> mrs_;  // one per device, in devs_ order
  std::string who_;    // caller memory: names the device in packed_key()'s error
  bool remote_ = true;  // false: register_memory() (local only, no key)
};

class VerbsRemoteKey final : public RemoteKey {
 public:
  VerbsRemoteKey(int peer, uint64_t base, uint64_t bytes, const KeyBlob& k) : peer_(peer), rails_(k.rails), rkeys_(k.rkeys) {
    base_ = base;
    bytes_ = bytes;
  }
  int peer() const noexcept { return peer_; }
  // The rkey on the owner's device `rail`; false when the owner has no such device.
  bool rkey(size_t rail, uint32_t& out) const noexcept {
    if (rail >= rails_) return false;
    out = rkeys_[rail];
    return true;
  }
  bool contains(uint64_t addr, size_t n) const noexcept {
    return addr >= base_ && n <= bytes_ && addr - base_ <= bytes_ - n;
  }
  // True when the 8-byte word at `addr` overlaps the region and lies in its registered pages
  // (regions are page aligned, so [base, base + round_up(bytes, 8)) is registered).
  bool contains_word(uint64_t addr) const noexcept {
    const uint64_t padded = (bytes_ + 7) / 8 * 8;
    return addr >= base_ && padded >= 8 && addr - base_ <= padded - 8;
  }

 private:
  int peer_;
  uint32_t rails_;
  std::array<uint32_t, KeyBlob::kMaxRails> rkeys_;
};

class VerbsTransport final : public Transport {
 public:
  explicit VerbsTransport(const TransportConfig& cfg);
  ~VerbsTransport() override;
  VerbsTransport(const VerbsTransport&) = delete;
  VerbsTransport& operator=(const VerbsTransport&) = delete;

  std::string describe() const override { return describe_; }
  Capabilities capabilities() const override;
  void connect(bootstrap::Bootstrap& bs) override;
  // Run-time peers (cfg.dynamic_peers): one RC QP per add_peer(), connected by connect_peer().
  int add_peer() override;
  std::vector<uint8_t> local_endpoint(int peer) override;
  void connect_peer(int peer, std::span<const uint8_t> remote_endpoint) override;
  std::unique_ptr<MemoryRegion> expose_memory(void* addr, size_t bytes) override;
  // RC: the adapter serves peers' writes, reads and atomics on registered memory by itself.
  bool serves_passively() const noexcept override { return true; }
  std::unique_ptr<MemoryRegion> allocate(size_t bytes) override;
  std::unique_ptr<MemoryRegion> register_memory(void* addr, size_t bytes) override;
  std::unique_ptr<RemoteKey> unpack_key(int peer, std::span<const uint8_t> packed) override;
  PostResult post(const Work& w) override;
  void poll(std::vector<Completion>& out) override;
  std::string peer_error(int peer) const override;
  TransportCounters counters() const override { return counters_; }
  // Moves the peer's QP to the error state: the device flushes its WRs and the peer's RDMA
  // operations through it are refused from then on; pending work completes failed. A run-time
  // peer's QP is then destroyed (its slot stays, failed: indices are never reused).
  void fail_peer(int peer, const std::string& msg) noexcept override;
  // Every QP to the error state (the MRs can then be deregistered: nothing reaches them).
  void quiesce(bool graceful) noexcept override;

 private:
  // One posted (or staged, not yet posted) work request, oldest first per lane.
  struct Pending {
    uint32_t seq = 0;  // per-lane sequence number, low 32 bits of wr_id
    uint64_t cookie = 0;
    Op op = Op::Write;  // the user's op (a Swap step is Op::Swap)
    size_t bytes = 0;
    uint64_t remote_addr = 0;
    bool early = false;     // an inline Write completed at post(): its payload is in the lane's bounce
    bool internal = false;  // a fence read of the transport's own (no cookie, no Completion)
  };
  // A work request built by post() and handed to the device by flush_staged().
  struct Staged {
    ibv_send_wr wr{};
    ibv_sge sge{};
  };
  // The emulated Swap in flight on a peer (at most one: later posts to that peer wait, so
  // everything posted after a Swap is ordered after it, as it would be for a native atomic).
  // Each CAS of the loop returns the word's old value into the peer's own result slot, which no
  // other work request writes: the loop decides success from it. The caller's slot (which the
  // core shares between peers) receives the old value once, when the Swap completes.
  struct SwapState {
    bool active = false;
    uint64_t cookie = 0;
    uint64_t* user = nullptr;    // caller's 8-byte slot: the final old value (may be shared)
    uint64_t* result = nullptr;  // this peer's own slot (result_slot()): every CAS result
    uint32_t result_lkey = 0;
    uint64_t remote_addr = 0;
    uint32_t rkey = 0;
    uint64_t value = 0;  // the value to store
    uint64_t guess = 0;  // what the current CAS expects to find
    unsigned attempts = 0;
  };
  // One RC queue pair to a peer. Lane 0 carries everything but large Writes/Reads, which go
  // round-robin over all lanes (RWIN_VERBS_QPS_PER_PEER, verbs_datapath.cpp "Striping").
  struct Lane {
    QpPtr qp;
    QpAddress local;          // what the other side needs (our qpn, initial PSN, GID, lane, ...)
    uint64_t flush_addr = 0;  // the other side's flush target (QpAddress::flush_addr, flush_rkey)
    uint32_t flush_rkey = 0;
    std::deque<Pending> pending;  // staged + posted, not yet completed; size() <= sq_depth_
    std::vector<Staged> staged;   // built, not yet given to ibv_post_send (capacity kChain)
    uint32_t next_seq = 1;
    // Inline Writes are copied here at post() (slot = index in `staged`, max_inline_ bytes each)
    // and complete at once: the device copies the payload into the WQE at ibv_post_send.
    std::vector<uint8_t> bounce;
    bool needs_post = false;  // `staged` holds a WR somebody waits for: poll() posts the chain
    bool dirty = false;       // listed in dirty_ (has staged WRs)
    bool unfenced = false;    // lanes >= 1: a Write went out since this lane's last fence read
    uint8_t rail = 0;         // our device of this QP (rail_of(lane))
    uint8_t remote_rail = 0;  // the peer's device of its end (QpAddress::rail): the rkey index
  };
  struct Peer {
    std::vector<Lane> lanes;  // 1 (run-time peers) or cfg_.verbs.qps_per_peer
    bool connected = false;   // at RTS: post() may hand work to the device
    SwapState swap;
    uint32_t fencing = 0;     // fence reads in flight: post() waits (Busy) until they complete
    uint32_t next_lane = 0;   // round-robin cursor of striped Writes/Reads
    std::string error;  // sticky failure, empty while healthy
    // After a failure: posted WRs stay in their lane's `pending` until the device returns their
    // completions (flushed or done): only then is their memory the caller's again. Bounded by
    // drain_deadline, after which the QPs are destroyed (the device is done with a QP when
    // ibv_destroy_qp returns).
    bool draining = false;
    std::chrono::steady_clock::time_point drain_deadline{};
    bool first_reported = false;  // the failure's own message went out with one completion
    bool has_pending() const noexcept {
      for (const Lane& l : lanes) {
        if (!l.pending.empty()) return true;
      }
      return false;
    }
  };
  struct LaneRef {
    int peer = 0;
    int lane = 0;
  };

  // verbs_connect.cpp: the steps both connect() and the run-time path take.
  // Creates the peer's QP of `lane`, moves it to INIT, picks its PSN; returns what the other side needs.
  QpAddress open_qp(int peer, int lane);
  // Checks the remote side (link layer, MTU, GID, lanes), moves the lane's QP to RTR and RTS. `from` names the
  // remote in messages ("peer 3", "endpoint of instance 0x.. slot 2").
  void connect_qp(int peer, int lane, const QpAddress& remote, const std::string& from);
  QpPtr create_qp(int peer, size_t rail);
  void qp_to_init(ibv_qp* qp, int peer, size_t rail);
  void qp_to_rtr_rts(ibv_qp* qp, int peer, size_t rail, uint32_t local_psn, const QpAddress& remote);
  // Grows the CQ (ibv_resize_cq) so that `live` QPs' send queues fit; throws TransportError.
  void ensure_cq_room(size_t live);
  // "rank 2 -> peer 1: verbs(rxe0 port 1 gid 1)": the prefix of every per-peer message.
  std::string who(int peer) const;
  int npeers() const noexcept { return static_cast<int>(peers_.size()); }

  // verbs_datapath.cpp
  std::string check_work(const Work& w, const Lane& ln, uint32_t& lkey, uint32_t& rkey) const;
  void stage(int peer, int lane, const Pending& p, const ibv_send_wr& wr, const ibv_sge* sge);
  void flush_staged(int peer, int lane);
  // Before an atomic or Flush to `peer` on lane 0: a zero-length READ on every other lane that
  // carried a Write since its last fence. Returns false when nothing needed fencing.
  bool start_fence(int peer);
  // Posts the chains of dirty peers that hold a WR somebody waits for; drops clean peers.
  void post_waited_chains();
  void on_success(int peer, int lane, uint32_t seq);
  void on_error(int peer, int lane, const ibv_wc& wc);
  void stage_swap_cas(int peer);
  std::string op_text(int peer, int lane, const Pending& p) const;
  // Completes `p` of a failed peer as failed: the first one carries the failure's message.
  void report_failed(int peer, int lane, const Pending& p);
  // A failed peer's completion arrived: everything up to `seq` is the caller's again.
  void drained_upto(int peer, int lane, uint32_t seq, bool ok);
  // Peers whose drain passed its deadline: destroy their QP, report what is left.
  void end_overdue_drains();
  void retire_qp(int peer) noexcept;
  // Reads the device's asynchronous events (port down, QP fatal, CQ error) without blocking and
  // turns them into named peer failures.
  void read_async_events() noexcept;
  void read_async_events(size_t rail) noexcept;
  // This peer's 8-byte CAS result slot (one per peer, never shared) and its lkey.
  uint64_t* result_slot(int peer, uint32_t& lkey) const;
  void ensure_result_slots(size_t peers);

  // One device the transport drives (RWIN_IB_HCA): lane l of a peer lives on rail l % rails_.size().
  // Declaration order: the CQ is destroyed before the PD and context it belongs to.
  struct Rail {
    DeviceChoice info;
    std::shared_ptr<DeviceHandles> dev;
    CqPtr cq;
    int cq_cqe = 0;                   // the CQ's size as created or resized
    bool async_nonblocking = false;   // the context's async_fd was made non-blocking
  };
  size_t rail_of(int lane) const noexcept { return static_cast<size_t>(lane) % rails_.size(); }

  // Members in set-up order; destruction runs in reverse: MRs, QPs, CQs, then PDs and contexts.
  TransportConfig cfg_;
  std::vector<Rail> rails_;  // at least one; rail 0 carries lane 0 (atomics, Flush, run-time peers)
  Devices devices_;          // rails_[r].dev, in order: every region is registered on each
  uint64_t max_msg_ = 0;     // the smallest max_msg_sz of the rails' ports
  std::string describe_;
  uint32_t sq_depth_ = 0;    // send queue slots per peer
  uint32_t max_inline_ = 0;  // from the created QPs: Writes up to this many bytes go inline
  bool have_qp_ = false;     // max_inline_ is set
  std::string self_;         // "rank 2" (collective) or "verbs instance 0x..." (run-time peers)
  uint64_t instance_ = 0;    // run-time peers: random id sent in every EndpointBlob
  // QPs that may still produce WCs. A failed peer's QPs are destroyed, but up to sq_depth_ WCs of
  // each may still sit in the CQ until poll() finds it empty; until then they count against the
  // CQ's size (retired_undrained_, in QPs; what ensure_cq_room() of rail 0 needs: run-time peers
  // live on rail 0 only).
  size_t live_qps_ = 0;
  size_t retired_undrained_ = 0;
  int lanes_ = 1;  // QPs per peer of the collective connect (qps_per_peer x rails); run-time peers 1
  // A deque: add_peer() appends without moving the other peers (no Peer& or staged chain of a
  // peer with work in flight is invalidated). wr_id carries the peer index, never a pointer.
  std::deque<Peer> peers_;
  // 8-byte sink for AtomicAdd's unused result; also the flush target peers' zero-length READs name
  // (QpAddress::flush_addr): such a READ moves no byte of it.
  std::unique_ptr<VerbsMemoryRegion> scratch_;
  // Per-peer CAS result slots for the Swap loop, kSlotsPerPage to a registered page; grows with
  // add_peer(); pages are never freed or moved while the transport lives.
  static constexpr size_t kSlotsPerPage = 512;
  std::vector<std::unique_ptr<VerbsMemoryRegion>> result_pages_;
  size_t draining_peers_ = 0;      // peers with draining set
  uint32_t polls_ = 0;              // poll() calls: async events are read every 256th
  TransportCounters counters_;
  std::vector<LaneRef> dirty_;  // lanes with staged WRs: poll() visits only these (O(active))
  bool connected_ = false;  // collective connect() done (run-time peers: Peer::connected)
  std::vector<Completion> ready_;  // completions produced outside poll() (validation failures)
};

}  // namespace rwin::transport::verbs
