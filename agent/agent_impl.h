// The agent's private state (rwin/agent.h): the transport with run-time peers, the control
// listener and connections, regions, imports and the work in flight. One recursive mutex guards
// all of it (recursive: a handle's last reference may drop inside an agent call, and its
// destructor takes the lock again). docs/AGENT.md describes the protocol.
#pragma once

#include <poll.h>

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "agent/agent_wire.h"
#include "agent/call_pace.h"
#include "agent/metrics.h"
#include "bootstrap/socket_util.h"
#include "reg_cache.h"
#include "trace.h"
#include "rwin/agent.h"
#include "transport/transport.h"

namespace rwin {

using AgentClock = std::chrono::steady_clock;

// Binds and listens on `addr` ("host:port", port 0 = ephemeral); `bound` gets it with the port bound.
// Throws Error(InvalidArgument) starting with `what`.
bootstrap::detail::Fd listen_on(const std::string& addr, const std::string& what, std::string& bound);

// One control connection. Outbound: we imported from that agent (we post to it). Inbound: that
// agent imported from us (it posts to us). A pair of agents importing from each other has two.
struct Conn {
  enum class State { AwaitHello, AwaitWelcome, AwaitWireup, AwaitReady, Ready, Failed };
  uint64_t id = 0;
  bool outbound = false;
  State state = State::AwaitHello;
  bootstrap::detail::Fd fd;
  std::string label;  // the peer agent's control address (inbound: from its hello), for messages
  std::string sock;   // the socket's peer address
  std::string key;    // outbound: its key in AgentImpl::outbound_
  int tpeer = -1;     // the transport's peer index
  AgentClock::time_point deadline{};  // of the handshake
  AgentClock::time_point last_rx{}, last_tx{};
  std::vector<uint8_t> rbuf, wbuf;
  std::string error;       // why it failed
  bool unflushed = false;  // puts or notifies posted since the last flush
};

// Work in flight of one blocking call; its cookies leave AgentImpl::tracks_ with it.
struct Track;

struct RegionState {
  std::weak_ptr<AgentImpl> agent;
  void* data = nullptr;
  size_t bytes = 0;
  uint32_t id = 0;
  uint64_t gen = 0;
  std::unique_ptr<transport::MemoryRegion> mr;
  std::vector<uint8_t> desc;
  std::set<uint64_t> importers;  // inbound connection ids that imported it
  std::atomic<bool> live{false};
};

struct RemoteRegionState {
  std::weak_ptr<AgentImpl> agent;
  uint64_t conn = 0;
  std::string peer;
  uint64_t id = 0, gen = 0, base = 0, bytes = 0;
  std::unique_ptr<transport::RemoteKey> key;
  std::atomic<bool> stale{false};
  ~RemoteRegionState();
};

struct AgentImpl : std::enable_shared_from_this<AgentImpl> {
  explicit AgentImpl(const AgentOptions& o);
  void start();            // after make_shared: the progress thread
  void close() noexcept;   // the destructor's work, once

  // Public calls (agent.cpp), under mu.
  Region register_memory(void* data, size_t bytes);
  void deregister(RegionState& r);
  RemoteRegion import_region(std::span<const uint8_t> d);
  void put(const RemoteRegion& dst, uint64_t off, const void* src, size_t n);
  void get(void* dst, const RemoteRegion& src, uint64_t off, size_t n);
  void transfer(transport::Op op, const RemoteRegion& remote, uint64_t off, void* local, size_t n);
  void notify(const RemoteRegion& sig, uint64_t off, int64_t value, NotifyOp op);
  void flush_conn(Conn& c, const std::string& what);
  void flush();
  bool check(const Region& sig, uint64_t off, int64_t expected, WaitCmp cmp, const char* op);
  void wait(const Region& sig, uint64_t off, int64_t expected, WaitCmp cmp, std::chrono::milliseconds t);

  // Progress (agent_progress.cpp).
  bool progress_once(bool control_now);
  void control_step();
  void accept_all();
  void read_conn(Conn& c);
  void handle(Conn& c, const agent::Msg& m);
  void send(Conn& c, const agent::Msg& m);
  void flush_wbuf(Conn& c);
  void fail_conn(Conn& c, const std::string& why, bool orderly = false);
  void mark_ready(Conn& c);  // its handshake completed: Ready, counted
  void drop_stranger(Conn& c, const std::string& why);
  void on_completion(const transport::Completion& comp);
  void revoke_flush(uint64_t conn, uint64_t id, uint64_t gen);
  void thread_main();
  // Sleeping while idle (agent_progress.cpp): the descriptors and the time a sleep may take, or -1
  // when it may not sleep now; a blocking call's sleep with the lock held; waking the thread.
  int prepare_sleep(std::vector<pollfd>& pf, std::chrono::milliseconds cap, bool need_events);
  bool sleep_locked(AgentClock::time_point deadline, bool need_events);
  void nudge() noexcept;

