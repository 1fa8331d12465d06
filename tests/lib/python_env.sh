# Sourced by the scripts that run rwin's Python package (tests/scripts/python_pytest.sh, python_agent.sh,
# tensor_service.sh): the sanitizer environment their interpreters need, and how they judge and count
# a run (pass/fail counters, PASS/FAIL lines).

# rwin_python_asan_env PYTHON_PACKAGE_DIR [NAME]: a sanitizer build's module needs the sanitizer runtime
# preloaded into the (uninstrumented) interpreter; CPython's own allocations are then leaks to LSan, so
# leak checking is off for these processes. Does nothing for a build without sanitizers.
rwin_python_asan_env() {
  local so pre
  so=$(ls "$1"/rwin/_rwin*.so 2>/dev/null | head -1)
  # A here-string, not a pipe: a caller's pipefail plus grep -q's early exit could SIGPIPE ldd.
  [[ -n $so ]] && grep -q libasan <<<"$(ldd "$so")" || return 0
  pre=$(ldd "$so" | awk '/lib(a|ub)san/ {print $3}' | paste -sd:)
  export LD_PRELOAD=$pre${LD_PRELOAD:+:$LD_PRELOAD} PYTHONMALLOC=malloc
  export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0
  echo "${2:-python}: ASan build: LD_PRELOAD=$LD_PRELOAD PYTHONMALLOC=malloc, leak checking off"
}

# rwin_sanitizer_clean OUTPUT: true when OUTPUT holds no AddressSanitizer or UBSan report (a run that
# printed one failed even when it exited 0).
rwin_sanitizer_clean() { ! grep -qE "AddressSanitizer|runtime error:" <<<"$1"; }

# rwin_verdict OK PASS_TEXT FAIL_TEXT TAIL OUTPUT: counts one run into the caller's pass / fail. OK=1:
# prints "PASS PASS_TEXT" (nothing when PASS_TEXT is empty); otherwise "FAIL FAIL_TEXT:" and the last
# TAIL lines of OUTPUT.
rwin_verdict() {
  if [[ $1 == 1 ]]; then
    pass=$((pass + 1))
    [[ -n $2 ]] && echo "PASS $2"
  else
    fail=$((fail + 1))
    echo "FAIL $3:"
    tail -n "$4" <<<"$5"
  fi
  return 0
}
