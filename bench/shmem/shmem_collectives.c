/* shmem_collectives: OpenSHMEM 1.4 collectives (Open MPI 4.1.4 OSHMEM) at rwin-perf's sizes, columns and
 * checks (bench/coll_common.h).
 *
 *   oshcc -O2 -o shmem_collectives bench/shmem/shmem_collectives.c
 *   oshrun --allow-run-as-root -np 4 --mca osc ^rdma -x SHMEM_SYMMETRIC_SIZE=1G ./shmem_collectives -s 8:64M:x8
 *
 * Tests (every PE, active set = all PEs):
 *   allreduce       shmem_<T>_<op>_to_all (out of place: source and dest are different buffers)
 *   allgather       shmem_fcollect32/64 (S elements per PE -> [NR, S])
 *   all_to_all      shmem_alltoall32/64 (S elements per PE pair)
 *   broadcast       shmem_broadcast32/64 from PE 0 (1.4: the root's dest is not written; the root
 *                   broadcasts from its own copy of the buffer, every other PE receives into it)
 *   barrier         shmem_barrier_all
 *   reduce_scatter  not in OpenSHMEM 1.4: skipped (prints nothing)
 * 32- or 64-bit variants by the dtype's size; reductions per dtype: f32 float, f64 double, i32 int,
 * i64 long. Two pSync arrays alternate between consecutive calls (a pSync may be reused only once
 * every PE left the previous call that used it). Each size: warm-up, the destination is cleared,
 * shmem_barrier_all, the timed loop (one clock read per call), then every PE checks its result
 * exactly; PE 0 collects the verdicts and averages (shmem_double_sum_to_all / int max).
 * Buffers: shmem_align(4096) (glibc rep-movsb trap, perf-baselines finding 3).
 * Options as mpi_collectives: -t, -s, -n (200), -w (20), --min-iters (5), --max-bytes (1G), --small-iters (0),
 * --dtype f32|f64|i32|i64, --op sum|max|min|prod, -o CSV, --transport LABEL, --deadline S (300).
 */
#include <shmem.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../coll_common.h"

static const char* phase = "start";
static void on_alarm(int s) {
  (void)s;
  static const char msg[] = "shmem_collectives: deadline passed in ";
  if (write(2, msg, sizeof msg - 1) < 0) { /* nothing */ }
  if (write(2, phase, strlen(phase)) < 0) { /* nothing */ }
  if (write(2, "\n", 1) < 0) { /* nothing */ }
  _exit(3);
}

enum { T_F32, T_F64, T_I32, T_I64 };
static const char* const tnames[] = {"f32", "f64", "i32", "i64"};
static const size_t tsizes[] = {4, 8, 4, 8};

static void put_el(int t, void* p, int64_t i, int64_t v) {
  switch (t) {
    case T_F32: ((float*)p)[i] = (float)v; break;
    case T_F64: ((double*)p)[i] = (double)v; break;
    case T_I32: ((int32_t*)p)[i] = (int32_t)v; break;
    default: ((int64_t*)p)[i] = v; break;
  }
}
static int eq_el(int t, const void* p, int64_t i, int64_t v) {
  switch (t) {
    case T_F32: return ((const float*)p)[i] == (float)v;
    case T_F64: return ((const double*)p)[i] == (double)v;
    case T_I32: return ((const int32_t*)p)[i] == (int32_t)v;
    default: return ((const int64_t*)p)[i] == v;
  }
}

static long psync[2][SHMEM_REDUCE_SYNC_SIZE > SHMEM_BCAST_SYNC_SIZE
                         ? (SHMEM_REDUCE_SYNC_SIZE > SHMEM_ALLTOALL_SYNC_SIZE ? SHMEM_REDUCE_SYNC_SIZE : SHMEM_ALLTOALL_SYNC_SIZE)
                         : (SHMEM_BCAST_SYNC_SIZE > SHMEM_ALLTOALL_SYNC_SIZE ? SHMEM_BCAST_SYNC_SIZE : SHMEM_ALLTOALL_SYNC_SIZE)];
