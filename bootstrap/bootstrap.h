// Bootstrap: moves bytes between ranks before (and beside) the RDMA transport.
//
// It knows nothing about RDMA. Transports publish addresses and keys through it as opaque,
// versioned blobs. Every blocking call takes or inherits a deadline and throws
// BootstrapError (naming the missing ranks where that is known) when it passes.
//
// Thread safety: a TcpStore client and a Bootstrap are used by one thread at a time.
// TcpStoreServer runs its own thread and is safe to construct/destroy from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
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
  // PeerFailed: a collective or p2p recv could not finish because a rank failed (its lease to
  // the store closed without a goodbye); the message names the rank and how it was learned.
  enum class Kind { Timeout, Connection, Protocol, Config, PeerFailed };
  BootstrapError(Kind kind, const std::string& what) : std::runtime_error(what), kind_(kind) {}
  Kind kind() const noexcept { return kind_; }

 private:
  Kind kind_;
};

// A rank that failed, as the store reported it (or as this process found the store gone).
struct PeerFailure {
  int rank = -1;    // the rank that failed
  std::string how;  // e.g. "its bootstrap connection closed" or "the store at 127.0.0.1:4000 (served by
                    // rank 0) closed the connection"
  std::chrono::steady_clock::time_point when;  // when this process learned it
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

struct StoreServerConfig {
  std::string job_key;  // empty: no key (clients must have none either); see docs/CONTRACT.md
  int nranks = 0;       // > 0: hellos must name this job size and a rank below it
};

// The store server: one thread, poll()-driven, serves any number of clients. A client is served
// only after a mutual HMAC-SHA256 challenge-response on the job key (wire.h). Before that only
// the hello exchange is accepted (small frames), an unauthenticated connection is dropped after
// kAuthDeadline, and at most kMaxUnauthenticated of them are kept (the oldest goes when another
// arrives), so strangers hold no memory and cannot crowd out the ranks. Each rank holds one
// lease connection; a second lease for the same rank is refused and logged. A lease that closes
// without a goodbye marks its rank failed: every other lease is told at once, and GET/WAIT
// requests that cannot be satisfied are answered with PeerFailed. Garbage on the port closes
// that one connection with a log line and never disturbs the stored data or other clients.
class TcpStoreServer {
 public:
  static constexpr std::chrono::seconds kAuthDeadline{5};
  static constexpr size_t kMaxUnauthenticated = 256;
  static constexpr size_t kMaxAuthenticated = 4096;
  // Per job, whoever writes them: a buggy rank cannot exhaust the root's memory.
  static constexpr uint64_t kMaxStoredBytes = 1ull << 30;
  static constexpr size_t kMaxStoredKeys = 1u << 22;

  // Binds `bind_host:port` (port 0 = ephemeral). `bind_host` must be a specific address or name
  // of this machine: a wildcard ("", 0.0.0.0, ::) is refused (Config).
  TcpStoreServer(const std::string& bind_host, uint16_t port, const StoreServerConfig& cfg = {});
  ~TcpStoreServer();  // stops the thread; never throws
  TcpStoreServer(const TcpStoreServer&) = delete;
  TcpStoreServer& operator=(const TcpStoreServer&) = delete;
  uint16_t port() const noexcept;
  // Blocks until every rank that ever held a lease, except `except_rank`, has said goodbye or
  // failed, or `deadline` passes (then false). Thread-safe.
  bool wait_until_ranks_left(int except_rank, std::chrono::steady_clock::time_point deadline) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

struct StoreClientConfig {
  std::string job_key;  // must match the server's (both empty: an unauthenticated loopback job)
  int rank = -1;        // -1: a data client that is not a rank (tools, tests); a lease needs one
  int nranks = 0;
  Millis op_timeout{0};  // deadline of set/add/check; 0: the connect timeout
};

// The client side. Connects (and authenticates) with retries until `connect_timeout` (the
// server may start later). A server that cannot prove it knows the key is refused before the
// client sends anything that depends on the key. Every call is bounded by its deadline,
// reconnects included.
class TcpStore final : public Store {
 public:
  TcpStore(const HostPort& server, Millis connect_timeout, const StoreClientConfig& cfg = {});
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

// A rank's liveness lease: a dedicated, authenticated connection to the store bound to the rank,
// used for nothing but failure events. Constructing it joins the rank (throws Config if the rank
// already holds a lease, naming both addresses).
class StoreLease {
 public:
  StoreLease(const HostPort& server, Millis connect_timeout, const StoreClientConfig& cfg);
  ~StoreLease();  // closes without a goodbye: the store counts that as a failure
  StoreLease(const StoreLease&) = delete;
  StoreLease& operator=(const StoreLease&) = delete;
  // Non-blocking (one recv(MSG_DONTWAIT)): failures reported since the last call. A lease that
  // reaches EOF or an error reports rank 0 (which serves the store) once.
  std::vector<PeerFailure> poll();
  // Tells the store this rank leaves and waits (at most `bound`) for the ack. Never throws. An
  // empty `reason` is a normal leave; otherwise the rank leaves after an error and the store reports
  // it failed to the others with that reason (bounded to wire::kMaxGoodbyeReason bytes).
  void goodbye(Millis bound, const std::string& reason = {}) noexcept;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Rank, size and rendezvous address as the launcher left them in the environment, in this order:
// RWIN_RANK/RWIN_NRANKS/RWIN_ROOT (rwinrun), OMPI_COMM_WORLD_RANK/SIZE (Open MPI mpirun),
// PMI_RANK/PMI_SIZE (MPICH, Hydra), SLURM_PROCID/SLURM_NTASKS (srun). `root` is RWIN_ROOT when set.
// Under a PMIx server the core fills one with source "pmix" from the PMIx session (pmix.h).
struct LaunchEnv {
  int rank = -1;
  int nranks = -1;
  std::string root;    // "host:port", may be empty when the launcher gives none
  std::string source;  // "rwin", "openmpi", "pmi", "slurm", "pmix": for messages
  std::string how;     // where rank, size and root came from, e.g. "rank OMPI_COMM_WORLD_RANK=1, size
                       // OMPI_COMM_WORLD_SIZE=4, root RWIN_ROOT": for messages and the start-up log line
  static std::optional<LaunchEnv> detect();

