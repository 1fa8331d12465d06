// The transport seam: what the core asks of an RDMA-capable backend (UCX, raw verbs).
//
// Contract of this interface (every implementation keeps it; the core relies on it):
//  * Nothing here blocks for longer than a bounded, short time except connect(), which is
//    collective and bounded by the bootstrap deadline.
//  * Set-up calls (connect, allocate, register_memory, unpack_key) throw rwin::transport::TransportError.
//    The data path (post, poll) never throws: it reports through PostResult and Completion.
//  * Every Work accepted by post() (PostResult::Ok) yields exactly one Completion from a later
//    poll(), successful or failed, even if the transport signals only some of them internally.
//  * Completion meaning per op:
//      Write            the local source may be reused (NOT necessarily visible remotely)
//      Read             the data is in the local buffer
//      AtomicAdd        the add is issued; the local side holds no resource for it
//      FetchAdd/Swap/CompareSwap  the old value (8 bytes) is in `local`
//      Flush            every op posted to that peer before the Flush is complete at the target
//  * A failed completion marks the peer failed in the transport; later posts to it return
//    PostResult::PeerFailed. Other peers keep working.
//  * post() may stage work and hand it to the device at the next poll() (verbs chains WRs to
//    save doorbells). A caller about to return control to the user polls once, so nothing it
//    promised to send is left staged. Exception: a Write (whose Completion only promises the
//    source is reusable) may stay staged after poll() until the next non-Write op or Flush to
//    the same peer (UCX am mode coalesces small writes with the notify after them). Remote
//    visibility of a put is only promised after notify/fence/quiet/barrier (docs/CONTRACT.md),
//    and each of those posts a non-Write op or a Flush to that peer.
//  * peer == own rank is supported (loopback through the same mechanism).
//
// Thread safety: one thread at a time per Transport object.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "transport/verbs/verbs_params.h"

namespace rwin::bootstrap {
class Bootstrap;
}

namespace rwin::transport {

class TransportError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Accumulate: put(Add) applied by the target itself (Capabilities::max_add_bytes > 0 only): the
// payload is added element-wise into the remote bytes by the region's RegionAdder (below). Its
// Completion means what a Write's does; a Flush after it promises the sums are in place.
enum class Op : uint8_t { Write, Read, AtomicAdd, FetchAdd, CompareSwap, Swap, Flush, Accumulate };
const char* op_name(Op op) noexcept;

struct Capabilities {
  size_t max_message_bytes = 0;            // a Write/Read longer than this must be cut by the caller
  bool write_then_atomic_ordered = false;  // true: an atomic posted after writes to the same peer is
                                           // applied after them (RC QP); false: post a Flush between
  bool needs_target_progress = false;      // true: remote ops land only while the target polls
  bool native_set = true;                  // Swap is a real remote atomic (else emulated, documented)
  // Measured defaults for the core's pipeline where the user set none (bench/RESULTS.md).
  size_t default_chunk_bytes = 1 << 20;
  int default_pipeline_depth = 4;
  // true: caller memory must be registered (register_memory) before it can be Work::local of a
  // Write or Read, and registering costs a syscall and pins pages, so the core caches regions
  // (core/src/reg_cache.h). false: register_memory returns a region that registers nothing (the
  // library takes any local pointer), and a cache buys nothing.
  bool local_needs_registration = false;
  // true: a CPU atomic on memory mapped here (Transport::mapped) is atomic against the remote
  // atomics other ranks send to that memory. false: remote atomics may run on a NIC, which is
  // atomic only against other NIC atomics (IBV_ATOMIC_HCA), so the core sends every atomic through
  // post(), same-host and self peers included (docs/CONTRACT.md, "Atomics on one word").
  bool cpu_atomics = true;
  // > 0: the target applies Op::Accumulate without its owner's help (tcp: its receiver thread), at
  // most this many bytes per Work, into regions that accept_adds() armed. 0: no Op::Accumulate (the
  // core stages put(Add) for the target's progress instead, core/src/staging.h).
  uint64_t max_add_bytes = 0;
};

// What a target that applies put(Add) itself runs for each Op::Accumulate that lands in a region
// (Transport::accept_adds): the core's element arithmetic under the buffer's stripe locks
// (core/src/accumulate.cpp). The transport knows only bytes; the element type travels as an opaque
// code. Called from any of the transport's threads, one add at a time per region is not promised.
class RegionAdder {
 public:
  virtual ~RegionAdder() = default;
  // Adds `bytes` of elements of type `dtype` at `src` into the region at byte `offset`, or refuses
  // (returns why, nothing added) what the region cannot take: an unknown type, a misaligned or
  // partial element, a range outside the part that takes adds. Never throws, never blocks for
  // longer than its own deadline.
  virtual std::string add(uint64_t dtype, uint64_t offset, const char* src, uint64_t bytes) const noexcept = 0;
};

// Memory that remote peers may read, write and update atomically (from allocate(): page aligned
// and zeroed), or caller memory registered for local use only (from register_memory()).
class MemoryRegion {
 public:
  virtual ~MemoryRegion() = default;
  void* addr() const noexcept { return addr_; }
  size_t bytes() const noexcept { return bytes_; }
  // Opaque, versioned bytes a peer passes to Transport::unpack_key(). A region from
  // register_memory() has none: it throws TransportError.
  virtual std::vector<uint8_t> packed_key() const = 0;

