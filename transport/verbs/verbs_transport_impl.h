// The verbs transport's private class. One file per lifecycle stage implements it:
//   verbs_device.cpp    device/port/GID choice
//   verbs_connect.cpp   construction, queue pairs, connect()
//   verbs_memory.cpp    allocate(), packed keys, unpack_key()
//   verbs_datapath.cpp  post(), poll(), failure handling
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "transport/transport.h"
#include "transport/verbs/verbs_device.h"
#include "transport/verbs/verbs_handles.h"

namespace rwin::transport::verbs {

class VerbsMemoryRegion final : public MemoryRegion {
 public:
  // Registers `bytes` (rounded up to whole pages) of fresh, zeroed, page-aligned memory.
  VerbsMemoryRegion(std::shared_ptr<DeviceHandles> dev, size_t bytes, const std::string& who);
  // Registers the caller's [addr, addr + bytes) for local use only (register_memory): the device
  // may read it (Write source) and write it (Read destination, atomic results). Owns the MR only.
  struct CallerMemory {};
  VerbsMemoryRegion(CallerMemory, std::shared_ptr<DeviceHandles> dev, void* addr, size_t bytes,
                    const std::string& who);
  std::vector<uint8_t> packed_key() const override;  // throws for caller memory (never remote)
  uint32_t lkey() const noexcept { return mr_->lkey; }
  // True when [p, p + n) lies inside this region.
  bool contains(const void* p, size_t n) const noexcept;

 private:
  // Declaration order is teardown order reversed: MR first, then the memory, then the PD/context.
  std::shared_ptr<DeviceHandles> dev_;
  HostBufferPtr buf_;  // null for caller memory
  MrPtr mr_;
  std::string who_;    // caller memory: names the device in packed_key()'s error
};

class VerbsRemoteKey final : public RemoteKey {
 public:
  VerbsRemoteKey(int peer, uint64_t base, uint64_t bytes, uint32_t rkey) : peer_(peer), rkey_(rkey) {
    base_ = base;
    bytes_ = bytes;
  }
  int peer() const noexcept { return peer_; }
  uint32_t rkey() const noexcept { return rkey_; }
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
  uint32_t rkey_;
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
  std::unique_ptr<MemoryRegion> allocate(size_t bytes) override;
  std::unique_ptr<MemoryRegion> register_memory(void* addr, size_t bytes) override;
  std::unique_ptr<RemoteKey> unpack_key(int peer, std::span<const uint8_t> packed) override;
  PostResult post(const Work& w) override;
  void poll(std::vector<Completion>& out) override;
  std::string peer_error(int peer) const override;
  // Moves the peer's QP to the error state: the device flushes its WRs and the peer's RDMA
  // operations through it are refused from then on; pending work completes failed.
  void fail_peer(int peer, const std::string& msg) noexcept override;
  // Every QP to the error state (the MRs can then be deregistered: nothing reaches them).
  void quiesce(bool graceful) noexcept override;

 private:
  // One posted (or staged, not yet posted) work request, oldest first per peer.
  struct Pending {
    uint32_t seq = 0;  // per-peer sequence number, low 32 bits of wr_id
    uint64_t cookie = 0;
    Op op = Op::Write;  // the user's op (a Swap step is Op::Swap)
    size_t bytes = 0;
    uint64_t remote_addr = 0;
  };
  // A work request built by post() and handed to the device by flush_staged().
  struct Staged {
    ibv_send_wr wr{};
    ibv_sge sge{};
  };
  // The emulated Swap in flight on a peer (at most one: later posts to that peer wait, so
  // everything posted after a Swap is ordered after it, as it would be for a native atomic).
  struct SwapState {
    bool active = false;
    uint64_t cookie = 0;
    uint64_t* local = nullptr;  // user's 8-byte result slot: receives each CAS result
    uint32_t lkey = 0;
    uint64_t remote_addr = 0;
    uint32_t rkey = 0;
    uint64_t value = 0;  // the value to store
    uint64_t guess = 0;  // what the current CAS expects to find
    unsigned attempts = 0;
  };
  struct Peer {
    QpPtr qp;
    std::deque<Pending> pending;  // staged + posted, not yet completed; size() <= sq_depth_
    std::vector<Staged> staged;   // built, not yet given to ibv_post_send (capacity kChain)
    uint32_t next_seq = 1;
    SwapState swap;
    std::string error;  // sticky failure, empty while healthy
  };

  // verbs_connect.cpp
  QpPtr create_qp(int peer);
  void qp_to_init(ibv_qp* qp, int peer);
  void qp_to_rtr_rts(ibv_qp* qp, int peer, uint32_t local_psn, const struct ConnBlob& remote);

  // verbs_datapath.cpp
  std::string check_work(const Work& w, uint32_t& lkey, uint32_t& rkey) const;
  void stage(int peer, const Pending& p, const ibv_send_wr& wr, const ibv_sge* sge);
  void flush_staged(int peer);
  void on_success(int peer, uint32_t seq);
  void on_error(int peer, const ibv_wc& wc);
  void stage_swap_cas(int peer);
  std::string op_text(int peer, const Pending& p) const;

  // Members in set-up order; destruction runs in reverse: MRs, QPs, CQ, then PD and context.
  TransportConfig cfg_;
  DeviceChoice dev_info_;
  std::string describe_;
  std::shared_ptr<DeviceHandles> dev_;
  CqPtr cq_;
  uint32_t sq_depth_ = 0;    // send queue slots per peer
  uint32_t max_inline_ = 0;  // from the created QPs: Writes up to this many bytes go inline
  std::vector<Peer> peers_;
  std::unique_ptr<VerbsMemoryRegion> scratch_;  // 8-byte sink for AtomicAdd's unused result
  bool connected_ = false;
  std::vector<Completion> ready_;  // completions produced outside poll() (validation failures)
};

}  // namespace rwin::transport::verbs
