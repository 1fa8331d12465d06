# Sourced by the scripts that run rwin's Python package (python_pytest.sh, python_agent.sh,
# tensor_service.sh): a sanitizer build's module needs the sanitizer runtime preloaded into the
# (uninstrumented) interpreter; CPython's own allocations are then leaks to LSan, so leak checking
# is off for these processes. Usage: rwin_python_asan_env PYTHON_PACKAGE_DIR [NAME]
rwin_python_asan_env() {
  local so pre
  so=$(ls "$1"/rwin/_rwin*.so 2>/dev/null | head -1)
  [[ -n $so ]] && ldd "$so" | grep -q libasan || return 0
  pre=$(ldd "$so" | awk '/lib(a|ub)san/ {print $3}' | paste -sd:)
  export LD_PRELOAD=$pre${LD_PRELOAD:+:$LD_PRELOAD} PYTHONMALLOC=malloc
  export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0
  echo "${2:-python}: ASan build: LD_PRELOAD=$LD_PRELOAD PYTHONMALLOC=malloc, leak checking off"
}
