/* shmem_bench: the OpenSHMEM side of bench/compare.sh, the same operations as rwin-perf.
 *
 *   oshcc -O2 -o shmem_bench shmem_bench.c
 *   oshrun --allow-run-as-root -np 2 --mca osc ^rdma ./shmem_bench -s 8,4096,65536 -n 1000 -O 16
 *
 * Tests (PE 0 measures, PE 1 answers or progresses):
 *   put_lat   putmem + fence + atomic_add on the peer's signal, peer wait_until then answers; RTT/2
 *   put_bw    O x putmem, quiet; repeated
 *   get_lat   one blocking getmem, full round trip
 *   get_bw    O x getmem_nbi, quiet; repeated
 *   fadd_lat  one blocking atomic_fetch_add on the peer, full round trip (8 B only; old values checked)
 * Buffers come from shmem_align(4096) so that (dst - src) mod 4096 = SKEW exactly (default 0):
 * two consecutive shmem_malloc()s can land 8 bytes apart mod 4096 and hit glibc's rep-movsb trap.
 * Output: CSV "tool,test,size,iters,p50_us,avg_us,mibs" on PE 0 (stdout). Each blocking wait has
 * a deadline (an alarm per test and size): one that passes prints an error and exits.
 */
#include <shmem.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <signal.h>
#include <unistd.h>

#define MAX_SIZES 32
#define DEADLINE_S 120

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int cmp_double(const void* a, const void* b) {
  const double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}

/* Signal words live on the symmetric heap (UCX-allocated): static data is only registered, which
 * posix/sysv cannot reach one-sidedly (see perf-baselines section 1). */
static long* sig;
#define sig_word (sig[0])
#define fadd_word (sig[8])

/* Deadline: shmem_long_wait_until progresses the transport (needed over tcp, where RMA and atomics
 * are software-emulated and the target must progress; shmem_long_test does not progress in OSHMEM
 * 4.1.4), but has no timeout. An alarm armed per test and size bounds every wait instead. */
static const char* phase = "start";
static void on_alarm(int sig) {
  (void)sig;
  static const char msg[] = "shmem_bench: deadline passed (a wait never completed); phase: ";
  write(2, msg, sizeof msg - 1);
  write(2, phase, strlen(phase));
  write(2, "\n", 1);
  _exit(1);
}
static void arm(const char* what) {
  phase = what;
  alarm((unsigned)DEADLINE_S);
}

static void wait_ge(long* word, long value) { shmem_long_wait_until(word, SHMEM_CMP_GE, value); }

static void report(const char* test, size_t size, double* samples, long n, double total_us) {
  qsort(samples, (size_t)n, sizeof(double), cmp_double);
  const double avg = total_us / (double)n;
  printf("oshmem,%s,%zu,%ld,%.4f,%.4f,%.2f\n", test, size, n, samples[n / 2], avg, (double)size / avg / 1.048576);
  fflush(stdout);
}

