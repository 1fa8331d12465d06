/* rwin's C ABI: the C++ API of rwin/rwin.h, rwin/collectives.h, rwin/agent.h and rwin/domain.h behind plain
 * C11 calls.
 *
 * Every call returns an rwin_status_t and never lets a C++ exception out. After a call that did not
 * return RWIN_OK, rwin_last_error() is its message (per thread). Handles are opaque; every one made
 * by rwin is released by the matching free/release call, also when a call fails (docs/EMBEDDING.md,
 * "The C ABI", has the rules). The semantics of each call are those of the C++ call it names
 * (docs/CONTRACT.md).
 *
 * Thread safety, as in C++: a context and every handle made from it are used by one thread at a
 * time, except rwin_fail_peer (any thread, at any time) and the functions that touch no context
 * (rwin_last_error, rwin_status_name, rwin_dtype_size, rwin_version, rwin_*options_init). An agent
 * may be used from any thread (rwin/agent.h).
 *
 * The exported names are listed in core/rwin_c.symbols; tests/scripts/c_abi_symbols.sh fails when one
 * of them disappears from librwin. Named values never change; new ones are appended. */
#ifndef RWIN_RWIN_C_H
#define RWIN_RWIN_C_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------------------------------
 * The enumerated types below are int32_t with named values, not C enums: a caller may pass any int, and
 * a value outside the list is RWIN_ERR_INVALID_ARGUMENT, never undefined behaviour on the C++ side.
 *
 * Status codes: RWIN_OK, rwin::ErrorCode in its order, then the failures that are not rwin::Errors. */
typedef int32_t rwin_status_t;
enum {
  RWIN_OK = 0,
  RWIN_ERR_INVALID_ARGUMENT = 1,    /* also a NULL handle or out pointer, a value out of its type */
  RWIN_ERR_PEER_OUT_OF_RANGE = 2,
  RWIN_ERR_OUT_OF_BOUNDS = 3,
  RWIN_ERR_SHAPE_MISMATCH = 4,
  RWIN_ERR_DTYPE_MISMATCH = 5,
  RWIN_ERR_MISALIGNED = 6,
  RWIN_ERR_WINDOW_MISMATCH = 7,
  RWIN_ERR_USE_AFTER_FREE = 8,
  RWIN_ERR_TIMEOUT = 9,
  RWIN_ERR_PEER_FAILED = 10,
  RWIN_ERR_TRANSPORT = 11,
  RWIN_ERR_BOOTSTRAP = 12,
  RWIN_ERR_UNSUPPORTED = 13,
  RWIN_ERR_COLLECTIVE_MISMATCH = 14,
  RWIN_ERR_NO_MEMORY = 15, /* std::bad_alloc */
  RWIN_ERR_INTERNAL = 16   /* any other exception: a bug in rwin; the message says what it was */
};

/* "RWIN_OK", "RWIN_ERR_OUT_OF_BOUNDS", ...; "RWIN_ERR_UNKNOWN" for a value not listed above. */
const char* rwin_status_name(rwin_status_t status);
/* The message of the last call on this thread that did not return RWIN_OK ("" if none): valid until
 * the next failing call on this thread. A successful call leaves it as it was. */
const char* rwin_last_error(void);
/* "MAJOR.MINOR.PATCH" of the librwin this process runs. */
const char* rwin_version(void);

/* ------------------------------------------------------------------------------------------------
 * Element types (the numeric values are rwin::DType's, the ones window descriptors carry) and operations */
typedef int32_t rwin_dtype_t;
enum {
  RWIN_I32 = 0, RWIN_I64 = 1, RWIN_U32 = 2, RWIN_U64 = 3, RWIN_F32 = 4, RWIN_F64 = 5,
  RWIN_F16 = 6, RWIN_BF16 = 7, RWIN_I8 = 8, RWIN_I16 = 9, RWIN_U8 = 10, RWIN_U16 = 11
};
size_t rwin_dtype_size(rwin_dtype_t dtype); /* bytes per element; 0 for a value not listed above */

typedef int32_t rwin_atomic_t; /* put: copy or add */
enum { RWIN_ATOMIC_NONE = 0, RWIN_ATOMIC_ADD = 1 };
typedef int32_t rwin_notify_op_t;
enum { RWIN_NOTIFY_ADD = 0, RWIN_NOTIFY_SET = 1 };
typedef int32_t rwin_cmp_t;
enum { RWIN_CMP_EQ = 0, RWIN_CMP_NE = 1, RWIN_CMP_GT = 2, RWIN_CMP_GE = 3, RWIN_CMP_LT = 4, RWIN_CMP_LE = 5 };
typedef int32_t rwin_reduce_op_t;
enum { RWIN_REDUCE_SUM = 0, RWIN_REDUCE_MAX = 1, RWIN_REDUCE_MIN = 2, RWIN_REDUCE_PROD = 3 };

