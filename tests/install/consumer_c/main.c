/* The C consumer of an installed rwin (tests/install/consumer-test.sh): plain C11 over rwin/rwin_c.h,
 * on N ranks under rwinrun. Part 1, on the launcher's context: a ring put + notify + wait, a get, an
 * allreduce, fetch_add tickets on rank 0 (every ticket handed out once), an out-of-bounds slice that
 * must fail with its status and message. Part 2: the same ranks start a second context on a store
 * written here in C (files in the directory $CONSUMER_C_STORE_DIR) and run a ring shift and tickets on it.
 * Each rank prints "OK rank R of N, rwin V" when all is right, else what failed (exit 1). */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "rwin/rwin_c.h"
#include "rwin/version.h"

static int rank = -1;

#define CHECK(call)                                                                                        \
  do {                                                                                                     \
    rwin_status_t st_ = (call);                                                                            \
    if (st_ != RWIN_OK) {                                                                                  \
      printf("FAIL rank %d: %s:%d: %s: %s (%s)\n", rank, __FILE__, __LINE__, #call, rwin_status_name(st_), \
             rwin_last_error());                                                                           \
      exit(1);                                                                                             \
    }                                                                                                      \
  } while (0)
#define EXPECT(cond, ...)                                                   \
  do {                                                                      \
    if (!(cond)) {                                                          \
      printf("FAIL rank %d: %s:%d: %s: ", rank, __FILE__, __LINE__, #cond); \
      printf(__VA_ARGS__);                                                  \
      printf("\n");                                                         \
      exit(1);                                                              \
    }                                                                       \
  } while (0)

enum { N = 1000, TICKETS = 50 };

/* Ring shift: rank r's src into rank r+1's dst, then a notify; check what came from r-1, and get
 * r+1's src back. */
static void ring(rwin_context_t* ctx, int n, const char* tag) {
  char name[64];
  rwin_window_t *src, *dst;
  rwin_signals_t* ready;
  int64_t *s, *d, back[N];
  const int next = (rank + 1) % n, prev = (rank + n - 1) % n;
  snprintf(name, sizeof name, "%s_src", tag);
  CHECK(rwin_alloc_window(ctx, name, RWIN_I64, 1, N, &src));
  snprintf(name, sizeof name, "%s_dst", tag);
  CHECK(rwin_alloc_window(ctx, name, RWIN_I64, 1, N, &dst));
  snprintf(name, sizeof name, "%s_ready", tag);
  CHECK(rwin_alloc_signals(ctx, name, 1, &ready));
  CHECK(rwin_window_data(src, (void**)&s));
  CHECK(rwin_window_data(dst, (void**)&d));
  for (int64_t i = 0; i < N; ++i) s[i] = rank * 1000003 + i;

  rwin_slice_t to = rwin_window_slice(dst, 0, 0, 1, N), from = rwin_window_slice(src, 0, 0, 1, N);
  rwin_signal_slice_t sig = rwin_signal_at(ready, 0);
  CHECK(rwin_put(ctx, &to, next, &from, RWIN_ATOMIC_NONE));
  CHECK(rwin_notify(ctx, &sig, next, 1, RWIN_NOTIFY_ADD)); /* after the put: seen with the data */
  CHECK(rwin_wait(ctx, &sig, 1, RWIN_CMP_GE, -1));
  for (int64_t i = 0; i < N; ++i) {
    EXPECT(d[i] == prev * 1000003 + i, "%s: dst[%lld] = %lld, want %lld", tag, (long long)i, (long long)d[i],
           (long long)(prev * 1000003 + i));
  }
  CHECK(rwin_barrier(ctx)); /* next filled its src (with 2 ranks the notify said so already) */
  rwin_local_t mine = {back, RWIN_I64, 1, N, 0};
  CHECK(rwin_get_local(ctx, &mine, next, &from));
  for (int64_t i = 0; i < N; ++i) {
    EXPECT(back[i] == next * 1000003 + i, "%s: got back[%lld] = %lld", tag, (long long)i, (long long)back[i]);
  }
  CHECK(rwin_barrier(ctx));
  CHECK(rwin_signals_free(ctx, ready));
  CHECK(rwin_window_free(ctx, dst));
  CHECK(rwin_window_free(ctx, src));
}

/* TICKETS fetch_adds per rank on one counter on rank 0; every number 0 .. n*TICKETS-1 once. */
static void tickets(rwin_context_t* ctx, int n, const char* tag) {
  char name[64];
  rwin_window_t *counter, *mine, *all;
  int64_t *m, *a;
  snprintf(name, sizeof name, "%s_counter", tag);
  CHECK(rwin_alloc_window(ctx, name, RWIN_I64, 1, 1, &counter));
  snprintf(name, sizeof name, "%s_mine", tag);
  CHECK(rwin_alloc_window(ctx, name, RWIN_I64, 1, TICKETS, &mine));
  snprintf(name, sizeof name, "%s_all", tag);
  CHECK(rwin_alloc_window(ctx, name, RWIN_I64, n, TICKETS, &all));
  CHECK(rwin_window_data(mine, (void**)&m));
  CHECK(rwin_window_data(all, (void**)&a));
  rwin_slice_t c = rwin_window_slice(counter, 0, 0, 1, 1);
  for (int i = 0; i < TICKETS; ++i) CHECK(rwin_fetch_add(ctx, &c, 0, 1, &m[i]));
  CHECK(rwin_allgather(ctx, mine, all));
  char* seen = calloc((size_t)n * TICKETS, 1);
  EXPECT(seen != NULL, "calloc");
  for (int64_t i = 0; i < (int64_t)n * TICKETS; ++i) {
    EXPECT(a[i] >= 0 && a[i] < (int64_t)n * TICKETS && !seen[a[i]], "%s: ticket %lld twice or out of range", tag,
           (long long)a[i]);
    seen[a[i]] = 1;
  }
  free(seen);
  CHECK(rwin_window_free(ctx, all));
  CHECK(rwin_window_free(ctx, mine));
  CHECK(rwin_window_free(ctx, counter));
}

static void allreduce(rwin_context_t* ctx, int n) {
  rwin_window_t* x;
  int64_t* v;
  CHECK(rwin_alloc_window(ctx, "c_allreduce", RWIN_I64, 1, 4, &x));
  CHECK(rwin_window_data(x, (void**)&v));
  for (int i = 0; i < 4; ++i) v[i] = rank + 1 + i;
  CHECK(rwin_allreduce(ctx, x, RWIN_REDUCE_SUM));
  for (int i = 0; i < 4; ++i) {
    EXPECT(v[i] == n * (n + 1) / 2 + n * i, "allreduce: x[%d] = %lld", i, (long long)v[i]);
  }
  CHECK(rwin_window_free(ctx, x));
}

static void error_path(rwin_context_t* ctx) {
  rwin_window_t* w;
  CHECK(rwin_alloc_window(ctx, "c_small", RWIN_I32, 2, 2, &w));
  rwin_slice_t past = rwin_window_slice(w, 1, 1, 2, 2), ok = rwin_window_slice(w, 0, 0, 2, 2);
  rwin_status_t st = rwin_put(ctx, &past, 0, &ok, RWIN_ATOMIC_NONE);
  EXPECT(st == RWIN_ERR_OUT_OF_BOUNDS, "put past the window gave %s", rwin_status_name(st));
  EXPECT(strstr(rwin_last_error(), "out of bounds") != NULL, "last error: %s", rwin_last_error());
  rwin_window_t* bad = w; /* a failed call sets its out handle to NULL */
  st = rwin_alloc_window(ctx, "c_bad", 99, 1, 1, &bad);
  EXPECT(st == RWIN_ERR_INVALID_ARGUMENT && bad == NULL, "dtype 99 gave %s", rwin_status_name(st));
  EXPECT(strstr(rwin_last_error(), "dtype 99") != NULL, "last error: %s", rwin_last_error());
  CHECK(rwin_window_free(ctx, w));
}

/* ---- the caller's store: one file per key (hex-encoded) in a directory shared by the ranks. */
typedef struct {
  char dir[512];
} file_store;

/* 0, or -1 when the path would not fit (a cut path could name another key's file). */
static int key_path(const file_store* fs, const char* key, char* out, size_t cap) {
  size_t n = (size_t)snprintf(out, cap, "%s/", fs->dir);
  for (const unsigned char* k = (const unsigned char*)key; *k; ++k) {
    if (n + 3 > cap) return -1;
    n += (size_t)snprintf(out + n, cap - n, "%02x", *k);
  }
  return n < cap ? 0 : -1;
}
static void nap(void) {
  struct timespec t = {0, 1000000};
  nanosleep(&t, NULL);
}
static int64_t now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}
static int write_file(const char* path, const void* data, size_t len) {
  char tmp[700];
  snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
  FILE* f = fopen(tmp, "wb");
  if (!f) return 2;
  int bad = len > 0 && fwrite(data, 1, len, f) != len; /* data is NULL for an empty value */
  bad |= fclose(f) != 0;
  return bad || rename(tmp, path) != 0 ? 2 : 0; /* readers see all of it or nothing */
}
static int fs_set(void* user, const char* key, const void* value, size_t len) {
  char p[600];
  if (key_path(user, key, p, sizeof p) != 0) return 3;
  return write_file(p, value, len);
}
static int exists(const file_store* fs, const char* key) {
  char p[600];
  struct stat st;
  return key_path(fs, key, p, sizeof p) == 0 && stat(p, &st) == 0;
}
static int fs_check(void* user, const char* const* keys, size_t n, int* all) {
  *all = 1;
  for (size_t i = 0; i < n; ++i) *all &= exists(user, keys[i]);
  return 0;
}
static int fs_wait(void* user, const char* const* keys, size_t n, int64_t timeout_ms) {
  const int64_t end = now_ms() + timeout_ms;
  for (int all = 0;; nap()) {
    fs_check(user, keys, n, &all);
    if (all) return RWIN_STORE_OK;
    if (now_ms() >= end) return RWIN_STORE_TIMEOUT;
  }
}
static int fs_get(void* user, const char* key, int64_t timeout_ms, void* buf, size_t cap, size_t* len) {
  int rc = fs_wait(user, &key, 1, timeout_ms);
  if (rc != RWIN_STORE_OK) return rc;
  char p[600];
  if (key_path(user, key, p, sizeof p) != 0) return 3;
  FILE* f = fopen(p, "rb");
  if (!f) return 2;
  fseek(f, 0, SEEK_END);
  long size = ftell(f);
  fseek(f, 0, SEEK_SET);
  *len = (size_t)size;
  size_t want = *len < cap ? *len : cap;
  rc = fread(buf, 1, want, f) == want ? RWIN_STORE_OK : 2;
  fclose(f);
  return rc;
}
static int fs_add(void* user, const char* key, int64_t delta, int64_t* result) {
  char p[600], lock[620], text[32];
  if (key_path(user, key, p, sizeof p) != 0) return 3;
  snprintf(lock, sizeof lock, "%s.lock", p);
  int fd = open(lock, O_CREAT | O_RDWR, 0600);
  struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
  if (fd < 0) return 2;
  while (fcntl(fd, F_SETLKW, &fl) != 0) {
    if (errno != EINTR) {
      close(fd);
      return 2;
    }
  }
  long long v = 0;
  FILE* f = fopen(p, "r");
  if (f) {
    if (fscanf(f, "%lld", &v) != 1) v = 0;
    fclose(f);
  }
  v += delta;
  int n = snprintf(text, sizeof text, "%lld", v);
  int rc = write_file(p, text, (size_t)n);
  close(fd); /* releases the lock */
  *result = v;
  return rc;
}
static int released = 0;
static void fs_release(void* user) {
  (void)user;
  ++released;
}

