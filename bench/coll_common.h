/* coll_common.h: what the collective benchmarks share (rwin-perf's collective tests,
 * bench/mpi/mpi_collectives.c, bench/shmem/shmem_collectives.c), so that the three measure the same
 * thing, check it the same way and print the same columns.
 *
 * Size convention (nccl-tests): `size` is the per-rank buffer in bytes as nccl-tests counts it:
 *   allreduce, broadcast          the buffer (count = size / esize elements)
 *   allgather                     the gathered data [NR, S]      (S = size / NR / esize per rank)
 *   reduce_scatter                the [NR, S] input              (each rank's result is S elements)
 *   all_to_all                    [NR, S] (the send buffer = the receive buffer size)
 *   barrier                       0
 * When size / NR / esize is not a whole number (small sizes), S is rounded down (at least 1) and the
 * reported size is the one actually moved, NR * S * esize: the three programs round the same way.
 *
 * Bandwidth (nccl-tests doc/PERFORMANCE.md): algbw = size / time; busbw = algbw * factor with
 * factor 2(n-1)/n for allreduce, (n-1)/n for allgather, reduce_scatter and all_to_all, 1 for
 * broadcast. Reported in GB/s (1e9 bytes/s) like nccl-tests; time = avg us per call (the mean over
 * ranks of each rank's average over the timed iterations, nccl-tests' default "-a 1"); p50 = the
 * median of rank 0's per-call times.
 *
 * Data: every input element is a small integer, exact in every type (even bf16) and in every
 * reduction of up to 8 ranks, so the check compares exactly:
 *   value(r, i)     = 1 + ((r + i) & 1)      for prod (products <= 2^8)
 *                   = (r + 1) + i % 7        otherwise
 *   a2a(r, d, i)    = (r * 8 + d) * 4 + i % 4   (rank r's stage row d; < 256)
 * reduce_scatter input on rank r: flat element j of [NR, S] = value(r, j).
 *
 * C and C++ (header only, static functions).
 */
#ifndef RWIN_BENCH_COLL_COMMON_H
#define RWIN_BENCH_COLL_COMMON_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define COLL_MAX_SIZES 64

/* all_to_all_v: the per-peer-count form with every count S (packed), so its result and check are
   all_to_all's; it measures what the v interface costs each library (rwin: its pull per pair). */
enum coll_kind {
  COLL_ALLREDUCE, COLL_ALLGATHER, COLL_REDUCE_SCATTER, COLL_ALL_TO_ALL, COLL_BROADCAST, COLL_BARRIER, COLL_ALL_TO_ALL_V,
  COLL_N
};
static const char* const coll_names[COLL_N] = {"allreduce", "allgather", "reduce_scatter", "all_to_all", "broadcast",
                                               "barrier", "all_to_all_v"};
static inline int coll_a2a_like(int kind) { return kind == COLL_ALL_TO_ALL || kind == COLL_ALL_TO_ALL_V; }
enum coll_op { COLL_SUM, COLL_MAX, COLL_MIN, COLL_PROD };
static const char* const coll_op_names[4] = {"sum", "max", "min", "prod"};

static inline double coll_now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static inline int coll_cmp_double(const void* a, const void* b) {
  const double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}