/* ------------------------------------------------------------------------------------------------
 * Options (rwin::Options; docs/CONFIG.md). rwin_options_init fills the defaults: every field unset, so
 * the environment (RWIN_*) and the built-in defaults apply. NULL strings and 0 / -1 as noted are
 * "unset". struct_size lets a later librwin read an older program's struct: set by rwin_options_init,
 * leave it as it is. */
typedef struct rwin_options {
  size_t struct_size;
  int rank;                  /* -1: from the launcher */
  int nranks;                /* -1: from the launcher */
  const char* root;          /* "host:port" of the bootstrap store */
  const char* transport;     /* "auto" | "ucx" | "tcp" | "mixed" | "verbs"; NULL: RWIN_TRANSPORT, else "auto" */
  const char* ib_device;
  int ib_port;               /* 0: 1 */
  int gid_index;             /* -1: auto */
  const char* ucx_rma;       /* "auto" | "native" | "am" */
  int ucx_tcp_zcopy;         /* -1: RWIN_UCX_TCP_ZCOPY, else 0 */
  size_t chunk_bytes;        /* 0: the transport's default */
  int pipeline_depth;        /* 0: the transport's default */
  size_t accumulate_staging_bytes; /* 0: 4 MiB */
  int64_t startup_timeout_ms;      /* 0: RWIN_STARTUP_TIMEOUT_MS, else 60 s */
  int64_t op_timeout_ms;           /* 0: RWIN_TIMEOUT_MS, else 60 s */
  int spin_us;               /* -1: RWIN_SPIN_US, else automatic */
  const char* job_key;
  const char* bootstrap;     /* "auto" | "tcp" | "pmix" */
} rwin_options_t;
void rwin_options_init(rwin_options_t* opts);

/* ------------------------------------------------------------------------------------------------
 * The caller's store (rwin/store.h): a table of callbacks over the caller's key-value store. `user` is
 * passed to each. Every callback returns RWIN_STORE_OK, RWIN_STORE_TIMEOUT where noted, or any other
 * value for a failure (the rwin call then fails with RWIN_ERR_BOOTSTRAP naming the callback, the key
 * and the value). Keys are NUL-terminated text; values are bytes. rwin owns every buffer it passes and
 * the callbacks own nothing rwin gave them after they return. Called from the thread using the context,
 * one call at a time per context. */
#define RWIN_STORE_OK 0
#define RWIN_STORE_TIMEOUT 1
typedef struct rwin_store_ops {
  /* Stores `len` bytes under `key`, replacing any value (`value` may be NULL when len is 0). */
  int (*set)(void* user, const char* key, const void* value, size_t len);
  /* Waits up to timeout_ms for `key`; RWIN_STORE_TIMEOUT if it still does not exist. Found: copies
   * min(value size, cap) bytes into `buf` (rwin's, `cap` bytes; NULL when cap is 0), sets *len to the
   * value's full size and returns RWIN_STORE_OK. When *len > cap rwin calls again with a buffer of
   * *len bytes (the key exists then: the second call should not wait). */
  int (*get)(void* user, const char* key, int64_t timeout_ms, void* buf, size_t cap, size_t* len);
  /* Adds `delta` to the 64-bit counter at `key` (missing: 0) atomically; the new value in *result. */
  int (*add)(void* user, const char* key, int64_t delta, int64_t* result);
  /* Non-blocking: *all_exist = 1 if every one of the `n` keys exists now, else 0. */
  int (*check)(void* user, const char* const* keys, size_t n, int* all_exist);
  /* Waits up to timeout_ms until every one of the `n` keys exists (RWIN_STORE_OK) or
   * returns RWIN_STORE_TIMEOUT. */
  int (*wait)(void* user, const char* const* keys, size_t n, int64_t timeout_ms);
  /* Optional (NULL: none): called once when rwin no longer uses the store (the context was destroyed,
   * or its creation failed), e.g. to free `user`. */
  void (*release)(void* user);
} rwin_store_ops_t;

/* ------------------------------------------------------------------------------------------------
 * Contexts */
typedef struct rwin_context rwin_context_t;
typedef struct rwin_buffer rwin_buffer_t;   /* a window buffer (rwin::WindowBuffer) */
typedef struct rwin_window rwin_window_t;   /* a typed 2-D view (rwin::Window) */
typedef struct rwin_signals rwin_signals_t; /* a signal array (rwin::SignalArray) */