 protected:
  void* addr_ = nullptr;
  size_t bytes_ = 0;
};

// A peer's MemoryRegion as seen from here.
class RemoteKey {
 public:
  virtual ~RemoteKey() = default;
  uint64_t base() const noexcept { return base_; }  // the peer's address of byte 0
  size_t bytes() const noexcept { return bytes_; }

 protected:
  uint64_t base_ = 0;
  size_t bytes_ = 0;
};

struct Work {
  Op op = Op::Write;
  int peer = -1;
  void* local = nullptr;                  // Write: source; Read: destination; Fetch*/Swap/CAS: old value
  const MemoryRegion* local_mr = nullptr; // region holding `local` (required by verbs for its lkey;
                                          // may be null only for AtomicAdd and Flush)
  uint64_t remote_addr = 0;               // absolute address in the peer's region
  const RemoteKey* rkey = nullptr;        // null only for Flush
  size_t bytes = 0;                       // Write/Read length; atomics are always 8 bytes
  uint64_t operand = 0;                   // add value / swap value / CAS new value / Accumulate: element type
  uint64_t compare = 0;                   // CAS expected value
  uint64_t cookie = 0;                    // returned in the Completion
};

struct Completion {
  uint64_t cookie = 0;
  bool ok = true;
  std::string error;  // one line naming device, peer, op and the library's status text
};

enum class PostResult { Ok, Busy, PeerFailed };

// What the transport asked of the device since it was made (verbs; rwin's tcp: `striped` only; zero
// elsewhere). Cheap
// increments on the data path, read by tests and rwin-perf --counters.
struct TransportCounters {
  uint64_t wrs = 0;          // work requests handed to the device
  uint64_t doorbells = 0;    // ibv_post_send calls (one doorbell each)
  uint64_t signaled = 0;     // WRs that asked for a completion
  uint64_t inline_wrs = 0;   // WRs whose payload went inside the WQE
  uint64_t cqes = 0;         // completions polled from the CQ
  uint64_t drained = 0;      // WRs of a failed peer completed only once the device returned them
  uint64_t striped = 0;      // Writes/Reads posted on a peer's queue pairs (tcp: connections) other than the first
  uint64_t fence_reads = 0;  // zero-length READs that ordered an atomic/Flush after striped Writes
};

class Transport {
 public:
  virtual ~Transport() = default;

  // "ucx(tcp)", "verbs(rxe0 port 1 gid 1)": used in every error message.
  virtual std::string describe() const = 0;
  virtual Capabilities capabilities() const = 0;

  // Collective: exchanges addresses through the bootstrap and connects to every rank (incl. self).
  virtual void connect(bootstrap::Bootstrap& bs) = 0;

  virtual std::unique_ptr<MemoryRegion> allocate(size_t bytes) = 0;
  // Caller memory [addr, addr + bytes) as a local region: usable as Work::local_mr of a Write
  // (source) or Read (destination, so it is registered writable by the device) and of fetching
  // atomics' result slot; never exposed to peers (packed_key() throws). addr() and bytes() of the
  // result are the arguments. The memory stays the caller's: it must stay mapped while the region
  // lives, and destroying the region deregisters it, never frees it. Costs per transport:
  // verbs pins the pages (ibv_reg_mr, IBV_ACCESS_LOCAL_WRITE), a syscall and the page walk;
  // UCX registers nothing (ucp_put/get_nbx, am sends and direct copies take any pointer).
  // Capabilities::local_needs_registration says which. Throws TransportError naming the device,
  // address, length and errno when the registration fails (bytes == 0 included).
  virtual std::unique_ptr<MemoryRegion> register_memory(void* addr, size_t bytes) = 0;
  virtual std::unique_ptr<RemoteKey> unpack_key(int peer, std::span<const uint8_t> packed) = 0;

