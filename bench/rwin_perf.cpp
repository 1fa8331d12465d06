// rwin-perf: a ucx_perftest-style benchmark for rwin, with an in-run raw-UCP / raw-verbs baseline.
//
//   rwinrun -n 2 -- build/bin/rwin-perf -t put_lat,put_bw -s 8:16M --vs-raw
//
// Tests (ranks 0 and 1; other ranks idle, except ring_shift which uses every rank):
//   put_lat      put + notify, peer waits and answers the same way; one way = RTT / 2
//   put_bw       -O puts then quiet(), repeated; per-op time and MiB/s
//   put_add_bw   the same with put(..., AtomicType::Add) of i64 (rwin only: no raw baseline)
//   get_lat      one blocking get, full round trip
//   get_bw       -O gets (rwin's get is blocking; raw keeps -O in flight), then quiet
//   notify_lat   notify ping-pong; one way = RTT / 2
//   notify_rate  -O notifies then quiet(), repeated
//   fetch_add_lat  one blocking fetch_add(+1) on rank 1's int64 element, full round trip (one 8 B
//                element whatever -s says; rwin only); every old value is checked to be the last + 1
//   ring_shift   every rank puts to rank+1, notifies it and waits for rank-1; time per step
//   memcpy       rank 0 alone: glibc memcpy between two page-aligned buffers (+ --skew), the floor
//
// Collective tests (every rank of the job, rwin/collectives.h on world(ctx); bench/coll_common.h
// has the size convention, the data and the exact check, shared with bench/mpi/mpi_collectives.c
// and bench/shmem/shmem_collectives.c):
//   allreduce      allreduce(src, dst, --op, --mode) out of place, [1, size/esize]
//   allgather      allgather(stage [1, S], data [NR, S]); size = NR * S * esize (the gathered data)
//   reduce_scatter reduce_scatter(data [NR, S], out [1, S], --op); size = the [NR, S] input
//   all_to_all     all_to_all(stage [NR, S], data [NR, S]); size = [NR, S]
//   broadcast      broadcast(x [1, size/esize], root 0), in place
//   barrier        world(ctx).barrier() (size 0)
// Per size: warm-up calls, the outputs are cleared, barrier, the timed calls (one clock read per
// call), then every rank checks its output exactly. Reported: p50 of rank 0's per-call times, avg
// = mean over ranks of each rank's average, algbw = size / avg and busbw = algbw x (2(n-1)/n
// allreduce; (n-1)/n allgather, reduce_scatter, all_to_all; 1 broadcast), GB/s as nccl-tests.
// Overlap: --compute-us N adds N us of compute (--compute sleep: the thread blocks, as a host
// thread on a device kernel; spin: busy) to each timed call, after it, or with --nonblocking between
// start_* and wait() (bench/coll_overlap.sh sets the three variants side by side with MPI's).
//
// Noise: this machine's latency swings 2-5x between runs, so every test runs in short batches and,
// with --vs-raw, alternates a batch of rwin with a batch of the same operation written on raw UCP
// (bench/raw_ucp.h), or on raw libibverbs when the transport is verbs (bench/raw_verbs.h), inside
// the same two processes. The reported ratio is the median of the per-batch
// ratios raw_time / rwin_time (= rwin/raw for bandwidth, raw/rwin for latency: higher is better),
// where each batch's time is the median of its per-op samples (ping-pong one-way times, or per-op
// time of each group of -O ops), so that a preemption inside one batch does not decide its ratio.
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "raw_ucp.h"
#ifdef RWIN_PERF_RAW_VERBS
#include "raw_verbs.h"
#endif
#include <nlohmann/json.hpp>

#include "coll_common.h"
#include "pin_cpu.h"
#include "collectives/team_state.h"  // ContextAccess: the transport's device counters (--counters)
#include "common/knobs.h"
#include "rwin/collectives.h"
#include "rwin/rwin.h"
#include "rwin/version.h"
#include "tools/cli.h"

namespace {

using Clock = std::chrono::steady_clock;

// Signal words (the same layout in rwin's signal array and in the raw region).
enum Word : int { kData = 0, kGo = 1, kDone = 2, kRate = 3, kRing = 4, kFin = 5, kWords = 8 };

// ---------------------------------------------------------------------------------------------
// Arguments

struct Args {
  std::vector<std::string> tests{"put_lat", "put_bw", "get_lat", "get_bw", "notify_lat", "notify_rate"};
  std::vector<uint64_t> sizes{8, 4096, 65536, 1 << 20};
  int64_t iters = 2000;
  int64_t warmup = 200;
  int outstanding = 16;
  int batches = 20;
  uint64_t max_bytes = 256ull << 20;  // per test and size: caps iterations of large messages
  std::string transport;
  std::string device;
  uint64_t chunk = 0;
  int depth = 0;
  uint64_t skew = 0;
  bool vs_raw = false;
  bool nbi = false;
  bool local = false;
  bool raw_fence = false;
  bool counters = false;
  bool stats = false;  // --stats: Context::stats() per test
  bool csv = false;
  bool json = false;
  bool pin = true;
  std::string out;
  int64_t timeout_ms = 60000;
  std::string ready_file;  // created once the Context started (tests/faults: kill trials during collectives)
  // collective tests
  rwin::DType dtype = rwin::DType::F32;
  rwin::ReduceOp op = rwin::ReduceOp::Sum;
  rwin::AllreduceMode mode = rwin::AllreduceMode::Auto;
  std::string mode_name = "auto";
  int64_t min_iters = 20;
  int64_t small_iters = 0;  // collectives: at least this many calls at <= 8 KiB (coll_common.h)
  std::string label;
  // Overlap (--compute-us): each timed call is followed by this much compute, `compute_spin` busy (a
  // CPU kernel) or asleep (a device kernel the host thread blocks on); --nonblocking starts the
  // collective before it and waits after it (Team::start_*).
  int64_t compute_us = 0;
  bool compute_spin = false;
  bool nonblocking = false;
};

bool is_coll(const std::string& t) {
  return t == "allreduce" || t == "allgather" || t == "reduce_scatter" || t == "all_to_all" || t == "broadcast" ||
         t == "barrier" || t == "all_to_all_v";
}

const char* const kPairTests[] = {"put_lat",    "put_bw",      "put_add_bw", "get_lat",      "get_bw",
                                  "notify_lat", "notify_rate", "ring_shift", "fetch_add_lat", "memcpy"};

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, sep)) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

// -t: "" or why the list is refused.
std::string check_tests(const std::string& list) {
  const auto tests = split(list, ',');
  if (tests.empty()) return "'" + list + "' names no test";
  for (const auto& t : tests) {
    if (!is_coll(t) && std::none_of(std::begin(kPairTests), std::end(kPairTests), [&](const char* n) { return t == n; })) {
      return "unknown test '" + t + "' (see --help)";
    }
  }
  return {};
}

// -s: a list "8,4096,64K" or a sweep "LO:HI" (x2) / "LO:HI:x4", every size a positive multiple of 8
// in parse_size's form (bootstrap/parse_number.h). Returns "" and fills `out`, or why not.
std::string parse_sizes(const std::string& s, std::vector<uint64_t>& out) {
  out.clear();
  auto bytes = [](const std::string& t, uint64_t& v) -> std::string {
    const std::string why = rwin::bootstrap::parse_size(t, v);
    return why.empty() ? why : "'" + t + "' is not a size: " + why + " (want " + rwin::bootstrap::kSizeForm + ")";
  };
  if (s.find(':') != std::string::npos) {
    const auto parts = split(s, ':');
    if (parts.size() < 2 || parts.size() > 3) return "bad sweep '" + s + "' (want LO:HI or LO:HI:x4)";
    uint64_t lo = 0, hi = 0, factor = 2;
    for (const auto& [text, v] : {std::pair{parts[0], &lo}, std::pair{parts[1], &hi}}) {
      if (std::string why = bytes(text, *v); !why.empty()) return why;
    }
    if (parts.size() == 3) {
      if (parts[2].size() < 2 || parts[2][0] != 'x' ||
          !rwin::bootstrap::parse_u64_in(std::string_view(parts[2]).substr(1), 2, 1024, factor).empty()) {
        return "bad sweep step '" + parts[2] + "' (want x2 .. x1024)";
      }
    }
    if (lo == 0 || lo > hi) return "bad sweep '" + s + "' (want 0 < LO <= HI)";
    for (uint64_t v = lo; v <= hi; v *= factor) {
      out.push_back(v);
      if (v > hi / factor) break;  // the next step would pass HI (or overflow)
    }
  } else {
    for (const auto& p : split(s, ',')) {
      uint64_t v = 0;
      if (std::string why = bytes(p, v); !why.empty()) return why;
      out.push_back(v);
    }
  }
  if (out.empty()) return "no sizes in '" + s + "'";
  for (uint64_t v : out) {
    if (v == 0 || v % 8 != 0) return "size " + std::to_string(v) + " is not a positive multiple of 8";
  }
  return {};
}

