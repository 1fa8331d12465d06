#!/usr/bin/env bash
# location.sh <build>/bin: guest steps find the build tree wherever the checkout lives (issue 24).
#
# The guest has its own tmpfs on /tmp and shares only the current directory and RWIN_RXE_SHARE
# (run-in-guest.sh), so a checkout under /tmp once lost its build tree (ring_shift: "librwin.so.0:
# cannot open shared object file"). This makes such a checkout, "/tmp/rwin loc.XXXXXX/a checkout/rwin"
# (spaces included): the tracked files of this one and a build tree holding what a verbs step loads
# (ring_shift, rwinrun and their libraries from the build) with its RUNPATH rewritten to the new place
# (patchelf), as a build there would have it. From it, without building again:
#   1. one guest started in build/bin (so the shared current directory is the bin dir alone), a 2-rank
#      verbs ring shift through rwinrun; first it checks the guest does NOT see an unshared file next
#      to the checkout in /tmp (otherwise this test could not fail);
#   2. tests/rxe/verbs-two-guests.sh build/bin from the checkout's root (the two-guest step itself).
# Exit 0 when both pass.
set -uo pipefail
src=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)
bin=$(cd "${1:?usage: location.sh <build>/bin}" && pwd -P)
build=$(dirname "$bin")
say() { echo "location: $*"; }
command -v patchelf >/dev/null || { say "FAIL: patchelf missing (apt-get install patchelf; .ci/setup.sh installs it)"; exit 1; }
progs=(ring_shift rwinrun rwin-perf)
for b in "${progs[@]}"; do [ -x "$bin/$b" ] || { say "FAIL: $bin/$b not built"; exit 1; }; done

tmp=$(mktemp -d "/tmp/rwin loc.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
new="$tmp/a checkout/rwin"
mkdir -p "$new/build/bin"
if git -C "$src" rev-parse --git-dir >/dev/null 2>&1; then  # the tracked files, as edited now
  git -C "$src" ls-files -z | (cd "$src" && tar --null --ignore-failed-read -T - -cf - 2>/dev/null) | tar -xf - -C "$new"
else
  cp -r "$src/tests" "$new/"
fi
# The build's binaries and the libraries they load from inside the build tree, RUNPATH moved along.
files=("${progs[@]/#/$bin/}")
for l in $(ldd "${files[@]}" | grep -o "=> $build/[^ ]*" | cut -c4- | sort -u); do
  files+=("$l" "$(readlink -f "$l")")
done
for f in "${files[@]}"; do
  rel=${f#"$build"/}; mkdir -p "$new/build/$(dirname "$rel")"
  cp -P "$f" "$new/build/$rel"
  if [ ! -L "$f" ]; then
    rp=$(patchelf --print-rpath "$f")
    [ -z "$rp" ] || patchelf --set-rpath "${rp//"$build"/"$new/build"}" "$new/build/$rel" || exit 1
  fi
done
for b in "${progs[@]}"; do
  if grep -q "=> $build/\|not found" <<<"$(ldd "$new/build/bin/$b")"; then
    say "FAIL: the copied $b still loads from $build or misses a library:"; ldd "$new/build/bin/$b"; exit 1
  fi
done
: > "$tmp/not-shared"
say "checkout at '$new' ($(find "$new/build" -type f | wc -l) build files, RUNPATH $(patchelf --print-rpath "$new/build/bin/ring_shift"))"

fails=0
t0=$SECONDS
(cd "$new/build/bin" && RWIN_RXE_SHARE="$new/build" RWIN_RXE_TIMEOUT=${RWIN_RXE_TIMEOUT:-300} \
  "$new/tests/rxe/run-in-guest.sh" bash -c '
    [ -e "$1" ] && { echo "location: $1 is visible in the guest: /tmp is not hidden, this test proves nothing"; exit 1; }
    out=$(RWIN_TRANSPORT=verbs ./rwinrun -n 2 --timeout 200 -- ./ring_shift --size 1000 --iters 2 2>&1); rc=$?
    echo "$out" | tail -4
    [ $rc = 0 ] && grep -q "all ranks OK" <<<"$out"' _ "$tmp/not-shared")
rc=$?
if [ $rc = 0 ]; then say "PASS one guest from build/bin, build tree shared ($((SECONDS - t0)) s)"
else say "FAIL one guest from build/bin, build tree shared: exit $rc ($((SECONDS - t0)) s)"; fails=$((fails + 1)); fi

t0=$SECONDS
(cd "$new" && RWIN_RXE_TIMEOUT=${RWIN_RXE_TIMEOUT:-900} bash tests/rxe/verbs-two-guests.sh build/bin)
rc=$?
if [ $rc = 0 ]; then say "PASS two guests from the checkout's root ($((SECONDS - t0)) s)"
else say "FAIL two guests from the checkout's root: exit $rc ($((SECONDS - t0)) s)"; fails=$((fails + 1)); fi
[ $fails = 0 ]
