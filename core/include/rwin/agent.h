// Peers that meet at run time: an Agent listens on an address, registers local memory as regions
// whose descriptors (versioned byte strings) the user carries over its own control channel, and
// puts, gets and notifies into regions it imported from other agents. No job, no collective:
// connections are made on first use and watched by keepalives.
//
// Thread safety: every member function of Agent may be called from any thread; calls are
// serialised by the agent (one at a time). With AgentOptions::progress_thread the agent also
// progresses in a thread of its own, so a process that never calls into rwin (asleep, blocked in
// Python or in a gRPC call) still serves the gets, puts and atomics other agents send it; idle,
// that thread sleeps in poll(2) until a request, a control message or a deadline wakes it, and it
// keeps out of the way while a call is inside the agent (docs/AGENT.md, "Thread safety and progress").
// Region and RemoteRegion are handles: copies share one object; they stay valid (as handles)
// after the agent is gone, and every use then fails with a clear error.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "rwin/rwin.h"  // Error, ErrorCode, NotifyOp, WaitCmp

namespace rwin {

struct AgentOptions {
  // host:port the control listener binds; port 0 = ephemeral (Agent::address() tells the result).
  std::string listen = "127.0.0.1:0";
  std::string transport = "ucx";  // "ucx" (tcp, shared memory: UCX_TLS), "tcp" (rwin's own sockets) or "verbs"
  std::string ib_device;          // verbs: empty = first usable
  int ib_port = 1;                // verbs
  int gid_index = -1;             // verbs: -1 = auto
  std::chrono::milliseconds op_timeout{30000};       // deadline of every blocking call
  std::chrono::milliseconds connect_timeout{10000};  // first-use connection set-up
  std::chrono::milliseconds keepalive_interval{500};
  std::chrono::milliseconds keepalive_timeout{5000};  // a peer silent this long has failed
  bool progress_thread = false;  // serve peers while no thread of this process is inside rwin
  // Prometheus metrics of this agent (docs/OBSERVING.md, "Metrics"): "HOST:PORT", "http://HOST:PORT"
  // or ":PORT" (= 127.0.0.1:PORT) serves HTTP GET /metrics there, bound to that address only (port 0 =
  // ephemeral: metrics_address() tells; no authentication, so keep it on loopback or a trusted
  // network); "file:PATH" rewrites PATH atomically every metrics_interval and at close (%p = pid,
  // %h = host); "off" = none. Empty: the RWIN_METRICS variable (unset: none).
  std::string metrics;
  std::chrono::milliseconds metrics_interval{0};  // file form; 0 = RWIN_METRICS_INTERVAL_MS (1000)
  // Labels on every sample besides agent="<address()>" (Prometheus label names; not agent, op,
  // direction, transport or peer).
  std::vector<std::pair<std::string, std::string>> metrics_labels;
};

// What the agent did, counted since it was made (never reset: subtract two snapshots). The same
// counters are its Prometheus metrics (AgentOptions::metrics), which break some down further (errors
// by operation, connections by direction). docs/OBSERVING.md, "Metrics".
//
// The progress thread: for checks and for "why does my idle server use CPU". An idle thread sleeps on
// its sockets and the transport's wake-up descriptor (sleeps); where the transport cannot wake it and
// needs its progress, it polls on a timer (timer_sleeps, up to 250 us each).
struct AgentStats {
  uint64_t thread_rounds = 0;        // progress rounds of the thread
  uint64_t thread_sleeps = 0;        // sleeps on descriptors, woken by traffic, a deadline or a call
  uint64_t thread_timer_sleeps = 0;  // sleeps of the timer schedule
  // put/get's local memory through the registration cache (verbs; zero where the transport needs
  // no registration): a hit costs no ibv_reg_mr.
  uint64_t reg_cache_hits = 0;
  uint64_t reg_cache_misses = 0;
  // This agent's calls that returned, as initiator (put, get, put_notify, notify, flush) or on its own
  // signal words (wait, test), and the data bytes of put, get and put_notify. What peers did to this
  // agent's regions is not counted: over verbs the adapter serves it without the agent.
  uint64_t puts = 0, put_bytes = 0;
  uint64_t gets = 0, get_bytes = 0;
  uint64_t put_notifies = 0, put_notify_bytes = 0;  // a put_notify counts here only (not as put + notify)
  uint64_t notifies = 0;
  uint64_t flushes = 0;
  uint64_t waits = 0;  // a wait that timed out counts in errors instead
  uint64_t tests = 0;
  uint64_t errors = 0;  // calls above, register_memory, import_region and deregister that threw
  uint64_t regions_registered = 0, regions_deregistered = 0;
  uint64_t regions = 0;  // registered now
  uint64_t imports = 0;  // descriptors imported (import_region that returned)
  // Control connections with other agents (one per importer and owner pair and direction: two agents
  // importing from each other have two): handshakes completed, failed after it (a transport error,
  // silence, EOF, fail_peer) or closed in order (the peer's agent closed), and established now.
  uint64_t peers_connected = 0, peer_failures = 0, peer_closes = 0;
  uint64_t peers = 0;
  uint64_t refused = 0;  // strangers and garbage: connections to the listener refused before a handshake
};

struct AgentImpl;
struct RegionState;
struct RemoteRegionState;

// Local memory registered with an agent: peers that hold its descriptor may put into it, get from
// it and update its 8-byte signal words atomically. The memory stays the caller's and must stay
// mapped until the region is deregistered (or the agent destroyed).
class Region {
 public:
  Region() = default;
  void* data() const;  // nullptr for an empty handle
  size_t bytes() const;
  // Versioned bytes naming this agent (transport address, control address), the region's
  // identity and generation, its address, length and remote key. Opaque to the user.
  std::vector<uint8_t> descriptor() const;
  // Revokes the region: importers are told (their later uses fail naming the region), the
  // transport registration is dropped, and no peer operation reaches the memory after this
  // returns. Idempotent. The memory is not freed.
  void deregister();
  bool valid() const;  // registered and the agent alive

