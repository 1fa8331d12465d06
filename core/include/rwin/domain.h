// A communication domain the caller wires up itself (issue 25 item 5): the shape of a runtime's
// "global comm domain" seam. Each rank prepares (a window of its own plus int64 signal words, and one
// descriptor of at most kMaxDescriptorBytes), the caller carries the descriptors in its own frames
// over its own sockets, every rank imports the whole table, and the caller commits (or aborts) the
// transaction. No store, no rwin process in the middle, no launcher variable read.
//
//   rwin::Domain d(id, rank, nranks, window_bytes);        // prepare
//   send(d.descriptor());                                   // <= 256 bytes over UCX, the caller's frames
//   d.import_table(table);                                  // every rank's descriptor, in rank order
//   d.commit();                                             // or d.abort(): back to prepared
//   d.put_notify(peer, off, src, n, signal, 1); d.wait(signal, 1);
//   d.release();                                            // or the destructor
//
// It runs on an Agent (rwin/agent.h): the descriptor carries the agent's region descriptor (its
// control address, a per-agent token, the region's id, generation and key), so a connection is made
// and authenticated at import, a descriptor of a released domain is refused by its owner (stale), a
// forged one fails the token check, and the transport is whatever the agent runs (UCX, verbs).
//
// Thread safety: calls are serialised (one at a time, any thread); fail_peer() and failed_peers() may
// be called from any thread at any time, also while another thread is blocked in wait().
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "rwin/agent.h"
#include "rwin/rwin.h"

namespace rwin {

struct DomainOptions {
  // A domain's ranks spend their time between calls in the caller's control plane (exchanging the
  // table, awaiting the commit, computing), where peers' imports and one-sided operations must
  // still be served: the agent's progress thread is on (idle, it sleeps in poll(2)).
  DomainOptions() { agent.progress_thread = true; }
  // The agent under the domain: listen address (a multi-host domain: this host's address, not
  // 127.0.0.1), transport ("ucx", "tcp" or "verbs"), timeouts (op_timeout bounds every blocking call,
  // connect_timeout the connections made at import), progress_thread (serve peers while this process
  // is outside rwin).
  AgentOptions agent;
  size_t signals = 64;  // int64 signal words per rank, after the window
};

struct DomainState;

class Domain {
 public:
  // Descriptor bytes, as measured (docs/EMBEDDING.md): about 175 over UCX with a 127.0.0.1 control
  // address. A descriptor that would exceed this is refused at prepare, naming its size.
  static constexpr size_t kMaxDescriptorBytes = 256;
  static constexpr uint16_t kDescriptorVersion = 1;
  enum class State { Prepared, Imported, Committed, Released };

  // prepare: allocates `window_bytes` (page-aligned, zeroed) plus opt.signals int64 signal words
  // (zeroed), registers them with a new agent. `id` names the domain: a descriptor of another id is
  // refused at import (a foreign one). Throws InvalidArgument / PeerOutOfRange for bad arguments.
  Domain(uint64_t id, int rank, int nranks, size_t window_bytes, const DomainOptions& opt = {});
  ~Domain();  // release(); never throws
  Domain(const Domain&) = delete;
  Domain& operator=(const Domain&) = delete;

  std::vector<uint8_t> descriptor() const;  // this rank's, valid from prepare until release
  // The local window and signal words: mapped until this object is destroyed (also after release).
  void* base() const;
  int64_t* signals() const;
  size_t window_bytes() const;
  size_t signal_count() const;
  int rank() const;
  int nranks() const;
  uint64_t id() const;
  State state() const;
  std::string describe() const;  // "domain 0x2a rank 1 of 3 (agent 127.0.0.1:40123 ucx(tcp))"

  // Every rank's descriptor in rank order (this rank's own at its index). Checks the whole table
  // before touching the network (size, magic, version, checksum, domain id, rank order, nranks,
  // window size and signal count, this rank's own entry), then imports every region (connecting to
  // each peer, bounded by connect_timeout and op_timeout). Any failure leaves the domain prepared
  // (no import kept) and names the table entry. Prepared -> Imported.
  void import_table(std::span<const std::vector<uint8_t>> table);
  void commit();  // Imported -> Committed: operations allowed. Local: the caller's transaction decides.
  void abort();   // Prepared/Imported -> Prepared: drops the imports; the window and descriptor stay
  // Deregisters the window (no peer operation reaches it after this returns; peers holding it see a
  // stale region) and closes the agent. The memory stays mapped, and readable, until the destructor.
  // Idempotent; never throws.
  void release() noexcept;

  // Operations (Committed). Offsets are bytes into the peer's window, signal indexes count int64
  // words. put returns when `src` may be reused; flush() makes every put and notify complete at its
  // target; put_notify's signal is seen only after its data.
  void put(int peer, uint64_t offset, const void* src, size_t bytes);
  void get(void* dst, int peer, uint64_t offset, size_t bytes);
  void put_notify(int peer, uint64_t offset, const void* src, size_t bytes, size_t signal, int64_t value,
                  NotifyOp op = NotifyOp::AtomicAdd);
  void notify(int peer, size_t signal, int64_t value, NotifyOp op = NotifyOp::AtomicAdd);
  void flush();
  // Waits until this rank's signal word satisfies `cmp expected`. Ends with PeerFailed (naming every
  // failed rank and why) as soon as a rank of the domain is known failed while it is unsatisfied:
  // any rank may be the one that would have written it. Timeout after `timeout` (default op_timeout).
  void wait(size_t signal, int64_t expected, WaitCmp cmp = WaitCmp::GE,
            std::optional<std::chrono::milliseconds> timeout = std::nullopt);
  bool test(size_t signal, int64_t expected, WaitCmp cmp = WaitCmp::GE);
  int64_t signal(size_t signal) const;  // an atomic load of this rank's word (also after release)

  // The caller's health lane says `peer` failed. Any thread, never blocks on the domain's calls:
  // a wait blocked meanwhile ends within a few ms. From then on every call involving `peer` (and
  // every unsatisfied wait) throws PeerFailed naming it and `reason`. The first reason sticks.
  // Failures the agent finds itself (a broken connection, keepalive silence) count the same way.
  void fail_peer(int peer, const std::string& reason);
  std::vector<int> failed_peers() const;

 private:
  std::shared_ptr<DomainState> s_;
};

}  // namespace rwin