  // Never blocks. Busy: no room now (poll, then retry). PeerFailed: see peer_error(peer).
  virtual PostResult post(const Work& w) = 0;
  // Drives progress and appends finished work to `out`. Never blocks.
  virtual void poll(std::vector<Completion>& out) = 0;
  // The sticky failure of a peer, empty while the peer is healthy.
  virtual std::string peer_error(int peer) const = 0;
  virtual TransportCounters counters() const { return {}; }
  // Whether an atomic posted to `peer` after writes lands after them with no Flush between. Per
  // peer, because one transport may reach some peers natively and others through an ordered
  // protocol of its own. Valid after connect().
  // How RMA reaches `peer`, for reports (rwin-perf's JSON): "direct" (its memory is mapped here:
  // CPU loads and stores), "am" (rwin's ordered active-message protocol) or "native" (the
  // library's RMA: ucp_put/get, RDMA verbs). Valid after connect().
  virtual std::string rma_mode(int peer) const {
    (void)peer;
    return "native";
  }
  virtual bool write_then_atomic_ordered(int peer) const {
    (void)peer;
    return capabilities().write_then_atomic_ordered;
  }
  // This process's address of the peer's bytes [remote_addr, remote_addr + bytes) of `key` when the
  // peer's memory is mapped here (UCX direct mode: posix/sysv shared memory on the same host,
  // ucp_rkey_ptr), else nullptr. The core then reads and writes them with the CPU (put(Add) applies
  // its sums there under the buffer's stripe locks, core/src/stripe_locks.h). The pointer stays
  // valid as long as `key`. Never blocks, never throws.
  virtual void* mapped(int peer, const RemoteKey& key, uint64_t remote_addr, size_t bytes) const noexcept {
    (void)peer, (void)key, (void)remote_addr, (void)bytes;
    return nullptr;
  }
  // The core learned that `peer` is gone (its bootstrap lease closed, or it missed a deadline):
  // stop talking to it now. Afterwards post() to it returns PeerFailed with peer_error(peer) ==
  // `why` (unless the transport had its own failure first), nothing of this transport touches the
  // peer's connection again, and work posted to it completes (failed) at a later poll() or
  // never: the core no longer waits for it. Never blocks.
  virtual void fail_peer(int peer, const std::string& why) noexcept = 0;
  // Teardown, first step: when it returns, neither a peer nor this transport can write into any
  // MemoryRegion it allocated, so the caller may release them. Closes every connection (bounded,
  // a second at most); afterwards post() returns PeerFailed and poll() finds nothing new.
  // `graceful` (the job ended with a barrier): flush-close connections to healthy peers. Otherwise
  // (a peer failed or a deadline passed) drop every connection without driving any more protocol:
  // peers are going down at the same moment, and UCX 1.13's tcp transport can assert when it is
  // progressed while its peers vanish mid-protocol.
  virtual void quiesce(bool graceful) noexcept = 0;

