// rwin's C ABI (rwin/rwin_c.h; shared helpers in c_api_util.h): contexts (also over a C store),
// window buffers, windows and signal arrays, data movement, signals, fetching atomics and counters.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "c_api_util.h"
#include "rwin/store.h"

using namespace rwin_c_api;

namespace {

rwin::Slice slice(const rwin_slice_t* s, const char* fn, const char* name) {
  need(s, fn, name);
  return window(s->window, fn, (std::string(name) + "->window").c_str()).slice({s->row, s->col}, {s->rows, s->cols});
}
rwin::SignalSlice signal_slice(const rwin_signal_slice_t* s, const char* fn, const char* name) {
  need(s, fn, name);
  need(s->signals, fn, (std::string(name) + "->signals").c_str());
  return s->signals->s.slice(s->index, s->count);
}
rwin::Local local(const rwin_local_t* l, const char* fn, const char* name) {
  need(l, fn, name);
  return rwin::Local{l->data, dtype(l->dtype, fn), {l->rows, l->cols}, l->row_stride};
}

rwin::Options options(const rwin_options_t* o, const char* fn) {
  rwin::Options r;
  if (o == nullptr) return r;
  if (o->struct_size < sizeof(rwin_options_t)) {
    invalid(fn, "opts->struct_size " + std::to_string(o->struct_size) + " is below sizeof(rwin_options_t) " +
                    std::to_string(sizeof(rwin_options_t)) + ": call rwin_options_init first");
  }
  r.rank = o->rank;
  r.nranks = o->nranks;
  r.root = text(o->root);
  r.transport = text(o->transport);
  r.ib_device = text(o->ib_device);
  r.ib_port = o->ib_port > 0 ? o->ib_port : 1;
  r.gid_index = o->gid_index;
  r.ucx_rma = text(o->ucx_rma);
  r.ucx_tcp_zcopy = o->ucx_tcp_zcopy;
  r.chunk_bytes = o->chunk_bytes;
  r.pipeline_depth = o->pipeline_depth;
  r.accumulate_staging_bytes = o->accumulate_staging_bytes;
  r.startup_timeout = std::chrono::milliseconds(o->startup_timeout_ms);
  r.op_timeout = std::chrono::milliseconds(o->op_timeout_ms);
  r.spin_us = o->spin_us;
  r.job_key = text(o->job_key);
  r.bootstrap = text(o->bootstrap);
  return r;
}

// rwin::Store over the caller's callbacks. A callback's failure becomes an exception here, which the
// bootstrap reports as Error(Bootstrap) naming the store call and the key (rwin/store.h).
class CStore final : public rwin::Store {
 public:
  CStore(const rwin_store_ops_t& ops, void* user) : ops_(ops), user_(user) {}
  ~CStore() override {
    if (ops_.release) ops_.release(user_);
  }
  CStore(const CStore&) = delete;
  CStore& operator=(const CStore&) = delete;

  void set(const std::string& key, const std::vector<uint8_t>& value) override {
    check("set", ops_.set(user_, key.c_str(), value.data(), value.size()));
  }
  std::optional<std::vector<uint8_t>> get(const std::string& key, std::chrono::milliseconds timeout) override {
    std::vector<uint8_t> buf(1024);  // rwin's values are a few hundred bytes: one call, usually
    size_t len = 0;
    int rc = ops_.get(user_, key.c_str(), timeout.count(), buf.data(), buf.size(), &len);
    if (rc == RWIN_STORE_TIMEOUT) return std::nullopt;
    check("get", rc);
    if (len > buf.size()) {
      buf.resize(len);
      const size_t want = len;
      rc = ops_.get(user_, key.c_str(), timeout.count(), buf.data(), buf.size(), &len);
      if (rc == RWIN_STORE_TIMEOUT) throw std::runtime_error("get timed out on its second call, for a key it found");
      check("get", rc);
      if (len != want)
        throw std::runtime_error("get gave " + std::to_string(want) + " bytes, then " + std::to_string(len));
    }
    buf.resize(len);
    return buf;
  }
  int64_t add(const std::string& key, int64_t delta) override {
    int64_t result = 0;
    check("add", ops_.add(user_, key.c_str(), delta, &result));
    return result;
  }
  bool check(const std::vector<std::string>& keys) override {
    const auto ptrs = pointers(keys);
    int all = 0;
    check("check", ops_.check(user_, ptrs.data(), ptrs.size(), &all));
    return all != 0;
  }
  bool wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override {
    const auto ptrs = pointers(keys);
    const int rc = ops_.wait(user_, ptrs.data(), ptrs.size(), timeout.count());
    if (rc == RWIN_STORE_TIMEOUT) return false;
    check("wait", rc);
    return true;
  }