/* Collective start-up from the launcher's environment (rwinrun, PMIx, RWIN_*), as rwin::Context(opts).
 * opts may be NULL (all defaults). On failure *out is NULL. */
rwin_status_t rwin_context_create(const rwin_options_t* opts, rwin_context_t** out);
/* Collective start-up on the caller's store as rank `rank` of `nranks` (rwin::Context(store, rank,
 * nranks, opts)). `ops` is copied; `user` must stay valid until ops->release is called (every call
 * that took `ops` calls release exactly once, also when it fails). */
rwin_status_t rwin_context_create_with_store(const rwin_store_ops_t* ops, void* user, int rank, int nranks,
                                             const rwin_options_t* opts, rwin_context_t** out);
/* Best effort quiet + bounded barrier, then every resource goes. NULL: no-op. Handles made from the
 * context must afterwards only be released (rwin_*_release or rwin_*_free with a NULL context). */
void rwin_context_destroy(rwin_context_t* ctx);
rwin_status_t rwin_context_rank(const rwin_context_t* ctx, int* out);
rwin_status_t rwin_context_size(const rwin_context_t* ctx, int* out);
/* rwin::Context::fail_peer: from any thread, never blocks. reason may be NULL. */
rwin_status_t rwin_fail_peer(rwin_context_t* ctx, int peer, const char* reason);

/* ------------------------------------------------------------------------------------------------
 * Window buffers, windows, signal arrays. alloc_* are collective (same name and size on every rank).
 * rwin_*_free(ctx, h) is the collective free of rwin::Context::free, then releases the handle; with
 * ctx NULL it only releases the handle (after rwin_context_destroy). rwin_*_release(h) releases the
 * handle only (the memory stays until freed or until the context goes). The handle is gone after
 * either call, whatever the status. NULL handle: no-op. */
rwin_status_t rwin_alloc_window_buffer(rwin_context_t* ctx, const char* name, size_t bytes, rwin_buffer_t** out);
rwin_status_t rwin_buffer_free(rwin_context_t* ctx, rwin_buffer_t* buffer);
void rwin_buffer_release(rwin_buffer_t* buffer);
rwin_status_t rwin_buffer_data(const rwin_buffer_t* buffer, void** out);
rwin_status_t rwin_buffer_bytes(const rwin_buffer_t* buffer, size_t* out);

/* A view of `buffer` (local, not collective): dtype[rows, cols] row-major from byte_offset. Release it
 * with rwin_window_release; its memory is freed with its buffer. */
rwin_status_t rwin_window_view(rwin_context_t* ctx, const rwin_buffer_t* buffer, rwin_dtype_t dtype, int64_t rows,
                               int64_t cols, uint64_t byte_offset, rwin_window_t** out);
/* Collective: a window with a buffer of its own; rwin_window_free frees it. */
rwin_status_t rwin_alloc_window(rwin_context_t* ctx, const char* name, rwin_dtype_t dtype, int64_t rows,
                                int64_t cols, rwin_window_t** out);
rwin_status_t rwin_window_free(rwin_context_t* ctx, rwin_window_t* window);
void rwin_window_release(rwin_window_t* window);
rwin_status_t rwin_window_data(const rwin_window_t* window, void** out); /* this rank's copy, row-major */
rwin_status_t rwin_window_shape(const rwin_window_t* window, int64_t* rows, int64_t* cols);
rwin_status_t rwin_window_dtype(const rwin_window_t* window, rwin_dtype_t* out);

rwin_status_t rwin_alloc_signals(rwin_context_t* ctx, const char* name, int64_t count, rwin_signals_t** out);
rwin_status_t rwin_signals_free(rwin_context_t* ctx, rwin_signals_t* signals);
void rwin_signals_release(rwin_signals_t* signals);
rwin_status_t rwin_signals_size(const rwin_signals_t* signals, int64_t* out);
rwin_status_t rwin_signals_load(const rwin_signals_t* signals, int64_t index, int64_t* out); /* atomic, local */
rwin_status_t rwin_signals_store(rwin_signals_t* signals, int64_t index, int64_t value);     /* atomic, local */

/* ------------------------------------------------------------------------------------------------
 * Slices, by value (rwin::Slice, rwin::SignalSlice, rwin::Local). A window slice is the rectangle
 * [row, row + rows) x [col, col + cols) of `window`; on the remote side of an operation it names the
 * peer's copy at the same place. Bounds are checked by the call that uses it (RWIN_ERR_OUT_OF_BOUNDS). */