[[noreturn]] void usage(const std::string& msg) {
  std::fprintf(stderr, "rwin-perf: %s\nrun 'rwin-perf --help' for the options\n", msg.c_str());
  std::exit(2);
}

Args parse(int argc, char** argv) {
  Args a;
  CLI::App app{"rwin-perf: rwin latency/bandwidth benchmark (ucx_perftest style); run it as\n"
               "  rwinrun -n 2 -- rwin-perf [options]       (pair tests: ranks 0 and 1; collectives: every rank)",
               "rwin-perf"};
  rwin::cli::setup(app, rwin::version());
  std::string tests, sizes;
  bool misalign = false;
  const char* kColl = "Collectives (size = the per-rank buffer as nccl-tests counts it, bench/coll_common.h)";
  app.add_option("-t", tests,
                 "tests: put_lat,put_bw,put_add_bw,get_lat,get_bw,notify_lat,notify_rate,ring_shift,fetch_add_lat,\n"
                 "memcpy;\n"
                 "collectives (every rank): allreduce,allgather,reduce_scatter,all_to_all,all_to_all_v,broadcast,barrier\n"
                 "(default: the six pair tests)")
      ->check(CLI::Validator([](std::string& v) { return check_tests(v); }, ""))
      ->type_name("LIST");
  app.add_option("-s", sizes, "bytes, multiples of 8: a list 8,4096,64K or a sweep 8:16M (x2) / 8:16M:x4")
      ->check(CLI::Validator(
          [](std::string& v) {
            std::vector<uint64_t> out;
            return parse_sizes(v, out);
          },
          ""))
      ->type_name("SIZES");
  using rwin::cli::Count;
  using rwin::cli::Size;
  app.add_option("-n", a.iters, "iterations per test and size (default 2000; capped by --max-bytes)")
      ->transform(Count(1, INT64_MAX))->type_name("N");
  app.add_option("-w", a.warmup, "warm-up iterations (default 200; at least one, whose data is checked)")->transform(Count(0, INT64_MAX))->type_name("N");
  app.add_option("-O", a.outstanding, "outstanding ops per quiet in bw/rate tests (default 16)")
      ->transform(Count(1, INT32_MAX))->type_name("N");
  app.add_option("--batches", a.batches, "batches per test and size (default 20)")->transform(Count(1, INT32_MAX))->type_name("N");
  app.add_option("--max-bytes", a.max_bytes, "caps iterations at max(20, B / size) (default 256M)")
      ->transform(Size(1))->type_name("B");
  app.add_option("--transport", a.transport, "ucx | tcp | verbs (default: RWIN_TRANSPORT, else ucx)")->type_name("T");
  app.add_option("--device", a.device, "UCX_NET_DEVICES for ucx, the IB device for verbs")->type_name("D");
  app.add_option("--chunk", a.chunk, "rwin chunk size (RWIN_CHUNK_BYTES)")->transform(Size(1))->type_name("B");
  app.add_option("--depth", a.depth, "rwin pipeline depth (RWIN_PIPELINE_DEPTH)")->transform(Count(1, INT32_MAX))->type_name("N");
  auto* skew = app.add_option("--skew", a.skew, "destination offset: (dst - src) mod 4096 = B (multiple of 8)")
                   ->transform(Size(0, 4095))
                   ->type_name("B");
  app.add_flag("--misalign", misalign, "same as --skew 8 (glibc rep-movsb trap check)");
  app.add_flag("--vs-raw", a.vs_raw, "alternate batches with the same op on raw UCP (verbs: raw libibverbs); report ratios");
  app.add_flag("--nbi", a.nbi, "put_bw/get_bw (and put in put_lat) use put_nbi/get_nbi");
  app.add_flag("--counters", a.counters,
               "after each test, rank 0 prints what its transport asked of the device (verbs: WRs, doorbells, "
               "signaled WRs, inline WRs, CQEs) to stderr");
  app.add_flag("--stats", a.stats,
               "after each test, rank 0 prints what rwin counted (Context::stats: puts, gets, bytes, chunks, notifies, "
               "waits and time waited) to stderr");
  app.add_flag("--local", a.local, "rwin's local side (put src, get dst) is plain memory (rwin::Local), not a window");
  app.add_flag("--raw-fence", a.raw_fence, "--vs-raw, raw notify ordered by ucp_worker_fence instead of an ep flush");
  app.add_flag("--csv", a.csv, "machine-readable output: csv (stdout, or -o FILE)");
  app.add_flag("--json", a.json, "machine-readable output: one JSON document (stdout, or -o FILE); rank 0 writes it");
  app.add_option("-o", a.out, "write the csv/json there (format from --csv/--json or the extension)")->type_name("FILE");
  bool no_pin = false;
  app.add_flag("--no-pin", no_pin, "do not pin rank r to CPU r mod ncpu");
  app.add_option("--timeout-ms", a.timeout_ms, "deadline of each blocking wait (default 60000)")
      ->transform(Count(1, INT64_MAX))->type_name("N");
  app.add_option("--ready-file", a.ready_file, "created once start-up is done (the fault suite's kill trials)")
      ->type_name("PATH");
  app.add_option_function<std::string>(
         "--dtype", [&a](const std::string& v) { a.dtype = rwin::parse_dtype(v); }, "element type (default f32)")
      ->check(rwin::cli::ParsedBy(rwin::parse_dtype))->type_name("T")->group(kColl);
  app.add_option_function<std::string>(
         "--op", [&a](const std::string& v) { a.op = rwin::parse_reduce_op(v); },
         "sum | max | min | prod (allreduce, reduce_scatter; default sum)")
      ->check(rwin::cli::ParsedBy(rwin::parse_reduce_op))->type_name("OP")->group(kColl);
  app.add_option_function<std::string>(
         "--mode", [&a](const std::string& v) { a.mode = rwin::parse_allreduce_mode(a.mode_name = v); },
         "allreduce algorithm: auto | mesh | ring | bruck (default auto)")
      ->check(rwin::cli::ParsedBy(rwin::parse_allreduce_mode))->type_name("M")->group(kColl);
  app.add_option("--min-iters", a.min_iters, "iterations per size at least N (default 20), else max-bytes / size")
      ->transform(Count(1, INT64_MAX))->type_name("N")->group(kColl);
  app.add_option("--small-iters", a.small_iters,
                 "collectives of <= 8 KiB: at least N calls (OSU's convention; default 0: -n alone)")
      ->transform(Count(0, INT64_MAX))->type_name("N")->group(kColl);
  app.add_option("--compute-us", a.compute_us,
                 "overlap: each timed collective call comes with N us of compute (default 0: none)")
      ->transform(Count(0, 60000000))->type_name("N")->group(kColl);
  std::string compute_kind = "sleep";
  app.add_option("--compute", compute_kind,
                 "what the compute is: sleep (the thread blocks, as on a device kernel) | spin (busy on the CPU)")
      ->check(CLI::IsMember({"sleep", "spin"}))->type_name("K")->group(kColl);
  app.add_flag("--nonblocking", a.nonblocking,
               "start each collective (Team::start_*), compute, then wait; without it: the call, then the compute")
      ->group(kColl);
  app.add_option("--label", a.label, "transport label written into the collective csv/json (default: the transport name)")
      ->type_name("L")->group(kColl);
  rwin::cli::parse_or_exit(app, argc, argv);

  a.compute_spin = compute_kind == "spin";
  if (!tests.empty()) a.tests = split(tests, ',');
  if (!sizes.empty()) (void)parse_sizes(sizes, a.sizes);  // checked above
  if (misalign && skew->count() > 0) usage("--misalign is --skew 8: give one of them");
  if (misalign) a.skew = 8;
  if (a.csv && a.json) usage("choose one of --csv and --json");
  if (a.raw_fence) a.vs_raw = true;
  a.pin = !no_pin;
  const bool any_coll = std::any_of(a.tests.begin(), a.tests.end(), is_coll);
  const bool any_pair = !std::all_of(a.tests.begin(), a.tests.end(), is_coll);
  if (any_coll && any_pair && (a.csv || a.json || !a.out.empty())) {
    usage("--csv/--json/-o: run collective and pair tests separately (different columns)");
  }
  if (a.skew % 8 != 0) usage("--skew: " + std::to_string(a.skew) + " is not a multiple of 8");
  if (!a.out.empty() && !a.csv && !a.json) {
    if (a.out.ends_with(".json")) a.json = true;
    else a.csv = true;
  }
  return a;
}

