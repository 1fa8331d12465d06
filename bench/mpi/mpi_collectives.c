/* mpi_collectives: Open MPI's collectives at rwin-perf's sizes, columns and checks (bench/coll_common.h).
 *
 *   mpicc -O2 -I bench -o mpi_collectives bench/mpi/mpi_collectives.c
 *   mpirun --allow-run-as-root -np 4 ./mpi_collectives -t allreduce,allgather -s 8:64M:x8 -n 200
 *
 * Tests: allreduce (MPI_Allreduce, out of place), allgather (MPI_Allgather), reduce_scatter
 * (MPI_Reduce_scatter_block, out of place), all_to_all (MPI_Alltoall), broadcast (MPI_Bcast,
 * root 0), barrier (MPI_Barrier). Each size: warm-up, the destination is cleared, MPI_Barrier,
 * the timed loop (one clock read per call), then every rank checks its result exactly and the
 * verdict is combined over ranks ("ok" / "FAIL").
 * Options: -t LIST, -s SIZES, -n ITERS (200), -w WARMUP (20), --min-iters N (5),
 *          --max-bytes B (caps iterations at max(min-iters, B / size); default 1G),
 *          --small-iters N (at least N calls at <= 8 KiB, OSU's convention; default 0: off),
 *          --dtype f32|f64|i32|i64 (f32), --op sum|max|min|prod (sum), -o CSV, --transport LABEL
 *          (a label for the CSV only), --deadline S (alarm per size, default 300),
 *          --compute-us N (overlap: N us of compute with each timed call, after it, or with
 *          --nonblocking between MPI_I<collective> and MPI_Wait; --compute sleep|spin as rwin-perf's).
 * Output: a table on rank 0's stdout, the CSV (COLL_CSV_HEADER) in -o FILE.
 */
#include <mpi.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../coll_common.h"

static const char* phase = "start";
static void on_alarm(int s) {
  (void)s;
  static const char msg[] = "mpi_collectives: deadline passed in ";
  if (write(2, msg, sizeof msg - 1) < 0) { /* nothing to do */ }
  if (write(2, phase, strlen(phase)) < 0) { /* nothing to do */ }
  if (write(2, "\n", 1) < 0) { /* nothing to do */ }
  _exit(3);
}

struct dt {
  const char* name;
  MPI_Datatype mpi;
  size_t size;
};
static const struct dt dtypes[] = {{"f32", MPI_FLOAT, 4}, {"f64", MPI_DOUBLE, 8}, {"i32", MPI_INT32_T, 4},
                                   {"i64", MPI_INT64_T, 8}};

static void put_el(const struct dt* t, void* p, int64_t i, int64_t v) {
  switch (t->name[0] == 'f' ? (int)t->size : -(int)t->size) {
    case 4: ((float*)p)[i] = (float)v; break;
    case 8: ((double*)p)[i] = (double)v; break;
    case -4: ((int32_t*)p)[i] = (int32_t)v; break;
    default: ((int64_t*)p)[i] = v; break;
  }
}
static int eq_el(const struct dt* t, const void* p, int64_t i, int64_t v) {
  switch (t->name[0] == 'f' ? (int)t->size : -(int)t->size) {
    case 4: return ((const float*)p)[i] == (float)v;
    case 8: return ((const double*)p)[i] == (double)v;
    case -4: return ((const int32_t*)p)[i] == (int32_t)v;
    default: return ((const int64_t*)p)[i] == v;
  }
}