typedef struct rwin_slice {
  const rwin_window_t* window;
  int64_t row, col;   /* offsets */
  int64_t rows, cols; /* shape */
} rwin_slice_t;
/* `count` signal words from word `index`. */
typedef struct rwin_signal_slice {
  const rwin_signals_t* signals;
  int64_t index;
  int64_t count;
} rwin_signal_slice_t;
/* Plain memory as the local side of a put (read) or get (written): dtype[rows, cols] with row_stride
 * elements between rows (0: cols). */
typedef struct rwin_local {
  void* data;
  rwin_dtype_t dtype;
  int64_t rows, cols;
  int64_t row_stride;
} rwin_local_t;

static inline rwin_slice_t rwin_window_slice(const rwin_window_t* window, int64_t row, int64_t col, int64_t rows,
                                             int64_t cols) {
  rwin_slice_t s;
  s.window = window; s.row = row; s.col = col; s.rows = rows; s.cols = cols;
  return s;
}
static inline rwin_signal_slice_t rwin_signal_at(const rwin_signals_t* signals, int64_t index) {
  rwin_signal_slice_t s;
  s.signals = signals; s.index = index; s.count = 1;
  return s;
}

/* ------------------------------------------------------------------------------------------------
 * Data movement. Blocking put: returns when src may be reused; remote visibility comes with a later
 * notify to the peer, quiet or barrier. Blocking get: returns with the data in dst. *_nbi: posted;
 * complete after rwin_quiet or rwin_fence(peer). */
rwin_status_t rwin_put(rwin_context_t* ctx, const rwin_slice_t* dst, int peer, const rwin_slice_t* src,
                       rwin_atomic_t atomic);
rwin_status_t rwin_get(rwin_context_t* ctx, const rwin_slice_t* dst, int peer, const rwin_slice_t* src);
rwin_status_t rwin_put_nbi(rwin_context_t* ctx, const rwin_slice_t* dst, int peer, const rwin_slice_t* src);
rwin_status_t rwin_get_nbi(rwin_context_t* ctx, const rwin_slice_t* dst, int peer, const rwin_slice_t* src);
rwin_status_t rwin_put_local(rwin_context_t* ctx, const rwin_slice_t* dst, int peer, const rwin_local_t* src,
                             rwin_atomic_t atomic);
rwin_status_t rwin_get_local(rwin_context_t* ctx, const rwin_local_t* dst, int peer, const rwin_slice_t* src);
rwin_status_t rwin_put_local_nbi(rwin_context_t* ctx, const rwin_slice_t* dst, int peer, const rwin_local_t* src);
rwin_status_t rwin_get_local_nbi(rwin_context_t* ctx, const rwin_local_t* dst, int peer, const rwin_slice_t* src);
rwin_status_t rwin_deregister(rwin_context_t* ctx, const void* ptr);

rwin_status_t rwin_fence(rwin_context_t* ctx, int peer);
rwin_status_t rwin_quiet(rwin_context_t* ctx);
rwin_status_t rwin_barrier(rwin_context_t* ctx);

/* ------------------------------------------------------------------------------------------------
 * Signals. notify: ordered after every earlier put to `peer`. wait: blocks until every word satisfies
 * `word cmp expected`; timeout_ms < 0: the context's default deadline (rwin_options_t.op_timeout_ms).
 * test: one progress step, *satisfied = 1 or 0. The *_window forms take an int32/int64 window slice
 * (notify: exactly one element). */
rwin_status_t rwin_notify(rwin_context_t* ctx, const rwin_signal_slice_t* signal, int peer, int64_t value,
                          rwin_notify_op_t op);
rwin_status_t rwin_notify_window(rwin_context_t* ctx, const rwin_slice_t* signal, int peer, int64_t value,
                                 rwin_notify_op_t op);
rwin_status_t rwin_wait(rwin_context_t* ctx, const rwin_signal_slice_t* signal, int64_t expected, rwin_cmp_t cmp,
                        int64_t timeout_ms);
rwin_status_t rwin_wait_window(rwin_context_t* ctx, const rwin_slice_t* signal, int64_t expected, rwin_cmp_t cmp,
                               int64_t timeout_ms);
rwin_status_t rwin_test(rwin_context_t* ctx, const rwin_signal_slice_t* signal, int64_t expected, rwin_cmp_t cmp,
                        int* satisfied);
rwin_status_t rwin_test_window(rwin_context_t* ctx, const rwin_slice_t* signal, int64_t expected, rwin_cmp_t cmp,
                               int* satisfied);

/* ------------------------------------------------------------------------------------------------
 * Fetching atomics (blocking) on one element of `peer`'s copy: a one-element slice of an int32, int64,
 * uint32 or uint64 window, or one signal word (rwin_signal_*). *old = the value before, as the element's
 * type holds it (int32 sign-extended, uint32 zero-extended, uint64 as its bits). */