int main(int argc, char** argv) {
  size_t sizes[MAX_SIZES];
  int nsizes = 0;
  long iters = 1000, O = 16;
  size_t skew = 0;
  unsigned long long max_bytes = 256ull << 20;
  const char* tests = "put_lat,put_bw,get_lat,get_bw,fadd_lat";
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "-s") && i + 1 < argc) {
      char* list = argv[++i];
      for (char* tok = strtok(list, ","); tok && nsizes < MAX_SIZES; tok = strtok(NULL, ",")) {
        char* end;
        double v = strtod(tok, &end);
        if (*end == 'K') v *= 1024;
        if (*end == 'M') v *= 1048576;
        sizes[nsizes++] = (size_t)v;
      }
    } else if (!strcmp(argv[i], "-n") && i + 1 < argc) {
      iters = atol(argv[++i]);
    } else if (!strcmp(argv[i], "-O") && i + 1 < argc) {
      O = atol(argv[++i]);
    } else if (!strcmp(argv[i], "-t") && i + 1 < argc) {
      tests = argv[++i];
    } else if (!strcmp(argv[i], "--skew") && i + 1 < argc) {
      skew = (size_t)atol(argv[++i]);
    } else if (!strcmp(argv[i], "--max-bytes") && i + 1 < argc) {
      max_bytes = strtoull(argv[++i], NULL, 10);
    } else {
      fprintf(stderr, "usage: shmem_bench [-t tests] [-s sizes] [-n iters] [-O outstanding] [--skew B] [--max-bytes B]\n");
      return 2;
    }
  }
  if (nsizes == 0) sizes[nsizes++] = 8;
  if (O < 1) O = 1;
  signal(SIGALRM, on_alarm);
  arm("init");
  shmem_init();
  const int me = shmem_my_pe(), peer = 1 - me;
  if (shmem_n_pes() != 2) {
    if (me == 0) fprintf(stderr, "shmem_bench: needs exactly 2 PEs\n");
    shmem_finalize();
    return 2;
  }
  size_t max_size = 8;
  for (int i = 0; i < nsizes; ++i) max_size = sizes[i] > max_size ? sizes[i] : max_size;
  const size_t buf_bytes = (max_size + skew + 4095) / 4096 * 4096;
  char* src = shmem_align(4096, buf_bytes);
  char* dst = shmem_align(4096, buf_bytes);
  sig = shmem_align(4096, 4096);
  if (!src || !dst || !sig) {
    fprintf(stderr, "shmem_bench: pe %d: shmem_align(%zu) failed\n", me, buf_bytes);
    shmem_global_exit(1);
  }
  memset(src, 7, buf_bytes);
  memset(dst, 0, buf_bytes);
  memset(sig, 0, 4096);
  const long max_iters = iters;
  double* samples = malloc(sizeof(double) * (size_t)(max_iters + 1));
  long signals = 0; /* put_lat: signals received so far */
  shmem_barrier_all();

  for (int si = 0; si < nsizes; ++si) {
    const size_t size = sizes[si];
    long n = max_iters;
    const long cap = (long)(max_bytes / size) > 20 ? (long)(max_bytes / size) : 20;
    if (n > cap) n = cap;
    const long warm = n / 10 > 2 ? n / 10 : 2;
    char* d = dst + skew;

    if (strstr(tests, "put_lat")) {
      arm("put_lat");
      shmem_barrier_all();
      double total = 0;
      for (long i = -warm; i < n; ++i) {
        const double t0 = now_us();
        if (me == 0) {
          shmem_putmem(d, src, size, peer);
          shmem_fence();
          shmem_long_atomic_add(&sig_word, 1, peer);
          wait_ge(&sig_word, ++signals);
          if (i >= 0) {
            samples[i] = (now_us() - t0) / 2;
            total += samples[i];
          }
        } else {
          wait_ge(&sig_word, ++signals);
          shmem_putmem(d, src, size, peer);
          shmem_fence();
          shmem_long_atomic_add(&sig_word, 1, peer);
        }
      }
      shmem_barrier_all();
      if (me == 0) report("put_lat", size, samples, n, total);
    }
    if (strstr(tests, "put_bw")) {
      arm("put_bw");
      const long groups = n / O > 0 ? n / O : 1;
      shmem_barrier_all();
      double total = 0;
      if (me == 0) {
        for (long g = -(warm / O + 1); g < groups; ++g) {
          const double t0 = now_us();
          for (long k = 0; k < O; ++k) shmem_putmem(d, src, size, peer);
          shmem_quiet();
          if (g >= 0) {
            samples[g] = (now_us() - t0) / (double)O;
            total += now_us() - t0;
          }
        }
      }
      shmem_barrier_all(); /* PE 1 progresses here (tcp: software RMA needs the target) */
      if (me == 0) report("put_bw", size, samples, groups, total / (double)O);
    }
    if (strstr(tests, "get_lat")) {
      arm("get_lat");
      shmem_barrier_all();
      double total = 0;
      if (me == 0) {
        for (long i = -warm; i < n; ++i) {
          const double t0 = now_us();
          shmem_getmem(d, src, size, peer);
          if (i >= 0) {
            samples[i] = now_us() - t0;
            total += samples[i];
          }
        }
      }
      shmem_barrier_all();
      if (me == 0) report("get_lat", size, samples, n, total);
    }
    if (strstr(tests, "get_bw")) {
      arm("get_bw");
      const long groups = n / O > 0 ? n / O : 1;
      shmem_barrier_all();
      double total = 0;
      if (me == 0) {
        for (long g = -(warm / O + 1); g < groups; ++g) {
          const double t0 = now_us();
          for (long k = 0; k < O; ++k) shmem_getmem_nbi(d, src, size, peer);
          shmem_quiet();
          if (g >= 0) {
            samples[g] = (now_us() - t0) / (double)O;
            total += now_us() - t0;
          }
        }
      }
      shmem_barrier_all();
      if (me == 0) report("get_bw", size, samples, groups, total / (double)O);
    }
  }
  if (strstr(tests, "fadd_lat")) {
    arm("fadd_lat");
    const long n = max_iters;
    shmem_barrier_all();
    double total = 0;
    if (me == 0) {
      long expect = 0; /* only PE 0 adds: each old value is the count so far (the op really ran) */
      for (long i = -(n / 10 + 2); i < n; ++i) {
        const double t0 = now_us();
        long old = shmem_long_atomic_fetch_add(&fadd_word, 1, peer);
        __asm__ volatile("" : : "r"(old));
        if (old != expect++) {
          fprintf(stderr, "shmem_bench: fadd_lat: old value %ld, expected %ld\n", old, expect - 1);
          shmem_global_exit(1);
        }
        if (i >= 0) {
          samples[i] = now_us() - t0;
          total += samples[i];
        }
      }
    }
    shmem_barrier_all();
    if (me == 0) report("fadd_lat", 8, samples, n, total);
  }
  shmem_barrier_all();
  free(samples);
  shmem_free(sig);
  shmem_free(dst);
  shmem_free(src);
  shmem_finalize();
  return 0;
}