  // The launcher variables set here that show a job of more than one rank, as "NAME=value": a size
  // variable above 1 (OMPI_COMM_WORLD_SIZE, PMI_SIZE, SLURM_NTASKS, SLURM_NPROCS), a rank variable above
  // 0 (OMPI_COMM_WORLD_RANK, PMI_RANK, SLURM_PROCID, PMIX_RANK), or a PMIx client's PMIX_NAMESPACE and
  // PMIX_RANK (the job size is then PMIx's to say). Empty: nothing says this is not a job of one.
  static std::vector<std::string> job_of_many_evidence();
};

// RWIN_BOOTSTRAP: how a job finds its rendezvous. The one reader of that variable.
enum class BootstrapMethod { Auto, Tcp, Pmix };
// `text` as given (Options::bootstrap) or, when empty, RWIN_BOOTSTRAP; empty or unset is Auto.
// Throws BootstrapError(Config) naming the variable and value for anything but pmix, tcp or auto.
BootstrapMethod bootstrap_method(const std::string& text);
const char* bootstrap_method_name(BootstrapMethod m) noexcept;  // "auto", "tcp", "pmix"

struct BootstrapConfig {
  Millis startup_timeout{60000};  // constructor (arrival of every rank)
  Millis op_timeout{60000};       // every later store call (allgather, barrier, send/recv, shutdown steps)
  std::string job_key;            // empty = no authentication: only a loopback root may run without one
  bool serve = true;              // rank 0 serves the store
};

// Collectives over a Store for one job. Rank 0 serves the store when `serve` is true (the
// default: rwinrun/mpirun jobs); otherwise the store at `root` is run by someone else. Each rank
// holds a liveness lease (StoreLease): a rank whose lease closes without a goodbye is reported
// failed to the others within a socket close (no timers), and collectives waiting for it end
// with Kind::PeerFailed. Or, on a store the caller brings (rwin/store.h), with no server and no
// lease: failures then come only from report_failure().
class Bootstrap {
 public:
  // Collective. Returns when all `nranks` ranks have arrived; throws BootstrapError naming
  // the ranks that never arrived when cfg.startup_timeout passes. Rank 0 (serving) binds the
  // address RWIN_ROOT names (a local address, never a wildcard). Without a job key only a
  // loopback root is accepted (Config error naming RWIN_JOB_KEY otherwise).
  Bootstrap(int rank, int nranks, const HostPort& root, const BootstrapConfig& cfg);
  // The same, with the store rank 0 already serves at `root` (bound beforehand on an ephemeral port
  // whose address reached the other ranks some other way: PMIx, pmix.h). Ignored on other ranks.
  Bootstrap(int rank, int nranks, const HostPort& root, const BootstrapConfig& cfg,
            std::unique_ptr<TcpStoreServer> served);
  // On a store the caller runs (rwin/store.h; the core adapts it): no server, no lease, no socket of
  // the bootstrap's own. Keys go under "rwin/<n>/" (n from the counter "rwin/contexts/<rank>", so a
  // second job on the same store never reads the first one's keys); waits are cut into slices of at
  // most 100 ms so that a failure reported meanwhile ends them. `where` names the store in messages.
  Bootstrap(int rank, int nranks, std::shared_ptr<Store> caller_store, const BootstrapConfig& cfg,
            const std::string& where);
  // The same with startup_timeout = op_timeout = `timeout` and no key (loopback jobs, tests).
  Bootstrap(int rank, int nranks, const HostPort& root, Millis timeout, bool serve = true);
  // Says goodbye (unless unwinding from an exception: then this rank counts as failed); rank 0
  // keeps serving until every other live rank left or failed, at most min(op_timeout, 10 s).
  ~Bootstrap();
  Bootstrap(const Bootstrap&) = delete;
  Bootstrap& operator=(const Bootstrap&) = delete;