rwin_status_t rwin_fetch_add(rwin_context_t* ctx, const rwin_slice_t* target, int peer, int64_t value, int64_t* old);
rwin_status_t rwin_compare_swap(rwin_context_t* ctx, const rwin_slice_t* target, int peer, int64_t expected,
                                int64_t desired, int64_t* old);
rwin_status_t rwin_swap(rwin_context_t* ctx, const rwin_slice_t* target, int peer, int64_t value, int64_t* old);
rwin_status_t rwin_atomic_fetch(rwin_context_t* ctx, const rwin_slice_t* target, int peer, int64_t* old);
rwin_status_t rwin_signal_fetch_add(rwin_context_t* ctx, const rwin_signal_slice_t* target, int peer, int64_t value,
                                    int64_t* old);
rwin_status_t rwin_signal_compare_swap(rwin_context_t* ctx, const rwin_signal_slice_t* target, int peer,
                                       int64_t expected, int64_t desired, int64_t* old);
rwin_status_t rwin_signal_swap(rwin_context_t* ctx, const rwin_signal_slice_t* target, int peer, int64_t value,
                               int64_t* old);
rwin_status_t rwin_signal_atomic_fetch(rwin_context_t* ctx, const rwin_signal_slice_t* target, int peer,
                                       int64_t* old);
/* Non-blocking forms (OpenSHMEM's shmem_atomic_*_nbi): the same operations; the old value is written
 * to *fetch by the time rwin_quiet, rwin_barrier or rwin_fence(peer) returns RWIN_OK (not before: keep
 * *fetch alive and unread until then). If the operation fails, that call returns the failure and
 * *fetch is not written. A refused argument (NULL fetch, bad slice, bad peer) posts nothing. */
rwin_status_t rwin_fetch_add_nbi(rwin_context_t* ctx, const rwin_slice_t* target, int peer, int64_t value,
                                 int64_t* fetch);
rwin_status_t rwin_compare_swap_nbi(rwin_context_t* ctx, const rwin_slice_t* target, int peer, int64_t expected,
                                    int64_t desired, int64_t* fetch);
rwin_status_t rwin_swap_nbi(rwin_context_t* ctx, const rwin_slice_t* target, int peer, int64_t value, int64_t* fetch);
rwin_status_t rwin_atomic_fetch_nbi(rwin_context_t* ctx, const rwin_slice_t* target, int peer, int64_t* fetch);
rwin_status_t rwin_signal_fetch_add_nbi(rwin_context_t* ctx, const rwin_signal_slice_t* target, int peer,
                                        int64_t value, int64_t* fetch);
rwin_status_t rwin_signal_compare_swap_nbi(rwin_context_t* ctx, const rwin_signal_slice_t* target, int peer,
                                           int64_t expected, int64_t desired, int64_t* fetch);
rwin_status_t rwin_signal_swap_nbi(rwin_context_t* ctx, const rwin_signal_slice_t* target, int peer, int64_t value,
                                   int64_t* fetch);
rwin_status_t rwin_signal_atomic_fetch_nbi(rwin_context_t* ctx, const rwin_signal_slice_t* target, int peer,
                                           int64_t* fetch);

/* ------------------------------------------------------------------------------------------------
 * Counters (Context::stats, docs/OBSERVING.md). Set struct_size = sizeof the struct before the call:
 * rwin fills the fields that fit in it (a program built against an older, shorter struct keeps working). */
typedef struct rwin_peer_stats {
  size_t struct_size;
  uint64_t puts, put_bytes, put_adds, put_add_bytes, gets, get_bytes, chunks, notifies, fetching_atomics, fences;
} rwin_peer_stats_t;
typedef struct rwin_stats {
  size_t struct_size;
  rwin_peer_stats_t total; /* the sum over peers (its struct_size is set by rwin) */
  uint64_t waits, waits_blocked, wait_ns, tests, tests_satisfied, quiets, barriers, failed_peers;
  uint64_t reg_cache_hits, reg_cache_misses;
  uint64_t wrs, doorbells, signaled, inline_wrs, cqes, drained, striped, fence_reads;
} rwin_stats_t;
rwin_status_t rwin_context_stats(rwin_context_t* ctx, rwin_stats_t* out);
rwin_status_t rwin_context_peer_stats(rwin_context_t* ctx, int peer, rwin_peer_stats_t* out);

/* ------------------------------------------------------------------------------------------------
 * Collectives over the whole job (rwin/collectives.h, world(ctx)): every rank calls them in the same
 * order with matching windows. Shapes: allgather stage [1, S] -> data [N, S]; reduce_scatter data
 * [N, S] (row rank() gets the result); all_to_all stage [N, S] -> data [N, S]. */
