#!/usr/bin/env bash
# Builds docker/Dockerfile's image for real with Debian's podman, on a machine with no Docker engine and
# no reachable container registry (only the Debian mirror apt already uses), then runs it:
#   1. base      mmdebstrap --variant=minbase <suite> from the host's own apt sources (read at run time
#                from `apt-get indextargets`, never written down), imported as localhost/rwin-base:<tag>
#   2. build     podman build -f docker/Dockerfile --build-arg BASE_IMAGE=<that base> (the runtime target;
#                its own RUN checks ldd of /opt/rwin and `import rwin`)
#   3. checks    inside the image: its default command (rwinrun -n 2 -- ring_shift), rwinrun -n 4 --
#                ring_shift put and get, `import rwin` with Debian's /usr/bin/python3, the user is rwin
#   4. multi     docker/compose.yaml's ring without compose: one container per rank, each in a network
#                namespace made here (on a bridge in another namespace made here), RWIN_ROOT pointing at
#                the first container, UCX_TLS=tcp, put and get for 1, 1000 and 3000000 elements
# Prints PASS/FAIL lines and a closing "N passed, M failed"; exit 0 only when nothing failed.
#
# usage (root, from anywhere): bash tests/docker/build-and-run.sh
#   env: RWIN_DOCKER_WORK   parent of the run's scratch directory (default /var/tmp; needs ~5 GB)
#        RWIN_DOCKER_SUITE  Debian suite of the base (default bookworm: the Dockerfile is Debian 12's)
#        RWIN_DOCKER_HOSTS  containers in the multi-container ring (default 3, as compose.yaml; >= 2)
#        RWIN_DOCKER_BASE_TAR  use this mmdebstrap tarball instead of making one
#        RWIN_DOCKER_IMAGE_TAR use this `podman save` archive of the image instead of building it
#                           (both for local iteration on the checks only; a CI run makes its own)
#
# Everything lives in one scratch directory: podman's storage (--root), run state (--runroot, --tmpdir)
# and network config, so the run neither reads nor leaves images in the machine's own podman store, and
# clean-up (on exit, error, SIGINT, SIGTERM) is: remove the containers and images, unmount, delete the
# directory, delete the namespaces. Nothing is cached across runs.
#
# Why these podman options (each found on a 2-core Debian 12 VM, root, cgroup v1 hybrid, no
# CAP_SYS_RESOURCE in the caller's effective set):
#   --runtime runc   crun 1.8.1 (podman's default) refuses hybrid cgroups: "cgroups in hybrid mode not
#                    supported, drop all controllers from cgroupv2"; runc runs them
#   --ulimit ...     podman lowers its own RLIMIT_NPROC to 32768 and asks the runtime for its defaults
#                    (nofile 1048576): without CAP_SYS_RESOURCE runc/crun fail with "setrlimit
#                    RLIMIT_NPROC: Operation not permitted"; we ask for no more than the caller has
#   --network=host for the build (apt reaches the mirror as the host does; podman's default bridge
#                    would add an interface and NAT rules to the host's namespace), none for one-container
#                    runs, ns:/run/netns/<ours> for the multi-container ring
# shellcheck disable=SC2317  # cleanup and on_signal run from traps
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
REPO=$PWD
T_START=$SECONDS
SUITE=${RWIN_DOCKER_SUITE:-bookworm}
HOSTS=${RWIN_DOCKER_HOSTS:-3}
PREFIX="rwdk-$$"
TAG="t$$"
BASE_IMG="localhost/rwin-base:$TAG"
IMG="localhost/rwin:$TAG"

passed=0 failed=0
pass() { passed=$((passed + 1)); echo "PASS $*"; }
fail() { failed=$((failed + 1)); echo "FAIL $*"; }
finish() { echo "docker-test: total $((SECONDS - T_START)) s"; echo "$passed passed, $failed failed"; ((failed == 0)); exit $?; }
show_log() { tail -n "${2:-30}" "$1" | sed 's/^/docker-test:   | /'; }