// ---------------------------------------------------------------------------------------------
// The operations under test, once on rwin and once on raw UCP.

uint8_t pattern(uint64_t i);  // the byte every source holds at offset i (defined below)

class Ops {
 public:
  virtual ~Ops() = default;
  virtual void prepare(uint64_t bytes, uint64_t skew) = 0;  // sizes/offsets of the following ops
  virtual void put() = 0;                                   // local src -> peer dst + skew
  virtual void put_add() {}                                 // the same as put(Add) (rwin only)
  virtual int64_t fetch_add() { return 0; }                 // peer's int64 counter += 1, old value (rwin only)
  virtual void get() = 0;                                   // peer src -> local dst + skew, blocking
  virtual void get_group(int n) = 0;                        // n gets, all complete on return
  virtual void notify(int word) = 0;                        // peer's word += 1, after earlier puts
  virtual void notify_group(int word, int n) = 0;           // n notifies, then quiet
  virtual void wait(int word, int64_t value) = 0;           // local word >= value
  virtual void quiet() = 0;
  virtual char* local_src() = 0;
  virtual char* local_dst() = 0;
  // Where data lands on the receiving rank: a put's destination window, or a get's local dst.
  virtual char* landing(bool) { return local_dst(); }
  virtual void fill_sources(uint64_t bytes) {  // the pattern every source holds
    for (uint64_t i = 0; i < bytes; ++i) local_src()[i] = static_cast<char>(pattern(i));
  }
  virtual void set_peer(int peer) = 0;
};

class RwinOps final : public Ops {
 public:
  RwinOps(rwin::Context& ctx, uint64_t bytes, bool nbi, bool local) : ctx_(ctx), nbi_(nbi), local_(local) {
    const int64_t words = static_cast<int64_t>(bytes / 8);
    src_ = ctx.alloc_window("perf.src", rwin::DType::I64, {1, words});
    dst_ = ctx.alloc_window("perf.dst", rwin::DType::I64, {1, words});
    if (local_) {  // page-aligned like the windows, so only the local side's kind differs
      plain_src_.reset(static_cast<char*>(std::aligned_alloc(4096, bytes)));
      plain_dst_.reset(static_cast<char*>(std::aligned_alloc(4096, bytes)));
      std::memset(plain_src_.get(), 0, bytes);
      std::memset(plain_dst_.get(), 0, bytes);
    }
    sig_ = ctx.alloc_signals("perf.sig", kWords);
    for (int w = 0; w < kWords; ++w) words_.push_back(sig_.at(w));
    counter_ = ctx.alloc_window("perf.counter", rwin::DType::I64, {1, 1});
    counter_slice_ = counter_.all();
  }
  void set_peer(int peer) override { peer_ = peer; }
  // Slices are built once per size, as an application would hold them.
  void prepare(uint64_t bytes, uint64_t skew) override {
    const int64_t n = static_cast<int64_t>(bytes / 8), off = static_cast<int64_t>(skew / 8);
    src_slice_ = src_.slice({0, 0}, {1, n});
    dst_slice_ = dst_.slice({0, off}, {1, n});
    if (local_) {
      local_src_ = rwin::Local{plain_src_.get(), rwin::DType::I64, {1, n}, 0};
      local_dst_ = rwin::Local{plain_dst_.get() + skew, rwin::DType::I64, {1, n}, 0};
    }
  }
  // --nbi: puts and grouped gets use the non-blocking forms (completed by quiet/notify).
  void put() override {
    if (local_) {
      if (nbi_) {
        ctx_.put_nbi(dst_slice_, peer_, local_src_);
      } else {
        ctx_.put(dst_slice_, peer_, local_src_);
      }
    } else if (nbi_) {
      ctx_.put_nbi(dst_slice_, peer_, src_slice_);
    } else {
      ctx_.put(dst_slice_, peer_, src_slice_);
    }
  }
  void put_add() override {
    if (local_) {
      ctx_.put(dst_slice_, peer_, local_src_, rwin::AtomicType::Add);
    } else {
      ctx_.put(dst_slice_, peer_, src_slice_, rwin::AtomicType::Add);
    }
  }
  void get() override {
    if (local_) {
      ctx_.get(local_dst_, peer_, src_slice_);
    } else {
      ctx_.get(dst_slice_, peer_, src_slice_);
    }
  }
  void get_group(int n) override {
    for (int i = 0; i < n; ++i) {
      if (local_ && nbi_) {
        ctx_.get_nbi(local_dst_, peer_, src_slice_);
      } else if (local_) {
        ctx_.get(local_dst_, peer_, src_slice_);
      } else if (nbi_) {
        ctx_.get_nbi(dst_slice_, peer_, src_slice_);
      } else {
        ctx_.get(dst_slice_, peer_, src_slice_);
      }
    }
    if (nbi_) ctx_.quiet();
  }
  void notify(int word) override { ctx_.notify(words_[static_cast<size_t>(word)], peer_, 1); }
  void notify_group(int word, int n) override {
    for (int i = 0; i < n; ++i) ctx_.notify(words_[static_cast<size_t>(word)], peer_, 1);
    ctx_.quiet();
  }
  void wait(int word, int64_t value) override { ctx_.wait(words_[static_cast<size_t>(word)], value); }
  void quiet() override { ctx_.quiet(); }
  int64_t fetch_add() override { return ctx_.fetch_add(counter_slice_, peer_, 1); }
  char* local_src() override { return local_ ? plain_src_.get() : static_cast<char*>(src_.data()); }
  char* local_dst() override { return local_ ? plain_dst_.get() : static_cast<char*>(dst_.data()); }
  // --local: puts still land in the dst window, gets read the peer's src window.
  char* landing(bool put) override { return put ? static_cast<char*>(dst_.data()) : local_dst(); }
  void fill_sources(uint64_t bytes) override {
    Ops::fill_sources(bytes);
    if (local_) {
      for (uint64_t i = 0; i < bytes; ++i) static_cast<char*>(src_.data())[i] = static_cast<char>(pattern(i));
    }
  }
  int64_t load(int word) const { return sig_.load(word); }

 private:
  rwin::Context& ctx_;
  bool nbi_;
  bool local_;
  struct FreeDeleter {
    void operator()(char* p) const noexcept { std::free(p); }
  };
  std::unique_ptr<char, FreeDeleter> plain_src_, plain_dst_;
  rwin::Local local_src_, local_dst_;
  int peer_ = 0;
  rwin::Window src_, dst_, counter_;
  rwin::SignalArray sig_;
  std::vector<rwin::SignalSlice> words_;
  rwin::Slice src_slice_, dst_slice_, counter_slice_;
};

// Raw is rwinperf::RawUcp or rwinperf::RawVerbs: the same operations, without rwin.
template <class Raw>
class RawOps final : public Ops {
 public:
  template <class... A>
  explicit RawOps(A&&... a) : raw_(std::forward<A>(a)...) {}
  void set_peer(int) override {}
  void prepare(uint64_t bytes, uint64_t skew) override {
    bytes_ = bytes;
    skew_ = skew;
  }
  void put() override { raw_.put(0, skew_, bytes_); }
  void get() override { raw_.get(skew_, 0, bytes_); }
  void get_group(int n) override {
    for (int i = 0; i < n; ++i) raw_.get_nb(skew_, 0, bytes_);
    raw_.quiet();
  }
  void notify(int word) override { raw_.notify(word); }
  void notify_group(int word, int n) override {
    for (int i = 0; i < n; ++i) raw_.notify(word);
    raw_.quiet();
  }
  void wait(int word, int64_t value) override { raw_.wait(word, value); }
  void quiet() override { raw_.quiet(); }
  char* local_src() override { return raw_.src(); }
  char* local_dst() override { return raw_.dst(); }
  std::string describe() const { return raw_.describe(); }

 private:
  Raw raw_;
  uint64_t bytes_ = 0, skew_ = 0;
};

// ---------------------------------------------------------------------------------------------
// Statistics and records

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  const double idx = p / 100.0 * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(idx)), hi = static_cast<size_t>(std::ceil(idx));
  return v[lo] + (v[hi] - v[lo]) * (idx - static_cast<double>(lo));
}

struct Figures {
  bool present = false;
  double p50 = NAN, p99 = NAN, avg = NAN;  // us per op (one way for ping-pong tests)
  double mibs = NAN, mops = NAN;
};

