// The C ABI's error paths (rwin/rwin_c.h): every entry point given a NULL handle, a NULL out pointer, an
// enum value outside its type, a peer outside the job or a slice outside its window returns a status
// (never throws, never crashes) and leaves a message in rwin_last_error(); a failing or incomplete C
// store fails the context's creation and is released once. The context here is one rank on an
// in-memory store of C callbacks. Built from the installed header's view only: links librwin, not
// rwin_internal. (The 2-rank data paths are in tests/install/consumer_c, run by install.consumer.)
#include <gtest/gtest.h>

#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "rwin/rwin_c.h"

namespace {

// ---- an in-memory store for one rank, as C callbacks
struct MemStore {
  std::map<std::string, std::vector<unsigned char>> kv;
  int fail_with = 0;  // nonzero: every callback returns it
  int released = 0;
};
MemStore* ms(void* u) {
  return static_cast<MemStore*>(u);
}
int m_set(void* u, const char* key, const void* value, size_t len) {
  if (ms(u)->fail_with) return ms(u)->fail_with;
  const auto* p = static_cast<const unsigned char*>(value);
  ms(u)->kv[key] = std::vector<unsigned char>(p, p + len);
  return RWIN_STORE_OK;
}
int m_get(void* u, const char* key, int64_t, void* buf, size_t cap, size_t* len) {
  if (ms(u)->fail_with) return ms(u)->fail_with;
  auto it = ms(u)->kv.find(key);
  if (it == ms(u)->kv.end()) return RWIN_STORE_TIMEOUT;  // one rank: nobody else will write it
  *len = it->second.size();
  if (cap) std::memcpy(buf, it->second.data(), std::min(cap, *len));
  return RWIN_STORE_OK;
}
int m_add(void* u, const char* key, int64_t delta, int64_t* result) {
  if (ms(u)->fail_with) return ms(u)->fail_with;
  int64_t v = 0;
  auto& cell = ms(u)->kv[key];
  if (!cell.empty()) v = std::stoll(std::string(cell.begin(), cell.end()));
  v += delta;
  const std::string t = std::to_string(v);
  cell.assign(t.begin(), t.end());
  *result = v;
  return RWIN_STORE_OK;
}
int m_check(void* u, const char* const* keys, size_t n, int* all) {
  if (ms(u)->fail_with) return ms(u)->fail_with;
  *all = 1;
  for (size_t i = 0; i < n; ++i) *all &= ms(u)->kv.count(keys[i]) ? 1 : 0;
  return RWIN_STORE_OK;
}
int m_wait(void* u, const char* const* keys, size_t n, int64_t) {
  int all = 0;
  const int rc = m_check(u, keys, n, &all);
  return rc ? rc : all ? RWIN_STORE_OK : RWIN_STORE_TIMEOUT;
}
void m_release(void* u) {
  ++ms(u)->released;
}
const rwin_store_ops_t mem_ops = {m_set, m_get, m_add, m_check, m_wait, m_release};

// Expects `status` with a last error containing every `parts` string.
void expect_fail(rwin_status_t got, rwin_status_t want, std::initializer_list<const char*> parts) {
  EXPECT_EQ(got, want) << rwin_status_name(got) << " (wanted " << rwin_status_name(want) << "): " << rwin_last_error();
  for (const char* p : parts)
    EXPECT_NE(std::strstr(rwin_last_error(), p), nullptr) << "'" << p << "' not in: " << rwin_last_error();
}

class CApi : public ::testing::Test {
 protected:
  void SetUp() override {
    setenv("UCX_TLS", "tcp,self", 0);
    setenv("UCX_NET_DEVICES", "lo", 0);
    rwin_options_t o;
    rwin_options_init(&o);
    o.op_timeout_ms = 5000;
    o.startup_timeout_ms = 10000;
    ASSERT_EQ(rwin_context_create_with_store(&mem_ops, &store, 0, 1, &o, &ctx), RWIN_OK) << rwin_last_error();
    ASSERT_EQ(rwin_alloc_window(ctx, "w", RWIN_I64, 2, 4, &w), RWIN_OK) << rwin_last_error();
    ASSERT_EQ(rwin_alloc_signals(ctx, "s", 2, &sig), RWIN_OK) << rwin_last_error();
  }
  void TearDown() override {
    EXPECT_EQ(rwin_signals_free(ctx, sig), RWIN_OK) << rwin_last_error();
    EXPECT_EQ(rwin_window_free(ctx, w), RWIN_OK) << rwin_last_error();
    rwin_context_destroy(ctx);
    EXPECT_EQ(store.released, 1);
  }
  MemStore store;
  rwin_context_t* ctx = nullptr;
  rwin_window_t* w = nullptr;
  rwin_signals_t* sig = nullptr;
};

TEST(CApiNoContext, NamesAndInit) {
  EXPECT_STREQ(rwin_status_name(RWIN_OK), "RWIN_OK");
  EXPECT_STREQ(rwin_status_name(RWIN_ERR_OUT_OF_BOUNDS), "RWIN_ERR_OUT_OF_BOUNDS");
  EXPECT_STREQ(rwin_status_name(RWIN_ERR_INTERNAL), "RWIN_ERR_INTERNAL");
  EXPECT_STREQ(rwin_status_name(17), "RWIN_ERR_UNKNOWN");
  EXPECT_EQ(rwin_dtype_size(RWIN_BF16), 2u);
  EXPECT_EQ(rwin_dtype_size(12), 0u);
  EXPECT_NE(rwin_version(), nullptr);
  rwin_options_init(nullptr);  // no-op
  rwin_options_t o;
  rwin_options_init(&o);
  EXPECT_EQ(o.struct_size, sizeof o);
  EXPECT_EQ(o.rank, -1);
}

// Every entry point that takes a context, given NULL: InvalidArgument naming the call and "ctx".
TEST(CApiNoContext, NullContextEverywhere) {
  rwin_slice_t s{};
  rwin_signal_slice_t ss{};
  rwin_local_t l{};
  int i = 0;
  int64_t v = 0;
  void* p = nullptr;
  rwin_buffer_t* b = nullptr;
  rwin_window_t* win = nullptr;
  rwin_signals_t* sg = nullptr;
  rwin_request_t* rq = nullptr;
  const std::vector<std::pair<const char*, std::function<rwin_status_t()>>> calls = {
      {"rwin_context_rank", [&] { return rwin_context_rank(nullptr, &i); }},
      {"rwin_context_size", [&] { return rwin_context_size(nullptr, &i); }},
      {"rwin_fail_peer", [&] { return rwin_fail_peer(nullptr, 0, "x"); }},
      {"rwin_alloc_window_buffer", [&] { return rwin_alloc_window_buffer(nullptr, "b", 64, &b); }},
      {"rwin_window_view", [&] { return rwin_window_view(nullptr, nullptr, RWIN_I32, 1, 1, 0, &win); }},
      {"rwin_alloc_window", [&] { return rwin_alloc_window(nullptr, "w", RWIN_I32, 1, 1, &win); }},
      {"rwin_alloc_signals", [&] { return rwin_alloc_signals(nullptr, "s", 1, &sg); }},
      {"rwin_put", [&] { return rwin_put(nullptr, &s, 0, &s, RWIN_ATOMIC_NONE); }},
      {"rwin_get", [&] { return rwin_get(nullptr, &s, 0, &s); }},
      {"rwin_put_nbi", [&] { return rwin_put_nbi(nullptr, &s, 0, &s); }},
      {"rwin_get_nbi", [&] { return rwin_get_nbi(nullptr, &s, 0, &s); }},
      {"rwin_put_local", [&] { return rwin_put_local(nullptr, &s, 0, &l, RWIN_ATOMIC_NONE); }},
      {"rwin_get_local", [&] { return rwin_get_local(nullptr, &l, 0, &s); }},
      {"rwin_put_local_nbi", [&] { return rwin_put_local_nbi(nullptr, &s, 0, &l); }},
      {"rwin_get_local_nbi", [&] { return rwin_get_local_nbi(nullptr, &l, 0, &s); }},
      {"rwin_deregister", [&] { return rwin_deregister(nullptr, &i); }},
      {"rwin_fence", [&] { return rwin_fence(nullptr, 0); }},
      {"rwin_quiet", [&] { return rwin_quiet(nullptr); }},
      {"rwin_barrier", [&] { return rwin_barrier(nullptr); }},
      {"rwin_notify", [&] { return rwin_notify(nullptr, &ss, 0, 1, RWIN_NOTIFY_ADD); }},
      {"rwin_notify_window", [&] { return rwin_notify_window(nullptr, &s, 0, 1, RWIN_NOTIFY_SET); }},
      {"rwin_wait", [&] { return rwin_wait(nullptr, &ss, 1, RWIN_CMP_GE, 0); }},
      {"rwin_wait_window", [&] { return rwin_wait_window(nullptr, &s, 1, RWIN_CMP_GE, 0); }},
      {"rwin_test", [&] { return rwin_test(nullptr, &ss, 1, RWIN_CMP_GE, &i); }},
      {"rwin_test_window", [&] { return rwin_test_window(nullptr, &s, 1, RWIN_CMP_GE, &i); }},
      {"rwin_fetch_add", [&] { return rwin_fetch_add(nullptr, &s, 0, 1, &v); }},
      {"rwin_compare_swap", [&] { return rwin_compare_swap(nullptr, &s, 0, 0, 1, &v); }},
      {"rwin_swap", [&] { return rwin_swap(nullptr, &s, 0, 1, &v); }},
      {"rwin_atomic_fetch", [&] { return rwin_atomic_fetch(nullptr, &s, 0, &v); }},
      {"rwin_signal_fetch_add", [&] { return rwin_signal_fetch_add(nullptr, &ss, 0, 1, &v); }},
      {"rwin_signal_compare_swap", [&] { return rwin_signal_compare_swap(nullptr, &ss, 0, 0, 1, &v); }},
      {"rwin_signal_swap", [&] { return rwin_signal_swap(nullptr, &ss, 0, 1, &v); }},
      {"rwin_signal_atomic_fetch", [&] { return rwin_signal_atomic_fetch(nullptr, &ss, 0, &v); }},
      {"rwin_allreduce", [&] { return rwin_allreduce(nullptr, nullptr, RWIN_REDUCE_SUM); }},
      {"rwin_allreduce_to", [&] { return rwin_allreduce_to(nullptr, nullptr, nullptr, RWIN_REDUCE_SUM); }},
      {"rwin_broadcast", [&] { return rwin_broadcast(nullptr, nullptr, 0); }},
      {"rwin_allgather", [&] { return rwin_allgather(nullptr, nullptr, nullptr); }},
      {"rwin_reduce_scatter", [&] { return rwin_reduce_scatter(nullptr, nullptr, RWIN_REDUCE_SUM); }},
      {"rwin_reduce_scatter_to", [&] { return rwin_reduce_scatter_to(nullptr, nullptr, nullptr, RWIN_REDUCE_SUM); }},
      {"rwin_all_to_all", [&] { return rwin_all_to_all(nullptr, nullptr, nullptr); }},
      {"rwin_all_to_all_v", [&] { return rwin_all_to_all_v(nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr); }},
      {"rwin_barrier_collective", [&] { return rwin_barrier_collective(nullptr); }},
      {"rwin_start_allreduce", [&] { return rwin_start_allreduce(nullptr, nullptr, RWIN_REDUCE_SUM, &rq); }},
      {"rwin_start_allreduce_to", [&] { return rwin_start_allreduce_to(nullptr, nullptr, nullptr, RWIN_REDUCE_SUM, &rq); }},
      {"rwin_start_broadcast", [&] { return rwin_start_broadcast(nullptr, nullptr, 0, &rq); }},
      {"rwin_start_allgather", [&] { return rwin_start_allgather(nullptr, nullptr, nullptr, &rq); }},
      {"rwin_start_reduce_scatter", [&] { return rwin_start_reduce_scatter(nullptr, nullptr, RWIN_REDUCE_SUM, &rq); }},
      {"rwin_start_reduce_scatter_to",
       [&] { return rwin_start_reduce_scatter_to(nullptr, nullptr, nullptr, RWIN_REDUCE_SUM, &rq); }},
      {"rwin_start_all_to_all", [&] { return rwin_start_all_to_all(nullptr, nullptr, nullptr, &rq); }},
      {"rwin_start_all_to_all_v",
       [&] { return rwin_start_all_to_all_v(nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, &rq); }},
      {"rwin_start_barrier_collective", [&] { return rwin_start_barrier_collective(nullptr, &rq); }},
      {"rwin_request_test", [&] { return rwin_request_test(nullptr, &i); }},
      {"rwin_request_wait", [&] { return rwin_request_wait(nullptr); }},
      // Handle-only calls: NULL handle.
      {"rwin_buffer_data", [&] { return rwin_buffer_data(nullptr, &p); }},
      {"rwin_buffer_bytes",
       [&] {
         size_t n;
         return rwin_buffer_bytes(nullptr, &n);
       }},
      {"rwin_window_data", [&] { return rwin_window_data(nullptr, &p); }},
      {"rwin_window_shape", [&] { return rwin_window_shape(nullptr, &v, &v); }},
      {"rwin_window_dtype",
       [&] {
         rwin_dtype_t d;
         return rwin_window_dtype(nullptr, &d);
       }},
      {"rwin_signals_size", [&] { return rwin_signals_size(nullptr, &v); }},
      {"rwin_signals_load", [&] { return rwin_signals_load(nullptr, 0, &v); }},
      {"rwin_signals_store", [&] { return rwin_signals_store(nullptr, 0, 1); }},
      {"rwin_context_create_with_store",
       [&] {
         rwin_context_t* c = nullptr;
         return rwin_context_create_with_store(nullptr, nullptr, 0, 1, nullptr, &c);
       }},
  };
  for (const auto& [name, call] : calls) {
    SCOPED_TRACE(name);
    expect_fail(call(), RWIN_ERR_INVALID_ARGUMENT, {name, "is NULL"});
  }
  EXPECT_EQ(win, nullptr);
  EXPECT_EQ(b, nullptr);
  EXPECT_EQ(sg, nullptr);
  EXPECT_EQ(rq, nullptr);
  // Destroying or releasing NULL, and freeing with no context: no-ops.
  rwin_request_release(nullptr);
  rwin_context_destroy(nullptr);
  rwin_buffer_release(nullptr);
  rwin_window_release(nullptr);
  rwin_signals_release(nullptr);
  EXPECT_EQ(rwin_buffer_free(nullptr, nullptr), RWIN_OK);
  EXPECT_EQ(rwin_window_free(nullptr, nullptr), RWIN_OK);
  EXPECT_EQ(rwin_signals_free(nullptr, nullptr), RWIN_OK);
}

TEST(CApiNoContext, StoreRefusedOrFailing) {
  rwin_context_t* c = reinterpret_cast<rwin_context_t*>(&c);  // must come back NULL
  MemStore st;
  rwin_store_ops_t partial = mem_ops;
  partial.wait = nullptr;
  expect_fail(rwin_context_create_with_store(&partial, &st, 0, 1, nullptr, &c), RWIN_ERR_INVALID_ARGUMENT, {"wait"});
  EXPECT_EQ(c, nullptr);
  EXPECT_EQ(st.released, 1);  // released also when refused
  st.fail_with = 7;
  rwin_options_t o;
  rwin_options_init(&o);
  o.startup_timeout_ms = 5000;
  expect_fail(rwin_context_create_with_store(&mem_ops, &st, 0, 1, &o, &c), RWIN_ERR_BOOTSTRAP, {"returned 7"});
  EXPECT_EQ(c, nullptr);
  EXPECT_EQ(st.released, 2);
  st.fail_with = 0;
  expect_fail(rwin_context_create_with_store(&mem_ops, &st, 1, 1, &o, &c), RWIN_ERR_INVALID_ARGUMENT, {});
  EXPECT_EQ(st.released, 3);
  o.struct_size = 8;  // an options struct rwin_options_init never saw
  expect_fail(rwin_context_create_with_store(&mem_ops, &st, 0, 1, &o, &c), RWIN_ERR_INVALID_ARGUMENT, {"struct_size"});
  EXPECT_EQ(st.released, 4);
  expect_fail(rwin_context_create(nullptr, nullptr), RWIN_ERR_INVALID_ARGUMENT, {"rwin_context_create", "out"});
}

TEST_F(CApi, NullOutPointersAndArguments) {
  rwin_slice_t s = rwin_window_slice(w, 0, 0, 1, 1);
  rwin_signal_slice_t ss = rwin_signal_at(sig, 0);
  expect_fail(rwin_context_rank(ctx, nullptr), RWIN_ERR_INVALID_ARGUMENT, {"rwin_context_rank", "out"});
  expect_fail(rwin_context_size(ctx, nullptr), RWIN_ERR_INVALID_ARGUMENT, {"out"});
  expect_fail(rwin_alloc_window(ctx, "x", RWIN_I32, 1, 1, nullptr), RWIN_ERR_INVALID_ARGUMENT, {"out"});
  expect_fail(rwin_alloc_window_buffer(ctx, "x", 64, nullptr), RWIN_ERR_INVALID_ARGUMENT, {"out"});
  expect_fail(rwin_alloc_signals(ctx, "x", 1, nullptr), RWIN_ERR_INVALID_ARGUMENT, {"out"});
  rwin_window_t* none = nullptr;
  expect_fail(rwin_alloc_window(ctx, nullptr, RWIN_I32, 1, 1, &none), RWIN_ERR_INVALID_ARGUMENT, {"name"});
  expect_fail(rwin_window_data(w, nullptr), RWIN_ERR_INVALID_ARGUMENT, {"out"});
  expect_fail(rwin_window_shape(w, nullptr, nullptr), RWIN_ERR_INVALID_ARGUMENT, {"rows"});
  expect_fail(rwin_window_dtype(w, nullptr), RWIN_ERR_INVALID_ARGUMENT, {"out"});
  expect_fail(rwin_signals_size(sig, nullptr), RWIN_ERR_INVALID_ARGUMENT, {"out"});
  expect_fail(rwin_signals_load(sig, 0, nullptr), RWIN_ERR_INVALID_ARGUMENT, {"out"});
  expect_fail(rwin_test(ctx, &ss, 0, RWIN_CMP_EQ, nullptr), RWIN_ERR_INVALID_ARGUMENT, {"satisfied"});
  expect_fail(rwin_test_window(ctx, &s, 0, RWIN_CMP_EQ, nullptr), RWIN_ERR_INVALID_ARGUMENT, {"satisfied"});
  for (auto st : {rwin_fetch_add(ctx, &s, 0, 1, nullptr), rwin_compare_swap(ctx, &s, 0, 0, 1, nullptr),
                  rwin_swap(ctx, &s, 0, 1, nullptr), rwin_atomic_fetch(ctx, &s, 0, nullptr),
                  rwin_signal_fetch_add(ctx, &ss, 0, 1, nullptr), rwin_signal_compare_swap(ctx, &ss, 0, 0, 1, nullptr),
                  rwin_signal_swap(ctx, &ss, 0, 1, nullptr), rwin_signal_atomic_fetch(ctx, &ss, 0, nullptr)}) {
    expect_fail(st, RWIN_ERR_INVALID_ARGUMENT, {"old is NULL"});
  }
  // NULL slices and slices of no window.
  expect_fail(rwin_put(ctx, nullptr, 0, &s, RWIN_ATOMIC_NONE), RWIN_ERR_INVALID_ARGUMENT, {"dst is NULL"});
  expect_fail(rwin_get(ctx, &s, 0, nullptr), RWIN_ERR_INVALID_ARGUMENT, {"src is NULL"});
  rwin_slice_t nowin = rwin_window_slice(nullptr, 0, 0, 1, 1);
  expect_fail(rwin_put_nbi(ctx, &nowin, 0, &s), RWIN_ERR_INVALID_ARGUMENT, {"dst->window is NULL"});
  rwin_signal_slice_t nosig = rwin_signal_at(nullptr, 0);
  expect_fail(rwin_notify(ctx, &nosig, 0, 1, RWIN_NOTIFY_ADD), RWIN_ERR_INVALID_ARGUMENT, {"signal->signals is NULL"});
  expect_fail(rwin_put_local(ctx, &s, 0, nullptr, RWIN_ATOMIC_NONE), RWIN_ERR_INVALID_ARGUMENT, {"src is NULL"});
  expect_fail(rwin_allreduce(ctx, nullptr, RWIN_REDUCE_SUM), RWIN_ERR_INVALID_ARGUMENT, {"x is NULL"});
  expect_fail(rwin_allgather(ctx, w, nullptr), RWIN_ERR_INVALID_ARGUMENT, {"data is NULL"});
  expect_fail(rwin_all_to_all_v(ctx, w, nullptr, nullptr, w, nullptr, nullptr), RWIN_ERR_INVALID_ARGUMENT,
              {"send_counts is NULL"});
}

// Values outside each enumerated type (int32_t in the ABI, so any int may arrive): InvalidArgument.
TEST_F(CApi, BadEnums) {
  rwin_window_t* none = nullptr;
  expect_fail(rwin_alloc_window(ctx, "x", 12, 1, 1, &none), RWIN_ERR_INVALID_ARGUMENT, {"dtype 12"});
  EXPECT_EQ(none, nullptr);
  rwin_buffer_t* b = nullptr;
  ASSERT_EQ(rwin_alloc_window_buffer(ctx, "eb", 4096, &b), RWIN_OK) << rwin_last_error();
  expect_fail(rwin_window_view(ctx, b, 99, 1, 1, 0, &none), RWIN_ERR_INVALID_ARGUMENT, {"dtype 99"});
  EXPECT_EQ(rwin_buffer_free(ctx, b), RWIN_OK) << rwin_last_error();
  int64_t buf[4] = {};
  rwin_local_t l = {buf, -1, 1, 4, 0};
  rwin_slice_t s = rwin_window_slice(w, 0, 0, 1, 4), one = rwin_window_slice(w, 0, 0, 1, 1);
  expect_fail(rwin_put_local(ctx, &s, 0, &l, RWIN_ATOMIC_NONE), RWIN_ERR_INVALID_ARGUMENT, {"dtype -1"});
  expect_fail(rwin_put(ctx, &s, 0, &s, 2), RWIN_ERR_INVALID_ARGUMENT, {"rwin_atomic_t"});
  l.dtype = RWIN_I64;
  expect_fail(rwin_put_local(ctx, &s, 0, &l, -5), RWIN_ERR_INVALID_ARGUMENT, {"rwin_atomic_t"});
  rwin_signal_slice_t ss = rwin_signal_at(sig, 0);
  expect_fail(rwin_notify(ctx, &ss, 0, 1, 2), RWIN_ERR_INVALID_ARGUMENT, {"rwin_notify_op_t"});
  expect_fail(rwin_notify_window(ctx, &one, 0, 1, 99), RWIN_ERR_INVALID_ARGUMENT, {"rwin_notify_op_t"});
  expect_fail(rwin_wait(ctx, &ss, 0, 6, 0), RWIN_ERR_INVALID_ARGUMENT, {"rwin_cmp_t"});
  expect_fail(rwin_wait_window(ctx, &one, 0, -1, 0), RWIN_ERR_INVALID_ARGUMENT, {"rwin_cmp_t"});
  int sat = 0;
  expect_fail(rwin_test(ctx, &ss, 0, 1 << 30, &sat), RWIN_ERR_INVALID_ARGUMENT, {"rwin_cmp_t"});
  expect_fail(rwin_test_window(ctx, &s, 0, 6, &sat), RWIN_ERR_INVALID_ARGUMENT, {"rwin_cmp_t"});
  expect_fail(rwin_allreduce(ctx, w, 4), RWIN_ERR_INVALID_ARGUMENT, {"rwin_reduce_op_t"});
  expect_fail(rwin_allreduce_to(ctx, w, w, -1), RWIN_ERR_INVALID_ARGUMENT, {"rwin_reduce_op_t"});
  expect_fail(rwin_reduce_scatter(ctx, w, 99), RWIN_ERR_INVALID_ARGUMENT, {"rwin_reduce_op_t"});
  expect_fail(rwin_reduce_scatter_to(ctx, w, w, 99), RWIN_ERR_INVALID_ARGUMENT, {"rwin_reduce_op_t"});
  EXPECT_EQ(rwin_dtype_size(99), 0u);
  EXPECT_STREQ(rwin_status_name(-3), "RWIN_ERR_UNKNOWN");
}

TEST_F(CApi, PeersBoundsAndFreedHandles) {
  rwin_slice_t s = rwin_window_slice(w, 0, 0, 1, 4), past = rwin_window_slice(w, 1, 2, 2, 4);
  rwin_signal_slice_t ss = rwin_signal_at(sig, 0);
  int64_t v = 0;
  expect_fail(rwin_put(ctx, &s, 1, &s, RWIN_ATOMIC_NONE), RWIN_ERR_PEER_OUT_OF_RANGE, {"1"});
  expect_fail(rwin_get(ctx, &s, -1, &s), RWIN_ERR_PEER_OUT_OF_RANGE, {"-1"});
  expect_fail(rwin_notify(ctx, &ss, 3, 1, RWIN_NOTIFY_ADD), RWIN_ERR_PEER_OUT_OF_RANGE, {});
  rwin_slice_t one = rwin_window_slice(w, 0, 0, 1, 1);
  expect_fail(rwin_fetch_add(ctx, &one, 2, 1, &v), RWIN_ERR_PEER_OUT_OF_RANGE, {});
  expect_fail(rwin_fence(ctx, 5), RWIN_ERR_PEER_OUT_OF_RANGE, {});
  expect_fail(rwin_fail_peer(ctx, 0, "self"), RWIN_ERR_INVALID_ARGUMENT, {});  // not another rank
  expect_fail(rwin_put(ctx, &past, 0, &s, RWIN_ATOMIC_NONE), RWIN_ERR_OUT_OF_BOUNDS, {"out of bounds"});
  expect_fail(rwin_signals_load(sig, 2, &v), RWIN_ERR_OUT_OF_BOUNDS, {"index 2"});
  expect_fail(rwin_wait(ctx, &ss, 1, RWIN_CMP_EQ, 0), RWIN_ERR_TIMEOUT, {});
  // A view of a buffer freed: UseAfterFree through the view's handle, which is still released cleanly.
  rwin_buffer_t* b = nullptr;
  rwin_window_t* view = nullptr;
  ASSERT_EQ(rwin_alloc_window_buffer(ctx, "b", 4096, &b), RWIN_OK) << rwin_last_error();
  expect_fail(rwin_window_view(ctx, b, RWIN_I64, 1, 1, 4, &view), RWIN_ERR_MISALIGNED, {});
  expect_fail(rwin_window_view(ctx, b, RWIN_I64, 1, 1000, 0, &view), RWIN_ERR_OUT_OF_BOUNDS, {});
  ASSERT_EQ(rwin_window_view(ctx, b, RWIN_I64, 2, 4, 64, &view), RWIN_OK) << rwin_last_error();
  ASSERT_EQ(rwin_buffer_free(ctx, b), RWIN_OK) << rwin_last_error();
  void* p = nullptr;
  expect_fail(rwin_window_data(view, &p), RWIN_ERR_USE_AFTER_FREE, {});
  rwin_slice_t vs = rwin_window_slice(view, 0, 0, 1, 1);
  expect_fail(rwin_put(ctx, &vs, 0, &s, RWIN_ATOMIC_NONE), RWIN_ERR_USE_AFTER_FREE, {});
  rwin_window_release(view);
}

// The happy path on one rank, so the calls above fail for their argument and not for a broken context.
TEST_F(CApi, OneRankRoundTrip) {
  int64_t* d = nullptr;
  ASSERT_EQ(rwin_window_data(w, reinterpret_cast<void**>(&d)), RWIN_OK);
  for (int i = 0; i < 8; ++i) d[i] = i;
  rwin_slice_t row0 = rwin_window_slice(w, 0, 0, 1, 4), row1 = rwin_window_slice(w, 1, 0, 1, 4);
  ASSERT_EQ(rwin_put(ctx, &row1, 0, &row0, RWIN_ATOMIC_ADD), RWIN_OK) << rwin_last_error();
  ASSERT_EQ(rwin_quiet(ctx), RWIN_OK);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(d[4 + i], 4 + i + i);
  int64_t old = -1;
  rwin_slice_t one = rwin_window_slice(w, 0, 3, 1, 1);
  ASSERT_EQ(rwin_fetch_add(ctx, &one, 0, 10, &old), RWIN_OK) << rwin_last_error();
  EXPECT_EQ(old, 3);
  ASSERT_EQ(rwin_compare_swap(ctx, &one, 0, 13, 20, &old), RWIN_OK);
  EXPECT_EQ(old, 13);
  ASSERT_EQ(rwin_atomic_fetch(ctx, &one, 0, &old), RWIN_OK);
  EXPECT_EQ(old, 20);
  rwin_signal_slice_t ss = rwin_signal_at(sig, 1);
  ASSERT_EQ(rwin_notify(ctx, &ss, 0, 5, RWIN_NOTIFY_SET), RWIN_OK);
  ASSERT_EQ(rwin_wait(ctx, &ss, 5, RWIN_CMP_EQ, -1), RWIN_OK) << rwin_last_error();
  int sat = 0;
  ASSERT_EQ(rwin_test_window(ctx, &one, 20, RWIN_CMP_EQ, &sat), RWIN_OK);
  EXPECT_EQ(sat, 1);
  ASSERT_EQ(rwin_allreduce(ctx, w, RWIN_REDUCE_MAX), RWIN_OK) << rwin_last_error();
  ASSERT_EQ(rwin_barrier_collective(ctx), RWIN_OK) << rwin_last_error();
  // all_to_all_v: the rank's block to itself, at explicit offsets; the offsets go NULL together.
  rwin_buffer_t* vb = nullptr;
  ASSERT_EQ(rwin_alloc_window_buffer(ctx, "a2av", 128, &vb), RWIN_OK) << rwin_last_error();
  rwin_window_t *vsend = nullptr, *vrecv = nullptr;
  ASSERT_EQ(rwin_window_view(ctx, vb, RWIN_I32, 1, 16, 0, &vsend), RWIN_OK) << rwin_last_error();
  ASSERT_EQ(rwin_window_view(ctx, vb, RWIN_I32, 1, 16, 64, &vrecv), RWIN_OK) << rwin_last_error();
  int32_t *sp = nullptr, *rp = nullptr;
  ASSERT_EQ(rwin_window_data(vsend, reinterpret_cast<void**>(&sp)), RWIN_OK);
  ASSERT_EQ(rwin_window_data(vrecv, reinterpret_cast<void**>(&rp)), RWIN_OK);
  for (int i = 0; i < 16; ++i) sp[i] = i, rp[i] = -1;
  const int64_t cnt = 3, soff = 5, roff = 9;
  ASSERT_EQ(rwin_all_to_all_v(ctx, vsend, &cnt, &soff, vrecv, &cnt, &roff), RWIN_OK) << rwin_last_error();
  for (int i = 0; i < 16; ++i) EXPECT_EQ(rp[i], i >= 9 && i < 12 ? i - 4 : -1) << i;
  expect_fail(rwin_all_to_all_v(ctx, vsend, &cnt, &soff, vrecv, &cnt, nullptr), RWIN_ERR_INVALID_ARGUMENT, {"both NULL"});
  // The same, started: the request reports it finished; the context is the caller's again after.
  for (int i = 0; i < 16; ++i) rp[i] = -1;
  rwin_request_t* req = nullptr;
  ASSERT_EQ(rwin_start_all_to_all_v(ctx, vsend, &cnt, &soff, vrecv, &cnt, &roff, &req), RWIN_OK) << rwin_last_error();
  ASSERT_NE(req, nullptr);
  ASSERT_EQ(rwin_request_wait(req), RWIN_OK) << rwin_last_error();
  int done = 0;
  ASSERT_EQ(rwin_request_test(req, &done), RWIN_OK) << rwin_last_error();
  EXPECT_EQ(done, 1);
  rwin_request_release(req);
  for (int i = 0; i < 16; ++i) EXPECT_EQ(rp[i], i >= 9 && i < 12 ? i - 4 : -1) << i;
  // A started allreduce with a bad op fails at once (no request); one released unwaited is finished
  // before the release returns (the barrier after it is the caller's).
  rwin_request_t* bad = nullptr;
  expect_fail(rwin_start_allreduce(ctx, w, 9, &bad), RWIN_ERR_INVALID_ARGUMENT, {"rwin_reduce_op_t"});
  EXPECT_EQ(bad, nullptr);
  ASSERT_EQ(rwin_start_barrier_collective(ctx, &req), RWIN_OK) << rwin_last_error();
  rwin_request_release(req);
  ASSERT_EQ(rwin_barrier(ctx), RWIN_OK) << rwin_last_error();
  rwin_window_release(vsend);
  rwin_window_release(vrecv);
  EXPECT_EQ(rwin_buffer_free(ctx, vb), RWIN_OK) << rwin_last_error();
  int r = -1, n = -1;
  ASSERT_EQ(rwin_context_rank(ctx, &r), RWIN_OK);
  ASSERT_EQ(rwin_context_size(ctx, &n), RWIN_OK);
  EXPECT_EQ(r, 0);
  EXPECT_EQ(n, 1);
}

// The non-blocking fetching atomics: *fetch holds the old value once quiet (or fence) returned; a NULL
// fetch, a bad peer or slice posts nothing.
TEST_F(CApi, NonBlockingFetchingAtomics) {
  int64_t* d = nullptr;
  ASSERT_EQ(rwin_window_data(w, reinterpret_cast<void**>(&d)), RWIN_OK);
  for (int i = 0; i < 8; ++i) d[i] = 100 + i;
  rwin_slice_t e0 = rwin_window_slice(w, 0, 0, 1, 1), e1 = rwin_window_slice(w, 0, 1, 1, 1);
  rwin_slice_t e2 = rwin_window_slice(w, 0, 2, 1, 1), e3 = rwin_window_slice(w, 0, 3, 1, 1);
  int64_t f[8] = {-1, -1, -1, -1, -1, -1, -1, -1};
  ASSERT_EQ(rwin_fetch_add_nbi(ctx, &e0, 0, 5, &f[0]), RWIN_OK) << rwin_last_error();
  ASSERT_EQ(rwin_compare_swap_nbi(ctx, &e1, 0, 101, 7, &f[1]), RWIN_OK) << rwin_last_error();
  ASSERT_EQ(rwin_swap_nbi(ctx, &e2, 0, 9, &f[2]), RWIN_OK) << rwin_last_error();
  ASSERT_EQ(rwin_atomic_fetch_nbi(ctx, &e3, 0, &f[3]), RWIN_OK) << rwin_last_error();
  ASSERT_EQ(rwin_quiet(ctx), RWIN_OK) << rwin_last_error();
  EXPECT_EQ(f[0], 100);
  EXPECT_EQ(f[1], 101);
  EXPECT_EQ(f[2], 102);
  EXPECT_EQ(f[3], 103);
  EXPECT_EQ(d[0], 105);
  EXPECT_EQ(d[1], 7);
  EXPECT_EQ(d[2], 9);
  rwin_signal_slice_t s0 = rwin_signal_at(sig, 0), s1 = rwin_signal_at(sig, 1);
  ASSERT_EQ(rwin_notify(ctx, &s0, 0, 40, RWIN_NOTIFY_SET), RWIN_OK);
  ASSERT_EQ(rwin_quiet(ctx), RWIN_OK);
  ASSERT_EQ(rwin_signal_fetch_add_nbi(ctx, &s0, 0, 2, &f[4]), RWIN_OK) << rwin_last_error();
  ASSERT_EQ(rwin_fence(ctx, 0), RWIN_OK) << rwin_last_error();  // ordered: the CAS sees 42
  ASSERT_EQ(rwin_signal_compare_swap_nbi(ctx, &s0, 0, 42, 50, &f[5]), RWIN_OK) << rwin_last_error();
  ASSERT_EQ(rwin_signal_swap_nbi(ctx, &s1, 0, 3, &f[6]), RWIN_OK) << rwin_last_error();
  ASSERT_EQ(rwin_fence(ctx, 0), RWIN_OK);
  ASSERT_EQ(rwin_signal_atomic_fetch_nbi(ctx, &s1, 0, &f[7]), RWIN_OK) << rwin_last_error();
  ASSERT_EQ(rwin_quiet(ctx), RWIN_OK) << rwin_last_error();
  EXPECT_EQ(f[4], 40);
  EXPECT_EQ(f[5], 42);
  EXPECT_EQ(f[6], 0);
  EXPECT_EQ(f[7], 3);
  int64_t v = 0;
  ASSERT_EQ(rwin_signals_load(sig, 0, &v), RWIN_OK);
  EXPECT_EQ(v, 50);
  expect_fail(rwin_fetch_add_nbi(ctx, &e0, 0, 1, nullptr), RWIN_ERR_INVALID_ARGUMENT, {"rwin_fetch_add_nbi", "fetch is NULL"});
  expect_fail(rwin_swap_nbi(ctx, &e0, 1, 1, &f[0]), RWIN_ERR_PEER_OUT_OF_RANGE, {});
  expect_fail(rwin_signal_atomic_fetch_nbi(ctx, nullptr, 0, &f[0]), RWIN_ERR_INVALID_ARGUMENT, {"target"});
  rwin_slice_t two = rwin_window_slice(w, 0, 0, 1, 2);
  expect_fail(rwin_compare_swap_nbi(ctx, &two, 0, 0, 1, &f[0]), RWIN_ERR_INVALID_ARGUMENT, {});
  ASSERT_EQ(rwin_quiet(ctx), RWIN_OK);
  EXPECT_EQ(d[0], 105);  // nothing was posted by the refused calls
}

// Counters through C: a known sequence on one rank, every touched field checked; an old caller's shorter
// struct gets only what fits.
TEST_F(CApi, Stats) {
  rwin_stats_t before{};
  before.struct_size = sizeof before;
  ASSERT_EQ(rwin_context_stats(ctx, &before), RWIN_OK) << rwin_last_error();
  rwin_slice_t row0 = rwin_window_slice(w, 0, 0, 1, 4), row1 = rwin_window_slice(w, 1, 0, 1, 4);
  ASSERT_EQ(rwin_put(ctx, &row1, 0, &row0, RWIN_ATOMIC_NONE), RWIN_OK) << rwin_last_error();
  ASSERT_EQ(rwin_get(ctx, &row0, 0, &row1), RWIN_OK) << rwin_last_error();
  rwin_signal_slice_t ss = rwin_signal_at(sig, 0);
  ASSERT_EQ(rwin_notify(ctx, &ss, 0, 1, RWIN_NOTIFY_ADD), RWIN_OK);
  ASSERT_EQ(rwin_quiet(ctx), RWIN_OK);
  ASSERT_EQ(rwin_wait(ctx, &ss, 1, RWIN_CMP_GE, -1), RWIN_OK);
  rwin_stats_t after{};
  after.struct_size = sizeof after;
  ASSERT_EQ(rwin_context_stats(ctx, &after), RWIN_OK) << rwin_last_error();
  EXPECT_EQ(after.struct_size, sizeof after);
  EXPECT_EQ(after.total.puts - before.total.puts, 1u);
  EXPECT_EQ(after.total.put_bytes - before.total.put_bytes, 32u);
  EXPECT_EQ(after.total.gets - before.total.gets, 1u);
  EXPECT_EQ(after.total.get_bytes - before.total.get_bytes, 32u);
  EXPECT_EQ(after.total.notifies - before.total.notifies, 1u);
  EXPECT_EQ(after.quiets - before.quiets, 1u);
  EXPECT_EQ(after.waits - before.waits, 1u);
  EXPECT_EQ(after.waits_blocked - before.waits_blocked, 0u);
  EXPECT_EQ(after.failed_peers, 0u);
  rwin_peer_stats_t p{};
  p.struct_size = sizeof p;
  ASSERT_EQ(rwin_context_peer_stats(ctx, 0, &p), RWIN_OK) << rwin_last_error();
  EXPECT_EQ(p.puts, after.total.puts);
  EXPECT_EQ(p.notifies, after.total.notifies);
  // A caller whose struct ends after `puts` (an older header): nothing past it is written.
  struct {
    rwin_peer_stats_t head;
    uint64_t guard;
  } small{};
  small.head.struct_size = offsetof(rwin_peer_stats_t, put_bytes);
  small.head.put_bytes = 777;
  small.guard = 99;
  ASSERT_EQ(rwin_context_peer_stats(ctx, 0, &small.head), RWIN_OK) << rwin_last_error();
  EXPECT_EQ(small.head.puts, p.puts);
  EXPECT_EQ(small.head.put_bytes, 777u);
  EXPECT_EQ(small.guard, 99u);
  expect_fail(rwin_context_peer_stats(ctx, 1, &p), RWIN_ERR_PEER_OUT_OF_RANGE, {"peer 1"});
  expect_fail(rwin_context_stats(ctx, nullptr), RWIN_ERR_INVALID_ARGUMENT, {"out is NULL"});
  rwin_stats_t zero{};
  expect_fail(rwin_context_stats(ctx, &zero), RWIN_ERR_INVALID_ARGUMENT, {"struct_size 0"});
  expect_fail(rwin_context_stats(nullptr, &after), RWIN_ERR_INVALID_ARGUMENT, {"ctx is NULL"});
}

// The last error is per thread: another thread's failure does not replace this thread's message.
TEST(CApiNoContext, LastErrorIsPerThread) {
  EXPECT_NE(rwin_context_rank(nullptr, nullptr), RWIN_OK);
  const std::string mine = rwin_last_error();
  std::string theirs;
  std::thread([&] {
    EXPECT_STREQ(rwin_last_error(), "");
    EXPECT_NE(rwin_quiet(nullptr), RWIN_OK);
    theirs = rwin_last_error();
  }).join();
  EXPECT_EQ(rwin_last_error(), mine);
  EXPECT_NE(theirs, mine);
  EXPECT_NE(theirs.find("rwin_quiet"), std::string::npos);
}

// Agents: every call with a NULL agent or handle; then two agents in this process (each serving from its
// progress thread): descriptor through the caller's buffer, import, put_notify, wait, get, a revoked
// region failing its importer's put with a status naming it, handles released after their agent.
TEST(CApiAgent, NullHandles) {
  char buf[64];
  size_t n = 0;
  int sat = 0;
  rwin_region_t* r = nullptr;
  rwin_remote_region_t* rr = nullptr;
  const std::vector<std::pair<const char*, std::function<rwin_status_t()>>> calls = {
      {"rwin_agent_address", [&] { return rwin_agent_address(nullptr, buf, sizeof buf, &n); }},
      {"rwin_agent_register", [&] { return rwin_agent_register(nullptr, buf, sizeof buf, &r); }},
      {"rwin_region_descriptor", [&] { return rwin_region_descriptor(nullptr, buf, sizeof buf, &n); }},
      {"rwin_region_deregister", [&] { return rwin_region_deregister(nullptr); }},
      {"rwin_agent_import", [&] { return rwin_agent_import(nullptr, buf, sizeof buf, &rr); }},
      {"rwin_remote_region_bytes", [&] { return rwin_remote_region_bytes(nullptr, &n); }},
      {"rwin_agent_put", [&] { return rwin_agent_put(nullptr, nullptr, 0, buf, 1); }},
      {"rwin_agent_get", [&] { return rwin_agent_get(nullptr, buf, nullptr, 0, 1); }},
      {"rwin_agent_put_notify",
       [&] { return rwin_agent_put_notify(nullptr, nullptr, 0, buf, 1, nullptr, 0, 1, RWIN_NOTIFY_ADD); }},
      {"rwin_agent_notify", [&] { return rwin_agent_notify(nullptr, nullptr, 0, 1, RWIN_NOTIFY_ADD); }},
      {"rwin_agent_flush", [&] { return rwin_agent_flush(nullptr); }},
      {"rwin_agent_wait", [&] { return rwin_agent_wait(nullptr, nullptr, 0, 1, RWIN_CMP_GE, 0); }},
      {"rwin_agent_test", [&] { return rwin_agent_test(nullptr, nullptr, 0, 1, RWIN_CMP_GE, &sat); }},
      {"rwin_agent_progress", [&] { return rwin_agent_progress(nullptr); }},
      {"rwin_agent_create", [&] { return rwin_agent_create(nullptr, nullptr); }},
  };
  for (const auto& [name, call] : calls) {
    SCOPED_TRACE(name);
    expect_fail(call(), RWIN_ERR_INVALID_ARGUMENT, {name, "is NULL"});
  }
  EXPECT_EQ(r, nullptr);
  EXPECT_EQ(rr, nullptr);
  rwin_agent_destroy(nullptr);
  rwin_region_release(nullptr);
  rwin_remote_region_release(nullptr);
}

TEST(CApiAgent, TwoAgentsRoundTrip) {
  setenv("UCX_TLS", "tcp,self", 0);
  setenv("UCX_NET_DEVICES", "lo", 0);
  rwin_agent_options_t o;
  rwin_agent_options_init(&o);
  o.progress_thread = 1;
  rwin_agent_t *owner = nullptr, *user = nullptr;
  ASSERT_EQ(rwin_agent_create(&o, &owner), RWIN_OK) << rwin_last_error();
  o.op_timeout_ms = 5000;  // both serve from a thread: a revocation waits for the importer's answer
  ASSERT_EQ(rwin_agent_create(&o, &user), RWIN_OK) << rwin_last_error();

  size_t n = 0;
  ASSERT_EQ(rwin_agent_address(owner, nullptr, 0, &n), RWIN_OK) << rwin_last_error();
  std::string addr(n, '\0');
  char tiny[2];
  expect_fail(rwin_agent_address(owner, tiny, sizeof tiny, &n), RWIN_ERR_INVALID_ARGUMENT, {"needed"});
  ASSERT_EQ(rwin_agent_address(owner, addr.data(), addr.size(), &n), RWIN_OK);
  EXPECT_EQ(std::strlen(addr.c_str()) + 1, n);
  EXPECT_NE(addr.find("127.0.0.1:"), std::string::npos) << addr;

  std::vector<unsigned char> data(4096, 0);
  alignas(8) int64_t sig[2] = {};
  rwin_region_t *rd = nullptr, *rs = nullptr;
  ASSERT_EQ(rwin_agent_register(owner, data.data(), data.size(), &rd), RWIN_OK) << rwin_last_error();
  ASSERT_EQ(rwin_agent_register(owner, sig, sizeof sig, &rs), RWIN_OK) << rwin_last_error();
  auto descriptor = [](const rwin_region_t* r) {
    size_t len = 0;
    EXPECT_EQ(rwin_region_descriptor(r, nullptr, 0, &len), RWIN_OK) << rwin_last_error();
    std::vector<unsigned char> d(len);
    EXPECT_EQ(rwin_region_descriptor(r, d.data(), d.size(), &len), RWIN_OK) << rwin_last_error();
    return d;
  };
  const auto dd = descriptor(rd), ds = descriptor(rs);
  rwin_remote_region_t *xd = nullptr, *xs = nullptr;
  ASSERT_EQ(rwin_agent_import(user, dd.data(), dd.size(), &xd), RWIN_OK) << rwin_last_error();
  ASSERT_EQ(rwin_agent_import(user, ds.data(), ds.size(), &xs), RWIN_OK) << rwin_last_error();
  size_t bytes = 0;
  ASSERT_EQ(rwin_remote_region_bytes(xd, &bytes), RWIN_OK);
  EXPECT_EQ(bytes, data.size());
  rwin_remote_region_t* junk = nullptr;
  expect_fail(rwin_agent_import(user, "garbage", 7, &junk), RWIN_ERR_INVALID_ARGUMENT, {});
  EXPECT_EQ(junk, nullptr);

  const char msg[] = "hello from C";
  ASSERT_EQ(rwin_agent_put_notify(user, xd, 100, msg, sizeof msg, xs, 8, 1, RWIN_NOTIFY_ADD), RWIN_OK)
      << rwin_last_error();
  ASSERT_EQ(rwin_agent_wait(owner, rs, 8, 1, RWIN_CMP_GE, -1), RWIN_OK) << rwin_last_error();
  EXPECT_STREQ(reinterpret_cast<const char*>(data.data() + 100), msg);
  char back[sizeof msg] = {};
  ASSERT_EQ(rwin_agent_get(user, back, xd, 100, sizeof back), RWIN_OK) << rwin_last_error();
  EXPECT_STREQ(back, msg);
  ASSERT_EQ(rwin_agent_notify(user, xs, 0, 7, RWIN_NOTIFY_SET), RWIN_OK) << rwin_last_error();
  ASSERT_EQ(rwin_agent_flush(user), RWIN_OK) << rwin_last_error();
  int sat = 0;
  ASSERT_EQ(rwin_agent_test(owner, rs, 0, 7, RWIN_CMP_EQ, &sat), RWIN_OK) << rwin_last_error();
  EXPECT_EQ(sat, 1);
  expect_fail(rwin_agent_wait(owner, rs, 0, 8, RWIN_CMP_EQ, 0), RWIN_ERR_TIMEOUT, {});
  expect_fail(rwin_agent_wait(owner, rs, 0, 8, 9, 0), RWIN_ERR_INVALID_ARGUMENT, {"rwin_cmp_t"});
  EXPECT_EQ(rwin_agent_progress(user), RWIN_OK);

  ASSERT_EQ(rwin_region_deregister(rd), RWIN_OK) << rwin_last_error();
  const rwin_status_t st = rwin_agent_put(user, xd, 0, msg, sizeof msg);
  EXPECT_NE(st, RWIN_OK) << "a put into a revoked region";
  EXPECT_NE(std::string(rwin_last_error()).find("region"), std::string::npos) << rwin_last_error();

  rwin_agent_destroy(user);
  rwin_agent_destroy(owner);
  // Handles outlive their agents: releasing them afterwards is clean.
  rwin_remote_region_release(xs);
  rwin_remote_region_release(xd);
  rwin_region_release(rs);
  rwin_region_release(rd);
}

// Domains: every call with a NULL handle; then two ranks' domains in this process through the whole
// transaction (a foreign table refused and the domain still prepared, abort, import, commit), data and
// signals both ways, fail_peer ending a wait, release and destroy.
TEST(CApiDomain, NullHandles) {
  char buf[8];
  size_t n = 0;
  int sat = 0;
  rwin_domain_state_t st{};
  rwin_domain_t* d = nullptr;
  const std::vector<std::pair<const char*, std::function<rwin_status_t()>>> calls = {
      {"rwin_domain_prepare", [&] { return rwin_domain_prepare(1, 0, 1, 64, nullptr, nullptr); }},
      {"rwin_domain_descriptor", [&] { return rwin_domain_descriptor(nullptr, buf, sizeof buf, &n); }},
      {"rwin_domain_local", [&] { return rwin_domain_local(nullptr, nullptr, nullptr, nullptr, nullptr); }},
      {"rwin_domain_state", [&] { return rwin_domain_state(nullptr, &st); }},
      {"rwin_domain_import", [&] { return rwin_domain_import(nullptr, nullptr, nullptr, 0); }},
      {"rwin_domain_commit", [&] { return rwin_domain_commit(nullptr); }},
      {"rwin_domain_abort", [&] { return rwin_domain_abort(nullptr); }},
      {"rwin_domain_release", [&] { return rwin_domain_release(nullptr); }},
      {"rwin_domain_put", [&] { return rwin_domain_put(nullptr, 0, 0, buf, 1); }},
      {"rwin_domain_get", [&] { return rwin_domain_get(nullptr, buf, 0, 0, 1); }},
      {"rwin_domain_put_notify", [&] { return rwin_domain_put_notify(nullptr, 0, 0, buf, 1, 0, 1, RWIN_NOTIFY_ADD); }},
      {"rwin_domain_notify", [&] { return rwin_domain_notify(nullptr, 0, 0, 1, RWIN_NOTIFY_ADD); }},
      {"rwin_domain_flush", [&] { return rwin_domain_flush(nullptr); }},
      {"rwin_domain_wait", [&] { return rwin_domain_wait(nullptr, 0, 1, RWIN_CMP_GE, 0); }},
      {"rwin_domain_test", [&] { return rwin_domain_test(nullptr, 0, 1, RWIN_CMP_GE, &sat); }},
      {"rwin_domain_fail_peer", [&] { return rwin_domain_fail_peer(nullptr, 0, "x"); }},
  };
  for (const auto& [name, call] : calls) {
    SCOPED_TRACE(name);
    expect_fail(call(), RWIN_ERR_INVALID_ARGUMENT, {name, "is NULL"});
  }
  EXPECT_EQ(d, nullptr);
  rwin_domain_destroy(nullptr);
  rwin_domain_options_init(nullptr);
}

TEST(CApiDomain, TwoRanksTransactionDataAndFailure) {
  setenv("UCX_TLS", "tcp,self", 0);
  setenv("UCX_NET_DEVICES", "lo", 0);
  rwin_domain_options_t o;
  rwin_domain_options_init(&o);
  EXPECT_EQ(o.agent.progress_thread, 1);
  EXPECT_EQ(o.signals, 64u);
  o.signals = 4;
  o.agent.op_timeout_ms = 10000;
  rwin_domain_t *a = nullptr, *b = nullptr, *foreign = nullptr;
  ASSERT_EQ(rwin_domain_prepare(0x77, 0, 2, 4096, &o, &a), RWIN_OK) << rwin_last_error();
  ASSERT_EQ(rwin_domain_prepare(0x77, 1, 2, 4096, &o, &b), RWIN_OK) << rwin_last_error();
  ASSERT_EQ(rwin_domain_prepare(0x78, 0, 2, 4096, &o, &foreign), RWIN_OK) << rwin_last_error();
  rwin_domain_t* bad = nullptr;
  expect_fail(rwin_domain_prepare(1, 2, 2, 64, &o, &bad), RWIN_ERR_PEER_OUT_OF_RANGE, {"rank 2"});
  EXPECT_EQ(bad, nullptr);
  auto descriptor = [](const rwin_domain_t* d) {
    size_t len = 0;
    EXPECT_EQ(rwin_domain_descriptor(d, nullptr, 0, &len), RWIN_OK) << rwin_last_error();
    EXPECT_LE(len, size_t(RWIN_DOMAIN_MAX_DESCRIPTOR_BYTES));
    std::vector<unsigned char> v(len);
    EXPECT_EQ(rwin_domain_descriptor(d, v.data(), v.size(), &len), RWIN_OK) << rwin_last_error();
    return v;
  };
  const auto da = descriptor(a), db = descriptor(b), df = descriptor(foreign);
  const void* good[2] = {da.data(), db.data()};
  const size_t good_lens[2] = {da.size(), db.size()};
  const void* wrong[2] = {df.data(), db.data()};
  const size_t wrong_lens[2] = {df.size(), db.size()};
  expect_fail(rwin_domain_import(b, wrong, wrong_lens, 2), RWIN_ERR_INVALID_ARGUMENT, {"entry 0", "foreign"});
  expect_fail(rwin_domain_import(b, good, good_lens, 1), RWIN_ERR_INVALID_ARGUMENT, {"1 descriptors"});
  const void* holes[2] = {da.data(), nullptr};
  expect_fail(rwin_domain_import(b, holes, good_lens, 2), RWIN_ERR_INVALID_ARGUMENT, {"descriptors[1] is NULL"});
  rwin_domain_state_t st{};
  ASSERT_EQ(rwin_domain_state(b, &st), RWIN_OK);
  EXPECT_EQ(st, RWIN_DOMAIN_PREPARED);
  const char msg[] = "domain from C";
  expect_fail(rwin_domain_put(b, 0, 0, msg, sizeof msg), RWIN_ERR_INVALID_ARGUMENT, {"must be committed"});
  ASSERT_EQ(rwin_domain_import(b, good, good_lens, 2), RWIN_OK) << rwin_last_error();
  ASSERT_EQ(rwin_domain_abort(b), RWIN_OK) << rwin_last_error();
  for (rwin_domain_t* d : {a, b}) {
    ASSERT_EQ(rwin_domain_import(d, good, good_lens, 2), RWIN_OK) << rwin_last_error();
    ASSERT_EQ(rwin_domain_commit(d), RWIN_OK) << rwin_last_error();
  }
  ASSERT_EQ(rwin_domain_state(a, &st), RWIN_OK);
  EXPECT_EQ(st, RWIN_DOMAIN_COMMITTED);
  void* wa = nullptr;
  int64_t* sa = nullptr;
  size_t wbytes = 0, nsig = 0;
  ASSERT_EQ(rwin_domain_local(a, &wa, &wbytes, &sa, &nsig), RWIN_OK) << rwin_last_error();
  EXPECT_EQ(wbytes, 4096u);
  EXPECT_EQ(nsig, 4u);
  ASSERT_EQ(rwin_domain_put_notify(b, 0, 100, msg, sizeof msg, 2, 1, RWIN_NOTIFY_ADD), RWIN_OK) << rwin_last_error();
  ASSERT_EQ(rwin_domain_wait(a, 2, 1, RWIN_CMP_EQ, -1), RWIN_OK) << rwin_last_error();
  EXPECT_STREQ(static_cast<const char*>(wa) + 100, msg);
  EXPECT_EQ(sa[2], 1);
  char back[sizeof msg] = {};
  ASSERT_EQ(rwin_domain_get(b, back, 0, 100, sizeof back), RWIN_OK) << rwin_last_error();
  EXPECT_STREQ(back, msg);
  ASSERT_EQ(rwin_domain_put(a, 1, 0, msg, sizeof msg), RWIN_OK) << rwin_last_error();
  ASSERT_EQ(rwin_domain_notify(a, 1, 3, 7, RWIN_NOTIFY_SET), RWIN_OK) << rwin_last_error();
  ASSERT_EQ(rwin_domain_flush(a), RWIN_OK) << rwin_last_error();
  int sat = 0;
  ASSERT_EQ(rwin_domain_test(b, 3, 7, RWIN_CMP_EQ, &sat), RWIN_OK) << rwin_last_error();
  EXPECT_EQ(sat, 1);
  expect_fail(rwin_domain_put(a, 1, 4090, msg, sizeof msg), RWIN_ERR_OUT_OF_BOUNDS, {"window of 4096 bytes"});
  expect_fail(rwin_domain_notify(a, 1, 4, 1, RWIN_NOTIFY_ADD), RWIN_ERR_OUT_OF_BOUNDS, {"signal 4"});
  expect_fail(rwin_domain_wait(a, 0, 1, 9, 0), RWIN_ERR_INVALID_ARGUMENT, {"rwin_cmp_t"});
  expect_fail(rwin_domain_wait(a, 0, 1, RWIN_CMP_GE, 20), RWIN_ERR_TIMEOUT, {"within 20 ms"});
  // The health lane, from another thread, while this one waits.
  std::thread lane([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    EXPECT_EQ(rwin_domain_fail_peer(a, 1, "lane says so"), RWIN_OK) << rwin_last_error();
  });
  expect_fail(rwin_domain_wait(a, 0, 1, RWIN_CMP_GE, 30000), RWIN_ERR_PEER_FAILED, {"rank 1 failed: lane says so"});
  lane.join();
  expect_fail(rwin_domain_put(a, 1, 0, msg, 1), RWIN_ERR_PEER_FAILED, {"rank 1 failed"});
  expect_fail(rwin_domain_fail_peer(a, 0, nullptr), RWIN_ERR_INVALID_ARGUMENT, {"is this rank"});
  ASSERT_EQ(rwin_domain_release(a), RWIN_OK);
  ASSERT_EQ(rwin_domain_state(a, &st), RWIN_OK);
  EXPECT_EQ(st, RWIN_DOMAIN_RELEASED);
  expect_fail(rwin_domain_put(a, 1, 0, msg, 1), RWIN_ERR_USE_AFTER_FREE, {"released"});
  EXPECT_STREQ(static_cast<const char*>(wa) + 100, msg);  // still mapped until destroy
  rwin_domain_destroy(a);
  rwin_domain_destroy(b);
  rwin_domain_destroy(foreign);
}

}  // namespace
