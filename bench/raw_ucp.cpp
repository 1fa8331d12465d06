#include "raw_ucp.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace rwinperf {
namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kSigBytes = 4096;

void append(std::vector<uint8_t>& b, const void* p, size_t n) {
  b.insert(b.end(), static_cast<const uint8_t*>(p), static_cast<const uint8_t*>(p) + n);
}

// Reads a length-prefixed field from a blob; throws on truncation.
std::vector<uint8_t> take(const std::vector<uint8_t>& b, size_t& off, const char* what) {
  uint64_t n = 0;
  if (off + 8 > b.size()) throw std::runtime_error(std::string("raw ucp: truncated blob reading ") + what);
  std::memcpy(&n, b.data() + off, 8);
  off += 8;
  if (off + n > b.size()) throw std::runtime_error(std::string("raw ucp: truncated blob reading ") + what);
  std::vector<uint8_t> v(b.begin() + static_cast<long>(off), b.begin() + static_cast<long>(off + n));
  off += n;
  return v;
}

}  // namespace

void RawUcp::fail(const std::string& what, ucs_status_t s) const {
  throw std::runtime_error("raw ucp(" + tls_ + "): rank " + std::to_string(rank_) + " peer " + std::to_string(peer_) +
                           ": " + what + ": " + ucs_status_string(s));
}

RawUcp::RawUcp(rwin::Context& ctx, int peer, size_t bytes, std::chrono::milliseconds timeout, bool fence)
    : rank_(ctx.rank()), peer_(peer), timeout_(timeout), fence_(fence) {
  const char* tls = std::getenv("UCX_TLS");
  tls_ = tls && *tls ? tls : "all";
  try {
    ucp_config_t* config = nullptr;
    ucs_status_t s = ucp_config_read(nullptr, nullptr, &config);
    if (s != UCS_OK) fail("ucp_config_read", s);
    ucp_params_t params{};
    params.field_mask = UCP_PARAM_FIELD_FEATURES;
    params.features = UCP_FEATURE_RMA | UCP_FEATURE_AMO64;
    s = ucp_init(&params, config, &context_);
    ucp_config_release(config);
    if (s != UCS_OK) fail("ucp_init", s);
    ucp_worker_params_t wp{};
    wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    wp.thread_mode = UCS_THREAD_MODE_SINGLE;
    s = ucp_worker_create(context_, &wp, &worker_);
    if (s != UCS_OK) fail("ucp_worker_create", s);

    auto map = [&](size_t n, ucp_mem_h& mem, void*& addr) {
      ucp_mem_map_params_t p{};
      p.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH | UCP_MEM_MAP_PARAM_FIELD_FLAGS;
      p.length = n;
      p.flags = UCP_MEM_MAP_ALLOCATE;
      ucs_status_t st = ucp_mem_map(context_, &p, &mem);
      if (st != UCS_OK) fail("ucp_mem_map(ALLOCATE, " + std::to_string(n) + " bytes)", st);
      ucp_mem_attr_t a{};
      a.field_mask = UCP_MEM_ATTR_FIELD_ADDRESS;
      st = ucp_mem_query(mem, &a);
      if (st != UCS_OK) fail("ucp_mem_query", st);
      addr = a.address;
      std::memset(addr, 0, n);
    };
    map(bytes, src_mem_, src_addr_);
    map(bytes, dst_mem_, dst_addr_);
    void* sig = nullptr;
    map(kSigBytes, sig_mem_, sig);
    sig_ = static_cast<int64_t*>(sig);

    // Blob: worker address, then (address, packed rkey) for src, dst, signals.
    std::vector<uint8_t> blob;
    ucp_address_t* wa = nullptr;
    size_t wa_len = 0;
    s = ucp_worker_get_address(worker_, &wa, &wa_len);
    if (s != UCS_OK) fail("ucp_worker_get_address", s);
    uint64_t n64 = wa_len;
    append(blob, &n64, 8);
    append(blob, wa, wa_len);
    ucp_worker_release_address(worker_, wa);
    for (auto [mem, addr] : {std::pair{src_mem_, src_addr_}, std::pair{dst_mem_, dst_addr_},
                             std::pair{sig_mem_, static_cast<void*>(sig_)}}) {
      void* packed = nullptr;
      size_t len = 0;
      s = ucp_rkey_pack(context_, mem, &packed, &len);
      if (s != UCS_OK) fail("ucp_rkey_pack", s);
      const uint64_t a = reinterpret_cast<uint64_t>(addr);
      n64 = 8;
      append(blob, &n64, 8);
      append(blob, &a, 8);
      n64 = len;
      append(blob, &n64, 8);
      append(blob, packed, len);
      ucp_rkey_buffer_release(packed);
    }
    const auto all = ctx.allgather(blob);
    if (peer_ < 0) return;  // a rank outside the measured pair only took part in the allgather
    const auto& pb = all.at(static_cast<size_t>(peer_));
    size_t off = 0;
    const auto addr = take(pb, off, "worker address");
    ucp_ep_params_t ep{};
    ep.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
    ep.address = reinterpret_cast<const ucp_address_t*>(addr.data());
    // Same error mode as rwin's transport (NONE): it changes UCP's lane choice (with PEER, UCX
    // 1.13 sends same-node traffic over tcp active messages).
    ep.err_mode = UCP_ERR_HANDLING_MODE_NONE;
    s = ucp_ep_create(worker_, &ep, &ep_);
    if (s != UCS_OK) fail("ucp_ep_create", s);
    uint64_t* bases[3] = {&peer_src_, &peer_dst_, &peer_sig_};
    ucp_rkey_h* keys[3] = {&rkey_src_, &rkey_dst_, &rkey_sig_};
    for (int i = 0; i < 3; ++i) {
      const auto a = take(pb, off, "region address");
      std::memcpy(bases[i], a.data(), 8);
      const auto k = take(pb, off, "rkey");
      s = ucp_ep_rkey_unpack(ep_, k.data(), keys[i]);
      if (s != UCS_OK) fail("ucp_ep_rkey_unpack", s);
    }
  } catch (...) {
    cleanup();
    throw;
  }
}