rwin_status_t rwin_allreduce(rwin_context_t* ctx, const rwin_window_t* x, rwin_reduce_op_t op); /* in place */
rwin_status_t rwin_allreduce_to(rwin_context_t* ctx, const rwin_window_t* src, const rwin_window_t* dst,
                                rwin_reduce_op_t op);
rwin_status_t rwin_broadcast(rwin_context_t* ctx, const rwin_window_t* x, int root);
rwin_status_t rwin_allgather(rwin_context_t* ctx, const rwin_window_t* stage, const rwin_window_t* data);
rwin_status_t rwin_reduce_scatter(rwin_context_t* ctx, const rwin_window_t* data, rwin_reduce_op_t op);
rwin_status_t rwin_reduce_scatter_to(rwin_context_t* ctx, const rwin_window_t* data, const rwin_window_t* out,
                                     rwin_reduce_op_t op);
rwin_status_t rwin_all_to_all(rwin_context_t* ctx, const rwin_window_t* stage, const rwin_window_t* data);
/* Variable all-to-all (Team::all_to_all_v): this rank sends send_counts[q] elements of `send` (from
 * element send_offsets[q]) to rank q, which stores them at element recv_offsets[my rank] of its `recv`;
 * recv_counts[p] must equal rank p's send_counts[my rank] (else RWIN_ERR_COLLECTIVE_MISMATCH). Each array
 * holds one entry per rank of the job; both offset arrays NULL: packed blocks. */
rwin_status_t rwin_all_to_all_v(rwin_context_t* ctx, const rwin_window_t* send, const int64_t* send_counts,
                                const int64_t* send_offsets, const rwin_window_t* recv, const int64_t* recv_counts,
                                const int64_t* recv_offsets);
/* The collectives' dissemination barrier (notify/wait); rwin_barrier is the context's. */
rwin_status_t rwin_barrier_collective(rwin_context_t* ctx);

/* Nonblocking forms (Team::start_*, rwin::CollectiveRequest): each starts the collective of the same
 * name and returns at once with *out, a request; the collective runs on the context's worker thread
 * while the caller computes. Until rwin_request_test set *done = 1 or rwin_request_wait returned,
 * every other call on the context fails with RWIN_ERR_INVALID_ARGUMENT ("lent to a nonblocking
 * collective") and the collective's windows must not be touched. A collective's error is returned
 * by rwin_request_test / rwin_request_wait (every time). rwin_request_release of an unfinished request
 * waits for it first (bounded by its deadline); NULL is a no-op. */
typedef struct rwin_request rwin_request_t;
rwin_status_t rwin_start_allreduce(rwin_context_t* ctx, const rwin_window_t* x, rwin_reduce_op_t op, rwin_request_t** out);
rwin_status_t rwin_start_allreduce_to(rwin_context_t* ctx, const rwin_window_t* src, const rwin_window_t* dst,
                                      rwin_reduce_op_t op, rwin_request_t** out);
rwin_status_t rwin_start_broadcast(rwin_context_t* ctx, const rwin_window_t* x, int root, rwin_request_t** out);
rwin_status_t rwin_start_allgather(rwin_context_t* ctx, const rwin_window_t* stage, const rwin_window_t* data,
                                   rwin_request_t** out);
rwin_status_t rwin_start_reduce_scatter(rwin_context_t* ctx, const rwin_window_t* data, rwin_reduce_op_t op,
                                        rwin_request_t** out);
rwin_status_t rwin_start_reduce_scatter_to(rwin_context_t* ctx, const rwin_window_t* data, const rwin_window_t* o,
                                           rwin_reduce_op_t op, rwin_request_t** out);
rwin_status_t rwin_start_all_to_all(rwin_context_t* ctx, const rwin_window_t* stage, const rwin_window_t* data,
                                    rwin_request_t** out);
rwin_status_t rwin_start_all_to_all_v(rwin_context_t* ctx, const rwin_window_t* send, const int64_t* send_counts,
                                      const int64_t* send_offsets, const rwin_window_t* recv, const int64_t* recv_counts,
                                      const int64_t* recv_offsets, rwin_request_t** out);
rwin_status_t rwin_start_barrier_collective(rwin_context_t* ctx, rwin_request_t** out);
rwin_status_t rwin_request_test(rwin_request_t* req, int* done); /* *done 1: finished (RWIN_OK or its error) */
rwin_status_t rwin_request_wait(rwin_request_t* req);
void rwin_request_release(rwin_request_t* req);

