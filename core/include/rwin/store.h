// rwin::Store: the rendezvous a host program brings (docs/EMBEDDING.md).
//
// A runtime with a control plane of its own (daemons, a manifest, its own sockets) starts rwin on
// a key-value store it already has, in the shape torch.distributed.Store and gloo's Store use:
//   rwin::Context ctx(std::make_shared<MyStore>(...), rank, nranks);
// rwin then starts no store server, opens no listening port for its bootstrap and holds no lease
// connection: every byte of its rendezvous goes through these five calls. Failure of a peer is
// then found by the transport and by the caller (Context::fail_peer).
//
// Thread safety: rwin calls a store from the thread that uses the Context (one call at a time per
// Context). Several Contexts may share one store object only if the store is thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace rwin {

class Store {
 public:
  virtual ~Store() = default;
  // Stores `value` under `key` (replacing any value). rwin writes each of its keys once.
  virtual void set(const std::string& key, const std::vector<uint8_t>& value) = 0;
  // Blocks until `key` exists and returns its value, or returns std::nullopt once `timeout` passed.
  virtual std::optional<std::vector<uint8_t>> get(const std::string& key, std::chrono::milliseconds timeout) = 0;
  // Atomically adds `delta` to the 64-bit counter at `key` (a missing key counts as 0) and returns
  // the new value.
  virtual int64_t add(const std::string& key, int64_t delta) = 0;
  // Non-blocking: whether every key in `keys` exists now.
  virtual bool check(const std::vector<std::string>& keys) = 0;
  // Blocks until every key in `keys` exists (true) or `timeout` passed (false).
  virtual bool wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) = 0;
};
// Any exception a store throws fails the rwin call that used it with Error(Bootstrap) naming the
// store call, the key and the exception's message (Error(Timeout) when it is an rwin::Error with
// code Timeout). rwin never asks with a timeout longer than its own deadline and waits in slices of
// at most 100 ms, so that a failure reported by fail_peer ends a wait that would never finish.
//
// Keys: rwin puts every key under "rwin/<n>/", where n counts the Contexts each rank made on this
// store (kept in the counter "rwin/contexts/<rank>"): every rank must make its Contexts on one
// store in the same order, and the caller's own keys must not start with "rwin/". A store shared
// with other jobs needs a prefix of its own per job (torch's PrefixStore does that).

}  // namespace rwin