static long collect_sync[2][SHMEM_COLLECT_SYNC_SIZE];
static double stat_src, stat_dst, stat_wrk[SHMEM_REDUCE_MIN_WRKDATA_SIZE];
static int flag_src, flag_dst, flag_wrk[SHMEM_REDUCE_MIN_WRKDATA_SIZE];
static long stat_sync[SHMEM_REDUCE_SYNC_SIZE], flag_sync[SHMEM_REDUCE_SYNC_SIZE];

#define REDUCE(T, CT)                                                                                           \
  static void reduce_##T(int op, CT* d, const CT* s, int nr, int npes, CT* wrk, long* ps) {                    \
    switch (op) {                                                                                               \
      case COLL_SUM: shmem_##T##_sum_to_all(d, s, nr, 0, 0, npes, wrk, ps); break;                            \
      case COLL_MAX: shmem_##T##_max_to_all(d, s, nr, 0, 0, npes, wrk, ps); break;                            \
      case COLL_MIN: shmem_##T##_min_to_all(d, s, nr, 0, 0, npes, wrk, ps); break;                            \
      default: shmem_##T##_prod_to_all(d, s, nr, 0, 0, npes, wrk, ps); break;                                 \
    }                                                                                                           \
  }
REDUCE(float, float)
REDUCE(double, double)
REDUCE(int, int)
REDUCE(long, long)

