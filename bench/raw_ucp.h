// RawUcp: the same operations rwin-perf measures, written directly on UCP, so that rwin's overhead
// can be measured against it inside the same two processes (--vs-raw).
//
// It owns its own ucp_context / worker / endpoint and ucp_mem_map(ALLOCATE) buffers (the only
// memory posix/sysv can reach one-sidedly), exchanges worker addresses and rkeys through
// rwin::Context::allgather, and reads the same UCX_TLS / UCX_NET_DEVICES as rwin does.
//
//   put     = ucp_put_nbx (request released; completion covered by the next flush)
//   notify  = ucp_ep_flush_nbx (only if puts are unflushed, as rwin does) + ucp_atomic_op_nbx ADD
//   wait    = poll the local word, calling ucp_worker_progress
//   get     = ucp_get_nbx, wait for its request
//   quiet   = ucp_ep_flush_nbx, wait for it
#pragma once

#include <ucp/api/ucp.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "rwin/rwin.h"

namespace rwinperf {

class RawUcp {
 public:
  // Collective over every rank of `ctx` (allgather); only `peer` gets an endpoint.
  // `bytes` per data buffer (src and dst each).
  // fence: order puts before a notify's atomic with ucp_worker_fence (what OpenSHMEM's shmem_fence
  // does) instead of an endpoint flush (what rwin's core does today); an A/B for the core's choice.
  RawUcp(rwin::Context& ctx, int peer, size_t bytes, std::chrono::milliseconds timeout, bool fence = false);
  ~RawUcp();
  RawUcp(const RawUcp&) = delete;
  RawUcp& operator=(const RawUcp&) = delete;

  char* src() const noexcept { return static_cast<char*>(src_addr_); }
  char* dst() const noexcept { return static_cast<char*>(dst_addr_); }

  // Local src + src_off -> peer's dst + dst_off.
  void put(size_t src_off, size_t dst_off, size_t bytes);
  // Peer's src + src_off -> local dst + dst_off; returns when the data is here.
  void get(size_t dst_off, size_t src_off, size_t bytes);
  // Non-blocking get; completed by the next quiet().
  void get_nb(size_t dst_off, size_t src_off, size_t bytes);
  void notify(int word);  // peer's signal word += 1, after every earlier put to it
  void add_nb(int word);  // peer's signal word += 1, no ordering with earlier puts
  void wait(int word, int64_t value);  // local word >= value, progressing the worker
  void quiet();                       // everything issued to the peer is complete there
  std::string describe() const { return "raw ucp(" + tls_ + ")"; }

 private:
  void cleanup() noexcept;
  void wait_request(ucs_status_ptr_t req, const char* what);
  void release(ucs_status_ptr_t req, const char* what);
  [[noreturn]] void fail(const std::string& what, ucs_status_t s) const;

  int rank_;
  int peer_;
  std::chrono::milliseconds timeout_;
  std::string tls_;
  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  ucp_ep_h ep_ = nullptr;
  ucp_mem_h src_mem_ = nullptr, dst_mem_ = nullptr, sig_mem_ = nullptr;
  void* src_addr_ = nullptr;
  void* dst_addr_ = nullptr;
  int64_t* sig_ = nullptr;
  uint64_t peer_src_ = 0, peer_dst_ = 0, peer_sig_ = 0;
  ucp_rkey_h rkey_src_ = nullptr, rkey_dst_ = nullptr, rkey_sig_ = nullptr;
  bool dirty_ = false;
  bool fence_ = false;
  uint64_t one_ = 1;  // atomic operand: must stay valid until the operation completes
};

}  // namespace rwinperf
