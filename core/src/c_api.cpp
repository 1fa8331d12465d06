// rwin's C ABI (rwin/rwin_c.h): each entry point checks its pointers and enum values, calls the C++ API
// and turns whatever it throws into a status and this thread's last error. Nothing is thrown out.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <exception>
#include <memory>
#include <new>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "rwin/agent.h"
#include "rwin/collectives.h"
#include "rwin/domain.h"
#include "rwin/rwin.h"
#include "rwin/rwin_c.h"
#include "rwin/store.h"
#include "rwin/version.h"

struct rwin_context {
  std::unique_ptr<rwin::Context> ctx;
};
struct rwin_buffer {
  rwin::WindowBuffer b;
};
struct rwin_window {
  rwin::Window w;
};
struct rwin_signals {
  rwin::SignalArray s;
};
struct rwin_agent {
  std::unique_ptr<rwin::Agent> a;
};
struct rwin_region {
  rwin::Region r;
};
struct rwin_remote_region {
  rwin::RemoteRegion r;
};
struct rwin_domain {
  std::unique_ptr<rwin::Domain> d;
};

namespace {

using rwin::ErrorCode;

// The C values are the C++ enums' numbering: casting is the conversion.
static_assert(RWIN_ERR_INVALID_ARGUMENT == 1 + static_cast<int>(ErrorCode::InvalidArgument));
static_assert(RWIN_ERR_COLLECTIVE_MISMATCH == 1 + static_cast<int>(ErrorCode::CollectiveMismatch));
static_assert(RWIN_U16 == static_cast<int>(rwin::DType::U16) && RWIN_I8 == static_cast<int>(rwin::DType::I8));
static_assert(RWIN_NOTIFY_SET == static_cast<int>(rwin::NotifyOp::Set));
static_assert(RWIN_ATOMIC_ADD == static_cast<int>(rwin::AtomicType::Add));
static_assert(RWIN_CMP_LE == static_cast<int>(rwin::WaitCmp::LE));
static_assert(RWIN_REDUCE_PROD == static_cast<int>(rwin::ReduceOp::Prod));

thread_local std::string last_error;

rwin_status_t fail(rwin_status_t status, const char* fn, const char* what) noexcept {
  try {
    last_error = what;
    if (std::strncmp(what, "rwin:", 5) != 0) last_error = std::string("rwin: ") + fn + ": " + what;
  } catch (...) {
    last_error.clear();  // no memory for the message: the status still says it
  }
  return status;
}

// Runs `f`, mapping every exception to a status. `fn` names the entry point in messages not from rwin.
template <class F>
rwin_status_t guard(const char* fn, F&& f) noexcept {
  try {
    f();
    return RWIN_OK;
  } catch (const rwin::Error& e) {
    return fail(static_cast<rwin_status_t>(1 + static_cast<int>(e.code())), fn, e.what());
  } catch (const std::bad_alloc&) {
    return fail(RWIN_ERR_NO_MEMORY, fn, "out of memory");
  } catch (const std::exception& e) {
    return fail(RWIN_ERR_INTERNAL, fn, e.what());
  } catch (...) {
    return fail(RWIN_ERR_INTERNAL, fn, "an exception that is not a std::exception");
  }
}

[[noreturn]] void invalid(const char* fn, const std::string& what) {
  throw rwin::Error(ErrorCode::InvalidArgument, std::string(fn) + ": " + what);
}
template <class T>
T* need(T* p, const char* fn, const char* name) {
  if (p == nullptr) invalid(fn, std::string(name) + " is NULL");
  return p;
}
rwin::Context& context(rwin_context_t* c, const char* fn) {
  need(c, fn, "ctx");
  if (!c->ctx) invalid(fn, "ctx is not a live context");
  return *c->ctx;
}

rwin::DType dtype(rwin_dtype_t d, const char* fn) {
  if (static_cast<int>(d) < 0 || static_cast<int>(d) > static_cast<int>(RWIN_U16)) {
    invalid(fn, "dtype " + std::to_string(static_cast<int>(d)) + " is not an rwin_dtype_t");
  }
  return static_cast<rwin::DType>(d);
}
template <class E>
E checked_enum(int v, int max, const char* fn, const char* type) {
  if (v < 0 || v > max) invalid(fn, std::to_string(v) + " is not an " + type);
  return static_cast<E>(v);
}
rwin::AtomicType atomic(rwin_atomic_t a, const char* fn) {
  return checked_enum<rwin::AtomicType>(a, RWIN_ATOMIC_ADD, fn, "rwin_atomic_t");
}
rwin::NotifyOp notify_op(rwin_notify_op_t o, const char* fn) {
  return checked_enum<rwin::NotifyOp>(o, RWIN_NOTIFY_SET, fn, "rwin_notify_op_t");
}
rwin::WaitCmp cmp(rwin_cmp_t c, const char* fn) {
  return checked_enum<rwin::WaitCmp>(c, RWIN_CMP_LE, fn, "rwin_cmp_t");
}
rwin::ReduceOp reduce_op(rwin_reduce_op_t o, const char* fn) {
  return checked_enum<rwin::ReduceOp>(o, RWIN_REDUCE_PROD, fn, "rwin_reduce_op_t");
}

const rwin::Window& window(const rwin_window_t* w, const char* fn, const char* name) {
  return need(w, fn, name)->w;
}
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
std::optional<std::chrono::milliseconds> timeout(int64_t ms) {
  if (ms < 0) return std::nullopt;
  return std::chrono::milliseconds(ms);
}
std::string text(const char* s) {
  return s ? s : "";
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

template <class H, class F>
rwin_status_t make_handle(const char* fn, H** out, F&& make) noexcept {
  if (out) *out = nullptr;
  return guard(fn, [&] {
    need(out, fn, "out");
    *out = new H{make()};
  });
}

// Copies `bytes` into the caller's buffer under the rules of rwin_c.h (agents: byte and string results).
void copy_out(const char* fn, const void* bytes, size_t n, void* buf, size_t cap, size_t* len) {
  *need(len, fn, "len") = n;
  if (buf == nullptr && cap == 0) return;  // the size only
  need(buf, fn, "buf");
  if (cap < n) invalid(fn, "a buffer of " + std::to_string(cap) + " bytes, " + std::to_string(n) + " needed");
  std::memcpy(buf, bytes, n);
}
rwin::AgentOptions agent_options(const rwin_agent_options_t* o, const char* fn) {
  rwin::AgentOptions a;
  if (o != nullptr) {
    if (o->struct_size < sizeof(rwin_agent_options_t)) {
      invalid(fn, "opts->struct_size " + std::to_string(o->struct_size) +
                      " is below sizeof(rwin_agent_options_t): call rwin_agent_options_init first");
    }
    if (o->listen) a.listen = o->listen;
    if (o->transport) a.transport = o->transport;
    if (o->ib_device) a.ib_device = o->ib_device;
    if (o->ib_port > 0) a.ib_port = o->ib_port;
    a.gid_index = o->gid_index;
    using Ms = std::chrono::milliseconds;
    if (o->op_timeout_ms > 0) a.op_timeout = Ms(o->op_timeout_ms);
    if (o->connect_timeout_ms > 0) a.connect_timeout = Ms(o->connect_timeout_ms);
    if (o->keepalive_interval_ms > 0) a.keepalive_interval = Ms(o->keepalive_interval_ms);
    if (o->keepalive_timeout_ms > 0) a.keepalive_timeout = Ms(o->keepalive_timeout_ms);
    a.progress_thread = o->progress_thread != 0;
  }
  return a;
}
rwin::Agent& agent(rwin_agent_t* a, const char* fn) {
  need(a, fn, "agent");
  if (!a->a) invalid(fn, "agent is not a live agent");
  return *a->a;
}
const rwin::RemoteRegion& remote(const rwin_remote_region_t* r, const char* fn, const char* name) {
  return need(r, fn, name)->r;
}

rwin::Domain& domain(const rwin_domain_t* d, const char* fn) {
  need(d, fn, "domain");
  if (!d->d) invalid(fn, "domain is not a live domain");
  return *d->d;
}
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

const char* rwin_status_name(rwin_status_t status) {
  switch (status) {
    case RWIN_OK:
      return "RWIN_OK";
    case RWIN_ERR_INVALID_ARGUMENT:
      return "RWIN_ERR_INVALID_ARGUMENT";
    case RWIN_ERR_PEER_OUT_OF_RANGE:
      return "RWIN_ERR_PEER_OUT_OF_RANGE";
    case RWIN_ERR_OUT_OF_BOUNDS:
      return "RWIN_ERR_OUT_OF_BOUNDS";
    case RWIN_ERR_SHAPE_MISMATCH:
      return "RWIN_ERR_SHAPE_MISMATCH";
    case RWIN_ERR_DTYPE_MISMATCH:
      return "RWIN_ERR_DTYPE_MISMATCH";
    case RWIN_ERR_MISALIGNED:
      return "RWIN_ERR_MISALIGNED";
    case RWIN_ERR_WINDOW_MISMATCH:
      return "RWIN_ERR_WINDOW_MISMATCH";
    case RWIN_ERR_USE_AFTER_FREE:
      return "RWIN_ERR_USE_AFTER_FREE";
    case RWIN_ERR_TIMEOUT:
      return "RWIN_ERR_TIMEOUT";
    case RWIN_ERR_PEER_FAILED:
      return "RWIN_ERR_PEER_FAILED";
    case RWIN_ERR_TRANSPORT:
      return "RWIN_ERR_TRANSPORT";
    case RWIN_ERR_BOOTSTRAP:
      return "RWIN_ERR_BOOTSTRAP";
    case RWIN_ERR_UNSUPPORTED:
      return "RWIN_ERR_UNSUPPORTED";
    case RWIN_ERR_COLLECTIVE_MISMATCH:
      return "RWIN_ERR_COLLECTIVE_MISMATCH";
    case RWIN_ERR_NO_MEMORY:
      return "RWIN_ERR_NO_MEMORY";
    case RWIN_ERR_INTERNAL:
      return "RWIN_ERR_INTERNAL";
  }
  return "RWIN_ERR_UNKNOWN";
}

const char* rwin_last_error(void) {
  return last_error.c_str();
}
const char* rwin_version(void) {
  return rwin::version();
}

size_t rwin_dtype_size(rwin_dtype_t d) {
  if (static_cast<int>(d) < 0 || static_cast<int>(d) > static_cast<int>(RWIN_U16)) return 0;
  return rwin::dtype_size(static_cast<rwin::DType>(d));
}

void rwin_options_init(rwin_options_t* o) {
  if (o == nullptr) return;
  std::memset(o, 0, sizeof *o);
  o->struct_size = sizeof *o;
  o->rank = -1;
  o->nranks = -1;
  o->ib_port = 1;
  o->gid_index = -1;
  o->ucx_tcp_zcopy = -1;
  o->spin_us = -1;
}

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

// ---- collectives over the job

rwin_status_t rwin_allreduce(rwin_context_t* ctx, const rwin_window_t* x, rwin_reduce_op_t op) {
  const char* fn = "rwin_allreduce";
  return guard(fn, [&] { rwin::allreduce(context(ctx, fn), window(x, fn, "x"), reduce_op(op, fn)); });
}
rwin_status_t rwin_allreduce_to(rwin_context_t* ctx, const rwin_window_t* src, const rwin_window_t* dst,
                                rwin_reduce_op_t op) {
  const char* fn = "rwin_allreduce_to";
  return guard(fn, [&] {
    rwin::world(context(ctx, fn)).allreduce(window(src, fn, "src"), window(dst, fn, "dst"), reduce_op(op, fn));
  });
}
rwin_status_t rwin_broadcast(rwin_context_t* ctx, const rwin_window_t* x, int root) {
  const char* fn = "rwin_broadcast";
  return guard(fn, [&] { rwin::broadcast(context(ctx, fn), window(x, fn, "x"), root); });
}
rwin_status_t rwin_allgather(rwin_context_t* ctx, const rwin_window_t* stage, const rwin_window_t* data) {
  const char* fn = "rwin_allgather";
  return guard(fn, [&] { rwin::allgather(context(ctx, fn), window(stage, fn, "stage"), window(data, fn, "data")); });
}
rwin_status_t rwin_reduce_scatter(rwin_context_t* ctx, const rwin_window_t* data, rwin_reduce_op_t op) {
  const char* fn = "rwin_reduce_scatter";
  return guard(fn, [&] { rwin::reduce_scatter(context(ctx, fn), window(data, fn, "data"), reduce_op(op, fn)); });
}
rwin_status_t rwin_reduce_scatter_to(rwin_context_t* ctx, const rwin_window_t* data, const rwin_window_t* out,
                                     rwin_reduce_op_t op) {
  const char* fn = "rwin_reduce_scatter_to";
  return guard(fn, [&] {
    rwin::world(context(ctx, fn)).reduce_scatter(window(data, fn, "data"), window(out, fn, "out"), reduce_op(op, fn));
  });
}
rwin_status_t rwin_all_to_all(rwin_context_t* ctx, const rwin_window_t* stage, const rwin_window_t* data) {
  const char* fn = "rwin_all_to_all";
  return guard(fn, [&] { rwin::all_to_all(context(ctx, fn), window(stage, fn, "stage"), window(data, fn, "data")); });
}
rwin_status_t rwin_barrier_collective(rwin_context_t* ctx) {
  const char* fn = "rwin_barrier_collective";
  return guard(fn, [&] { rwin::barrier_collective(context(ctx, fn)); });
}

// ---- agents

void rwin_agent_options_init(rwin_agent_options_t* o) {
  if (o == nullptr) return;
  std::memset(o, 0, sizeof *o);
  o->struct_size = sizeof *o;
  o->ib_port = 1;
  o->gid_index = -1;
}

rwin_status_t rwin_agent_create(const rwin_agent_options_t* o, rwin_agent_t** out) {
  const char* fn = "rwin_agent_create";
  return make_handle<rwin_agent>(fn, out, [&] { return std::make_unique<rwin::Agent>(agent_options(o, fn)); });
}
void rwin_agent_destroy(rwin_agent_t* a) {
  delete a;
}  // ~Agent never throws
rwin_status_t rwin_agent_address(const rwin_agent_t* a, char* buf, size_t cap, size_t* len) {
  const char* fn = "rwin_agent_address";
  return guard(fn, [&] {
    const std::string addr = agent(const_cast<rwin_agent_t*>(a), fn).address();
    copy_out(fn, addr.c_str(), addr.size() + 1, buf, cap, len);
  });
}

rwin_status_t rwin_agent_register(rwin_agent_t* a, void* data, size_t bytes, rwin_region_t** out) {
  const char* fn = "rwin_agent_register";
  return make_handle<rwin_region>(fn, out, [&] { return agent(a, fn).register_memory(need(data, fn, "data"), bytes); });
}
rwin_status_t rwin_region_descriptor(const rwin_region_t* r, void* buf, size_t cap, size_t* len) {
  const char* fn = "rwin_region_descriptor";
  return guard(fn, [&] {
    const std::vector<uint8_t> d = need(r, fn, "region")->r.descriptor();
    copy_out(fn, d.data(), d.size(), buf, cap, len);
  });
}
rwin_status_t rwin_region_deregister(rwin_region_t* r) {
  return guard("rwin_region_deregister", [&] { need(r, "rwin_region_deregister", "region")->r.deregister(); });
}
void rwin_region_release(rwin_region_t* r) {
  delete r;
}

rwin_status_t rwin_agent_import(rwin_agent_t* a, const void* descriptor, size_t len, rwin_remote_region_t** out) {
  const char* fn = "rwin_agent_import";
  return make_handle<rwin_remote_region>(fn, out, [&] {
    const auto* p = static_cast<const uint8_t*>(need(descriptor, fn, "descriptor"));
    return agent(a, fn).import_region(std::span<const uint8_t>(p, len));
  });
}
rwin_status_t rwin_remote_region_bytes(const rwin_remote_region_t* r, size_t* out) {
  const char* fn = "rwin_remote_region_bytes";
  return guard(fn, [&] { *need(out, fn, "out") = remote(r, fn, "region").bytes(); });
}
void rwin_remote_region_release(rwin_remote_region_t* r) {
  delete r;
}

rwin_status_t rwin_agent_put(rwin_agent_t* a, const rwin_remote_region_t* dst, uint64_t offset, const void* src,
                             size_t bytes) {
  const char* fn = "rwin_agent_put";
  return guard(fn, [&] { agent(a, fn).put(remote(dst, fn, "dst"), offset, need(src, fn, "src"), bytes); });
}
rwin_status_t rwin_agent_get(rwin_agent_t* a, void* dst, const rwin_remote_region_t* src, uint64_t offset,
                             size_t bytes) {
  const char* fn = "rwin_agent_get";
  return guard(fn, [&] { agent(a, fn).get(need(dst, fn, "dst"), remote(src, fn, "src"), offset, bytes); });
}
rwin_status_t rwin_agent_put_notify(rwin_agent_t* a, const rwin_remote_region_t* dst, uint64_t offset, const void* src,
                                    size_t bytes, const rwin_remote_region_t* signal, uint64_t signal_offset,
                                    int64_t value, rwin_notify_op_t op) {
  const char* fn = "rwin_agent_put_notify";
  return guard(fn, [&] {
    agent(a, fn).put_notify(remote(dst, fn, "dst"), offset, need(src, fn, "src"), bytes, remote(signal, fn, "signal"),
                            signal_offset, value, notify_op(op, fn));
  });
}
rwin_status_t rwin_agent_notify(rwin_agent_t* a, const rwin_remote_region_t* signal, uint64_t signal_offset,
                                int64_t value, rwin_notify_op_t op) {
  const char* fn = "rwin_agent_notify";
  return guard(fn, [&] { agent(a, fn).notify(remote(signal, fn, "signal"), signal_offset, value, notify_op(op, fn)); });
}
rwin_status_t rwin_agent_flush(rwin_agent_t* a) {
  return guard("rwin_agent_flush", [&] { agent(a, "rwin_agent_flush").flush(); });
}
rwin_status_t rwin_agent_wait(rwin_agent_t* a, const rwin_region_t* signal, uint64_t offset, int64_t expected,
                              rwin_cmp_t c, int64_t timeout_ms) {
  const char* fn = "rwin_agent_wait";
  return guard(
      fn, [&] { agent(a, fn).wait(need(signal, fn, "signal")->r, offset, expected, cmp(c, fn), timeout(timeout_ms)); });
}
rwin_status_t rwin_agent_test(rwin_agent_t* a, const rwin_region_t* signal, uint64_t offset, int64_t expected,
                              rwin_cmp_t c, int* satisfied) {
  const char* fn = "rwin_agent_test";
  return guard(fn, [&] {
    need(satisfied, fn, "satisfied");
    *satisfied = agent(a, fn).test(need(signal, fn, "signal")->r, offset, expected, cmp(c, fn)) ? 1 : 0;
  });
}
rwin_status_t rwin_agent_progress(rwin_agent_t* a) {
  return guard("rwin_agent_progress", [&] { agent(a, "rwin_agent_progress").progress(); });
}

// ---- domains

void rwin_domain_options_init(rwin_domain_options_t* o) {
  if (o == nullptr) return;
  std::memset(o, 0, sizeof *o);
  o->struct_size = sizeof *o;
  rwin_agent_options_init(&o->agent);
  o->agent.progress_thread = 1;
  o->signals = 64;
}
rwin_status_t rwin_domain_prepare(uint64_t id, int rank, int nranks, size_t window_bytes,
                                  const rwin_domain_options_t* o, rwin_domain_t** out) {
  const char* fn = "rwin_domain_prepare";
  return make_handle<rwin_domain>(fn, out, [&] {
    rwin::DomainOptions d;
    if (o != nullptr) {
      if (o->struct_size < sizeof(rwin_domain_options_t)) {
        invalid(fn, "opts->struct_size " + std::to_string(o->struct_size) +
                        " is below sizeof(rwin_domain_options_t): call rwin_domain_options_init first");
      }
      d.agent = agent_options(&o->agent, fn);
      if (o->signals > 0) d.signals = o->signals;
    }
    return std::make_unique<rwin::Domain>(id, rank, nranks, window_bytes, d);
  });
}
void rwin_domain_destroy(rwin_domain_t* d) {
  delete d;  // ~Domain releases; never throws
}
rwin_status_t rwin_domain_descriptor(const rwin_domain_t* d, void* buf, size_t cap, size_t* len) {
  const char* fn = "rwin_domain_descriptor";
  return guard(fn, [&] {
    const std::vector<uint8_t> v = domain(d, fn).descriptor();
    copy_out(fn, v.data(), v.size(), buf, cap, len);
  });
}
rwin_status_t rwin_domain_local(const rwin_domain_t* d, void** window, size_t* window_bytes, int64_t** signals,
                                size_t* nsignals) {
  const char* fn = "rwin_domain_local";
  return guard(fn, [&] {
    rwin::Domain& x = domain(d, fn);
    if (window) *window = x.base();
    if (window_bytes) *window_bytes = x.window_bytes();
    if (signals) *signals = x.signals();
    if (nsignals) *nsignals = x.signal_count();
  });
}
rwin_status_t rwin_domain_state(const rwin_domain_t* d, rwin_domain_state_t* out) {
  const char* fn = "rwin_domain_state";
  return guard(fn, [&] { *need(out, fn, "out") = static_cast<rwin_domain_state_t>(domain(d, fn).state()); });
}
rwin_status_t rwin_domain_import(rwin_domain_t* d, const void* const* descriptors, const size_t* lens, int n) {
  const char* fn = "rwin_domain_import";
  return guard(fn, [&] {
    rwin::Domain& x = domain(d, fn);
    if (n < 0) invalid(fn, "n " + std::to_string(n) + " is negative");
    if (n > 0) {
      need(descriptors, fn, "descriptors");
      need(lens, fn, "lens");
    }
    std::vector<std::vector<uint8_t>> table;
    for (int i = 0; i < n; ++i) {
      if (descriptors[i] == nullptr) invalid(fn, "descriptors[" + std::to_string(i) + "] is NULL");
      const auto* p = static_cast<const uint8_t*>(descriptors[i]);
      table.emplace_back(p, p + lens[i]);
    }
    x.import_table(table);
  });
}
rwin_status_t rwin_domain_commit(rwin_domain_t* d) {
  return guard("rwin_domain_commit", [&] { domain(d, "rwin_domain_commit").commit(); });
}
rwin_status_t rwin_domain_abort(rwin_domain_t* d) {
  return guard("rwin_domain_abort", [&] { domain(d, "rwin_domain_abort").abort(); });
}
rwin_status_t rwin_domain_release(rwin_domain_t* d) {
  return guard("rwin_domain_release", [&] { domain(d, "rwin_domain_release").release(); });
}
rwin_status_t rwin_domain_put(rwin_domain_t* d, int peer, uint64_t offset, const void* src, size_t bytes) {
  const char* fn = "rwin_domain_put";
  return guard(fn, [&] { domain(d, fn).put(peer, offset, need(src, fn, "src"), bytes); });
}
rwin_status_t rwin_domain_get(rwin_domain_t* d, void* dst, int peer, uint64_t offset, size_t bytes) {
  const char* fn = "rwin_domain_get";
  return guard(fn, [&] { domain(d, fn).get(need(dst, fn, "dst"), peer, offset, bytes); });
}
rwin_status_t rwin_domain_put_notify(rwin_domain_t* d, int peer, uint64_t offset, const void* src, size_t bytes,
                                     size_t signal, int64_t value, rwin_notify_op_t op) {
  const char* fn = "rwin_domain_put_notify";
  return guard(fn, [&] { domain(d, fn).put_notify(peer, offset, need(src, fn, "src"), bytes, signal, value, notify_op(op, fn)); });
}
rwin_status_t rwin_domain_notify(rwin_domain_t* d, int peer, size_t signal, int64_t value, rwin_notify_op_t op) {
  const char* fn = "rwin_domain_notify";
  return guard(fn, [&] { domain(d, fn).notify(peer, signal, value, notify_op(op, fn)); });
}
rwin_status_t rwin_domain_flush(rwin_domain_t* d) {
  return guard("rwin_domain_flush", [&] { domain(d, "rwin_domain_flush").flush(); });
}
rwin_status_t rwin_domain_wait(rwin_domain_t* d, size_t signal, int64_t expected, rwin_cmp_t c, int64_t timeout_ms) {
  const char* fn = "rwin_domain_wait";
  return guard(fn, [&] { domain(d, fn).wait(signal, expected, cmp(c, fn), timeout(timeout_ms)); });
}
rwin_status_t rwin_domain_test(rwin_domain_t* d, size_t signal, int64_t expected, rwin_cmp_t c, int* satisfied) {
  const char* fn = "rwin_domain_test";
  return guard(fn, [&] {
    need(satisfied, fn, "satisfied");
    *satisfied = domain(d, fn).test(signal, expected, cmp(c, fn)) ? 1 : 0;
  });
}
rwin_status_t rwin_domain_fail_peer(rwin_domain_t* d, int peer, const char* reason) {
  const char* fn = "rwin_domain_fail_peer";
  return guard(fn, [&] { domain(d, fn).fail_peer(peer, text(reason)); });
}

}  // extern "C"
