#!/usr/bin/env bash
# Sanitizer jobs (issue 9, item 8) and the bounded fuzz run (item 7), each in its own build dir:
#   asan  build-asan (gcc, -DRWIN_SANITIZE=address,undefined): the host ctest under ASan+UBSan+LSan
#   tsan  build-tsan (gcc, -DRWIN_SANITIZE=thread): the threaded parts (store server thread, rwinrun,
#         the agent and its progress thread, the nonblocking collectives' worker, rwin's own tcp
#         transport's receiver thread under every transport-parameterised suite)
#   fuzz  build-fuzz (clang, -DRWIN_FUZZ=ON): tests/fuzz/run.sh, RWIN_FUZZ_SECONDS per target
# RWIN_TEST_TIER=ci (tests/run-all.sh's default) runs ASan+UBSan over a representative subset of the
# host suite and fuzzes 2 s per target, as many targets at a time as there are cores; full (run-all.sh --full, or no tier set) runs all of it, 15 s.
# The sanitizer builds are -O1 -g1 (ASan's advice; half the compile time of -O2 -g, line tables kept
# for the reports); the test programs and the Python bindings -O0 (RWIN_TEST_CXX_FLAGS: half their
# compile time again, and they are most of the tree; librwin, what the sanitizers watch, stays -O1).
# usage: tests/sanitizers.sh [--build-only|--run-only] [asan] [tsan] [fuzz]   (no part: all three)
#   --build-only  configure and build the parts' trees, run nothing (run-all.sh builds them in the
#                 background, niced, while the release build's tests run)
#   --run-only    run the parts' tests against trees built before
# Prints one line per part and a closing "N passed, M failed"; exit status 0 only if all passed.
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
source tests/lib/tiers.sh
jobs=${RWIN_JOBS:-$(nproc)}
stage=all
case ${1:-} in
  --build-only) stage=build; shift ;;
  --run-only) stage=run; shift ;;