  int rank() const noexcept { return rank_; }
  int nranks() const noexcept { return nranks_; }
  Millis timeout() const noexcept { return timeout_; }  // op_timeout
  Millis startup_timeout() const noexcept { return startup_timeout_; }

  // Non-blocking, cheap (at most one recv(MSG_DONTWAIT) on the lease socket): failures the store
  // has reported since the last call, each failed rank reported once.
  std::vector<PeerFailure> poll_failures();
  // Leaves the job as a failed rank, now: the store tells every other rank at once, with `reason`
  // (what made this rank give up, e.g. "peer 3 failed (...)"), so a survivor still putting to us or
  // waiting on us ends now instead of at its deadline, and names the first failure. Closes the
  // lease; rank 0 keeps serving the store until ~Bootstrap. Bounded (<= 1 s), never throws.
  void abandon_lease(const std::string& reason) noexcept;
  // Thread-safe, never blocks, never throws: someone outside the bootstrap (the core's transport, the
  // caller's health lane through Context::fail_peer) learned that `rank` failed; the next
  // poll_failures() on the owning thread learns it (as a lease report) and a collective waiting for
  // it ends with PeerFailed. A rank already known failed keeps its first reason.
  void report_failure(int rank, const std::string& how) noexcept;
  // Called between polls of the store while allgather() and barrier() wait for the other ranks
  // (then they poll, every 50 us at first, then every 1 ms, instead of blocking in the store): the
  // core's transport progress, set once the transport is up and cleared before it goes. Empty: block.
  void set_while_waiting(std::function<void()> f) { while_waiting_ = std::move(f); }
  // Whether this bootstrap runs on a store the caller brought (no lease, no server).
  bool caller_store() const noexcept { return caller_store_; }
  // Every failure learned so far (also those already returned by poll_failures()).
  const std::vector<PeerFailure>& failures() const noexcept { return failures_; }

  // Collective: every rank contributes one blob, every rank gets all of them in rank order.
  std::vector<Bytes> allgather(std::span<const uint8_t> mine);
  // Collective: returns when every rank has called it.
  void barrier();
  // The same, for callers that must keep serving their peers while they wait (a transport whose
  // remote operations land only while the target progresses): calls `while_waiting` between
  // polls of the store (the store is asked every 50 us at first, then every 1 ms). Throws
  // BootstrapError::Timeout naming the ranks that never came once `timeout` passes, and
  // Kind::PeerFailed as soon as a rank failed while some rank is still missing.
  // `survivors_only`: a rank known failed (now or while waiting) is not waited for; returns when
  // every other rank has arrived (the shutdown of a job that lost ranks).
  void barrier(Millis timeout, const std::function<void()>& while_waiting, bool survivors_only = false);
  // Point to point, for per-peer handshakes (e.g. one queue pair per peer): `tag` must be the
  // same on both sides and unique per exchange.
  void send(int peer, const std::string& tag, std::span<const uint8_t> data);
  Bytes recv(int peer, const std::string& tag);

  Store& store() noexcept { return *store_; }

 private:
  // Waits for one key per rank under `prefix`; on timeout names the ranks that are missing.
  void wait_ranks(const std::string& prefix, const char* what);
  // The polling wait of barrier(timeout, while_waiting, ...) for `keys` (one per rank), messages under `who`.
  void await_keys(const std::vector<std::string>& keys, const std::string& who, Millis timeout,
                  const std::function<void()>& while_waiting, bool survivors_only);
  // Adds failures not known yet to failures_ and returns them.
  std::vector<PeerFailure> learn(std::vector<PeerFailure> news);
  // "peer 2 failed (its bootstrap connection closed, learned 0.3 s ago)" for every known failure.
  std::string failure_summary() const;
  // Rethrows a store error under `head`; a PeerFailed one names the failed ranks as this rank
  // knows them (the lease's report includes when it learned them).
  bool await_failure_event();
  [[noreturn]] void rethrow(const BootstrapError& e, const std::string& head);

  int rank_;
  int nranks_;
  bool caller_store_ = false;
  std::string where_;  // the store in messages: "host:port" or "the caller's store"
  Millis timeout_;
  Millis startup_timeout_;
  int uncaught_at_start_ = 0;  // std::uncaught_exceptions() at construction
  std::vector<PeerFailure> failures_;
  std::unique_ptr<StoreLease> lease_;
  std::function<void()> while_waiting_;
  uint64_t seq_ = 0;  // collective sequence number: keys of one collective never collide with another's
  std::unique_ptr<TcpStoreServer> server_;
  std::unique_ptr<Store> store_;
  // report_failure()'s mailbox: written from any thread, drained by poll_failures().
  std::mutex reported_mu_;
  std::vector<PeerFailure> reported_;
  std::atomic<bool> has_reported_{false};
};

}  // namespace rwin::bootstrap