if [[ $(id -u) -ne 0 ]]; then fail "docker-test needs root (mmdebstrap, podman storage, namespaces)"; finish; fi
if ((HOSTS < 2 || HOSTS > 200)); then fail "RWIN_DOCKER_HOSTS must be 2..200, got $HOSTS"; finish; fi

# ---- packages (Debian's; installed like .ci/setup.sh does, only what is missing) ---------------------
pkgs=(podman runc mmdebstrap netavark)
missing=()
for p in "${pkgs[@]}"; do
  [[ $(dpkg-query -W -f='${Status}' "$p" 2>/dev/null) == *"install ok installed"* ]] || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "docker-test: installing ${missing[*]}"
  if ! DEBIAN_FRONTEND=noninteractive timeout 900 apt-get install -y -qq --no-install-recommends \
      "${missing[@]}" >/dev/null; then
    fail "apt-get install ${missing[*]}"
    finish
  fi
fi

# ---- scratch directory, podman wrapper, clean-up --------------------------------------------------
W=$(mktemp -d "${RWIN_DOCKER_WORK:-/var/tmp}/rwin-docker.XXXXXX") || { fail "mktemp"; finish; }
mkdir -p "$W/logs" "$W/net" "$W/libpod"
echo "docker-test: scratch $W, free there: $(df -h --output=avail "$W" | tail -1 | tr -d ' ')"
PM=(podman --root "$W/store" --runroot "$W/run" --tmpdir "$W/libpod" --network-config-dir "$W/net"
  --runtime runc)
nofile=$(ulimit -Hn)
[[ $nofile == unlimited || $nofile -gt 1048576 ]] && nofile=1048576
nproc=$(ulimit -Hu)
[[ $nproc == unlimited || $nproc -gt 32768 ]] && nproc=32768
ULIMITS=(--ulimit "nofile=$nofile:$nofile" --ulimit "nproc=$nproc:$nproc")

# shellcheck disable=SC2034  # read by tests/lib/netns.sh
NETNS_SELF=docker-test
# shellcheck source=tests/lib/netns.sh
source "$REPO/tests/lib/netns.sh"
RUN_PIDS=()
cleanup() {
  local pid
  for pid in "${RUN_PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null; done
  for pid in "${RUN_PIDS[@]}"; do wait "$pid" 2>/dev/null; done
  RUN_PIDS=()
  if [[ -d $W/store ]]; then
    timeout 120 "${PM[@]}" rm -a -f -t 0 >/dev/null 2>&1
    timeout 120 "${PM[@]}" rmi -a -f >/dev/null 2>&1
    timeout 120 "${PM[@]}" system reset -f >/dev/null 2>&1
  fi
  netns_cleanup
  # Whatever podman left mounted under the scratch directory (e.g. after a killed build), deepest first.
  awk -v w="$W/" 'index($5, w) == 1 { print $5 }' /proc/self/mountinfo | sort -r |
    while read -r m; do umount -l "$m" 2>/dev/null; done
  rm -rf "$W"
}
on_signal() { echo "docker-test: caught $1, cleaning up" >&2; trap - EXIT; cleanup; exit $((128 + $2)); }
trap cleanup EXIT
trap 'on_signal SIGINT 2' INT
trap 'on_signal SIGTERM 15' TERM

# ---- 1. base image from the host's Debian mirror --------------------------------------------------
t0=$SECONDS
if [[ -n ${RWIN_DOCKER_BASE_TAR:-} ]]; then
  base_tar=$RWIN_DOCKER_BASE_TAR
  base_how="given tarball $base_tar"