/* --compute-us: `us` microseconds of work beside a collective, busy or asleep (rwin-perf's compute()). */
static void compute(int64_t us, int spin) {
  if (us <= 0) return;
  if (!spin) {
    const struct timespec ts = {(time_t)(us / 1000000), (long)(us % 1000000) * 1000};
    nanosleep(&ts, NULL);
    return;
  }
  const double until = coll_now_us() + (double)us;
  while (coll_now_us() < until) {
  }
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int me, n;
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  int kinds[COLL_N], nk = 0;
  uint64_t sizes[COLL_MAX_SIZES];
  int nsizes = 0;
  int64_t iters = 200, warmup = 20, min_iters = 5, small_iters = 0;
  uint64_t max_bytes = 1ull << 30;
  const struct dt* t = &dtypes[0];
  int op = COLL_SUM;
  const char* csv_path = NULL;
  const char* transport = "";
  int deadline = 300;
  int64_t compute_us = 0;
  int compute_spin = 0, nonblocking = 0;
  for (int k = 0; k < COLL_N; ++k) kinds[nk++] = k;
  nsizes = coll_parse_sizes("8,4K,64K,1M", sizes, COLL_MAX_SIZES);
  for (int i = 1; i < argc; ++i) {
    const char* a = argv[i];
    if (!strcmp(a, "--nonblocking")) {
      nonblocking = 1;
      continue;
    }
    const char* v = i + 1 < argc ? argv[i + 1] : NULL;
    int bad = v == NULL;
    if (!strcmp(a, "-t") && v) {
      char buf[512];
      snprintf(buf, sizeof buf, "%s", v);
      nk = 0;
      for (char* s = strtok(buf, ","); s; s = strtok(NULL, ",")) {
        const int k = coll_parse_kind(s);
        if (k < 0) bad = 1;
        else kinds[nk++] = k;
      }
    } else if (!strcmp(a, "-s") && v) {
      nsizes = coll_parse_sizes(v, sizes, COLL_MAX_SIZES);
      bad = nsizes == 0;
    } else if (!strcmp(a, "-n") && v) iters = atoll(v), bad = iters < 1;
    else if (!strcmp(a, "-w") && v) warmup = atoll(v);
    else if (!strcmp(a, "--small-iters") && v) small_iters = atoll(v), bad = small_iters < 0;
    else if (!strcmp(a, "--min-iters") && v) min_iters = atoll(v), bad = min_iters < 1;
    else if (!strcmp(a, "--max-bytes") && v) max_bytes = coll_parse_bytes(v, &bad), bad = !bad;
    else if (!strcmp(a, "--dtype") && v) {
      t = NULL;
      for (size_t d = 0; d < sizeof dtypes / sizeof *dtypes; ++d) {
        if (!strcmp(v, dtypes[d].name)) t = &dtypes[d];
      }
      bad = t == NULL;
    } else if (!strcmp(a, "--op") && v) op = coll_parse_op(v), bad = op < 0;
    else if (!strcmp(a, "-o") && v) csv_path = v;
    else if (!strcmp(a, "--transport") && v) transport = v;
    else if (!strcmp(a, "--deadline") && v) deadline = atoi(v);
    else if (!strcmp(a, "--compute-us") && v) compute_us = atoll(v), bad = compute_us < 0;
    else if (!strcmp(a, "--compute") && v) compute_spin = !strcmp(v, "spin"), bad = !compute_spin && strcmp(v, "sleep");
    else bad = 1;
    if (bad) {
      if (me == 0) fprintf(stderr, "mpi_collectives: bad argument %s (see the head of mpi_collectives.c)\n", a);
      MPI_Abort(MPI_COMM_WORLD, 2);
    }
    ++i;
  }
  MPI_Op mop = op == COLL_SUM ? MPI_SUM : op == COLL_MAX ? MPI_MAX : op == COLL_MIN ? MPI_MIN : MPI_PROD;
  uint64_t maxs = 0;
  for (int s = 0; s < nsizes; ++s) maxs = sizes[s] > maxs ? sizes[s] : maxs;
  const size_t cap = (maxs + (uint64_t)n * t->size + 4095) / 4096 * 4096;
  char *src = aligned_alloc(4096, cap), *dst = aligned_alloc(4096, cap);
  if (!src || !dst) MPI_Abort(MPI_COMM_WORLD, 1);
  memset(src, 0, cap);
  memset(dst, 0, cap);
  int* vcounts = calloc((size_t)n, sizeof(int));  /* all_to_all_v's counts and displacements */
  int* vdispls = calloc((size_t)n, sizeof(int));
  if (!vcounts || !vdispls) MPI_Abort(MPI_COMM_WORLD, 1);
  FILE* csv = NULL;
  if (me == 0) {
    if (csv_path) {
      csv = fopen(csv_path, "w");
      if (!csv) {
        perror(csv_path);
        MPI_Abort(MPI_COMM_WORLD, 1);
      }
      fputs(COLL_CSV_HEADER, csv);
    }
    printf("mpi_collectives: %d ranks, dtype %s, op %s\n", n, t->name, coll_op_names[op]);
    coll_table_header(stdout);
  }
  signal(SIGALRM, on_alarm);
  double* samples = NULL;
  for (int ki = 0; ki < nk; ++ki) {
    const int kind = kinds[ki];
    for (int si = 0; si < (kind == COLL_BARRIER ? 1 : nsizes); ++si) {
      const int64_t S = coll_row_elems(kind, sizes[si], n, t->size);
      const uint64_t bytes = coll_actual_bytes(kind, S, n, t->size);
      const int64_t it = coll_iters(iters, min_iters, max_bytes, bytes, small_iters), w = coll_warmup(warmup, it);
      const int64_t total = kind == COLL_ALLREDUCE || kind == COLL_BROADCAST ? S : S * n;  // elements in the buffer
      phase = coll_names[kind];
      alarm((unsigned)deadline);
      /* all_to_all_v: S elements to and from every rank, packed */
      for (int r = 0; r < n; ++r) vcounts[r] = (int)S, vdispls[r] = (int)(r * S);
      /* inputs */
      for (int64_t i = 0; i < total; ++i) {
        switch (kind) {
          case COLL_ALLGATHER: if (i < S) put_el(t, src, i, coll_value(op, me, i)); break;
          case COLL_ALL_TO_ALL:
          case COLL_ALL_TO_ALL_V: put_el(t, src, i, coll_a2a(me, (int)(i / S), i % S)); break;
          case COLL_BROADCAST: put_el(t, dst, i, me == 0 ? coll_value(op, 0, i) : 0); break;
          default: put_el(t, src, i, coll_value(op, me, i)); break;
        }
      }
      samples = realloc(samples, (size_t)it * sizeof *samples);
      for (int rep = 0; rep < 2; ++rep) {
        const int64_t count = rep == 0 ? w : it;
        if (rep == 1) {
          /* clear what the collective produces, so that the timed calls must write it again */
          if (kind == COLL_BROADCAST) {
            if (me != 0) memset(dst, 0, (size_t)S * t->size);
          } else {
            memset(dst, 0, (size_t)total * t->size);
          }
        }
        MPI_Barrier(MPI_COMM_WORLD);
        const double t0 = coll_now_us();
        double last = t0;
        for (int64_t k = 0; k < count; ++k) {
          if (nonblocking) {
            MPI_Request rq = MPI_REQUEST_NULL;
            switch (kind) {
              case COLL_ALLREDUCE: MPI_Iallreduce(src, dst, (int)S, t->mpi, mop, MPI_COMM_WORLD, &rq); break;
              case COLL_ALLGATHER: MPI_Iallgather(src, (int)S, t->mpi, dst, (int)S, t->mpi, MPI_COMM_WORLD, &rq); break;
              case COLL_REDUCE_SCATTER: MPI_Ireduce_scatter_block(src, dst, (int)S, t->mpi, mop, MPI_COMM_WORLD, &rq); break;
              case COLL_ALL_TO_ALL: MPI_Ialltoall(src, (int)S, t->mpi, dst, (int)S, t->mpi, MPI_COMM_WORLD, &rq); break;
              case COLL_ALL_TO_ALL_V: MPI_Ialltoallv(src, vcounts, vdispls, t->mpi, dst, vcounts, vdispls, t->mpi, MPI_COMM_WORLD, &rq); break;
              case COLL_BROADCAST: MPI_Ibcast(dst, (int)S, t->mpi, 0, MPI_COMM_WORLD, &rq); break;
              default: MPI_Ibarrier(MPI_COMM_WORLD, &rq); break;
            }
            compute(compute_us, compute_spin);
            MPI_Wait(&rq, MPI_STATUS_IGNORE);
          } else {
            switch (kind) {
              case COLL_ALLREDUCE: MPI_Allreduce(src, dst, (int)S, t->mpi, mop, MPI_COMM_WORLD); break;
              case COLL_ALLGATHER: MPI_Allgather(src, (int)S, t->mpi, dst, (int)S, t->mpi, MPI_COMM_WORLD); break;
              case COLL_REDUCE_SCATTER: MPI_Reduce_scatter_block(src, dst, (int)S, t->mpi, mop, MPI_COMM_WORLD); break;
              case COLL_ALL_TO_ALL: MPI_Alltoall(src, (int)S, t->mpi, dst, (int)S, t->mpi, MPI_COMM_WORLD); break;
              case COLL_ALL_TO_ALL_V: MPI_Alltoallv(src, vcounts, vdispls, t->mpi, dst, vcounts, vdispls, t->mpi, MPI_COMM_WORLD); break;
              case COLL_BROADCAST: MPI_Bcast(dst, (int)S, t->mpi, 0, MPI_COMM_WORLD); break;
              default: MPI_Barrier(MPI_COMM_WORLD); break;
            }
            compute(compute_us, compute_spin);
          }
          if (rep == 1) {
            const double now = coll_now_us();
            samples[k] = now - last;
            last = now;
          }
        }
        if (rep == 1) {
          double avg = (coll_now_us() - t0) / (double)it, sum = 0;
          int bad = 0;
          for (int64_t i = 0; i < S && !bad; ++i) {
            switch (kind) {
              case COLL_ALLREDUCE: bad = !eq_el(t, dst, i, coll_reduced(op, n, i)); break;
              case COLL_REDUCE_SCATTER: bad = !eq_el(t, dst, i, coll_reduced(op, n, (int64_t)me * S + i)); break;
              case COLL_BROADCAST: bad = !eq_el(t, dst, i, coll_value(op, 0, i)); break;
              case COLL_ALLGATHER:
                for (int r = 0; r < n && !bad; ++r) bad = !eq_el(t, dst, r * S + i, coll_value(op, r, i));
                break;
              case COLL_ALL_TO_ALL:
              case COLL_ALL_TO_ALL_V:
                for (int r = 0; r < n && !bad; ++r) bad = !eq_el(t, dst, r * S + i, coll_a2a(r, me, i));
                break;
              default: break;
            }
          }
          int anybad = 0;
          MPI_Reduce(&avg, &sum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
          MPI_Reduce(&bad, &anybad, 1, MPI_INT, MPI_LOR, 0, MPI_COMM_WORLD);
          if (me == 0) {
            coll_row(stdout, csv, "mpi", transport, kind, n, t->name, coll_op_names[op], "-", bytes, S, it,
                     coll_median(samples, it), sum / n, kind == COLL_BARRIER ? "-" : anybad ? "FAIL" : "ok");
          }
        }
      }
      alarm(0);
    }
  }
  if (csv) fclose(csv);
  free(samples);
  free(src);
  free(dst);
  free(vcounts);
  free(vdispls);
  MPI_Finalize();
  return 0;
}