  // ---- Peers met at run time (rwin/agent.h) ------------------------------------------------
  // A transport made with TransportConfig::dynamic_peers has no collective connect(): it starts
  // with no peers and the caller connects each one by a handshake it carries over its own
  // channel (the agent's control connection):
  //   A: p = add_peer(); send local_endpoint(p) ......> B: q = add_peer(); connect_peer(q, blob_A);
  //   A: connect_peer(p, blob_B) <...................... B: reply local_endpoint(q)
  //   A: send "ready" ................................> B: may post to q from now on
  // A may post to p once connect_peer(p, blob_B) returned; B only after "ready" (verbs: a packet
  // reaching a QP not yet at RTR is dropped). Indices count up from 0 and are never reused; a
  // peer is ended with fail_peer() (its connection dropped, later posts PeerFailed). Connecting
  // to oneself: connect_peer(p, local_endpoint(p)). Set-up calls throw TransportError; a
  // transport without run-time peers throws from add_peer().
  virtual int add_peer();
  virtual std::vector<uint8_t> local_endpoint(int peer);
  virtual void connect_peer(int peer, std::span<const uint8_t> remote_endpoint);
  // Caller memory exposed to peers (an agent's registered region): like allocate(), remote peers
  // may write, read and update it atomically with the key from packed_key(), but the memory is
  // the caller's. Destroying the region deregisters it and never frees it; once the destructor
  // returned, no peer operation reaches the memory (verbs: the MR is gone, a stale rkey fails
  // remotely; UCX: the target refuses the address). Throws TransportError naming the address,
  // length and the library's reason.
  virtual std::unique_ptr<MemoryRegion> expose_memory(void* addr, size_t bytes);
  // A region from allocate() takes Op::Accumulate from now on, applied by `adder` (kept as long as
  // the region). Only where Capabilities::max_add_bytes > 0; elsewhere it does nothing. An
  // Accumulate into a region that was not armed is refused.
  virtual void accept_adds(MemoryRegion& region, std::shared_ptr<const RegionAdder> adder) {
    (void)region, (void)adder;
  }
  // Sleeping until something happens (an agent's idle progress thread and its long waits), so an
  // idle owner costs no CPU yet serves a request as soon as it arrives:
  //   for (;;) { poll(); if nothing happened && arm(): sleep in poll(2) on wait_fd() and sockets }
  // wait_fd(): readable when poll() may find new work; -1 when the transport has none (the caller
  // polls on a schedule). arm(): right after a poll() that found nothing, before sleeping; false
  // when work is pending already or any work of the transport's is in flight, whose progress need
  // not raise an event (poll again, do not sleep). serves_passively(): peers' one-sided
  // operations on exposed memory complete without this process calling poll() (verbs RC: the
  // adapter serves them), so an owner with nothing of its own in flight may sleep on its sockets.
  // The owner's wait found nothing to do and is about to sleep `max` (core/src/backoff.h, after it
  // spun and yielded): a transport whose arrivals can end that sleep blocks here instead, up to
  // `max`, and returns true; false: not supported, the caller sleeps itself. Owner thread only.
  virtual bool idle_wait(std::chrono::microseconds max) noexcept {
    (void)max;
    return false;
  }
  // How many times data arrived for this rank so far (any thread may read it; it only grows): a
  // wait that sees it move is serving traffic and keeps spinning instead of backing off into sleep
  // (core/src/backoff.h). 0 forever: the transport does not count (its arrivals need no wait here).
  virtual uint64_t arrivals() const noexcept { return 0; }
  // The core counted at start-up that this host runs more of the job's ranks than it has CPUs for
  // them (core/src/context.cpp, choose_spin): a transport whose waiting differs then may adapt.
  // Called once, from the owner's thread, after connect().
  virtual void set_oversubscribed(bool yes) noexcept { (void)yes; }
  // Orders what this transport's own threads did to this process's memory so far (peers' writes
  // and atomics landed, reads served) before the caller's next access, where the caller learned of it
  // through another channel (the store's barrier, after the peers' quiet): the happens-before that
  // a signal's acquire gives otherwise. Nothing to do where no thread of the transport's touches
  // windows (UCX, verbs: the NIC, or the owner's own progress). Bounded (the thread's hold is short).
  virtual void sync_arrivals() noexcept {}
  virtual int wait_fd() const noexcept { return -1; }
  virtual bool arm() noexcept { return false; }
  // The owner's thread leaves the transport (an agent call returned, not one of a loop of calls, or
  // its progress thread sleeps with nothing of its own in flight) and may not poll again for a
  // while: a transport that serves peers itself while its owner is away (tcp's receiver thread)
  // starts now rather than when the owner's last poll has aged. Owner thread only; cheap.
  virtual void owner_away() noexcept {}
  virtual bool serves_passively() const noexcept { return false; }
};

struct TransportConfig {
  std::string name;        // "ucx", "tcp", "mixed" or "verbs"
  std::string ib_device;   // verbs: device name, empty = first usable
  int ib_port = 1;         // verbs: port number
  int gid_index = -1;      // verbs: -1 = auto (RoCE v2 IPv4-mapped GID where present)
  VerbsParams verbs;       // verbs: traffic class, SL, GID type/subnet, timeouts, fork safety
                           // (VerbsParams::from_env() reads the RWIN_IB_* knobs; default: their defaults)
  int rank = 0;
  int nranks = 1;
  std::string ifname;      // ucx: the network interface that reaches the root (RWIN_IFNAME or the
                           // route to the root); restricts UCX's tcp devices unless UCX_NET_DEVICES is set
  bool ucx_tcp_zcopy = false;    // ucx without RDMA devices: allow UCX's zero-copy sends (see UcxTransport)
  std::string ucx_rma = "auto";  // ucx: how RMA reaches a peer: "native" (ucp_put/get/atomic), "am" (rwin's
                                 // ordered active-message protocol), "auto" (direct loads/stores where UCX
                                 // maps the peer's memory, am where UCX would emulate RMA, else native)
  bool dynamic_peers = false;    // peers are added at run time (add_peer/connect_peer), never connect();
                                 // rank and nranks are unused (0 and 0)
  bool ucx_wakeup = false;       // ucx, dynamic_peers: UCP_FEATURE_WAKEUP and wait_fd() (agents: on unless RWIN_AGENT_UCX_WAKEUP=0)
  std::vector<int> host_of;      // mixed: each rank's host, equal numbers for ranks that share one (the same
                                 // vector on every rank, from the bootstrap: core/src/context.cpp); empty: one host
  bool lanes_across_hosts_only = false;  // tcp under mixed: RWIN_TCP_SOCKETS' extra connections only to ranks on
                                         // other hosts (host_of), the ones mixed sends through tcp
  std::string listen_host;       // tcp, dynamic_peers: the IPv4 address its listener binds (the agent's control
                                 // address); empty: RWIN_IFNAME's address, else the one a route chooses
};

// Creates the named transport; throws TransportError listing the known names for an unknown one.
std::unique_ptr<Transport> make_transport(const TransportConfig& cfg);

}  // namespace rwin::transport