else
  # The mirror(s) apt uses here, for SUITE, SUITE-updates and SUITE-security: one-line sources that
  # mmdebstrap reads from a file (and leaves in the image's /etc/apt/sources.list.d for the build's apt).
  # shellcheck disable=SC2016  # $(...) is apt's field syntax, not the shell's
  apt-get indextargets --format '$(REPO_URI) $(RELEASE) $(COMPONENT)' 'Identifier: Packages' |
    awk -v s="$SUITE" '$2 == s || $2 == s"-updates" || $2 == s"-security" { print "deb", $1, $2, $3 }' |
    sort -u >"$W/sources.list"
  if ! grep -q " $SUITE " "$W/sources.list"; then
    fail "base: the host's apt sources have no $SUITE suite (apt-get indextargets); the Dockerfile needs Debian 12"
    finish
  fi
  base_tar=$W/base.tar
  base_how="mmdebstrap minbase $SUITE, $(wc -l <"$W/sources.list") apt source(s) of the host"
  if ! nice -n 10 timeout 1800 mmdebstrap --variant=minbase --format=tar --quiet \
      "$SUITE" "$base_tar" "$W/sources.list" >"$W/logs/mmdebstrap.log" 2>&1; then
    fail "base: mmdebstrap $SUITE ($((SECONDS - t0)) s)"
    show_log "$W/logs/mmdebstrap.log"
    finish
  fi
fi
if timeout 600 "${PM[@]}" import --change 'CMD ["/bin/bash"]' "$base_tar" "$BASE_IMG" >"$W/logs/import.log" 2>&1; then
  pass "base image $BASE_IMG: $base_how ($((SECONDS - t0)) s, $(du -m "$base_tar" | cut -f1) MB)"
else
  fail "base: podman import"
  show_log "$W/logs/import.log"
  finish
fi
[[ -z ${RWIN_DOCKER_BASE_TAR:-} ]] && rm -f "$base_tar"

# ---- 2. the image --------------------------------------------------------------------------------
# The build stage compiles rwin on every core: nice, so it yields to whatever else runs.
# The image must exist afterwards: podman build exits 0 when a SIGTERM stops it.
t0=$SECONDS
if [[ -n ${RWIN_DOCKER_IMAGE_TAR:-} ]]; then
  what="podman load $RWIN_DOCKER_IMAGE_TAR (not built: RWIN_DOCKER_IMAGE_TAR)"
  timeout 600 "${PM[@]}" load -i "$RWIN_DOCKER_IMAGE_TAR" >"$W/logs/build.log" 2>&1 &&
    IMG=$(sed -n 's/^Loaded image[^:]*: *//p' "$W/logs/build.log" | cut -d, -f1)
else
  what="podman build -f docker/Dockerfile (runtime target; its ldd and import checks ran)"
  nice -n 10 timeout 3600 "${PM[@]}" build --pull=never --network=host "${ULIMITS[@]}" \
    --build-arg BASE_IMAGE="$BASE_IMG" -f docker/Dockerfile -t "$IMG" . >"$W/logs/build.log" 2>&1
fi
rc=$?
if ((rc == 0)) && [[ -n $IMG ]] && "${PM[@]}" image exists "$IMG"; then
  size=$("${PM[@]}" image inspect --format '{{.Size}}' "$IMG" 2>/dev/null)
  pass "$what ($((SECONDS - t0)) s, image $((${size:-0} / 1000000)) MB)"
else
  fail "$what: exit $rc$( ((rc == 124)) && echo ' (timed out after 3600 s)'), image ${IMG:-?} $("${PM[@]}" image exists "$IMG" 2>/dev/null || echo 'missing') ($((SECONDS - t0)) s)"
  show_log "$W/logs/build.log" 40
  finish
fi

# ---- 3. one container ----------------------------------------------------------------------------
# check_run NAME EXPECT_REGEX PODMAN_RUN_ARGS...: passes when the container exits 0 and prints EXPECT.
check_run() {
  local name=$1 expect=$2 log="$W/logs/run-$RANDOM.log" t=$SECONDS rc
  shift 2
  timeout -k 10 300 "${PM[@]}" run --rm --pull=never --network=none "${ULIMITS[@]}" "$@" >"$log" 2>&1
  rc=$?
  if ((rc == 0)) && grep -Eq "$expect" "$log"; then
    pass "$name: $(grep -Em1 "$expect" "$log" | sed 's/^ *//') ($((SECONDS - t)) s)"
  else
    fail "$name: exit $rc$( ((rc == 124)) && echo " (timed out after 300 s)"), expected /$expect/"
    show_log "$log"
  fi
}
check_run "default command (rwinrun -n 2 -- ring_shift)" "all ranks OK" "$IMG"
for mode in put get; do
  check_run "rwinrun -n 4 -- ring_shift --mode $mode --size 3000000" "all ranks OK" \
    "$IMG" rwinrun -n 4 --timeout 240 -- ring_shift --mode "$mode" --size 3000000