esac
parts=("$@")
tier=${RWIN_TEST_TIER:-full}
((${#parts[@]})) || parts=(asan tsan fuzz)

configure() {  # configure DIR WERROR ARGS...: configure + build DIR (quietly; the log on failure)
  local dir=$1 werror=$2; shift 2
  cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" \
    -DRWIN_WERROR="$werror" "$@" >"$dir.configure.log" 2>&1 ||
    { cat "$dir.configure.log"; return 1; }
}
build() {  # build DIR [TARGETS...]
  local dir=$1; shift
  ninja -C "$dir" -j"$jobs" "$@" >"$dir.build.log" 2>&1 || { tail -40 "$dir.build.log"; return 1; }
}

# Shared by both runtime parts. UBSan does not stop by default: halt_on_error makes a finding fail
# the test. LSan runs in every process (detect_leaks) with the UCX/ibverbs-only suppressions.
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
export LSAN_OPTIONS=suppressions=$root/tests/lsan.supp:print_suppressions=0

# gcc 12's flow warnings misfire at -O1 under the sanitizers (a resize() after a size check read as
# a 2^64-byte memset stopped a CI build): the gcc sanitizer trees build without -Werror and without
# the object-size warnings. Warnings stay errors in the release tree (CI: -O2, -Werror) and in the
# clang fuzz tree, so no warning goes unseen.
gcc_san_flags=-DCMAKE_CXX_FLAGS="-Wno-stringop-overflow -Wno-stringop-overread -Wno-array-bounds"
# The gcc sanitizer trees compile in unity batches (6 files a unit: each inline function and template
# the files share is instrumented once per batch instead of once per file). The release tree keeps one
# unit per file, so a file that compiles only thanks to its batch neighbours' includes still fails CI;
# helpers in a file's anonymous namespace need names of their own (tests/CMakeLists.txt).
unity=(-DCMAKE_UNITY_BUILD=ON -DCMAKE_UNITY_BUILD_BATCH_SIZE=6)
build_asan() {
  configure build-asan OFF -DRWIN_SANITIZE=address,undefined -DRWIN_BUILD_BENCH=OFF -DRWIN_TEST_CXX_FLAGS=-O0 "$gcc_san_flags" "${unity[@]}" && build build-asan
}
run_asan() {
  # Excluded, with the reason: tests/lib/tiers.sh (RWIN_ASAN_ALWAYS_SKIP; the CI tier's subset,
  # RWIN_ASAN_CI_SKIP, whose complement run-all.sh runs on the release build). The fault suite (label
  # faults) runs from run-all.sh with these binaries; the soft-RoCE guest is not part of host ctest.
  local skip=$RWIN_ASAN_ALWAYS_SKIP
  if [[ $tier == ci ]]; then
    skip=$RWIN_ASAN_CI_SKIP
    echo "asan: CI tier subset (tests/lib/tiers.sh; run-all.sh --full runs the whole host suite)"
  fi
  RWIN_JOBS=$jobs rwin_host_ctest build-asan -E "$skip"
}

build_tsan() {
  configure build-tsan OFF -DRWIN_SANITIZE=thread -DRWIN_BUILD_BENCH=OFF -DRWIN_TEST_CXX_FLAGS=-O0 "$gcc_san_flags" "${unity[@]}" &&
    build build-tsan rwin_unit_tests rwin_mp_tests rwinrun ring_shift overlap rwin_agent_tests
}
run_tsan() {
  # UCX's mmap hooks crash TSan's runtime; rwin does not need them (it maps its own windows).
  # The store server runs its own thread (TcpStore.*, Bootstrap.* drive it from the test
  # thread); rwinrun relays output and watches ranks; ring_shift under rwinrun runs the store
  # thread of rank 0 next to the main thread.
  UCX_MEM_MMAP_HOOK_MODE=none TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
    ctest --test-dir build-tsan --output-on-failure --no-tests=error --timeout 900 -j"$jobs" \
    -R '^(TcpStore|Bootstrap|CallerStoreBootstrap|StoreWire|HostPort|LaunchEnv|TcpWire|TcpTransport|TcpRunTimePeers|Connections/Tcp(HeaderFirst|AdoptedFrames)|OwnerNap)|^script\.rwinrun_' || return 1
  # CI tier: not the shmcma lane (UCX shared memory plus cma: the agent's threads do what they do on shm).
  local shmcma=(); [[ $tier == ci ]] && shmcma=(-E '/shmcma( |$)')
  # The agent (rwin/agent.h): its progress thread beside the callers' threads (ConcurrentCallers*,
  # the passive servers, the sleeping thread and its wake-ups), over UCX tcp, shared memory and
  # rwin's own tcp (its receiver thread beside them). tests/tsan-agent.supp: the tests learn of a peer's
  # write from a file it wrote, an order through two processes that TSan cannot see.
  UCX_MEM_MMAP_HOOK_MODE=none TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1:suppressions=$root/tests/tsan-agent.supp \
    ctest --test-dir build-tsan --output-on-failure --no-tests=error --timeout 900 -j1 -L '^agent$' "${shmcma[@]}" || return 1
  # The registration cache (core/src/reg_cache.cpp) with libucm's hooks ON: its unmap hook runs on
  # another thread's munmap while this thread acquires (RegCacheHooks.ConcurrentUnmaps*, whose
  # unmapper thread parks instead of exiting: the hook crashes TSan at thread exit, see there).
  TSAN_OPTIONS=halt_on_error=1 build-tsan/bin/rwin_unit_tests --gtest_filter='RegCache*' >build-tsan.regcache.log 2>&1 ||
    { echo "tsan: RegCache* with the memory hooks on failed:"; tail -40 build-tsan.regcache.log; return 1; }
  # A real job: rank 0 serves the store from its own thread while every rank's main thread
  # drives UCX (tcp, then shared memory), put and get.
  local tls mode out
  for tls in tcp posix,sysv,self; do
    for mode in put get; do
      out=$(UCX_MEM_MMAP_HOOK_MODE=none UCX_TLS=$tls TSAN_OPTIONS=halt_on_error=1 \
        build-tsan/bin/rwinrun -n 3 --timeout 300 -- build-tsan/bin/ring_shift --mode $mode --size 100003 --iters 3 2>&1)
      if ! grep -q "all ranks OK" <<<"$out" || grep -q "ThreadSanitizer" <<<"$out"; then
        echo "tsan: ring_shift $mode UCX_TLS=$tls failed:"; echo "$out"; return 1
      fi
    done
  done
  echo "tsan: ring_shift put/get over tcp and shared memory: OK"
  # Nonblocking collectives (examples/overlap.cpp): the caller lends its context to the collective
  # worker thread and takes it back at wait(); over UCX's tcp, shared memory and rwin's own tcp
  # (whose receiver thread lands the messages beside both).
  local lane
  for lane in UCX_TLS=tcp UCX_TLS=posix,sysv,self RWIN_TRANSPORT=tcp; do
    out=$(env "$lane" UCX_MEM_MMAP_HOOK_MODE=none TSAN_OPTIONS=halt_on_error=1 \
      build-tsan/bin/rwinrun -n 3 --timeout 300 -- build-tsan/bin/overlap --size 100003 --iters 3 --compute-us 1000 2>&1)
    if [[ $(grep -c 'OK$' <<<"$out") -ne 3 ]] || grep -q "ThreadSanitizer" <<<"$out"; then
      echo "tsan: overlap $lane failed:"; echo "$out"; return 1
    fi
  done
  echo "tsan: overlap (nonblocking collectives) over UCX tcp, shared memory and rwin's own tcp: OK"
  # Every transport-parameterised suite over rwin's own tcp (one connection per pair, and three with
  # striping: tcp_striped) and over mixed (contract, memory model,
  # accumulate, collectives, ...: the receiver thread applies writes, atomics and put(Add)s while the
  # main thread reads what they publish; in mixed beside shared-memory peers' CPU stores and atomics on
  # the same windows), the mixed transport's own tests, and the nonblocking collectives over every lane.
  # tests/tsan-mp.supp: the one test that reads a window while puts land in it, on purpose.
  UCX_MEM_MMAP_HOOK_MODE=none TSAN_OPTIONS=halt_on_error=1:suppressions=$root/tests/tsan-mp.supp \
    build-tsan/bin/rwin_mp_tests --gtest_filter='*/tcp:*/tcp_striped:*/mixed:*/mixed_striped:MixedTransport.*:*Nonblocking*' --gtest_brief=1 >build-tsan.mp.log 2>&1 ||
    { echo "tsan: rwin_mp_tests over own tcp and mixed failed:"; grep -v '^skipped' build-tsan.mp.log | tail -60; return 1; }
  echo "tsan: rwin_mp_tests over rwin's own tcp and mixed (and *Nonblocking* everywhere): OK"
  # rwin's own tcp transport: every rank's receiver thread applies peers' writes, reads and
  # atomics and put(Add)s (its RegionAdder takes the stripe locks) while the main thread posts and waits.
  for mode in put get add; do
    out=$(RWIN_TRANSPORT=tcp UCX_MEM_MMAP_HOOK_MODE=none TSAN_OPTIONS=halt_on_error=1 \
      build-tsan/bin/rwinrun -n 3 --timeout 300 -- build-tsan/bin/ring_shift --mode $mode --size 100003 --iters 3 2>&1)
    if ! grep -q "all ranks OK" <<<"$out" || grep -q "ThreadSanitizer" <<<"$out"; then
      echo "tsan: ring_shift $mode RWIN_TRANSPORT=tcp failed:"; echo "$out"; return 1
    fi
  done
  echo "tsan: ring_shift put/get/add over rwin's tcp transport: OK"
}

build_fuzz() {
  configure build-fuzz ON -DCMAKE_CXX_COMPILER=clang++ -DRWIN_FUZZ=ON -DRWIN_BUILD_BENCH=OFF -DRWIN_BUILD_TESTS=OFF &&
    build build-fuzz fuzzers
}
run_fuzz() {
  local secs=15; [[ $tier == ci ]] && secs=2
  bash tests/fuzz/run.sh build-fuzz "${RWIN_FUZZ_SECONDS:-$secs}"
}

part() {  # part NAME: this stage of one part
  case $stage in
    build) "build_$1" ;;
    run) "run_$1" ;;
    all) "build_$1" && "run_$1" ;;
  esac
}

passed=0 failed=0 summary=()
for p in "${parts[@]}"; do
  declare -F "run_$p" >/dev/null || { echo "sanitizers.sh: unknown part '$p' (asan, tsan, fuzz)" >&2; exit 2; }
  [[ $stage == all ]] && name=$p || name="$p ($stage)"
  echo "=== sanitizers: $name"
  t0=$SECONDS
  if part "$p"; then
    passed=$((passed + 1)); summary+=("$name: passed ($((SECONDS - t0)) s)")
  else
    failed=$((failed + 1)); summary+=("$name: FAILED ($((SECONDS - t0)) s)")
  fi
done
for line in "${summary[@]}"; do echo "=== sanitizers: $line"; done
echo "$passed passed, $failed failed"
[[ $failed -eq 0 ]]