int main(int argc, char** argv) {
  shmem_init();
  const int me = shmem_my_pe(), n = shmem_n_pes();
  int kinds[COLL_N], nk = 0;
  uint64_t sizes[COLL_MAX_SIZES];
  int nsizes;
  int64_t iters = 200, warmup = 20, min_iters = 5, small_iters = 0;
  uint64_t max_bytes = 1ull << 30;
  int t = T_F32, op = COLL_SUM, deadline = 300;
  const char* csv_path = NULL;
  const char* transport = "";
  for (int k = 0; k < COLL_N; ++k) if (k != COLL_ALL_TO_ALL_V) kinds[nk++] = k;
  nsizes = coll_parse_sizes("8,4K,64K,1M", sizes, COLL_MAX_SIZES);
  for (int i = 1; i < argc; ++i) {
    const char* a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : NULL;
    int bad = v == NULL, ok = 1;
    if (!strcmp(a, "-t") && v) {
      char buf[512];
      snprintf(buf, sizeof buf, "%s", v);
      nk = 0;
      for (char* s = strtok(buf, ","); s; s = strtok(NULL, ",")) {
        const int k = coll_parse_kind(s);
        if (k < 0 || k == COLL_ALL_TO_ALL_V) bad = 1;  /* OpenSHMEM has no all_to_all_v */
        else kinds[nk++] = k;
      }
    } else if (!strcmp(a, "-s") && v) nsizes = coll_parse_sizes(v, sizes, COLL_MAX_SIZES), bad = nsizes == 0;
    else if (!strcmp(a, "-n") && v) iters = atoll(v), bad = iters < 1;
    else if (!strcmp(a, "-w") && v) warmup = atoll(v);
    else if (!strcmp(a, "--small-iters") && v) small_iters = atoll(v), bad = small_iters < 0;
    else if (!strcmp(a, "--min-iters") && v) min_iters = atoll(v), bad = min_iters < 1;
    else if (!strcmp(a, "--max-bytes") && v) max_bytes = coll_parse_bytes(v, &ok), bad = !ok;
    else if (!strcmp(a, "--dtype") && v) {
      t = -1;
      for (int d = 0; d < 4; ++d) {
        if (!strcmp(v, tnames[d])) t = d;
      }
      bad = t < 0;
    } else if (!strcmp(a, "--op") && v) op = coll_parse_op(v), bad = op < 0;
    else if (!strcmp(a, "-o") && v) csv_path = v;
    else if (!strcmp(a, "--transport") && v) transport = v;
    else if (!strcmp(a, "--deadline") && v) deadline = atoi(v);
    else bad = 1;
    if (bad) {
      if (me == 0) fprintf(stderr, "shmem_collectives: bad argument %s (see the head of shmem_collectives.c)\n", a);
      shmem_global_exit(2);
    }
    ++i;
  }
  const size_t es = tsizes[t];
  uint64_t maxs = 0;
  for (int s = 0; s < nsizes; ++s) maxs = sizes[s] > maxs ? sizes[s] : maxs;
  const size_t cap = (maxs + (uint64_t)n * es + 4095) / 4096 * 4096;
  char* src = shmem_align(4096, cap);
  char* dst = shmem_align(4096, cap);
  /* pWrk: max(nreduce / 2 + 1, SHMEM_REDUCE_MIN_WRKDATA_SIZE) elements */
  const size_t wrk_elems = cap / es / 2 + 1 + SHMEM_REDUCE_MIN_WRKDATA_SIZE;
  char* wrk = shmem_align(4096, (wrk_elems * es + 4095) / 4096 * 4096);
  if (!src || !dst || !wrk) {
    fprintf(stderr, "shmem_collectives: shmem_align(%zu) failed (raise SHMEM_SYMMETRIC_SIZE)\n", cap);
    shmem_global_exit(1);
  }
  memset(src, 0, cap);
  memset(dst, 0, cap);
  for (int k = 0; k < 2; ++k) {
    for (size_t i = 0; i < sizeof psync[k] / sizeof(long); ++i) psync[k][i] = SHMEM_SYNC_VALUE;
    for (int i = 0; i < SHMEM_COLLECT_SYNC_SIZE; ++i) collect_sync[k][i] = SHMEM_SYNC_VALUE;
  }
  for (int i = 0; i < SHMEM_REDUCE_SYNC_SIZE; ++i) stat_sync[i] = flag_sync[i] = SHMEM_SYNC_VALUE;
  shmem_barrier_all();
  FILE* csv = NULL;
  if (me == 0) {
    if (csv_path) {
      csv = fopen(csv_path, "w");
      if (!csv) {
        perror(csv_path);
        shmem_global_exit(1);
      }
      fputs(COLL_CSV_HEADER, csv);
    }
    printf("shmem_collectives: %d PEs, dtype %s, op %s\n", n, tnames[t], coll_op_names[op]);
    coll_table_header(stdout);
  }
  signal(SIGALRM, on_alarm);
  double* samples = NULL;
  for (int ki = 0; ki < nk; ++ki) {
    const int kind = kinds[ki];
    if (kind == COLL_REDUCE_SCATTER) continue; /* not in OpenSHMEM 1.4 */
    for (int si = 0; si < (kind == COLL_BARRIER ? 1 : nsizes); ++si) {
      const int64_t S = coll_row_elems(kind, sizes[si], n, es);
      const uint64_t bytes = coll_actual_bytes(kind, S, n, es);
      const int64_t it = coll_iters(iters, min_iters, max_bytes, bytes, small_iters), w = coll_warmup(warmup, it);
      const int64_t total = kind == COLL_ALLREDUCE || kind == COLL_BROADCAST ? S : S * n;
      phase = coll_names[kind];
      alarm((unsigned)deadline);
      for (int64_t i = 0; i < total; ++i) {
        switch (kind) {
          case COLL_ALLGATHER: if (i < S) put_el(t, src, i, coll_value(op, me, i)); break;
          case COLL_ALL_TO_ALL: put_el(t, src, i, coll_a2a(me, (int)(i / S), i % S)); break;
          case COLL_BROADCAST: put_el(t, dst, i, me == 0 ? coll_value(op, 0, i) : 0); break;
          default: put_el(t, src, i, coll_value(op, me, i)); break;
        }
      }
      samples = realloc(samples, (size_t)it * sizeof *samples);
      int64_t calls = 0;
      for (int rep = 0; rep < 2; ++rep) {
        const int64_t count = rep == 0 ? w : it;
        if (rep == 1) {
          if (kind == COLL_BROADCAST) {
            if (me != 0) memset(dst, 0, (size_t)S * es);
          } else {
            memset(dst, 0, (size_t)total * es);
          }
        }
        shmem_barrier_all();
        const double t0 = coll_now_us();
        double last = t0;
        for (int64_t k = 0; k < count; ++k, ++calls) {
          long* ps = psync[calls & 1];
          switch (kind) {
            case COLL_ALLREDUCE:
              switch (t) {
                case T_F32: reduce_float(op, (float*)dst, (const float*)src, (int)S, n, (float*)wrk, ps); break;
                case T_F64: reduce_double(op, (double*)dst, (const double*)src, (int)S, n, (double*)wrk, ps); break;
                case T_I32: reduce_int(op, (int*)dst, (const int*)src, (int)S, n, (int*)wrk, ps); break;
                default: reduce_long(op, (long*)dst, (const long*)src, (int)S, n, (long*)wrk, ps); break;
              }
              break;
            case COLL_ALLGATHER:
              if (es == 4) shmem_fcollect32(dst, src, (size_t)S, 0, 0, n, collect_sync[calls & 1]);
              else shmem_fcollect64(dst, src, (size_t)S, 0, 0, n, collect_sync[calls & 1]);
              break;
            case COLL_ALL_TO_ALL:
              if (es == 4) shmem_alltoall32(dst, src, (size_t)S, 0, 0, n, ps);
              else shmem_alltoall64(dst, src, (size_t)S, 0, 0, n, ps);
              break;
            case COLL_BROADCAST:
              /* in place: dest == source (the root's copy is the source and is not written) */
              if (es == 4) shmem_broadcast32(dst, dst, (size_t)S, 0, 0, 0, n, ps);
              else shmem_broadcast64(dst, dst, (size_t)S, 0, 0, 0, n, ps);
              break;
            default: shmem_barrier_all(); break;
          }
          if (rep == 1) {
            const double now = coll_now_us();
            samples[k] = now - last;
            last = now;
          }
        }
        if (rep == 1) {
          stat_src = (coll_now_us() - t0) / (double)it;
          int bad = 0;
          for (int64_t i = 0; i < S && !bad; ++i) {
            switch (kind) {
              case COLL_ALLREDUCE: bad = !eq_el(t, dst, i, coll_reduced(op, n, i)); break;
              case COLL_BROADCAST: bad = !eq_el(t, dst, i, coll_value(op, 0, i)); break;
              case COLL_ALLGATHER:
                for (int r = 0; r < n && !bad; ++r) bad = !eq_el(t, dst, r * S + i, coll_value(op, r, i));
                break;
              case COLL_ALL_TO_ALL:
                for (int r = 0; r < n && !bad; ++r) bad = !eq_el(t, dst, r * S + i, coll_a2a(r, me, i));
                break;
              default: break;
            }
          }
          flag_src = bad;
          shmem_barrier_all();
          shmem_double_sum_to_all(&stat_dst, &stat_src, 1, 0, 0, n, stat_wrk, stat_sync);
          shmem_barrier_all();
          shmem_int_max_to_all(&flag_dst, &flag_src, 1, 0, 0, n, flag_wrk, flag_sync);
          shmem_barrier_all();
          if (me == 0) {
            coll_row(stdout, csv, "shmem", transport, kind, n, tnames[t], coll_op_names[op], "-", bytes, S, it,
                     coll_median(samples, it), stat_dst / n, kind == COLL_BARRIER ? "-" : flag_dst ? "FAIL" : "ok");
          }
        }
      }
      shmem_barrier_all();
      alarm(0);
    }
  }
  if (csv) fclose(csv);
  free(samples);
  shmem_barrier_all();
  shmem_free(wrk);
  shmem_free(dst);
  shmem_free(src);
  shmem_finalize();
  return 0;
}