Figures figures(const std::vector<double>& samples_us, double total_us, int64_t ops, uint64_t bytes) {
  Figures f;
  f.present = ops > 0;
  f.p50 = percentile(samples_us, 50);
  f.p99 = percentile(samples_us, 99);
  f.avg = total_us / static_cast<double>(ops);
  f.mibs = static_cast<double>(bytes) / (f.avg * 1e-6) / 1048576.0;
  f.mops = 1.0 / f.avg;
  return f;
}

struct Record {
  std::string test;
  uint64_t bytes = 0;
  int64_t iters = 0;
  int outstanding = 1;
  Figures rwin, raw;
  double ratio = NAN, ratio_p25 = NAN, ratio_p75 = NAN;
  int batches = 0;
};

std::string fmt(double v, int prec = 3) {
  if (std::isnan(v)) return "-";
  char b[64];
  if (std::fabs(v) >= 1e5) std::snprintf(b, sizeof b, "%.0f", v);
  else if (std::fabs(v) >= 100) std::snprintf(b, sizeof b, "%.1f", v);
  else std::snprintf(b, sizeof b, "%.*f", prec, v);
  return b;
}

std::string size_str(uint64_t b) {
  if (b >= (1 << 20) && b % (1 << 20) == 0) return std::to_string(b >> 20) + "M";
  if (b >= 1024 && b % 1024 == 0) return std::to_string(b >> 10) + "K";
  return std::to_string(b);
}

std::string jnum(double v) {
  if (std::isnan(v) || std::isinf(v)) return "null";
  char b[64];
  std::snprintf(b, sizeof b, "%.6g", v);
  return b;
}

// ---------------------------------------------------------------------------------------------
// The runner

bool is_bw(const std::string& t) { return t == "put_bw" || t == "put_add_bw" || t == "get_bw" || t == "notify_rate"; }
bool is_put(const std::string& t) { return t == "put_lat" || t == "put_bw" || t == "ring_shift"; }
bool is_get(const std::string& t) { return t == "get_lat" || t == "get_bw"; }

uint8_t pattern(uint64_t i) { return static_cast<uint8_t>(i * 131 + 7); }

class Runner {
 public:
  Runner(rwin::Context& ctx, const Args& a, RwinOps& rw, Ops* raw) : ctx_(ctx), a_(a), rw_(rw), raw_(raw) {}

  Record run(const std::string& test, uint64_t bytes) {
    Record r;
    r.test = test;
    r.bytes = bytes;
    const int64_t cap = std::max<int64_t>(20, static_cast<int64_t>(a_.max_bytes / bytes));
    int64_t iters = std::min<int64_t>(a_.iters, cap);
    // At least 8 groups of O, so that large sizes still give several batches (and ratios).
    const int O = is_bw(test) ? static_cast<int>(std::clamp<int64_t>(iters / 8, 1, a_.outstanding)) : 1;
    r.outstanding = O;
    const int64_t groups = std::max<int64_t>(1, iters / O);
    const int nb = static_cast<int>(std::min<int64_t>(a_.batches, groups));
    const int64_t per_batch = std::max<int64_t>(1, groups / nb) * O;  // ops per batch
    // At least one group even with -w 0: the data check after the warm-up needs data to check.
    const int64_t warm = (std::clamp<int64_t>(a_.warmup, O, std::max<int64_t>(O, iters / 10)) + O - 1) / O * O;
    r.iters = per_batch * nb;
    r.batches = nb;

    if (test == "memcpy") return run_memcpy(r, per_batch, nb, warm);

    const bool pair = test != "ring_shift";
    const bool in_pair = !pair || ctx_.rank() < 2;
    std::vector<Ops*> modes{&rw_};
    if (raw_ && pair && test != "put_add_bw" && test != "fetch_add_lat") modes.push_back(raw_);
    for (Ops* m : modes) {
      m->set_peer(pair ? 1 - ctx_.rank() : (ctx_.rank() + 1) % ctx_.size());
      m->prepare(bytes, a_.skew);
    }
    std::vector<std::vector<double>> samples(modes.size());
    std::vector<double> total(modes.size(), 0.0);
    std::vector<double> ratios;
    if (in_pair) {
      for (size_t m = 0; m < modes.size(); ++m) {
        verify_setup(test, *modes[m], bytes);
        std::vector<double> ignore;
        batch(test, m, *modes[m], warm, O, ignore);
        verify_check(test, *modes[m], bytes);
      }
      for (int b = 0; b < nb; ++b) {
        std::vector<double> med(modes.size());
        for (size_t k = 0; k < modes.size(); ++k) {
          const size_t m = (b % 2 == 0) ? k : modes.size() - 1 - k;  // alternate who goes first
          std::vector<double> mine;
          total[m] += batch(test, m, *modes[m], per_batch, O, mine);
          if (!mine.empty()) med[m] = percentile(mine, 50);
          samples[m].insert(samples[m].end(), mine.begin(), mine.end());
        }
        // Per-batch medians: one preemption in a batch (routine on this VM) must not decide the
        // ratio; tails are reported separately as p99.
        if (modes.size() == 2 && med[0] > 0) ratios.push_back(med[1] / med[0]);
      }
      if (test == "notify_rate") check_rate(modes);
    }
    ctx_.barrier();
    const int64_t ops = per_batch * nb;
    // A ping-pong's batch time is its round trips; its samples and figures are one way.
    const double legs = test == "put_lat" || test == "notify_lat" ? 2.0 : 1.0;
    r.rwin = figures(samples[0], total[0] / legs, ops, bytes);
    if (modes.size() == 2) {
      r.raw = figures(samples[1], total[1] / legs, ops, bytes);
      r.ratio = percentile(ratios, 50);
      r.ratio_p25 = percentile(ratios, 25);
      r.ratio_p75 = percentile(ratios, 75);
    }
    return r;
  }

 private:
  // Runs `ops` operations of `test` in mode `m`; returns the active side's time (us); appends
  // per-op samples (us) on the active side. Both ranks call it with the same arguments.
  double batch(const std::string& test, size_t m, Ops& o, int64_t ops, int O, std::vector<double>& samples) {
    const int me = ctx_.rank();
    const bool ring = test == "ring_shift";
    const bool active = ring ? me == 0 : me == 0;
    auto& seen = seen_[m];
    // Handshake: the passive side says "go" through the same mode, so its progress engine is
    // already running when the timed ops start (over tcp the target must progress).
    if (ring) {
      ctx_.barrier();
    } else if (active) {
      o.wait(kGo, ++seen[kGo]);
    } else {
      o.notify(kGo);
    }
    const auto t0 = Clock::now();
    auto last = t0;
    auto lap = [&](double div) {
      const auto now = Clock::now();
      samples.push_back(std::chrono::duration<double, std::micro>(now - last).count() / div);
      last = now;
    };
    if (test == "put_lat" || test == "notify_lat") {
      const bool put = test == "put_lat";
      for (int64_t i = 0; i < ops; ++i) {
        if (active) {
          if (put) o.put();
          o.notify(kData);
          o.wait(kData, ++seen[kData]);
          lap(2.0);
        } else {
          o.wait(kData, ++seen[kData]);
          if (put) o.put();
          o.notify(kData);
        }
      }
    } else if (ring) {
      for (int64_t i = 0; i < ops; ++i) {
        o.put();
        o.notify(kRing);
        o.wait(kRing, ++seen[kRing]);
        if (active) lap(1.0);
      }
    } else if (active) {
      if (test == "put_bw") {
        for (int64_t g = 0; g < ops / O; ++g) {
          for (int i = 0; i < O; ++i) o.put();
          o.quiet();
          lap(O);
        }
      } else if (test == "put_add_bw") {  // the passive side progresses in wait(kDone), applying staged slots
        for (int64_t g = 0; g < ops / O; ++g) {
          for (int i = 0; i < O; ++i) o.put_add();
          o.quiet();
          lap(O);
        }
      } else if (test == "get_lat") {
        for (int64_t i = 0; i < ops; ++i) {
          o.get();
          lap(1.0);
        }
      } else if (test == "fetch_add_lat") {
        // Only this rank adds: each old value must be the previous one + 1 (an op that did nothing
        // would look fast).
        int64_t prev = o.fetch_add();
        lap(1.0);
        for (int64_t i = 1; i < ops; ++i) {
          const int64_t v = o.fetch_add();
          lap(1.0);
          if (v != prev + 1) {
            throw std::runtime_error("rank 0: fetch_add_lat: old value " + std::to_string(v) + " after " +
                                     std::to_string(prev) + " (expected " + std::to_string(prev + 1) + ")");
          }
          prev = v;
        }
      } else if (test == "get_bw") {
        for (int64_t g = 0; g < ops / O; ++g) {
          o.get_group(O);
          lap(O);
        }
      } else if (test == "notify_rate") {
        for (int64_t g = 0; g < ops / O; ++g) {
          o.notify_group(kRate, O);
          lap(O);
        }
        rate_sent_[m] += ops;
      }
    }
    const double us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
    if (!ring && !(test == "put_lat" || test == "notify_lat")) {
      // One-sided tests: the passive side progresses (wait) until the active side is done.
      if (active) {
        o.notify(kDone);
      } else {
        o.wait(kDone, ++seen[kDone]);
        if (test == "notify_rate") rate_sent_[m] += ops;
      }
    }
    // Untimed close of the batch, in the same mode on both sides: quiet, then a "fin" exchange, so
    // neither side leaves for the other mode while its peer still needs its progress (over tcp a
    // flush completes only while the target progresses the same worker). No quiet after the fin:
    // it would flush towards a peer that may already run the other mode and never progress this
    // one (a hang over tcp). The fin notify itself is on its way when notify returns (rwin polls
    // once before returning, transport.h), so nothing is left staged here.
    o.quiet();
    if (ring) {
      ctx_.barrier();
    } else {
      o.notify(kFin);
      o.wait(kFin, ++seen[kFin]);
    }
    return us;
  }

