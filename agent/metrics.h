// The agent's counters (rwin::AgentStats) and their export in the Prometheus text format
// (RWIN_METRICS, AgentOptions::metrics): an HTTP endpoint serving GET /metrics, or a file rewritten
// atomically. docs/OBSERVING.md, "Metrics", names every metric.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace rwin {

// The calls an agent counts: by operation, those that returned, those that threw, and the data bytes.
enum class AgentOp : uint8_t { Put, Get, PutNotify, Notify, Flush, Wait, Test, Import, Register, Deregister };
inline constexpr size_t kAgentOps = 10;
const char* agent_op_name(AgentOp op) noexcept;  // "put", "put_notify", ...: the metrics' op label

// Every counter is a relaxed atomic: calls and the progress thread count under the agent's lock, but
// a scrape (the HTTP server's or the file writer's thread) reads them without it, so it never waits
// behind a blocking call and never delays one. The values need no order among themselves.
struct AgentCounters {
  using Count = std::atomic<uint64_t>;
  std::array<Count, kAgentOps> ops{}, errors{}, bytes{};
  Count rounds{0}, sleeps{0}, timer_sleeps{0};  // the progress thread
  Count reg_cache_hits{0}, reg_cache_misses{0};  // copies of RegCache::stats(), stored under the lock
  std::atomic<int64_t> regions{0};               // live regions now
  // Control connections by direction, [0] outbound (we imported from that agent), [1] inbound.
  std::array<Count, 2> connected{}, failures{}, closes{};
  std::array<std::atomic<int64_t>, 2> peers{};  // established now
  Count refused{0};  // inbound connections ended before their handshake completed (strangers, garbage)

  // Calls to one peer agent (put, get, put_notify, notify that returned), by the owner's address: the
  // metrics' peer label. Under their own small lock (a call holds it for one map update, a scrape for
  // a copy), never the agent's. At most kMaxPeers addresses, later ones counted under "other".
  static constexpr size_t kPeerOps = 4;  // Put, Get, PutNotify, Notify: the first four AgentOps
  static constexpr size_t kMaxPeers = 256;
  struct PeerCount {
    std::array<uint64_t, kPeerOps> ops{}, bytes{};
  };
  mutable std::mutex peer_mu;
  std::map<std::string, PeerCount> by_peer;
  void peer_op(const std::string& peer, AgentOp o, uint64_t n) {
    const size_t i = static_cast<size_t>(o);
    if (i >= kPeerOps) return;
    std::lock_guard lk(peer_mu);
    auto it = by_peer.find(peer);
    if (it == by_peer.end()) it = by_peer.try_emplace(by_peer.size() < kMaxPeers ? peer : std::string("other")).first;
    ++it->second.ops[i];
    it->second.bytes[i] += n;
  }
  std::map<std::string, PeerCount> peers_copy() const {
    std::lock_guard lk(peer_mu);
    return by_peer;
  }

  static void add(Count& c, uint64_t n = 1) noexcept { c.fetch_add(n, std::memory_order_relaxed); }
  static uint64_t get(const Count& c) noexcept { return c.load(std::memory_order_relaxed); }
  void op(AgentOp o, uint64_t n) noexcept {
    add(ops[static_cast<size_t>(o)]);
    if (n) add(bytes[static_cast<size_t>(o)], n);
  }
  void error(AgentOp o) noexcept { add(errors[static_cast<size_t>(o)]); }
};

// The text of every metric of one agent, Prometheus text exposition format 0.0.4. `labels` are on
// every sample (agent="host:port" first); `transport` goes on rwin_agent_info.
std::string render_metrics(const AgentCounters& c, const std::vector<std::pair<std::string, std::string>>& labels,
                           const std::string& transport);

// Checks extra labels (AgentOptions::metrics_labels): Prometheus label names, not the ones the
// metrics use themselves, no duplicates. Returns why not, or "".
std::string check_metric_labels(const std::vector<std::pair<std::string, std::string>>& labels);

// A parsed RWIN_METRICS / AgentOptions::metrics (docs/OBSERVING.md, "Metrics"): neither = off.
struct MetricsSpec {
  bool http = false;  // target: "HOST:PORT" (":PORT" already made 127.0.0.1:PORT)
  bool file = false;  // target: the path, %h and %p expanded
  std::string target;
};

// Serves the text of `render` as `spec` says: "[http://]HOST:PORT" or ":PORT" (HTTP GET /metrics, port
// 0 = ephemeral) or "file:PATH" (%h host, %p pid; rewritten every `interval` and at stop()). `source`
// names where the spec came from ("RWIN_METRICS", "AgentOptions::metrics") in errors, which are rwin::Error
// (InvalidArgument for a malformed spec, Transport when it cannot bind or write).
class MetricsExporter {
 public:
  // The spec's syntax only (nothing bound or written): rwin::Error(InvalidArgument) naming `source`
  // and `spec` when malformed. "", "off": neither http nor file.
  static MetricsSpec parse(const std::string& spec, const std::string& source);
  // Null for "" and "off".
  static std::unique_ptr<MetricsExporter> start(const std::string& spec, const std::string& source,
                                                std::chrono::milliseconds interval, std::function<std::string()> render,
                                                const std::string& describe);
  virtual ~MetricsExporter() = default;
  // "127.0.0.1:9464" (the bound port) or "file:/path" (expanded).
  virtual std::string address() const = 0;
  // Stops serving (no thread left); the file form writes a last time. Idempotent, never throws.
  virtual void stop() noexcept = 0;
};

}  // namespace rwin