static void store_context(int n) {
  const char* dir = getenv("CONSUMER_C_STORE_DIR");
  EXPECT(dir != NULL && *dir, "CONSUMER_C_STORE_DIR is not set");
  file_store fs;
  snprintf(fs.dir, sizeof fs.dir, "%s", dir);
  rwin_store_ops_t ops = {fs_set, fs_get, fs_add, fs_check, fs_wait, fs_release};
  rwin_options_t opts;
  rwin_options_init(&opts);
  opts.op_timeout_ms = 30000;
  rwin_context_t* ctx = NULL;
  CHECK(rwin_context_create_with_store(&ops, &fs, rank, n, &opts, &ctx));
  int r = -1, size = -1;
  CHECK(rwin_context_rank(ctx, &r));
  CHECK(rwin_context_size(ctx, &size));
  EXPECT(r == rank && size == n, "store context is rank %d of %d", r, size);
  ring(ctx, n, "store_ring");
  tickets(ctx, n, "store_tickets");
  rwin_context_destroy(ctx);
  EXPECT(released == 1, "the store was released %d times, want once", released);
}

/* A domain (rwin_domain_*): each rank's descriptor carried through the file directory above (the
 * caller's own channel, no rwin store), then a ring shift with put_notify / wait. */
static void domain_ring(int n) {
  const char* dir = getenv("CONSUMER_C_STORE_DIR");
  EXPECT(dir != NULL && *dir, "CONSUMER_C_STORE_DIR is not set");
  file_store fs;
  snprintf(fs.dir, sizeof fs.dir, "%s", dir);
  rwin_domain_options_t o;
  rwin_domain_options_init(&o);
  o.signals = 2;
  rwin_domain_t* d = NULL;
  CHECK(rwin_domain_prepare(0xC0FFEE, rank, n, 4096, &o, &d));
  unsigned char mine[RWIN_DOMAIN_MAX_DESCRIPTOR_BYTES];
  size_t len = 0;
  CHECK(rwin_domain_descriptor(d, mine, sizeof mine, &len));
  char key[64];
  snprintf(key, sizeof key, "domain/%d", rank);
  EXPECT(fs_set(&fs, key, mine, len) == 0, "publishing the descriptor");
  unsigned char(*table)[RWIN_DOMAIN_MAX_DESCRIPTOR_BYTES] = calloc((size_t)n, RWIN_DOMAIN_MAX_DESCRIPTOR_BYTES);
  const void** ptrs = calloc((size_t)n, sizeof *ptrs);
  size_t* lens = calloc((size_t)n, sizeof *lens);
  EXPECT(table && ptrs && lens, "calloc");
  for (int r = 0; r < n; ++r) {
    snprintf(key, sizeof key, "domain/%d", r);
    EXPECT(fs_get(&fs, key, 30000, table[r], sizeof table[r], &lens[r]) == RWIN_STORE_OK, "descriptor of rank %d", r);
    ptrs[r] = table[r];
  }
  CHECK(rwin_domain_import(d, ptrs, lens, n));
  CHECK(rwin_domain_commit(d));
  int64_t* w = NULL;
  CHECK(rwin_domain_local(d, (void**)&w, NULL, NULL, NULL));
  const int64_t x = 1000 + rank;
  CHECK(rwin_domain_put_notify(d, (rank + 1) % n, 8, &x, sizeof x, 0, 1, RWIN_NOTIFY_ADD));
  CHECK(rwin_domain_wait(d, 0, 1, RWIN_CMP_EQ, -1));
  EXPECT(w[1] == 1000 + (rank + n - 1) % n, "domain ring: got %lld", (long long)w[1]);
  /* No rank releases while another may still reach it: a second round says "done". */
  for (int r = 0; r < n; ++r) CHECK(rwin_domain_notify(d, r, 1, 1, RWIN_NOTIFY_ADD));
  CHECK(rwin_domain_wait(d, 1, n, RWIN_CMP_EQ, -1));
  CHECK(rwin_domain_release(d));
  rwin_domain_destroy(d);
  free(lens);
  free(ptrs);
  free(table);
}

int main(void) {
  rwin_context_t* ctx = NULL;
  int n = 0;
  CHECK(rwin_context_create(NULL, &ctx));
  CHECK(rwin_context_rank(ctx, &rank));
  CHECK(rwin_context_size(ctx, &n));
  ring(ctx, n, "c_ring");
  allreduce(ctx, n);
  tickets(ctx, n, "c_tickets");
  error_path(ctx);
  CHECK(rwin_barrier(ctx));
  rwin_context_destroy(ctx);

  store_context(n);
  domain_ring(n);

  EXPECT(strcmp(rwin_version(), RWIN_VERSION_STRING) == 0, "librwin %s, headers %s", rwin_version(),
         RWIN_VERSION_STRING);
  printf("OK rank %d of %d, rwin %s\n", rank, n, rwin_version());
  return 0;
}