  // Before the warm-up batch: the side that receives data clears its destination.
  void verify_setup(const std::string& test, Ops& o, uint64_t bytes) {
    const bool receiver = (is_put(test) && ctx_.rank() == 1) || (is_get(test) && ctx_.rank() == 0) ||
                          (test == "put_lat" && ctx_.rank() == 0);
    if (receiver) std::memset(o.landing(is_put(test)) + a_.skew, 0, bytes);
  }
  // After it: the data really arrived (a benchmark that moves nothing would look fast).
  void verify_check(const std::string& test, Ops& o, uint64_t bytes) {
    const bool receiver = (is_put(test) && ctx_.rank() == 1) || (is_get(test) && ctx_.rank() == 0);
    if (!receiver || test == "ring_shift") return;
    const char* d = o.landing(is_put(test)) + a_.skew;
    for (uint64_t i = 0; i < bytes; ++i) {
      if (static_cast<uint8_t>(d[i]) != pattern(i)) {
        throw std::runtime_error("rank " + std::to_string(ctx_.rank()) + ": " + test + " " + std::to_string(bytes) +
                                 " bytes: data check failed at byte " + std::to_string(i) + " (got " +
                                 std::to_string(static_cast<uint8_t>(d[i])) + ", expected " +
                                 std::to_string(pattern(i)) + ")");
      }
    }
  }
  // notify_rate: every add arrived exactly once (checked on the target, rwin mode).
  void check_rate(const std::vector<Ops*>& modes) {
    if (ctx_.rank() != 1) return;
    const int64_t got = rw_.load(kRate);
    if (got != rate_sent_[0]) {
      throw std::runtime_error("rank 1: notify_rate: signal word holds " + std::to_string(got) + ", expected " +
                               std::to_string(rate_sent_[0]));
    }
    (void)modes;
  }

  Record run_memcpy(Record r, int64_t per_batch, int nb, int64_t warm) {
    if (ctx_.rank() == 0) {
      const uint64_t n = r.bytes + 4096;
      auto* src = static_cast<char*>(std::aligned_alloc(4096, (n + 4095) / 4096 * 4096));
      auto* dst = static_cast<char*>(std::aligned_alloc(4096, (n + 4095) / 4096 * 4096));
      std::memset(src, 1, n);
      std::memset(dst, 0, n);
      std::vector<double> samples;
      double total = 0;
      for (int64_t i = 0; i < warm; ++i) std::memcpy(dst + a_.skew, src, r.bytes);
      for (int b = 0; b < nb; ++b) {
        const auto t0 = Clock::now();
        for (int64_t i = 0; i < per_batch; ++i) {
          std::memcpy(dst + a_.skew, src, r.bytes);
          asm volatile("" : : "r"(dst) : "memory");  // keep every copy
        }
        // One sample per batch: a clock read per 8-byte copy would cost more than the copy.
        const double us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
        samples.push_back(us / static_cast<double>(per_batch));
        total += us;
      }
      r.rwin = figures(samples, total, per_batch * nb, r.bytes);
      std::free(src);
      std::free(dst);
    }
    ctx_.barrier();
    return r;
  }

  rwin::Context& ctx_;
  const Args& a_;
  RwinOps& rw_;
  Ops* raw_;
  int64_t seen_[2][kWords] = {};
  int64_t rate_sent_[2] = {};
};

// ---------------------------------------------------------------------------------------------
// Collective tests (bench/coll_common.h: sizes, data, check, columns)

struct CollRecord {
  int kind = 0;
  uint64_t bytes = 0;  // as measured (nccl-tests convention)
  int64_t count = 0;   // elements per rank row (S), or of the buffer for allreduce / broadcast
  int64_t iters = 0;
  double p50 = NAN, avg = NAN;
  bool ok = true;
};

// Element access for every dtype: values are small integers (exact everywhere, see coll_common.h).
template <class T>
T from_i64(int64_t v) {
  if constexpr (std::is_same_v<T, rwin::f16>) return rwin::to_f16(static_cast<float>(v));
  else if constexpr (std::is_same_v<T, rwin::bf16>) return rwin::to_bf16(static_cast<float>(v));
  else return static_cast<T>(v);
}
template <class F>
void with_type(rwin::DType t, F&& f) {
  switch (t) {
    case rwin::DType::I32: f(int32_t{}); break;
    case rwin::DType::I64: f(int64_t{}); break;
    case rwin::DType::U32: f(uint32_t{}); break;
    case rwin::DType::U64: f(uint64_t{}); break;
    case rwin::DType::F32: f(float{}); break;
    case rwin::DType::F64: f(double{}); break;
    case rwin::DType::F16: f(rwin::f16{}); break;
    case rwin::DType::BF16: f(rwin::bf16{}); break;
    case rwin::DType::I8: f(int8_t{}); break;
    case rwin::DType::I16: f(int16_t{}); break;
    case rwin::DType::U8: f(uint8_t{}); break;
    case rwin::DType::U16: f(uint16_t{}); break;
  }
}
void put_el(rwin::DType t, void* p, int64_t i, int64_t v) {
  with_type(t, [&](auto z) {
    using T = decltype(z);
    const T x = from_i64<T>(v);
    std::memcpy(static_cast<char*>(p) + i * static_cast<int64_t>(sizeof(T)), &x, sizeof(T));
  });
}
bool eq_el(rwin::DType t, const void* p, int64_t i, int64_t v) {
  bool eq = false;
  with_type(t, [&](auto z) {
    using T = decltype(z);
    const T x = from_i64<T>(v);
    eq = std::memcmp(static_cast<const char*>(p) + i * static_cast<int64_t>(sizeof(T)), &x, sizeof(T)) == 0;
  });
  return eq;
}

// --compute-us: `us` microseconds of work beside a collective, busy or asleep.
void compute(int64_t us, bool spin) {
  if (us <= 0) return;
  if (!spin) {
    std::this_thread::sleep_for(std::chrono::microseconds(us));
    return;
  }
  const auto until = Clock::now() + std::chrono::microseconds(us);
  while (Clock::now() < until) {
  }
}

class CollRunner {
 public:
  CollRunner(rwin::Context& ctx, const Args& a, uint64_t max_size) : ctx_(ctx), a_(a), team_(rwin::world(ctx)) {
    const size_t es = rwin::dtype_size(a.dtype);
    const uint64_t cap = (max_size + static_cast<uint64_t>(ctx.size()) * es + 4095) / 4096 * 4096;
    a_buf_ = ctx.alloc_window_buffer("perf.coll.a", cap);
    b_buf_ = ctx.alloc_window_buffer("perf.coll.b", cap);
    stats_ = ctx.alloc_window("perf.coll.stats", rwin::DType::F64, {ctx.size(), 2});
  }