done
check_run "import rwin with /usr/bin/python3" "^rwin [0-9]" \
  "$IMG" /usr/bin/python3 -c 'import rwin; print("rwin", rwin.__version__, rwin.__file__)'
# shellcheck disable=SC2016  # expanded inside the container
check_run "runs as the non-root user rwin" "^rwin uid=1000" "$IMG" sh -c 'echo "$(id -un) uid=$(id -u)"'

# ---- 4. one container per rank, each in its own network namespace ---------------------------------
# Namespaces $PREFIX-h<i> with rw0 = 10.79.0.<i+1>/24 on bridge br0 in $PREFIX-br (tests/lib/netns.sh:
# no interface or address ever exists in the host's namespace). Container i joins $PREFIX-h<i> with
# --network=ns:, so it sees only lo and rw0, as a compose service sees only lo and eth0.
t0=$SECONDS
specs=()
for ((h = 0; h < HOSTS; h++)); do specs+=("$PREFIX-h$h=10.79.0.$((h + 1))"); done
carrier=()
for ((h = 0; h < HOSTS; h++)); do carrier+=("$PREFIX-h$h" rw0); done
if netns_bridge "$PREFIX-br" && netns_star "$PREFIX-br" rw0 24 "${specs[@]}" &&
    netns_wait_carrier "${carrier[@]}"; then
  key=$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')
  port=29500
  for mode in put get; do
    for size in 1 1000 3000000; do
      port=$((port + 1))
      t=$SECONDS
      RUN_PIDS=()
      for ((h = 0; h < HOSTS; h++)); do
        # Same environment as docker/compose.yaml's services, rank0's address instead of its name.
        timeout -k 10 180 "${PM[@]}" run --rm --pull=never --name "$PREFIX-r$h-$port" --network="ns:/run/netns/$PREFIX-h$h" \
          "${ULIMITS[@]}" -e RWIN_RANK="$h" -e RWIN_NRANKS="$HOSTS" -e RWIN_ROOT="10.79.0.1:$port" \
          -e RWIN_JOB_KEY="$key" -e UCX_TLS=tcp -e UCX_NET_DEVICES=rw0 \
          "$IMG" timeout -k 5 120 /opt/rwin/bin/ring_shift --mode "$mode" --size "$size" \
          >"$W/logs/multi-$port-r$h.log" 2>&1 &
        RUN_PIDS+=($!)
      done
      bad=()
      for ((h = 0; h < HOSTS; h++)); do
        wait "${RUN_PIDS[h]}"
        rc=$?
        if ((rc != 0)); then
          bad+=("rank $h exit $rc$( ((rc == 124)) && echo ' (timed out)')")
        elif ! grep -qw OK "$W/logs/multi-$port-r$h.log"; then
          bad+=("rank $h printed no OK")
        fi
      done
      RUN_PIDS=()
      label="$HOSTS containers, one netns each, ring_shift --mode $mode --size $size"
      if ((${#bad[@]} == 0)); then
        pass "$label:$(grep -m1 -o ' over [^:]*: all ranks OK' "$W/logs/multi-$port-r0.log") ($((SECONDS - t)) s)"
      else
        fail "$label: $(IFS=';'; echo "${bad[*]}")"
        for ((h = 0; h < HOSTS; h++)); do
          echo "docker-test: --- rank $h ---"
          show_log "$W/logs/multi-$port-r$h.log" 15
        done
      fi
    done
  done
  echo "docker-test: multi-container ring: $((SECONDS - t0)) s"
else
  fail "multi-container ring: network namespaces could not be set up (messages above)"
fi
netns_cleanup

finish
