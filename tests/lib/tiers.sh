# Which host tests run where in the CI tier (sourced by tests/run-all.sh and tests/sanitizers.sh).
# The CI tier runs each host test once: the ASan+UBSan build runs the tests whose names do NOT match
# RWIN_ASAN_CI_SKIP (every unit test, the multi-process suites over UCX tcp in rwin's own mode and shared
# memory in UCX's native mode, the agents over tcp, the launcher, PMIx, Python and tool scripts); the
# release build runs the ones that match (the other UCX lanes, the agents over shm, the real Slurm, the
# network namespaces, the install, the perf smoke scripts, the dtype ring shifts, the mpirun/srun
# launches, the fault suite's self-test). What a sanitizer
# finds depends on the code a test drives, and the excluded instances drive the same rwin code over
# another UCX lane. --full runs the whole host suite in both builds.
# (A parameterised test's name ends in "/PARAM  # GetParam() = ...".)

# Never under ASan, whatever the tier: the fault suite's self-test drives a fake ring_shift (no rwin
# code), and the network-namespace ring shift takes minutes under ASan for interface choice, which the
# Netif unit tests cover.
RWIN_ASAN_ALWAYS_SKIP='^faults\.selftest$|^script\.multinode_netns$'
RWIN_ASAN_CI_SKIP="$RWIN_ASAN_ALWAYS_SKIP"
# rwin's own tcp transport (/tcp, and /tcp_striped with 3 sockets per pair): the release build runs its
# multi-process instances; ASan drives the transport itself through the TcpTransport.* and TcpStriping.*
# unit tests, the fault suite's owntcp kill trials and the Python suite's own-tcp lanes. (`[_a-z]*`, not a
# group: CMake's regular expressions take at most 9 groups, see below.)
RWIN_ASAN_CI_SKIP+='|/(ucx_tcp_native|ucx_shm|shm|shmcma)( |$)|^Transports/.*/tcp[_a-z]*( |$)|^Transports/(MemoryModel|Accumulate|Collectives)\..*/ucx_shm_native( |$)'
RWIN_ASAN_CI_SKIP+='|^slurm\.|^install\.|^script\.(python_agent|tensor_service|perf_)'
# The verbs instances need an RDMA device, which the host lacks: they skip (in ~0.4 s each under
# ASan, ~40 s in all, against ~3 s in the release build); the soft-RoCE guest runs them for real.
RWIN_ASAN_CI_SKIP+='|/verbs( |$)|^Verbs(Transport|Dynamic|Fork)\.'
# The dtype ring shifts and the mpirun/srun launches drive, under ASan, what the multi-process dtype
# tests (Contract.*Dtype*) and the launcher-env unit tests already drive there: release build.
# Also driven under a sanitizer elsewhere: the kill-a-rank script by the ASan fault suite's kill trials
# (the same ring shifts killed the same way), rwinrun's output relay by TSan (script.rwinrun_*), the log
# lines by every ASan test, the tools' option parsing by the ASan unit tests (options_parse): release build.
# One group for all of these: CMake's regular expressions take at most 9 groups (more: "Too many
# parentheses", and ctest selects nothing: rwin_host_ctest then fails, --no-tests=error).
RWIN_ASAN_CI_SKIP+='|^script\.(ring_shift_dtypes|launch_mpirun_slurm|ring_shift_kill_rank|logging|rwinrun_output|tools_cli)$'

# rwin_host_ctest DIR [CTEST SELECTION...]: the host suite of build tree DIR, e.g. `-R REGEX` or
# `-E REGEX`. Unit tests are single processes: as many at a time as there are cores (RWIN_JOBS). The
# multi-process tests fork several busy ranks each: one at a time. The fault suite (label faults) runs
# from run-all.sh, not here.
rwin_host_ctest() {
  local dir=$1 rc=0; shift
  # The release build's CI selection holds no unit test (they all run under ASan); every selection holds
  # multi-process tests, so an empty one there means a broken selection (--no-tests=error).
  ctest --test-dir "$dir" --output-on-failure --timeout 900 "$@" -L '^unit$' -j"${RWIN_JOBS:-$(nproc)}" || rc=1
  ctest --test-dir "$dir" --output-on-failure --no-tests=error --timeout 900 "$@" -LE '^(faults|unit)$' || rc=1
  return $rc
}