  CollRecord run(const std::string& test, uint64_t size) {
    const int n = ctx_.size(), me = ctx_.rank();
    const rwin::DType t = a_.dtype;
    const size_t es = rwin::dtype_size(t);
    const int op = static_cast<int>(a_.op);  // rwin::ReduceOp and coll_op have the same order
    CollRecord r;
    r.kind = coll_parse_kind(test.c_str());
    const int64_t S = coll_row_elems(r.kind, size, n, es);
    r.bytes = coll_actual_bytes(r.kind, S, n, es);
    r.count = S;
    r.iters = coll_iters(a_.iters, a_.min_iters, a_.max_bytes, r.bytes, a_.small_iters);
    const int64_t warm = coll_warmup(a_.warmup, r.iters);
    const int64_t rows = (r.kind == COLL_ALLREDUCE || r.kind == COLL_BROADCAST) ? 1 : n;
    char* A = static_cast<char*>(a_buf_.data());
    char* B = static_cast<char*>(b_buf_.data());
    // Views (every rank makes the same ones): a = input side, b = output side.
    rwin::Window in, out;
    if (r.kind != COLL_BARRIER) {
      const bool in_rows = r.kind == COLL_REDUCE_SCATTER || coll_a2a_like(r.kind);
      const bool out_rows = r.kind == COLL_ALLGATHER || coll_a2a_like(r.kind);
      in = ctx_.window(a_buf_, t, {in_rows ? n : 1, S});
      out = ctx_.window(b_buf_, t, {out_rows ? n : 1, S});
    }
    // all_to_all_v: the same bytes as one row of n x S, S elements to and from every rank.
    rwin::Window in1, out1;
    const std::vector<int64_t> counts(static_cast<size_t>(n), S);
    if (r.kind == COLL_ALL_TO_ALL_V) {
      in1 = ctx_.window(a_buf_, t, {1, n * S});
      out1 = ctx_.window(b_buf_, t, {1, n * S});
    }
    for (int64_t i = 0; i < rows * S; ++i) {
      switch (r.kind) {
        case COLL_ALLGATHER: if (i < S) put_el(t, A, i, coll_value(op, me, i)); break;
        case COLL_ALL_TO_ALL:
        case COLL_ALL_TO_ALL_V: put_el(t, A, i, coll_a2a(me, static_cast<int>(i / S), i % S)); break;
        case COLL_BROADCAST: put_el(t, B, i, me == 0 ? coll_value(op, 0, i) : 0); break;
        default: put_el(t, A, i, coll_value(op, me, i)); break;
      }
    }
    std::function<void()> call = [&]() {
      switch (r.kind) {
        case COLL_ALLREDUCE: team_.allreduce(in, out, a_.op, a_.mode); break;
        case COLL_ALLGATHER: team_.allgather(in, out); break;
        case COLL_REDUCE_SCATTER: team_.reduce_scatter(in, out, a_.op); break;
        case COLL_ALL_TO_ALL: team_.all_to_all(in, out); break;
        case COLL_ALL_TO_ALL_V: team_.all_to_all_v(in1, counts, out1, counts); break;
        case COLL_BROADCAST: team_.broadcast(out, 0); break;
        default: team_.barrier(); break;
      }
    };
    auto start = [&]() {
      switch (r.kind) {
        case COLL_ALLREDUCE: return team_.start_allreduce(in, out, a_.op, a_.mode);
        case COLL_ALLGATHER: return team_.start_allgather(in, out);
        case COLL_REDUCE_SCATTER: return team_.start_reduce_scatter(in, out, a_.op);
        case COLL_ALL_TO_ALL: return team_.start_all_to_all(in, out);
        case COLL_ALL_TO_ALL_V: return team_.start_all_to_all_v(in1, counts, out1, counts);
        case COLL_BROADCAST: return team_.start_broadcast(out, 0);
        default: return team_.start_barrier();
      }
    };
    if (a_.compute_us > 0 || a_.nonblocking) {
      const auto plain = call;
      call = [&, plain]() {
        if (a_.nonblocking) {
          rwin::CollectiveRequest req = start();
          compute(a_.compute_us, a_.compute_spin);
          req.wait();
        } else {
          plain();
          compute(a_.compute_us, a_.compute_spin);
        }
      };
    }
    for (int64_t k = 0; k < warm; ++k) call();
    // Clear what the collective produces, so that the timed calls must write it again.
    if (r.kind == COLL_BROADCAST) {
      if (me != 0) std::memset(B, 0, static_cast<size_t>(S) * es);
    } else if (r.kind != COLL_BARRIER) {
      std::memset(B, 0, static_cast<size_t>(S * (r.kind == COLL_ALLGATHER || coll_a2a_like(r.kind) ? n : 1)) * es);
    }
    ctx_.barrier();
    std::vector<double> samples(static_cast<size_t>(r.iters));
    const auto t0 = Clock::now();
    auto last = t0;
    for (int64_t k = 0; k < r.iters; ++k) {
      call();
      const auto now = Clock::now();
      samples[static_cast<size_t>(k)] = std::chrono::duration<double, std::micro>(now - last).count();
      last = now;
    }
    const double avg = std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / static_cast<double>(r.iters);
    bool bad = false;
    for (int64_t i = 0; i < S && !bad; ++i) {
      switch (r.kind) {
        case COLL_ALLREDUCE: bad = !eq_el(t, B, i, coll_reduced(op, n, i)); break;
        case COLL_REDUCE_SCATTER: bad = !eq_el(t, B, i, coll_reduced(op, n, static_cast<int64_t>(me) * S + i)); break;
        case COLL_BROADCAST: bad = !eq_el(t, B, i, coll_value(op, 0, i)); break;
        case COLL_ALLGATHER:
          for (int q = 0; q < n && !bad; ++q) bad = !eq_el(t, B, q * S + i, coll_value(op, q, i));
          break;
        case COLL_ALL_TO_ALL:
        case COLL_ALL_TO_ALL_V:
          for (int q = 0; q < n && !bad; ++q) bad = !eq_el(t, B, q * S + i, coll_a2a(q, me, i));
          break;
        default: break;
      }
    }
    if (bad) {
      r.ok = false;
      std::fprintf(stderr, "rwin-perf: rank %d: %s %llu bytes: result check FAILED\n", me, test.c_str(),
                   static_cast<unsigned long long>(r.bytes));
    }
    // Rank 0 collects every rank's average and verdict (a get of its row of the stats window).
    double* st = stats_.data_as<double>();
    st[me * 2] = avg;
    st[me * 2 + 1] = bad ? 1.0 : 0.0;
    ctx_.barrier();
    if (me == 0) {
      double sum = 0;
      for (int q = 0; q < n; ++q) {
        if (q != 0) ctx_.get(stats_.slice({q, 0}, {1, 2}), q, stats_.slice({q, 0}, {1, 2}));
        sum += st[q * 2];
        if (st[q * 2 + 1] != 0.0) r.ok = false;
      }
      r.avg = sum / n;
      r.p50 = percentile(samples, 50);
    }
    ctx_.barrier();
    return r;
  }

 private:
  rwin::Context& ctx_;
  const Args& a_;
  rwin::Team team_;
  rwin::WindowBuffer a_buf_, b_buf_;
  rwin::Window stats_;
};

void print_coll(FILE* table, FILE* csv, const std::vector<CollRecord>& rs, const Args& a, const std::string& tr,
                int nranks) {
  const std::string dt = rwin::dtype_name(a.dtype), op = rwin::reduce_op_name(a.op);
  const std::string label = a.label.empty() ? tr : a.label;
  if (table) coll_table_header(table);
  if (csv) std::fputs(COLL_CSV_HEADER, csv);
  for (const auto& r : rs) {
    coll_row(table, csv, "rwin", label.c_str(), r.kind, nranks, dt.c_str(), op.c_str(),
             r.kind == COLL_ALLREDUCE ? a.mode_name.c_str() : "-", r.bytes, r.count, r.iters, r.p50, r.avg,
             r.kind == COLL_BARRIER ? "-" : r.ok ? "ok" : "FAIL");
  }
}

// (ordered_json: keys in the order written, "tool" first, as the hand-written JSON had them.)
// What every JSON document records about the run: the library, the transport and how RMA reaches
// each peer as rank 0 sees it, and the knobs that shape every figure (chunk, depth, nbi, local).
nlohmann::ordered_json run_json(const rwin::Context& ctx, const Args& a, const std::string& transport) {
  nlohmann::ordered_json modes = nlohmann::ordered_json::array();
  for (int q = 0; q < ctx.size(); ++q) modes.push_back(ctx.rma_mode(q));
  const rwin::Options& o = ctx.options();
  return {
      {"tool", "rwin-perf"},
      {"version", rwin::version()},
      {"transport", transport},
      {"transport_kind", o.transport},
      {"transport_description", ctx.transport_name()},
      {"nranks", ctx.size()},
      // The pair tests' peer (rank 1), or rank 0 itself in a job of one.
      {"rma_mode", ctx.rma_mode(ctx.size() > 1 ? 1 : 0)},
      {"rma_modes", modes},
      {"ucx_rma", o.ucx_rma},
      {"chunk_bytes", o.chunk_bytes},
      {"pipeline_depth", o.pipeline_depth},
      {"nbi", a.nbi},
      {"local", a.local},
  };
}