 private:
  static void check(const char* call, int rc) {
    if (rc != RWIN_STORE_OK)
      throw std::runtime_error(std::string("the C store's ") + call + " returned " + std::to_string(rc));
  }
  static std::vector<const char*> pointers(const std::vector<std::string>& keys) {
    std::vector<const char*> p;
    p.reserve(keys.size());
    for (const auto& k : keys) p.push_back(k.c_str());
    return p;
  }
  rwin_store_ops_t ops_;
  void* user_;
};
rwin_peer_stats_t c_peer(const rwin::PeerStats& p) {
  rwin_peer_stats_t o;
  std::memset(&o, 0, sizeof o);
  o.struct_size = sizeof o;
  o.puts = p.puts;
  o.put_bytes = p.put_bytes;
  o.put_adds = p.put_adds;
  o.put_add_bytes = p.put_add_bytes;
  o.gets = p.gets;
  o.get_bytes = p.get_bytes;
  o.chunks = p.chunks;
  o.notifies = p.notifies;
  o.fetching_atomics = p.fetching_atomics;
  o.fences = p.fences;
  return o;
}
// Copies `full` into the caller's struct, as much of it as its struct_size says (at least the size field).
void fill(const char* fn, void* out, size_t caller_size, const void* full, size_t full_size) {
  if (caller_size < sizeof(size_t)) invalid(fn, "out->struct_size " + std::to_string(caller_size) + " is too small: set it to sizeof the struct");
  std::memcpy(static_cast<char*>(out) + sizeof(size_t), static_cast<const char*>(full) + sizeof(size_t),
              std::min(caller_size, full_size) - sizeof(size_t));
}
}  // namespace