 private:
  friend struct AgentImpl;
  friend class Agent;
  std::shared_ptr<RegionState> s_;
};

// A region of another agent (or of this one), imported from its descriptor.
class RemoteRegion {
 public:
  RemoteRegion() = default;
  size_t bytes() const;
  std::string peer() const;  // the owning agent's control address, "host:port"
  bool stale() const;        // the owner deregistered it (learned from the owner)

 private:
  friend struct AgentImpl;
  friend class Agent;
  std::shared_ptr<RemoteRegionState> s_;
};

class Agent {
 public:
  explicit Agent(const AgentOptions& opt = {});
  ~Agent();  // closes every connection; never throws
  Agent(const Agent&) = delete;
  Agent& operator=(const Agent&) = delete;

  std::string address() const;      // the bound control address, "host:port"
  std::string describe() const;     // "agent 127.0.0.1:40123 ucx(tcp)": used in every message
  // Where the metrics are: the bound "host:port" of the HTTP endpoint, "file:PATH", or "" (off).
  std::string metrics_address() const;

  Region register_memory(void* data, size_t bytes);  // bytes > 0
  // Connects to the owner on first use (bounded by connect_timeout). Throws InvalidArgument for a
  // malformed or foreign-version descriptor, PeerFailed when the owner cannot be reached.
  RemoteRegion import_region(std::span<const uint8_t> descriptor);

  // Offsets are bytes into the remote region. put returns when `src` may be reused; the data is
  // visible at the target after flush() (or to a waiter of a later put_notify/notify's signal).
  void put(const RemoteRegion& dst, uint64_t offset, const void* src, size_t bytes);
  // Returns when the data is in `dst`.
  void get(void* dst, const RemoteRegion& src, uint64_t offset, size_t bytes);
  // The data, then the signal word (8 bytes at signal_offset, aligned): a peer that sees the
  // signal change sees the data.
  void put_notify(const RemoteRegion& dst, uint64_t offset, const void* src, size_t bytes,
                  const RemoteRegion& signal, uint64_t signal_offset, int64_t value,
                  NotifyOp op = NotifyOp::AtomicAdd);
  void notify(const RemoteRegion& signal, uint64_t signal_offset, int64_t value, NotifyOp op = NotifyOp::AtomicAdd);
  // Every put and notify this agent issued is complete at its target.
  void flush();
  // Waits until the local int64 signal word at byte `offset` of `signal` satisfies cmp expected.
  void wait(const Region& signal, uint64_t offset, int64_t expected, WaitCmp cmp = WaitCmp::GE,
            std::optional<std::chrono::milliseconds> timeout = std::nullopt);
  bool test(const Region& signal, uint64_t offset, int64_t expected, WaitCmp cmp = WaitCmp::GE);
  // Drives progress once (serves peers, keepalives) without blocking.
  void progress();
  // Empty while `r`'s owner is reachable; otherwise why not (its connection failed or closed, the
  // region was revoked, the agent is closed). Non-blocking: what this agent already learned.
  std::string peer_error(const RemoteRegion& r) const;
  // The caller knows `r`'s owner failed (its own health lane): every connection with that agent, both
  // ways, fails now with `why`. Its later uses fail naming it; a deregister no longer waits for its
  // acknowledgement; the transport drops the peer (nothing of it lands here after this returns).
  void fail_peer(const RemoteRegion& r, const std::string& why);
  AgentStats stats() const;

 private:
  std::shared_ptr<AgentImpl> impl_;
};

}  // namespace rwin