RawUcp::~RawUcp() { cleanup(); }

void RawUcp::cleanup() noexcept {
  for (ucp_rkey_h* k : {&rkey_src_, &rkey_dst_, &rkey_sig_}) {
    if (*k) ucp_rkey_destroy(*k);
    *k = nullptr;
  }
  if (ep_) {
    // Flush-close, bounded: over tcp the peer's progress is needed, and it is closing too.
    ucp_request_param_t p{};
    ucs_status_ptr_t r = ucp_ep_close_nbx(ep_, &p);
    if (r && UCS_PTR_IS_PTR(r)) {
      const auto deadline = Clock::now() + std::chrono::seconds(2);
      while (ucp_request_check_status(r) == UCS_INPROGRESS && Clock::now() < deadline) ucp_worker_progress(worker_);
      if (ucp_request_check_status(r) == UCS_INPROGRESS) {
        std::fprintf(stderr, "raw ucp: rank %d peer %d: endpoint close did not finish in 2 s\n", rank_, peer_);
      }
      ucp_request_free(r);
    }
    ep_ = nullptr;
  }
  for (ucp_mem_h* m : {&src_mem_, &dst_mem_, &sig_mem_}) {
    if (*m) ucp_mem_unmap(context_, *m);
    *m = nullptr;
  }
  if (worker_) ucp_worker_destroy(worker_);
  worker_ = nullptr;
  if (context_) ucp_cleanup(context_);
  context_ = nullptr;
}