extern "C" {

// ---- contexts

rwin_status_t rwin_context_create(const rwin_options_t* opts, rwin_context_t** out) {
  return make_handle<rwin_context>("rwin_context_create", out, [&] {
    return std::make_unique<rwin::Context>(options(opts, "rwin_context_create"));
  });
}

rwin_status_t rwin_context_create_with_store(const rwin_store_ops_t* ops, void* user, int rank, int nranks,
                                             const rwin_options_t* opts, rwin_context_t** out) {
  const char* fn = "rwin_context_create_with_store";
  if (out) *out = nullptr;
  if (ops == nullptr) return guard(fn, [&] { invalid(fn, "ops is NULL"); });
  // From here on the CStore, once made, owns the release; until then this does.
  std::shared_ptr<CStore> store;
  const rwin_status_t st = guard(fn, [&] {
    if (!ops->set || !ops->get || !ops->add || !ops->check || !ops->wait) {
      invalid(fn, "ops->set, get, add, check and wait must all be given");
    }
    store = std::make_shared<CStore>(*ops, user);
  });
  if (st != RWIN_OK) {
    if (ops->release) ops->release(user);
    return st;
  }
  return make_handle<rwin_context>(fn, out, [&] {
    rwin::Options o = options(opts, fn);
    return std::make_unique<rwin::Context>(std::move(store), rank, nranks, o);
  });
}

void rwin_context_destroy(rwin_context_t* ctx) {
  delete ctx;
}  // ~Context never throws

rwin_status_t rwin_context_rank(const rwin_context_t* ctx, int* out) {
  return guard("rwin_context_rank", [&] {
    *need(out, "rwin_context_rank", "out") = context(const_cast<rwin_context_t*>(ctx), "rwin_context_rank").rank();
  });
}
rwin_status_t rwin_context_size(const rwin_context_t* ctx, int* out) {
  return guard("rwin_context_size", [&] {
    *need(out, "rwin_context_size", "out") = context(const_cast<rwin_context_t*>(ctx), "rwin_context_size").size();
  });
}
rwin_status_t rwin_fail_peer(rwin_context_t* ctx, int peer, const char* reason) {
  return guard("rwin_fail_peer", [&] { context(ctx, "rwin_fail_peer").fail_peer(peer, text(reason)); });
}

// ---- buffers, windows, signals

rwin_status_t rwin_alloc_window_buffer(rwin_context_t* ctx, const char* name, size_t bytes, rwin_buffer_t** out) {
  const char* fn = "rwin_alloc_window_buffer";
  return make_handle<rwin_buffer>(fn, out,
                                  [&] { return context(ctx, fn).alloc_window_buffer(need(name, fn, "name"), bytes); });
}
rwin_status_t rwin_buffer_free(rwin_context_t* ctx, rwin_buffer_t* buffer) {
  const std::unique_ptr<rwin_buffer> h(buffer);
  if (ctx == nullptr || buffer == nullptr) return RWIN_OK;
  return guard("rwin_buffer_free", [&] { context(ctx, "rwin_buffer_free").free(h->b); });
}
void rwin_buffer_release(rwin_buffer_t* buffer) {
  delete buffer;
}
rwin_status_t rwin_buffer_data(const rwin_buffer_t* buffer, void** out) {
  return guard("rwin_buffer_data",
               [&] { *need(out, "rwin_buffer_data", "out") = need(buffer, "rwin_buffer_data", "buffer")->b.data(); });
}
rwin_status_t rwin_buffer_bytes(const rwin_buffer_t* buffer, size_t* out) {
  return guard("rwin_buffer_bytes", [&] {
    *need(out, "rwin_buffer_bytes", "out") = need(buffer, "rwin_buffer_bytes", "buffer")->b.bytes();
  });
}

rwin_status_t rwin_window_view(rwin_context_t* ctx, const rwin_buffer_t* buffer, rwin_dtype_t dt, int64_t rows,
                               int64_t cols, uint64_t byte_offset, rwin_window_t** out) {
  const char* fn = "rwin_window_view";
  return make_handle<rwin_window>(fn, out, [&] {
    return context(ctx, fn).window(need(buffer, fn, "buffer")->b, dtype(dt, fn), {rows, cols}, byte_offset);
  });
}
rwin_status_t rwin_alloc_window(rwin_context_t* ctx, const char* name, rwin_dtype_t dt, int64_t rows, int64_t cols,
                                rwin_window_t** out) {
  const char* fn = "rwin_alloc_window";
  return make_handle<rwin_window>(fn, out, [&] {
    return context(ctx, fn).alloc_window(need(name, fn, "name"), dtype(dt, fn), {rows, cols});
  });
}
rwin_status_t rwin_window_free(rwin_context_t* ctx, rwin_window_t* window) {
  const std::unique_ptr<rwin_window> h(window);
  if (ctx == nullptr || window == nullptr) return RWIN_OK;
  return guard("rwin_window_free", [&] { context(ctx, "rwin_window_free").free(h->w); });
}
void rwin_window_release(rwin_window_t* window) {
  delete window;
}
rwin_status_t rwin_window_data(const rwin_window_t* w, void** out) {
  return guard("rwin_window_data",
               [&] { *need(out, "rwin_window_data", "out") = window(w, "rwin_window_data", "window").data(); });
}
rwin_status_t rwin_window_shape(const rwin_window_t* w, int64_t* rows, int64_t* cols) {
  return guard("rwin_window_shape", [&] {
    need(rows, "rwin_window_shape", "rows");
    need(cols, "rwin_window_shape", "cols");
    const rwin::Shape2 s = window(w, "rwin_window_shape", "window").shape();
    *rows = s[0];
    *cols = s[1];
  });
}
rwin_status_t rwin_window_dtype(const rwin_window_t* w, rwin_dtype_t* out) {
  return guard("rwin_window_dtype", [&] {
    *need(out, "rwin_window_dtype", "out") =
        static_cast<rwin_dtype_t>(window(w, "rwin_window_dtype", "window").dtype());
  });
}

rwin_status_t rwin_alloc_signals(rwin_context_t* ctx, const char* name, int64_t count, rwin_signals_t** out) {
  const char* fn = "rwin_alloc_signals";
  return make_handle<rwin_signals>(fn, out,
                                   [&] { return context(ctx, fn).alloc_signals(need(name, fn, "name"), count); });
}
rwin_status_t rwin_signals_free(rwin_context_t* ctx, rwin_signals_t* signals) {
  const std::unique_ptr<rwin_signals> h(signals);
  if (ctx == nullptr || signals == nullptr) return RWIN_OK;
  return guard("rwin_signals_free", [&] { context(ctx, "rwin_signals_free").free(h->s); });
}
void rwin_signals_release(rwin_signals_t* signals) {
  delete signals;
}
rwin_status_t rwin_signals_size(const rwin_signals_t* s, int64_t* out) {
  return guard("rwin_signals_size",
               [&] { *need(out, "rwin_signals_size", "out") = need(s, "rwin_signals_size", "signals")->s.size(); });
}
rwin_status_t rwin_signals_load(const rwin_signals_t* s, int64_t index, int64_t* out) {
  return guard("rwin_signals_load", [&] {
    *need(out, "rwin_signals_load", "out") = need(s, "rwin_signals_load", "signals")->s.load(index);
  });
}
rwin_status_t rwin_signals_store(rwin_signals_t* s, int64_t index, int64_t value) {
  return guard("rwin_signals_store", [&] { need(s, "rwin_signals_store", "signals")->s.store(index, value); });
}

// ---- data movement

rwin_status_t rwin_put(rwin_context_t* ctx, const rwin_slice_t* dst, int peer, const rwin_slice_t* src,
                       rwin_atomic_t a) {
  const char* fn = "rwin_put";
  return guard(fn, [&] { context(ctx, fn).put(slice(dst, fn, "dst"), peer, slice(src, fn, "src"), atomic(a, fn)); });
}
rwin_status_t rwin_get(rwin_context_t* ctx, const rwin_slice_t* dst, int peer, const rwin_slice_t* src) {
  const char* fn = "rwin_get";
  return guard(fn, [&] { context(ctx, fn).get(slice(dst, fn, "dst"), peer, slice(src, fn, "src")); });
}
rwin_status_t rwin_put_nbi(rwin_context_t* ctx, const rwin_slice_t* dst, int peer, const rwin_slice_t* src) {
  const char* fn = "rwin_put_nbi";
  return guard(fn, [&] { context(ctx, fn).put_nbi(slice(dst, fn, "dst"), peer, slice(src, fn, "src")); });
}
rwin_status_t rwin_get_nbi(rwin_context_t* ctx, const rwin_slice_t* dst, int peer, const rwin_slice_t* src) {
  const char* fn = "rwin_get_nbi";
  return guard(fn, [&] { context(ctx, fn).get_nbi(slice(dst, fn, "dst"), peer, slice(src, fn, "src")); });
}
rwin_status_t rwin_put_local(rwin_context_t* ctx, const rwin_slice_t* dst, int peer, const rwin_local_t* src,
                             rwin_atomic_t a) {
  const char* fn = "rwin_put_local";
  return guard(fn, [&] { context(ctx, fn).put(slice(dst, fn, "dst"), peer, local(src, fn, "src"), atomic(a, fn)); });
}
rwin_status_t rwin_get_local(rwin_context_t* ctx, const rwin_local_t* dst, int peer, const rwin_slice_t* src) {
  const char* fn = "rwin_get_local";
  return guard(fn, [&] { context(ctx, fn).get(local(dst, fn, "dst"), peer, slice(src, fn, "src")); });
}
rwin_status_t rwin_put_local_nbi(rwin_context_t* ctx, const rwin_slice_t* dst, int peer, const rwin_local_t* src) {
  const char* fn = "rwin_put_local_nbi";
  return guard(fn, [&] { context(ctx, fn).put_nbi(slice(dst, fn, "dst"), peer, local(src, fn, "src")); });
}
rwin_status_t rwin_get_local_nbi(rwin_context_t* ctx, const rwin_local_t* dst, int peer, const rwin_slice_t* src) {
  const char* fn = "rwin_get_local_nbi";
  return guard(fn, [&] { context(ctx, fn).get_nbi(local(dst, fn, "dst"), peer, slice(src, fn, "src")); });
}
rwin_status_t rwin_deregister(rwin_context_t* ctx, const void* ptr) {
  return guard("rwin_deregister", [&] { context(ctx, "rwin_deregister").deregister(ptr); });
}

rwin_status_t rwin_fence(rwin_context_t* ctx, int peer) {
  return guard("rwin_fence", [&] { context(ctx, "rwin_fence").fence(peer); });
}
rwin_status_t rwin_quiet(rwin_context_t* ctx) {
  return guard("rwin_quiet", [&] { context(ctx, "rwin_quiet").quiet(); });
}
rwin_status_t rwin_barrier(rwin_context_t* ctx) {
  return guard("rwin_barrier", [&] { context(ctx, "rwin_barrier").barrier(); });
}

// ---- signals

rwin_status_t rwin_notify(rwin_context_t* ctx, const rwin_signal_slice_t* signal, int peer, int64_t value,
                          rwin_notify_op_t op) {
  const char* fn = "rwin_notify";
  return guard(fn,
               [&] { context(ctx, fn).notify(signal_slice(signal, fn, "signal"), peer, value, notify_op(op, fn)); });
}
rwin_status_t rwin_notify_window(rwin_context_t* ctx, const rwin_slice_t* signal, int peer, int64_t value,
                                 rwin_notify_op_t op) {
  const char* fn = "rwin_notify_window";
  return guard(fn, [&] { context(ctx, fn).notify(slice(signal, fn, "signal"), peer, value, notify_op(op, fn)); });
}
rwin_status_t rwin_wait(rwin_context_t* ctx, const rwin_signal_slice_t* signal, int64_t expected, rwin_cmp_t c,
                        int64_t timeout_ms) {
  const char* fn = "rwin_wait";
  return guard(fn, [&] {
    context(ctx, fn).wait(signal_slice(signal, fn, "signal"), expected, cmp(c, fn), timeout(timeout_ms));
  });
}
rwin_status_t rwin_wait_window(rwin_context_t* ctx, const rwin_slice_t* signal, int64_t expected, rwin_cmp_t c,
                               int64_t timeout_ms) {
  const char* fn = "rwin_wait_window";
  return guard(fn,
               [&] { context(ctx, fn).wait(slice(signal, fn, "signal"), expected, cmp(c, fn), timeout(timeout_ms)); });
}
rwin_status_t rwin_test(rwin_context_t* ctx, const rwin_signal_slice_t* signal, int64_t expected, rwin_cmp_t c,
                        int* satisfied) {
  const char* fn = "rwin_test";
  return guard(fn, [&] {
    need(satisfied, fn, "satisfied");
    *satisfied = context(ctx, fn).test(signal_slice(signal, fn, "signal"), expected, cmp(c, fn)) ? 1 : 0;
  });
}
rwin_status_t rwin_test_window(rwin_context_t* ctx, const rwin_slice_t* signal, int64_t expected, rwin_cmp_t c,
                               int* satisfied) {
  const char* fn = "rwin_test_window";
  return guard(fn, [&] {
    need(satisfied, fn, "satisfied");
    *satisfied = context(ctx, fn).test(slice(signal, fn, "signal"), expected, cmp(c, fn)) ? 1 : 0;
  });
}

// ---- fetching atomics

rwin_status_t rwin_fetch_add(rwin_context_t* ctx, const rwin_slice_t* target, int peer, int64_t value, int64_t* old) {
  const char* fn = "rwin_fetch_add";
  return guard(fn, [&] {
    need(old, fn, "old");
    *old = context(ctx, fn).fetch_add(slice(target, fn, "target"), peer, value);
  });
}
rwin_status_t rwin_compare_swap(rwin_context_t* ctx, const rwin_slice_t* target, int peer, int64_t expected,
                                int64_t desired, int64_t* old) {
  const char* fn = "rwin_compare_swap";
  return guard(fn, [&] {
    need(old, fn, "old");
    *old = context(ctx, fn).compare_swap(slice(target, fn, "target"), peer, expected, desired);
  });
}
rwin_status_t rwin_swap(rwin_context_t* ctx, const rwin_slice_t* target, int peer, int64_t value, int64_t* old) {
  const char* fn = "rwin_swap";
  return guard(fn, [&] {
    need(old, fn, "old");
    *old = context(ctx, fn).swap(slice(target, fn, "target"), peer, value);
  });
}
rwin_status_t rwin_atomic_fetch(rwin_context_t* ctx, const rwin_slice_t* target, int peer, int64_t* old) {
  const char* fn = "rwin_atomic_fetch";
  return guard(fn, [&] {
    need(old, fn, "old");
    *old = context(ctx, fn).atomic_fetch(slice(target, fn, "target"), peer);
  });
}
rwin_status_t rwin_signal_fetch_add(rwin_context_t* ctx, const rwin_signal_slice_t* target, int peer, int64_t value,
                                    int64_t* old) {
  const char* fn = "rwin_signal_fetch_add";
  return guard(fn, [&] {
    need(old, fn, "old");
    *old = context(ctx, fn).fetch_add(signal_slice(target, fn, "target"), peer, value);
  });
}
rwin_status_t rwin_signal_compare_swap(rwin_context_t* ctx, const rwin_signal_slice_t* target, int peer,
                                       int64_t expected, int64_t desired, int64_t* old) {
  const char* fn = "rwin_signal_compare_swap";
  return guard(fn, [&] {
    need(old, fn, "old");
    *old = context(ctx, fn).compare_swap(signal_slice(target, fn, "target"), peer, expected, desired);
  });
}
rwin_status_t rwin_signal_swap(rwin_context_t* ctx, const rwin_signal_slice_t* target, int peer, int64_t value,
                               int64_t* old) {
  const char* fn = "rwin_signal_swap";
  return guard(fn, [&] {
    need(old, fn, "old");
    *old = context(ctx, fn).swap(signal_slice(target, fn, "target"), peer, value);
  });
}
rwin_status_t rwin_signal_atomic_fetch(rwin_context_t* ctx, const rwin_signal_slice_t* target, int peer, int64_t* old) {
  const char* fn = "rwin_signal_atomic_fetch";
  return guard(fn, [&] {
    need(old, fn, "old");
    *old = context(ctx, fn).atomic_fetch(signal_slice(target, fn, "target"), peer);
  });
}

// ---- non-blocking fetching atomics: *fetch written by the quiet / fence / barrier that completes them

rwin_status_t rwin_fetch_add_nbi(rwin_context_t* ctx, const rwin_slice_t* target, int peer, int64_t value,
                                 int64_t* fetch) {
  const char* fn = "rwin_fetch_add_nbi";
  return guard(fn, [&] { context(ctx, fn).fetch_add_nbi(need(fetch, fn, "fetch"), slice(target, fn, "target"), peer, value); });
}
rwin_status_t rwin_compare_swap_nbi(rwin_context_t* ctx, const rwin_slice_t* target, int peer, int64_t expected,
                                    int64_t desired, int64_t* fetch) {
  const char* fn = "rwin_compare_swap_nbi";
  return guard(fn, [&] {
    context(ctx, fn).compare_swap_nbi(need(fetch, fn, "fetch"), slice(target, fn, "target"), peer, expected, desired);
  });
}
rwin_status_t rwin_swap_nbi(rwin_context_t* ctx, const rwin_slice_t* target, int peer, int64_t value, int64_t* fetch) {
  const char* fn = "rwin_swap_nbi";
  return guard(fn, [&] { context(ctx, fn).swap_nbi(need(fetch, fn, "fetch"), slice(target, fn, "target"), peer, value); });
}
rwin_status_t rwin_atomic_fetch_nbi(rwin_context_t* ctx, const rwin_slice_t* target, int peer, int64_t* fetch) {
  const char* fn = "rwin_atomic_fetch_nbi";
  return guard(fn, [&] { context(ctx, fn).atomic_fetch_nbi(need(fetch, fn, "fetch"), slice(target, fn, "target"), peer); });
}
rwin_status_t rwin_signal_fetch_add_nbi(rwin_context_t* ctx, const rwin_signal_slice_t* target, int peer,
                                        int64_t value, int64_t* fetch) {
  const char* fn = "rwin_signal_fetch_add_nbi";
  return guard(fn, [&] {
    context(ctx, fn).fetch_add_nbi(need(fetch, fn, "fetch"), signal_slice(target, fn, "target"), peer, value);
  });
}
rwin_status_t rwin_signal_compare_swap_nbi(rwin_context_t* ctx, const rwin_signal_slice_t* target, int peer,
                                           int64_t expected, int64_t desired, int64_t* fetch) {
  const char* fn = "rwin_signal_compare_swap_nbi";
  return guard(fn, [&] {
    context(ctx, fn).compare_swap_nbi(need(fetch, fn, "fetch"), signal_slice(target, fn, "target"), peer, expected,
                                      desired);
  });
}
rwin_status_t rwin_signal_swap_nbi(rwin_context_t* ctx, const rwin_signal_slice_t* target, int peer, int64_t value,
                                   int64_t* fetch) {
  const char* fn = "rwin_signal_swap_nbi";
  return guard(fn, [&] {
    context(ctx, fn).swap_nbi(need(fetch, fn, "fetch"), signal_slice(target, fn, "target"), peer, value);
  });
}
rwin_status_t rwin_signal_atomic_fetch_nbi(rwin_context_t* ctx, const rwin_signal_slice_t* target, int peer,
                                           int64_t* fetch) {
  const char* fn = "rwin_signal_atomic_fetch_nbi";
  return guard(fn, [&] {
    context(ctx, fn).atomic_fetch_nbi(need(fetch, fn, "fetch"), signal_slice(target, fn, "target"), peer);
  });
}

// ---- counters


rwin_status_t rwin_context_stats(rwin_context_t* ctx, rwin_stats_t* out) {
  const char* fn = "rwin_context_stats";
  return guard(fn, [&] {
    need(out, fn, "out");
    const rwin::Stats s = context(ctx, fn).stats();
    rwin_stats_t o;
    std::memset(&o, 0, sizeof o);
    o.struct_size = sizeof o;
    o.total = c_peer(s.total);
    o.waits = s.waits;
    o.waits_blocked = s.waits_blocked;
    o.wait_ns = s.wait_ns;
    o.tests = s.tests;
    o.tests_satisfied = s.tests_satisfied;
    o.quiets = s.quiets;
    o.barriers = s.barriers;
    o.failed_peers = s.failed_peers;
    o.reg_cache_hits = s.reg_cache_hits;
    o.reg_cache_misses = s.reg_cache_misses;
    o.wrs = s.wrs;
    o.doorbells = s.doorbells;
    o.signaled = s.signaled;
    o.inline_wrs = s.inline_wrs;
    o.cqes = s.cqes;
    o.drained = s.drained;
    o.striped = s.striped;
    o.fence_reads = s.fence_reads;
    fill(fn, out, out->struct_size, &o, sizeof o);
  });
}
rwin_status_t rwin_context_peer_stats(rwin_context_t* ctx, int peer, rwin_peer_stats_t* out) {
  const char* fn = "rwin_context_peer_stats";
  return guard(fn, [&] {
    need(out, fn, "out");
    rwin::Context& c = context(ctx, fn);
    if (peer < 0 || peer >= c.size()) {
      throw rwin::Error(rwin::ErrorCode::PeerOutOfRange,
                        std::string(fn) + ": peer " + std::to_string(peer) + " is outside 0.." + std::to_string(c.size() - 1));
    }
    const rwin_peer_stats_t o = c_peer(c.stats().peers[static_cast<size_t>(peer)]);
    fill(fn, out, out->struct_size, &o, sizeof o);
  });
}
}  // extern "C"