// A figure: NaN (not measured) is null.
nlohmann::ordered_json jval(double v) { return std::isfinite(v) ? nlohmann::ordered_json(v) : nlohmann::ordered_json(nullptr); }

void print_coll_json(std::ostream& os, const rwin::Context& ctx, const std::vector<CollRecord>& rs, const Args& a,
                     const std::string& tr) {
  const int nranks = ctx.size();
  nlohmann::ordered_json doc = run_json(ctx, a, a.label.empty() ? tr : a.label);
  doc["dtype"] = rwin::dtype_name(a.dtype);
  doc["op"] = rwin::reduce_op_name(a.op);
  doc["allreduce_mode"] = a.mode_name;
  doc["compute_us"] = a.compute_us;
  doc["compute"] = a.compute_spin ? "spin" : "sleep";
  doc["nonblocking"] = a.nonblocking;
  doc["bandwidth_definition"] =
      "nccl-tests: algbw = size / avg, busbw = algbw x factor (allreduce 2(n-1)/n, allgather/reduce_scatter/all_to_all "
      "(n-1)/n, broadcast 1), GB/s = 1e9 B/s";
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (const auto& r : rs) {
    const double alg = r.bytes ? static_cast<double>(r.bytes) / (r.avg * 1e-6) / 1e9 : 0.0;
    list.push_back({{"test", coll_names[r.kind]},
                    {"size", r.bytes},
                    {"count", r.count},
                    {"iters", r.iters},
                    {"p50_us", jval(r.p50)},
                    {"avg_us", jval(r.avg)},
                    {"algbw_gbs", jval(alg)},
                    {"busbw_gbs", jval(alg * coll_bus_factor(r.kind, nranks))},
                    {"check", r.kind == COLL_BARRIER ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(r.ok ? "ok" : "FAIL")}});
  }
  doc["collectives"] = list;
  os << doc.dump(2) << "\n";
}

// ---------------------------------------------------------------------------------------------
// Output

void print_table(std::ostream& os, const std::vector<Record>& rs, bool vs_raw) {
  char line[512];
  if (vs_raw) {
    std::snprintf(line, sizeof line, "%-12s %7s %7s %3s | %9s %9s %9s %10s %8s | %9s %9s %10s | %6s %13s\n", "test",
                  "size", "iters", "O", "p50(us)", "p99(us)", "avg(us)", "MiB/s", "Mop/s", "raw p50", "raw avg",
                  "raw MiB/s", "ratio", "[p25-p75]");
  } else {
    std::snprintf(line, sizeof line, "%-12s %7s %7s %3s | %9s %9s %9s %10s %8s\n", "test", "size", "iters", "O",
                  "p50(us)", "p99(us)", "avg(us)", "MiB/s", "Mop/s");
  }
  os << line;
  for (const auto& r : rs) {
    std::snprintf(line, sizeof line, "%-12s %7s %7lld %3d | %9s %9s %9s %10s %8s", r.test.c_str(),
                  size_str(r.bytes).c_str(), static_cast<long long>(r.iters), r.outstanding, fmt(r.rwin.p50).c_str(),
                  fmt(r.rwin.p99).c_str(), fmt(r.rwin.avg).c_str(), fmt(r.rwin.mibs, 1).c_str(),
                  fmt(r.rwin.mops).c_str());
    os << line;
    if (vs_raw) {
      std::snprintf(line, sizeof line, " | %9s %9s %10s | %6s %13s", fmt(r.raw.p50).c_str(), fmt(r.raw.avg).c_str(),
                    fmt(r.raw.mibs, 1).c_str(), fmt(r.ratio, 2).c_str(),
                    r.raw.present ? ("[" + fmt(r.ratio_p25, 2) + "-" + fmt(r.ratio_p75, 2) + "]").c_str() : "-");
      os << line;
    }
    os << "\n";
  }
}

void print_csv(std::ostream& os, const std::vector<Record>& rs, const std::string& transport, uint64_t skew) {
  os << "test,size,iters,outstanding,transport,skew,p50_us,p99_us,avg_us,mibs,mops,raw_p50_us,raw_p99_us,raw_avg_us,"
        "raw_mibs,raw_mops,ratio,ratio_p25,ratio_p75,batches\n";
  auto c = [](double v) { return std::isnan(v) ? std::string() : jnum(v); };
  for (const auto& r : rs) {
    os << r.test << "," << r.bytes << "," << r.iters << "," << r.outstanding << ",\"" << transport << "\"," << skew
       << "," << c(r.rwin.p50) << "," << c(r.rwin.p99) << "," << c(r.rwin.avg) << "," << c(r.rwin.mibs) << ","
       << c(r.rwin.mops) << "," << c(r.raw.p50) << "," << c(r.raw.p99) << "," << c(r.raw.avg) << "," << c(r.raw.mibs)
       << "," << c(r.raw.mops) << "," << c(r.ratio) << "," << c(r.ratio_p25) << "," << c(r.ratio_p75) << ","
       << r.batches << "\n";
  }
}

void print_json(std::ostream& os, const rwin::Context& ctx, const std::vector<Record>& rs, const std::string& transport,
                const Args& a) {
  auto fig = [](const Figures& f) {
    return nlohmann::ordered_json{{"p50_us", jval(f.p50)},
                          {"p99_us", jval(f.p99)},
                          {"avg_us", jval(f.avg)},
                          {"bandwidth_mibs", jval(f.mibs)},
                          {"msg_rate_mops", jval(f.mops)}};
  };
  nlohmann::ordered_json doc = run_json(ctx, a, transport);
  doc["skew"] = a.skew;
  doc["vs_raw"] = a.vs_raw;
  doc["ratio_definition"] =
      "median over batches of raw_time/rwin_time (each the batch's median per-op time): rwin/raw for bandwidth, "
      "raw/rwin for latency; higher is better for rwin";
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (const auto& r : rs) {
    nlohmann::ordered_json j{{"test", r.test},
                     {"size", r.bytes},
                     {"iters", r.iters},
                     {"outstanding", r.outstanding},
                     {"batches", r.batches},
                     {"rwin", fig(r.rwin)}};
    if (r.raw.present) {
      j["raw"] = fig(r.raw);
      j["ratio"] = jval(r.ratio);
      j["ratio_p25"] = jval(r.ratio_p25);
      j["ratio_p75"] = jval(r.ratio_p75);
    } else if (a.vs_raw) {
      j["raw"] = nullptr;
      j["ratio"] = nullptr;
    }
    list.push_back(std::move(j));
  }
  doc["records"] = list;
  os << doc.dump(2) << "\n";
}

void pin_rank(int rank) { rwin_bench::pin_to_allowed(static_cast<size_t>(rank), "rwin-perf"); }

int env_rank() {
  const char* r = rwin::knobs::env("RWIN_RANK");
  return r ? std::atoi(r) : 0;
}

}  // namespace

