#!/usr/bin/env bash
# A stand-in for ring_shift that checks the fault suite itself (selftest.sh): it makes its --ready-file
# (the last argument), notices a peer's death through pid files next to it, waits RWIN_RANK x 0.5 s and
# then does what FAKE_MODE says: ok (names the peer, exit 1), segv (dies of SIGSEGV), asan (prints a
# sanitizer report), hang (never exits), zero (exit 0).
ready=${@: -1}
dir=$(dirname "$ready")
echo $$ >"$dir/pid.$RWIN_RANK"
: >"$ready"
for _ in $(seq 6000); do  # bounded: 60 s
  for f in "$dir"/pid.*; do
    st=$(awk '{print $3}' "/proc/$(<"$f")/stat" 2>/dev/null)
    [[ -z $st || $st == Z ]] || continue  # alive (a killed rank stays a zombie until the suite reaps it)
    [[ -e $f ]] || continue               # a fake that ended on its own removed its file first
    rm -f "$dir/pid.$RWIN_RANK"
    sleep "$(awk -v r="$RWIN_RANK" 'BEGIN { print r * 0.5 }')"
    case ${FAKE_MODE:-ok} in
      ok) echo "ring_shift: rwin: peer ${f##*.} failed (fake)" >&2; exit 1 ;;
      segv) kill -SEGV $$ ;;
      asan) echo "==1==ERROR: AddressSanitizer: heap-use-after-free (fake)" >&2; exit 1 ;;
      hang) sleep 60 ;;
      zero) exit 0 ;;
    esac
  done
  sleep 0.01
done
exit 3