static inline double coll_median(double* v, int64_t n) {
  if (n <= 0) return NAN;
  qsort(v, (size_t)n, sizeof *v, coll_cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static inline int coll_parse_kind(const char* s) {
  for (int k = 0; k < COLL_N; ++k) {
    if (strcmp(s, coll_names[k]) == 0) return k;
  }
  return -1;
}
static inline int coll_parse_op(const char* s) {
  for (int k = 0; k < 4; ++k) {
    if (strcmp(s, coll_op_names[k]) == 0) return k;
  }
  return -1;
}

/* "8,4K,64K,1M" or a sweep "8:64M" (x2) / "8:64M:x4". Returns the count, 0 on error. */
static inline uint64_t coll_parse_bytes(const char* s, int* ok) {
  char* end = NULL;
  const double v = strtod(s, &end);
  uint64_t mult = 1;
  *ok = end != s && v >= 0;
  if (*end == 'K' || *end == 'k') mult = 1ull << 10, ++end;
  else if (*end == 'M' || *end == 'm') mult = 1ull << 20, ++end;
  else if (*end == 'G' || *end == 'g') mult = 1ull << 30, ++end;
  if (*end == 'i' && end[1] == 'B') end += 2;
  else if (*end == 'B') ++end;
  if (*end != '\0' && *end != ',' && *end != ':') *ok = 0;
  return (uint64_t)(v * (double)mult);
}
static inline int coll_parse_sizes(const char* arg, uint64_t* out, int max) {
  char buf[512];
  int n = 0, ok = 1;
  snprintf(buf, sizeof buf, "%s", arg);
  if (strchr(buf, ':')) {
    char* a = strtok(buf, ":");
    char* b = strtok(NULL, ":");
    char* c = strtok(NULL, ":");
    if (!a || !b) return 0;
    uint64_t lo = coll_parse_bytes(a, &ok), hi, f = 2;
    if (!ok) return 0;
    hi = coll_parse_bytes(b, &ok);
    if (!ok) return 0;
    if (c) {
      if (c[0] != 'x' || (f = strtoull(c + 1, NULL, 10)) < 2) return 0;
    }
    for (uint64_t v = lo; v > 0 && v <= hi && n < max; v *= f) out[n++] = v;
  } else {
    for (char* t = strtok(buf, ","); t && n < max; t = strtok(NULL, ",")) {
      out[n++] = coll_parse_bytes(t, &ok);
      if (!ok) return 0;
    }
  }
  for (int i = 0; i < n; ++i) {
    if (out[i] == 0 || out[i] % 8 != 0) return 0;
  }
  return n;
}

/* Elements per rank row (S) and the bytes actually measured (see the size convention). */
static inline int64_t coll_row_elems(int kind, uint64_t size, int nranks, size_t esize) {
  int64_t s;
  if (kind == COLL_BARRIER) return 0;
  if (kind == COLL_ALLREDUCE || kind == COLL_BROADCAST) s = (int64_t)(size / esize);
  else s = (int64_t)(size / (uint64_t)nranks / esize);
  return s < 1 ? 1 : s;
}
static inline uint64_t coll_actual_bytes(int kind, int64_t row, int nranks, size_t esize) {
  if (kind == COLL_BARRIER) return 0;
  if (kind == COLL_ALLREDUCE || kind == COLL_BROADCAST) return (uint64_t)row * esize;
  return (uint64_t)row * (uint64_t)nranks * esize;
}
static inline double coll_bus_factor(int kind, int n) {
  switch (kind) {
    case COLL_ALLREDUCE: return 2.0 * (n - 1) / n;
    case COLL_ALLGATHER:
    case COLL_REDUCE_SCATTER:
    case COLL_ALL_TO_ALL:
    case COLL_ALL_TO_ALL_V: return (double)(n - 1) / n;
    case COLL_BROADCAST: return 1.0;
    default: return 0.0;
  }
}

static inline int64_t coll_value(int op, int r, int64_t i) {
  return op == COLL_PROD ? 1 + ((r + i) & 1) : (r + 1) + i % 7;
}
static inline int64_t coll_a2a(int r, int d, int64_t i) { return ((int64_t)r * 8 + d) * 4 + i % 4; }
/* op over ranks 0..n-1 of value(r, i), exact in int64 (the caller casts to the element type). */
static inline int64_t coll_reduced(int op, int n, int64_t i) {
  int64_t acc = coll_value(op, 0, i);
  for (int r = 1; r < n; ++r) {
    const int64_t v = coll_value(op, r, i);
    switch (op) {
      case COLL_SUM: acc += v; break;
      case COLL_MAX: acc = v > acc ? v : acc; break;
      case COLL_MIN: acc = v < acc ? v : acc; break;
      default: acc *= v; break;
    }
  }
  return acc;
}

/* Iterations for one size: min(iters, max(min_iters, max_bytes / size)), and at least small_iters for
 * sizes up to COLL_SMALL_BYTES (OSU's convention: 1000 calls below 8 KiB, where 100 calls of a
 * sub-microsecond collective are shorter than one scheduler tick on an oversubscribed host); warm-up
 * <= iters / 10. */
#define COLL_SMALL_BYTES 8192u
static inline int64_t coll_iters(int64_t iters, int64_t min_iters, uint64_t max_bytes, uint64_t size,
                                 int64_t small_iters) {
  int64_t cap = size ? (int64_t)(max_bytes / size) : iters;
  if (cap < min_iters) cap = min_iters;
  const int64_t it = iters < cap ? iters : cap;
  return size <= COLL_SMALL_BYTES && small_iters > it ? small_iters : it;
}
static inline int64_t coll_warmup(int64_t warmup, int64_t iters) {
  int64_t w = iters / 10 > 1 ? iters / 10 : 1;
  return warmup < w ? warmup : w;
}

/* One output row. CSV columns (all three programs):
 *   tool,transport,coll,nranks,dtype,op,mode,size,count,iters,p50_us,avg_us,algbw_gbs,busbw_gbs,check
 * (transport is quoted: rwin's transport names contain commas) */
#define COLL_CSV_HEADER \
  "tool,transport,coll,nranks,dtype,op,mode,size,count,iters,p50_us,avg_us,algbw_gbs,busbw_gbs,check\n"
static inline void coll_row(FILE* table, FILE* csv, const char* tool, const char* transport, int kind, int nranks,
                            const char* dtype, const char* op, const char* mode, uint64_t bytes, int64_t count,
                            int64_t iters, double p50, double avg, const char* check) {
  const double algbw = bytes ? (double)bytes / (avg * 1e-6) / 1e9 : 0.0;
  const double busbw = algbw * coll_bus_factor(kind, nranks);
  if (table) {
    fprintf(table, "%-14s %9llu %10lld %7lld | %10.3f %10.3f | %9.3f %9.3f | %s\n", coll_names[kind],
            (unsigned long long)bytes, (long long)count, (long long)iters, p50, avg, algbw, busbw, check);
    fflush(table);
  }
  if (csv) {
    fprintf(csv, "%s,\"%s\",%s,%d,%s,%s,%s,%llu,%lld,%lld,%.4f,%.4f,%.5f,%.5f,%s\n", tool, transport, coll_names[kind],
            nranks, dtype, op, mode, (unsigned long long)bytes, (long long)count, (long long)iters, p50, avg, algbw,
            busbw, check);
    fflush(csv);
  }
}
static inline void coll_table_header(FILE* f) {
  fprintf(f, "%-14s %9s %10s %7s | %10s %10s | %9s %9s | %s\n", "collective", "size(B)", "count", "iters", "p50(us)",
          "avg(us)", "algbw", "busbw", "check");
  fprintf(f, "%-14s %9s %10s %7s | %10s %10s | %9s %9s |\n", "", "", "(elems)", "", "", "", "(GB/s)", "(GB/s)");
}

#endif