/* ------------------------------------------------------------------------------------------------
 * Agents (rwin/agent.h, docs/AGENT.md): peers that meet at run time, no job. Unlike a context, an agent
 * may be used from any thread (its calls are serialised). Region handles stay valid as handles after
 * their agent is destroyed (every use then fails); release them with rwin_region_release /
 * rwin_remote_region_release.
 *
 * Byte and string results (rwin_agent_address, rwin_region_descriptor) go into the caller's buffer:
 * *len is set to the size needed (a string's with its NUL); the bytes are written when cap >= *len.
 * buf NULL with cap 0 asks for the size only (RWIN_OK); a smaller buffer is RWIN_ERR_INVALID_ARGUMENT. */
typedef struct rwin_agent rwin_agent_t;
typedef struct rwin_region rwin_region_t;               /* local memory registered with an agent */
typedef struct rwin_remote_region rwin_remote_region_t; /* a region imported from its descriptor */

typedef struct rwin_agent_options {
  size_t struct_size;              /* set by rwin_agent_options_init */
  const char* listen;              /* "host:port" of the control listener; NULL: "127.0.0.1:0" */
  const char* transport;           /* "ucx" | "tcp" | "verbs"; NULL: "ucx" */
  const char* ib_device;           /* verbs; NULL: the first usable */
  int ib_port;                     /* verbs; 0: 1 */
  int gid_index;                   /* verbs; -1: auto */
  int64_t op_timeout_ms;           /* 0: 30 s */
  int64_t connect_timeout_ms;      /* 0: 10 s */
  int64_t keepalive_interval_ms;   /* 0: 500 ms */
  int64_t keepalive_timeout_ms;    /* 0: 5 s */
  int progress_thread;             /* nonzero: serve peers from a thread of the agent's own */
} rwin_agent_options_t;
void rwin_agent_options_init(rwin_agent_options_t* opts);

rwin_status_t rwin_agent_create(const rwin_agent_options_t* opts, rwin_agent_t** out); /* opts may be NULL */
void rwin_agent_destroy(rwin_agent_t* agent);                                         /* NULL: no-op */
rwin_status_t rwin_agent_address(const rwin_agent_t* agent, char* buf, size_t cap, size_t* len);

/* bytes > 0; the memory stays the caller's and must stay mapped until deregistered or the agent goes. */
rwin_status_t rwin_agent_register(rwin_agent_t* agent, void* data, size_t bytes, rwin_region_t** out);
rwin_status_t rwin_region_descriptor(const rwin_region_t* region, void* buf, size_t cap, size_t* len);
/* Revokes the region for every importer (idempotent); the handle stays until rwin_region_release. */
rwin_status_t rwin_region_deregister(rwin_region_t* region);
void rwin_region_release(rwin_region_t* region); /* the handle only; NULL: no-op */

rwin_status_t rwin_agent_import(rwin_agent_t* agent, const void* descriptor, size_t len, rwin_remote_region_t** out);
rwin_status_t rwin_remote_region_bytes(const rwin_remote_region_t* region, size_t* out);
void rwin_remote_region_release(rwin_remote_region_t* region); /* NULL: no-op */

/* Offsets are bytes into the remote region. put: src reusable on return, visible after flush or to a
 * waiter of a later notify. put_notify: the data, then the 8-byte signal word at signal_offset. */
rwin_status_t rwin_agent_put(rwin_agent_t* agent, const rwin_remote_region_t* dst, uint64_t offset, const void* src,
                             size_t bytes);
rwin_status_t rwin_agent_get(rwin_agent_t* agent, void* dst, const rwin_remote_region_t* src, uint64_t offset,
                             size_t bytes);
rwin_status_t rwin_agent_put_notify(rwin_agent_t* agent, const rwin_remote_region_t* dst, uint64_t offset,
                                    const void* src, size_t bytes, const rwin_remote_region_t* signal,
                                    uint64_t signal_offset, int64_t value, rwin_notify_op_t op);
rwin_status_t rwin_agent_notify(rwin_agent_t* agent, const rwin_remote_region_t* signal, uint64_t signal_offset,
                                int64_t value, rwin_notify_op_t op);
rwin_status_t rwin_agent_flush(rwin_agent_t* agent);
/* The local int64 word at byte `offset` of `signal`; timeout_ms < 0: the agent's op_timeout. */
rwin_status_t rwin_agent_wait(rwin_agent_t* agent, const rwin_region_t* signal, uint64_t offset, int64_t expected,
                              rwin_cmp_t cmp, int64_t timeout_ms);
rwin_status_t rwin_agent_test(rwin_agent_t* agent, const rwin_region_t* signal, uint64_t offset, int64_t expected,
                              rwin_cmp_t cmp, int* satisfied);