  // Helpers (agent.cpp).
  [[noreturn]] void fail(ErrorCode code, const std::string& msg) const;
  Conn& connect_to(const std::string& address, const agent::Token& token);
  RemoteRegionState& use(const RemoteRegion& h, const char* op, uint64_t off, uint64_t n);
  Conn& conn_of(const RemoteRegionState& r);
  void post(Conn& c, transport::Work w, Track& t, const std::string& what);
  void wait_track(Track& t, Conn& c, AgentClock::time_point deadline, const std::string& what, int until);
  std::string region_name(const RemoteRegionState& r) const;
  void sync_reg_cache_counters() noexcept;  // RegCache::stats() into the counters (under mu)

  AgentOptions opt;
  std::recursive_mutex mu;
  std::unique_ptr<transport::Transport> tr;
  transport::Capabilities caps;
  std::string address;
  std::string describe;
  bootstrap::detail::Fd listen_fd;
  agent::Token token{};
  std::atomic<bool> closed{false};  // read by Region::valid() without the lock

  std::map<uint64_t, std::unique_ptr<Conn>> conns;
  std::map<std::string, uint64_t> outbound_;  // "address/token" -> outbound connection id
  uint64_t next_conn = 1;

  struct Slot {
    std::shared_ptr<RegionState> live;
    uint64_t gen = 0;
  };
  std::vector<Slot> slots;
  std::vector<uint32_t> free_slots;
  size_t live_regions = 0;
  std::vector<std::weak_ptr<RemoteRegionState>> imports;

  uint64_t next_cookie = 1;
  std::unordered_map<uint64_t, Track*> tracks;
  struct RevokeFlush {
    uint64_t conn, id, gen;
  };
  std::unordered_map<uint64_t, RevokeFlush> revoke_flushes;  // cookie -> the ack it owes
  std::vector<RevokeFlush> revoke_retry;                      // Flush not accepted yet (Busy)
  std::unordered_map<uint64_t, uint64_t> handshake_flushes;   // cookie -> outbound conn (wire-up)
  struct PendingRevoke {
    uint64_t id, gen;
    std::set<uint64_t> conns;  // importers yet to acknowledge
  };
  std::vector<PendingRevoke*> revokes;
  uint64_t next_req = 1;
  std::unordered_map<uint64_t, int> import_replies;  // req -> -1 pending, 0 live, 1 gone

  std::vector<transport::Completion> comps;
  AgentClock::time_point last_control{};
  alignas(8) uint64_t scratch[8] = {};
  std::unique_ptr<transport::MemoryRegion> scratch_mr;
  // Caller memory of put/get, registered once and kept (verbs; core/src/reg_cache.h). Null where the
  // transport needs no registration of local memory (UCX). Destroyed before the transport (close()).
  std::unique_ptr<RegCache> regcache;

  std::thread thread;
  std::atomic<bool> stop{false};
  AgentCounters counters;  // AgentStats and the metrics (agent/metrics.h)
  // RWIN_TRACE: this agent's timeline (core/src/trace.h), written at close; null when off. Touched
  // under mu only (calls and the progress thread).
  std::unique_ptr<detail::Tracer> trace;
  std::atomic<int> callers{0};  // user calls inside or waiting for mu (CallLock): the thread stays out
  CallPace pace;  // whether a call's end hands serving to the transport (CallLock); under mu
  // Wakes the progress thread from its sleep: on close, and when a call changed what it must watch
  // (a new control connection, queued control bytes) or armed the transport itself.
  bootstrap::detail::Fd wake_fd;
  std::vector<pollfd> sleep_fds;  // a blocking call's sleep (under mu)
  // RWIN_METRICS / AgentOptions::metrics: null when off. Last member: it renders `counters` from its
  // own thread, so it is stopped (close()) or destroyed before anything it reads.
  std::unique_ptr<MetricsExporter> metrics;
};

// A user call's hold on the agent. Counted before it locks, so the progress thread leaves the lock
// to callers (a std::mutex is not fair: a thread that unlocks and locks again in a loop can starve
// a caller) and stays out while any call progresses for it.
class CallLock {
 public:
  explicit CallLock(AgentImpl& a) : a_(a) {
    a_.callers.fetch_add(1, std::memory_order_relaxed);
    try {
      a_.mu.lock();
    } catch (...) {
      a_.callers.fetch_sub(1, std::memory_order_relaxed);
      throw;
    }
    a_.pace.begin(AgentClock::now());
  }
  ~CallLock() {
    // The last caller out hands serving to the transport (Transport::owner_away: tcp's receiver
    // thread stops napping), unless its calls come in a loop (CallPace).
    if (a_.pace.end(AgentClock::now()) && a_.callers.load(std::memory_order_relaxed) == 1 && a_.tr) a_.tr->owner_away();
    a_.mu.unlock();
    // The thread waits for the count to change (no syscall here when nobody waits).
    if (a_.callers.fetch_sub(1, std::memory_order_release) == 1) a_.callers.notify_one();
  }
  CallLock(const CallLock&) = delete;
  CallLock& operator=(const CallLock&) = delete;

 private:
  AgentImpl& a_;
};

struct Track {
  explicit Track(AgentImpl& a) : agent(a) {}
  ~Track() {
    for (uint64_t c : cookies) agent.tracks.erase(c);
  }
  Track(const Track&) = delete;
  Track& operator=(const Track&) = delete;
  AgentImpl& agent;
  int inflight = 0;
  std::string error;
  std::vector<uint64_t> cookies;
};

}  // namespace rwin
