// Bootstrap: moves bytes between ranks before (and beside) the RDMA transport.
//
// It knows nothing about RDMA. Transports publish addresses and keys through it as opaque,
// versioned blobs. Every blocking call takes or inherits a deadline and throws
// BootstrapError (naming the missing ranks where that is known) when it passes.
//
// Thread safety: a TcpStore client and a Bootstrap are used by one thread at a time.
// TcpStoreServer runs its own thread and is safe to construct/destroy from any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace rwin::bootstrap {

using Bytes = std::vector<uint8_t>;
using Millis = std::chrono::milliseconds;

// Every bootstrap failure (timeout, peer gone, protocol garbage, bad address) is one of these.
// The core converts it into rwin::Error(ErrorCode::Bootstrap) at its boundary.
class BootstrapError : public std::runtime_error {
 public:
  enum class Kind { Timeout, Connection, Protocol, Config, PeerFailed };
  BootstrapError(Kind kind, const std::string& what) : std::runtime_error(what), kind_(kind) {}
  Kind kind() const noexcept { return kind_; }

 private:
  Kind kind_;
};

// STUB until the lease lands (helper H1).
struct PeerFailure {
  int rank = -1;
  std::string how;
  std::chrono::steady_clock::time_point when;
};

// A key-value store with blocking reads. Keys are short strings, values are bytes.
class Store {
 public:
  virtual ~Store() = default;
  virtual void set(const std::string& key, std::span<const uint8_t> value) = 0;
  // Blocks until `key` exists or `timeout` passes (then throws BootstrapError::Timeout).
  virtual Bytes get(const std::string& key, Millis timeout) = 0;
  // Atomically adds `delta` to the 64-bit counter at `key` (created as 0) and returns the new value.
  virtual int64_t add(const std::string& key, int64_t delta) = 0;
  // Non-blocking: which of `keys` exist right now (same order).
  virtual std::vector<bool> check(const std::vector<std::string>& keys) = 0;
  // Blocks until every key exists or `timeout` passes (then throws BootstrapError::Timeout).
  virtual void wait(const std::vector<std::string>& keys, Millis timeout) = 0;
};

// Parses "host:port" (host may be a name, IPv4 or [IPv6]); throws BootstrapError::Config.
struct HostPort {
  std::string host;
  uint16_t port = 0;
  static HostPort parse(const std::string& text);
  std::string str() const;
};

// The store server: one thread, poll()-driven, serves any number of clients. Garbage on the
// port (bad magic, oversized lengths, unknown op) closes that one connection with a log line and
// never disturbs the stored data or other clients.
class TcpStoreServer {
 public:
  // Binds `bind_host:port` (port 0 = ephemeral; bind_host "" or "0.0.0.0" = all interfaces).
  TcpStoreServer(const std::string& bind_host, uint16_t port);
  ~TcpStoreServer();  // stops the thread; never throws
  TcpStoreServer(const TcpStoreServer&) = delete;
  TcpStoreServer& operator=(const TcpStoreServer&) = delete;
  uint16_t port() const noexcept;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The client side. Connects with retries until `connect_timeout` (the server may start later).
class TcpStore final : public Store {
 public:
  TcpStore(const HostPort& server, Millis connect_timeout);
  ~TcpStore() override;
  void set(const std::string& key, std::span<const uint8_t> value) override;
  Bytes get(const std::string& key, Millis timeout) override;
  int64_t add(const std::string& key, int64_t delta) override;
  std::vector<bool> check(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys, Millis timeout) override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Rank, size and rendezvous address as the launcher left them in the environment, in this order:
// RWIN_RANK/RWIN_NRANKS/RWIN_ROOT (rwinrun), OMPI_COMM_WORLD_RANK/SIZE (Open MPI mpirun),
// PMI_RANK/PMI_SIZE (MPICH, Hydra), SLURM_PROCID/SLURM_NTASKS (srun). `root` is RWIN_ROOT when set.
struct LaunchEnv {
  int rank = -1;
  int nranks = -1;
  std::string root;    // "host:port", may be empty when the launcher gives none
  std::string source;  // "rwin", "openmpi", "pmi", "slurm": for messages
  static std::optional<LaunchEnv> detect();
};

// Collectives over a Store for one job. Rank 0 serves the store when `serve` is true (the
// default: rwinrun/mpirun jobs); otherwise the store at `root` is run by someone else.
class Bootstrap {
 public:
  // Collective. Returns when all `nranks` ranks have arrived; throws BootstrapError naming
  // the ranks that never arrived when `timeout` passes.
  Bootstrap(int rank, int nranks, const HostPort& root, Millis timeout, bool serve = true);
  ~Bootstrap();
  Bootstrap(const Bootstrap&) = delete;
  Bootstrap& operator=(const Bootstrap&) = delete;

  int rank() const noexcept { return rank_; }
  int nranks() const noexcept { return nranks_; }
  Millis timeout() const noexcept { return timeout_; }

  // Collective: every rank contributes one blob, every rank gets all of them in rank order.
  std::vector<Bytes> allgather(std::span<const uint8_t> mine);
  // Collective: returns when every rank has called it.
  void barrier();
  // The same, for callers that must keep serving their peers while they wait (a transport whose
  // remote operations land only while the target progresses): calls `while_waiting` between
  // polls of the store (the store is asked every 50 us at first, then every 1 ms). Throws
  // BootstrapError::Timeout naming the ranks that never came once `timeout` passes.
  void barrier(Millis timeout, const std::function<void()>& while_waiting);
  // Point to point, for per-peer handshakes (e.g. one queue pair per peer): `tag` must be the
  // same on both sides and unique per exchange.
  void send(int peer, const std::string& tag, std::span<const uint8_t> data);
  Bytes recv(int peer, const std::string& tag);

  Store& store() noexcept { return *store_; }
  std::vector<PeerFailure> poll_failures() { return {}; }  // STUB

 private:
  // Waits for one key per rank under `prefix`; on timeout names the ranks that are missing.
  void wait_ranks(const std::string& prefix, const char* what);

  int rank_;
  int nranks_;
  Millis timeout_;
  uint64_t seq_ = 0;  // collective sequence number: keys of one collective never collide with another's
  std::unique_ptr<TcpStoreServer> server_;
  std::unique_ptr<Store> store_;
};

}  // namespace rwin::bootstrap