rwin_status_t rwin_agent_progress(rwin_agent_t* agent);

/* ------------------------------------------------------------------------------------------------
 * Domains (rwin/domain.h, docs/EMBEDDING.md section 6): a window plus int64 signal words per rank,
 * wired up from one descriptor per rank that the caller carries itself: prepare -> import -> commit
 * (or abort: back to prepared) -> release. Calls are serialised (any thread, one at a time);
 * rwin_domain_fail_peer may be called from any thread at any time, also while another is blocked in
 * rwin_domain_wait. Offsets are bytes into the peer's window; signals are indexes of int64 words. */
typedef struct rwin_domain rwin_domain_t;
typedef enum rwin_domain_state {
  RWIN_DOMAIN_PREPARED = 0,
  RWIN_DOMAIN_IMPORTED = 1,
  RWIN_DOMAIN_COMMITTED = 2,
  RWIN_DOMAIN_RELEASED = 3
} rwin_domain_state_t;
#define RWIN_DOMAIN_MAX_DESCRIPTOR_BYTES 256

typedef struct rwin_domain_options {
  size_t struct_size;          /* set by rwin_domain_options_init */
  rwin_agent_options_t agent;  /* the agent under the domain; progress_thread is 1 after init */
  size_t signals;              /* int64 signal words per rank; 0: 64 */
} rwin_domain_options_t;
void rwin_domain_options_init(rwin_domain_options_t* opts);

/* prepare: allocates window_bytes (page-aligned, zeroed) plus the signal words and registers them. */
rwin_status_t rwin_domain_prepare(uint64_t id, int rank, int nranks, size_t window_bytes,
                                  const rwin_domain_options_t* opts, rwin_domain_t** out); /* opts may be NULL */
/* Releases (if not yet) and frees the handle and the memory; NULL: no-op. */
void rwin_domain_destroy(rwin_domain_t* domain);
/* This rank's descriptor (<= RWIN_DOMAIN_MAX_DESCRIPTOR_BYTES), under the agents' buffer rules above. */
rwin_status_t rwin_domain_descriptor(const rwin_domain_t* domain, void* buf, size_t cap, size_t* len);
/* The local window and signal words (either out may be NULL): valid until rwin_domain_destroy. */
rwin_status_t rwin_domain_local(const rwin_domain_t* domain, void** window, size_t* window_bytes, int64_t** signals,
                                size_t* nsignals);
rwin_status_t rwin_domain_state(const rwin_domain_t* domain, rwin_domain_state_t* out);
/* Every rank's descriptor in rank order: n = nranks pointers and lengths. Checked whole before anything
 * connects; a refusal names the entry and leaves the domain prepared. */
rwin_status_t rwin_domain_import(rwin_domain_t* domain, const void* const* descriptors, const size_t* lens, int n);
rwin_status_t rwin_domain_commit(rwin_domain_t* domain);
rwin_status_t rwin_domain_abort(rwin_domain_t* domain);
/* No peer operation reaches the window after it returns; the memory stays until rwin_domain_destroy. */
rwin_status_t rwin_domain_release(rwin_domain_t* domain);
rwin_status_t rwin_domain_put(rwin_domain_t* domain, int peer, uint64_t offset, const void* src, size_t bytes);
rwin_status_t rwin_domain_get(rwin_domain_t* domain, void* dst, int peer, uint64_t offset, size_t bytes);
rwin_status_t rwin_domain_put_notify(rwin_domain_t* domain, int peer, uint64_t offset, const void* src, size_t bytes,
                                     size_t signal, int64_t value, rwin_notify_op_t op);
rwin_status_t rwin_domain_notify(rwin_domain_t* domain, int peer, size_t signal, int64_t value, rwin_notify_op_t op);
rwin_status_t rwin_domain_flush(rwin_domain_t* domain);
/* timeout_ms < 0: the agent's op_timeout. RWIN_ERR_PEER_FAILED as soon as a rank of the domain failed
 * while the word is unsatisfied. */
rwin_status_t rwin_domain_wait(rwin_domain_t* domain, size_t signal, int64_t expected, rwin_cmp_t cmp,
                               int64_t timeout_ms);
rwin_status_t rwin_domain_test(rwin_domain_t* domain, size_t signal, int64_t expected, rwin_cmp_t cmp, int* satisfied);
/* The caller's health lane: `peer` failed. reason may be NULL. */
rwin_status_t rwin_domain_fail_peer(rwin_domain_t* domain, int peer, const char* reason);

#ifdef __cplusplus
}
#endif

#endif /* RWIN_RWIN_C_H */