int main(int argc, char** argv) {
  const Args a = parse(argc, argv);
  const int rank_hint = env_rank();
  try {
    if (a.pin) pin_rank(rank_hint);
    if (!a.device.empty()) setenv("UCX_NET_DEVICES", a.device.c_str(), 1);
    rwin::Options opt;
    opt.transport = a.transport;
    opt.ib_device = a.device;
    opt.chunk_bytes = a.chunk;
    opt.pipeline_depth = a.depth;
    opt.op_timeout = std::chrono::milliseconds(a.timeout_ms);
    rwin::Context ctx(opt);
    if (!a.ready_file.empty()) {
      if (std::FILE* f = std::fopen(a.ready_file.c_str(), "w")) std::fclose(f);
    }
    const bool need_pair = std::any_of(a.tests.begin(), a.tests.end(), [](const std::string& t) {
      return t != "memcpy" && t != "ring_shift" && !is_coll(t);
    });
    if (need_pair && ctx.size() < 2) throw std::runtime_error("pair tests need at least 2 ranks (rwinrun -n 2)");
    const bool any_coll = std::any_of(a.tests.begin(), a.tests.end(), is_coll);
    const bool only_coll = std::all_of(a.tests.begin(), a.tests.end(), is_coll);
    const uint64_t max_size = only_coll ? 4096 : *std::max_element(a.sizes.begin(), a.sizes.end());
    const uint64_t buf = (max_size + a.skew + 4095) / 4096 * 4096;
    RwinOps rw(ctx, buf, a.nbi, a.local);
    std::unique_ptr<Ops> raw;
    std::string raw_name;
    if (a.vs_raw) {
      const std::string tn = ctx.transport_name();
      const int peer = ctx.rank() < 2 ? 1 - ctx.rank() : -1;
      const std::chrono::milliseconds timeout(a.timeout_ms);
      if (tn.starts_with("ucx")) {
        auto r = std::make_unique<RawOps<rwinperf::RawUcp>>(ctx, peer, buf, timeout, a.raw_fence);
        raw_name = r->describe();
        raw = std::move(r);
      } else if (tn.starts_with("verbs")) {
#ifdef RWIN_PERF_RAW_VERBS
        if (a.raw_fence) throw std::runtime_error("--raw-fence: applies to the raw ucp baseline only (transport is " + tn + ")");
        auto r = std::make_unique<RawOps<rwinperf::RawVerbs>>(ctx, peer, buf, timeout);
        raw_name = r->describe();
        raw = std::move(r);
#else
        throw std::runtime_error("--vs-raw: rwin-perf was built without libibverbs, no raw verbs baseline");
#endif
      } else {
        throw std::runtime_error("--vs-raw: no raw baseline for transport " + tn + " (ucx and verbs only)");
      }
    }
    for (Ops* o : {static_cast<Ops*>(&rw), static_cast<Ops*>(raw.get())}) {
      if (!o || !o->local_src()) continue;  // raw verbs has no buffers on ranks outside the pair
      o->fill_sources(buf);
    }
    ctx.barrier();
    if (ctx.rank() == 0) {
      const auto* s = rw.local_src();
      const auto* d = rw.local_dst();
      std::fprintf(stderr,
                   "rwin-perf: %d ranks, %s, chunk %s depth %d, src page offset %zu, dst+skew page offset %zu%s%s%s%s\n",
                   ctx.size(), ctx.transport_name().c_str(), size_str(ctx.options().chunk_bytes).c_str(),
                   ctx.options().pipeline_depth, reinterpret_cast<uintptr_t>(s) % 4096,
                   (reinterpret_cast<uintptr_t>(d) + a.skew) % 4096, a.nbi ? ", put/get_nbi" : "", a.local ? ", local side: plain memory" : "",
                   a.vs_raw ? ", alternating with " : "", raw_name.c_str());
    }
    Runner runner(ctx, a, rw, raw.get());
    std::unique_ptr<CollRunner> coll;
    if (any_coll) coll = std::make_unique<CollRunner>(ctx, a, *std::max_element(a.sizes.begin(), a.sizes.end()));
    std::vector<CollRecord> coll_records;
    std::vector<Record> records;
    size_t done = 0;
    // notify_lat / notify_rate move no data: one record at 8 B, whatever -s says.
    auto sizes_of = [&](const std::string& t) {
      if (t == "barrier") return std::vector<uint64_t>{0};
      return t.starts_with("notify") ? std::vector<uint64_t>{8} : a.sizes;
    };
    size_t total = 0;
    for (const auto& t : a.tests) total += sizes_of(t).size();
    for (const auto& t : a.tests) {
      for (uint64_t s : sizes_of(t)) {
        if (ctx.rank() == 0) {
          std::fprintf(stderr, "rwin-perf: [%zu/%zu] %s %s\n", ++done, total, t.c_str(), size_str(s).c_str());
        }
        const auto dev = [&] { return rwin::detail::ContextAccess::impl(ctx).tp->counters(); };
        const auto before = dev();
        const rwin::Stats st0 = ctx.stats();
        if (is_coll(t)) coll_records.push_back(coll->run(t, s));
        else records.push_back(runner.run(t, s));
        if (a.stats && ctx.rank() == 0) {
          const rwin::Stats st = ctx.stats();
          const auto d = [](uint64_t x, uint64_t y) { return static_cast<unsigned long long>(x - y); };
          std::fprintf(stderr,
                       "rwin-perf: stats %s %s (rank 0, warm-up and checks included): %llu puts (%llu bytes), %llu gets "
                       "(%llu bytes), %llu put(Add), %llu chunks, %llu notifies, %llu fetching atomics, %llu waits "
                       "(%llu blocked, %.3f ms waited), %llu quiets, %llu barriers\n",
                       t.c_str(), size_str(s).c_str(), d(st.total.puts, st0.total.puts),
                       d(st.total.put_bytes, st0.total.put_bytes), d(st.total.gets, st0.total.gets),
                       d(st.total.get_bytes, st0.total.get_bytes), d(st.total.put_adds, st0.total.put_adds),
                       d(st.total.chunks, st0.total.chunks), d(st.total.notifies, st0.total.notifies),
                       d(st.total.fetching_atomics, st0.total.fetching_atomics), d(st.waits, st0.waits),
                       d(st.waits_blocked, st0.waits_blocked), double(st.wait_ns - st0.wait_ns) / 1e6,
                       d(st.quiets, st0.quiets), d(st.barriers, st0.barriers));
        }
        if (a.counters && ctx.rank() == 0) {
          const auto d = dev();
          const uint64_t wrs = d.wrs - before.wrs, bells = d.doorbells - before.doorbells;
          const uint64_t sig = d.signaled - before.signaled;
          std::fprintf(stderr,
                       "rwin-perf: counters %s %s (rank 0, warm-up and checks included): %llu WRs, %llu doorbells "
                       "(%.1f WRs each), %llu signaled (1 in %.1f), %llu inline, %llu CQEs, %llu striped, "
                       "%llu fence reads\n",
                       t.c_str(), size_str(s).c_str(), (unsigned long long)wrs, (unsigned long long)bells,
                       bells ? double(wrs) / double(bells) : 0.0, (unsigned long long)sig,
                       sig ? double(wrs) / double(sig) : 0.0, (unsigned long long)(d.inline_wrs - before.inline_wrs),
                       (unsigned long long)(d.cqes - before.cqes), (unsigned long long)(d.striped - before.striped),
                       (unsigned long long)(d.fence_reads - before.fence_reads));
        }
      }
    }
    if (ctx.rank() == 0) {
      const std::string tn = ctx.transport_name();
      std::ofstream file;
      std::ostream* os = &std::cout;
      if (!a.out.empty() && !(only_coll && a.csv)) {  // the collective csv is written with stdio
        file.open(a.out);
        if (!file) throw std::runtime_error("cannot write " + a.out);
        os = &file;
      }
      if (only_coll) {
        // The collective table (and csv / json): the columns of bench/coll_common.h.
        std::cout.flush();
        FILE* csv = nullptr;
        if (a.csv && a.out.empty()) csv = stdout;
        else if (a.csv && !(csv = std::fopen(a.out.c_str(), "w"))) throw std::runtime_error("cannot write " + a.out);
        if (a.json) print_coll_json(*os, ctx, coll_records, a, tn);
        const bool table = (!a.csv && !a.json) || !a.out.empty();
        if (table || csv) {
          if (table) std::printf("rwin-perf: %d ranks, %s, dtype %s, op %s, allreduce mode %s\n", ctx.size(), tn.c_str(),
                                 rwin::dtype_name(a.dtype), rwin::reduce_op_name(a.op), a.mode_name.c_str());
          if (table && a.compute_us > 0) {
            std::printf("rwin-perf: each call with %lld us of %s compute, %s\n", static_cast<long long>(a.compute_us),
                        a.compute_spin ? "spin" : "sleep",
                        a.nonblocking ? "between start_* and wait()" : "after the blocking call");
          }
          print_coll(table ? stdout : nullptr, csv, coll_records, a, tn, ctx.size());
        }
        if (csv && csv != stdout) std::fclose(csv);
        std::fflush(stdout);
      } else {
        if (a.csv) print_csv(*os, records, tn, a.skew);
        else if (a.json) print_json(*os, ctx, records, tn, a);
        if (!a.csv && !a.json) print_table(std::cout, records, a.vs_raw);
        else if (!a.out.empty()) print_table(std::cout, records, a.vs_raw);
        if (!coll_records.empty()) {
          std::cout.flush();
          print_coll(stdout, nullptr, coll_records, a, tn, ctx.size());
        }
        std::cout.flush();
      }
    }
    ctx.barrier();
    raw.reset();  // both sides close their raw endpoints while the other is still alive
    ctx.barrier();
    // A collective whose result check failed on any rank fails the run (after its table is out).
    if (std::any_of(coll_records.begin(), coll_records.end(), [](const CollRecord& r) { return !r.ok; })) {
      std::fprintf(stderr, "rwin-perf: a collective's result check FAILED (see the check column)\n");
      return 1;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rwin-perf: rank %d: %s\n", rank_hint, e.what());
    return 1;
  }
  return 0;
}