void RawUcp::wait_request(ucs_status_ptr_t req, const char* what) {
  if (req == nullptr) return;
  if (UCS_PTR_IS_ERR(req)) fail(what, UCS_PTR_STATUS(req));
  const auto deadline = Clock::now() + timeout_;
  uint64_t n = 0;
  ucs_status_t s;
  while ((s = ucp_request_check_status(req)) == UCS_INPROGRESS) {
    ucp_worker_progress(worker_);
    if ((++n & 1023) == 0 && Clock::now() > deadline) {
      ucp_request_free(req);
      fail(std::string(what) + " did not complete by the deadline", UCS_ERR_TIMED_OUT);
    }
  }
  ucp_request_free(req);
  if (s != UCS_OK) fail(what, s);
}

void RawUcp::release(ucs_status_ptr_t req, const char* what) {
  if (req == nullptr) return;
  if (UCS_PTR_IS_ERR(req)) fail(what, UCS_PTR_STATUS(req));
  ucp_request_free(req);  // completes internally; the next flush covers it
}

void RawUcp::put(size_t src_off, size_t dst_off, size_t bytes) {
  ucp_request_param_t p{};
  p.op_attr_mask = UCP_OP_ATTR_FIELD_MEMH;
  p.memh = src_mem_;
  release(ucp_put_nbx(ep_, src() + src_off, bytes, peer_dst_ + dst_off, rkey_dst_, &p), "ucp_put_nbx");
  dirty_ = true;
}

void RawUcp::get(size_t dst_off, size_t src_off, size_t bytes) {
  ucp_request_param_t p{};
  p.op_attr_mask = UCP_OP_ATTR_FIELD_MEMH;
  p.memh = dst_mem_;
  wait_request(ucp_get_nbx(ep_, dst() + dst_off, bytes, peer_src_ + src_off, rkey_src_, &p), "ucp_get_nbx");
}

void RawUcp::get_nb(size_t dst_off, size_t src_off, size_t bytes) {
  ucp_request_param_t p{};
  p.op_attr_mask = UCP_OP_ATTR_FIELD_MEMH;
  p.memh = dst_mem_;
  release(ucp_get_nbx(ep_, dst() + dst_off, bytes, peer_src_ + src_off, rkey_src_, &p), "ucp_get_nbx");
}

void RawUcp::add_nb(int word) {
  ucp_request_param_t p{};
  p.op_attr_mask = UCP_OP_ATTR_FIELD_DATATYPE;
  p.datatype = ucp_dt_make_contig(8);
  release(ucp_atomic_op_nbx(ep_, UCP_ATOMIC_OP_ADD, &one_, 1, peer_sig_ + static_cast<uint64_t>(word) * 8, rkey_sig_, &p),
          "ucp_atomic_op_nbx(add)");
}

void RawUcp::notify(int word) {
  if (dirty_ && fence_) {
    const ucs_status_t s = ucp_worker_fence(worker_);
    if (s != UCS_OK) fail("ucp_worker_fence", s);
    dirty_ = false;
  } else if (dirty_) {
    quiet();  // UCP does not order puts before atomics on an endpoint
  }
  add_nb(word);
}

void RawUcp::quiet() {
  ucp_request_param_t p{};
  wait_request(ucp_ep_flush_nbx(ep_, &p), "ucp_ep_flush_nbx");
  dirty_ = false;
}

void RawUcp::wait(int word, int64_t value) {
  std::atomic_ref<int64_t> w(sig_[word]);
  const auto deadline = Clock::now() + timeout_;
  for (uint64_t n = 0; w.load(std::memory_order_acquire) < value; ++n) {
    ucp_worker_progress(worker_);
    if ((n & 1023) == 1023 && Clock::now() > deadline) {
      throw std::runtime_error("raw ucp(" + tls_ + "): rank " + std::to_string(rank_) + ": wait timed out on word " +
                               std::to_string(word) + ": expected >= " + std::to_string(value) + ", last value " +
                               std::to_string(w.load()));
    }
  }
}

}  // namespace rwinperf
