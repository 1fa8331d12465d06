#!/usr/bin/env bash
# Installs a build into a temporary prefix P and uses it as a user would (issue 13, item 1): checks the
# installed layout (headers, librwin.so -> .so.0 -> .so.0.1.0 or one librwin.a, rwinConfig.cmake,
# rwin.pc, programs, Python package, docs), builds tests/install/consumer against P both ways
# (find_package with CMAKE_PREFIX_PATH, and c++ $(pkg-config --cflags --libs rwin)) and the C consumer
# tests/install/consumer_c (a C-only CMake project, and cc -std=c11 $(pkg-config ...); shared builds only: a
# static librwin.a needs the C++ runtime linked too), runs each on 2 ranks with P/bin/rwinrun (both ranks
# must print OK; the C consumer also starts a context on a store of its own in a fresh directory), imports the installed Python package, then moves P and
# runs the installed ring_shift again (the programs find librwin relative to themselves).
#   consumer-test.sh BUILD_DIR             install BUILD_DIR (shared, as configured)
#   consumer-test.sh BUILD_DIR --static    first build rwin again with -DBUILD_SHARED_LIBS=OFF in a
#                                          temporary dir (compiles the library once more: not in CI)
set -u
build=$(cd "${1:?usage: consumer-test.sh BUILD_DIR [--static]}" && pwd)
static=0
[[ ${2:-} == --static ]] && static=1
src=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d /tmp/rwin-consumer.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL consumer-test: $*" >&2; exit 1; }
log() { echo "consumer-test: $*"; }
export UCX_TLS=tcp UCX_NET_DEVICES=lo   # as the other multi-rank scripts: loopback only

if [[ $static -eq 1 ]]; then
  log "building a static librwin in $tmp/build-static"
  cmake -S "$src" -B "$tmp/build-static" -G Ninja -DBUILD_SHARED_LIBS=OFF -DRWIN_BUILD_TESTS=OFF \
        -DRWIN_BUILD_BENCH=OFF -DRWIN_PYTHON=OFF >"$tmp/static.log" 2>&1 &&
    ninja -C "$tmp/build-static" -j"${RWIN_JOBS:-2}" >>"$tmp/static.log" 2>&1 ||
    { tail -30 "$tmp/static.log"; fail "static build failed"; }
  build=$tmp/build-static
fi

P=$tmp/prefix
cmake --install "$build" --prefix "$P" >"$tmp/install.log" 2>&1 || { cat "$tmp/install.log"; fail "cmake --install $build failed"; }
libdir=$(sed -n 's/^libdir=\${prefix}\///p' "$P"/lib*/pkgconfig/rwin.pc 2>/dev/null | head -1)
[[ -n $libdir && -d $P/$libdir ]] || fail "no rwin.pc with a libdir under $P: $(cd "$P" && find . -name '*.pc')"
version=$(sed -n 's/^#define RWIN_VERSION_STRING "\(.*\)"$/\1/p' "$P/include/rwin/version.h")
[[ $version =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || fail "installed rwin/version.h has no RWIN_VERSION_STRING (got '$version')"
major=${version%%.*}

# --- the installed layout
for f in include/rwin/rwin.h include/rwin/rwin_c.h include/rwin/collectives.h include/rwin/version.h \
         "$libdir"/cmake/rwin/rwinConfig.cmake "$libdir"/cmake/rwin/rwinConfigVersion.cmake \
         "$libdir"/cmake/rwin/rwinTargets.cmake "$libdir"/pkgconfig/rwin.pc \
         bin/rwinrun bin/ring_shift share/doc/rwin/README.md share/doc/rwin/docs/CONFIG.md; do
  [[ -s $P/$f ]] || fail "$f not installed into $P"
done
for t in rwin-perf rwin-info; do  # installed when the build has them
  if [[ -x $build/bin/$t && ! -x $P/bin/$t ]]; then fail "$build/bin/$t built but not installed"; fi
done
if [[ $static -eq 0 ]]; then
  [[ -f $P/$libdir/librwin.so.$version && ! -L $P/$libdir/librwin.so.$version ]] || fail "no $libdir/librwin.so.$version"
  [[ $(readlink "$P/$libdir/librwin.so.$major") == "librwin.so.$version" ]] || fail "librwin.so.$major is not a link to librwin.so.$version"
  [[ $(readlink "$P/$libdir/librwin.so") == "librwin.so.$major" ]] || fail "librwin.so is not a link to librwin.so.$major"
  soname=$(readelf -d "$P/$libdir/librwin.so.$version" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
  [[ $soname == "librwin.so.$major" ]] || fail "SONAME of librwin.so.$version is '$soname', want librwin.so.$major"
  [[ ! -e $P/$libdir/librwin.a ]] || fail "a shared build also installed librwin.a"
else
  [[ -f $P/$libdir/librwin.a ]] || fail "static build: no $libdir/librwin.a"
  [[ -z $(ls "$P/$libdir"/librwin.so* 2>/dev/null) ]] || fail "static build installed a librwin.so"
  n=$(ls "$P/$libdir"/*.a | wc -l)
  [[ $n -eq 1 ]] || fail "static build installed $n archives, want only librwin.a: $(ls "$P/$libdir"/*.a)"
fi
# Every installed ELF file finds all its libraries (e.g. a dependency found through an RPATH of its own).
while IFS= read -r f; do
  readelf -h "$f" >/dev/null 2>&1 || continue   # ELF files only
  nf=$(ldd "$f" 2>&1 | grep 'not found')
  [[ -z $nf ]] || fail "installed $f: ldd finds no"$'\n'"$nf"
done < <(find "$P" -type f)
# Installed programs name no build directory in their RPATH and load the installed librwin.
for b in "$P"/bin/*; do
  rp=$(readelf -d "$b" | sed -n 's/.*(R\(UN\)\{0,1\}PATH).*\[\(.*\)\]/\2/p')
  [[ $rp != *"$build"* && $rp != *"$src"* ]] || fail "$b has RPATH '$rp' into the build tree"
  if [[ $static -eq 0 ]]; then
    got=$(ldd "$b" | awk '$1 ~ /^librwin\.so/ {print $3}')
    [[ -n $got && $got -ef $P/$libdir/librwin.so.$major ]] || fail "$b loads librwin from '$got', want $P/$libdir/librwin.so.$major"
  fi
done

# A sanitizer build's librwin needs the consumers built with the same -fsanitize (its runtime must come
# first) and the uninstrumented interpreter to preload it (as tests/scripts/python_pytest.sh does).
rwin_so=$(find "$P/$libdir" -name 'librwin.so.*' -type f | head -1)
san=() preload=
if [[ -n $rwin_so ]]; then
  deps=$(ldd "$rwin_so")
  grep -q libasan <<<"$deps" && san+=(address)
  grep -q libubsan <<<"$deps" && san+=(undefined)
  grep -q libtsan <<<"$deps" && san+=(thread)
  preload=$(ldd "$rwin_so" | awk '/lib(a|ub|t)san/ {print $3}' | paste -sd:)
fi
sanflags=
if ((${#san[@]})); then
  sanflags=-fsanitize=$(IFS=,; echo "${san[*]}")
  log "sanitizer build of librwin: consumers built with $sanflags"
fi

run2() {  # run2 NAME PROGRAM: the program on 2 ranks under the installed rwinrun; both ranks print OK
  local out rc
  out=$(timeout 120 "$P/bin/rwinrun" -n 2 --timeout 90 -- "$2" 2>&1)
  rc=$?
  for r in 0 1; do
    grep -Eq "^\[$r\] OK rank $r of 2, rwin $version$" <<<"$out" ||
      fail "$1: rank $r printed no 'OK rank $r of 2, rwin $version' (status $rc):"$'\n'"$out"
  done
  [[ $rc -eq 0 ]] || fail "$1: exit status $rc:"$'\n'"$out"
  log "PASS $1 on 2 ranks"
}

# --- find_package(rwin) with CMAKE_PREFIX_PATH
cmake -S "$src/tests/install/consumer" -B "$tmp/cmake-consumer" -G Ninja -DCMAKE_PREFIX_PATH="$P" \
      -DCMAKE_CXX_FLAGS="$sanflags" >"$tmp/consumer.log" 2>&1 && ninja -C "$tmp/cmake-consumer" >>"$tmp/consumer.log" 2>&1 ||
  { cat "$tmp/consumer.log"; fail "find_package consumer did not build"; }
found=$(sed -n 's/^rwin_DIR:PATH=//p' "$tmp/cmake-consumer/CMakeCache.txt")
[[ $found == "$P/$libdir/cmake/rwin" ]] || fail "find_package(rwin) found '$found', want $P/$libdir/cmake/rwin"
run2 "find_package consumer" "$tmp/cmake-consumer/consumer"

# --- pkg-config
export PKG_CONFIG_PATH=$P/$libdir/pkgconfig
[[ $(pkg-config --modversion rwin) == "$version" ]] || fail "pkg-config --modversion rwin: '$(pkg-config --modversion rwin 2>&1)', want $version"
mkdir -p "$tmp/pc-consumer"
if [[ $static -eq 0 ]]; then
  pcflags=$(pkg-config --cflags --libs rwin) rpath=-Wl,-rpath,$P/$libdir
else
  pcflags=$(pkg-config --static --cflags --libs rwin) rpath=
fi
# shellcheck disable=SC2086
c++ -std=c++20 -O1 $sanflags -o "$tmp/pc-consumer/consumer" "$src/tests/install/consumer/main.cpp" $pcflags $rpath \
    >"$tmp/pc.log" 2>&1 || { cat "$tmp/pc.log"; fail "c++ main.cpp $pcflags did not build"; }
run2 "pkg-config consumer" "$tmp/pc-consumer/consumer"
if [[ $static -eq 1 ]]; then
  ! ldd "$tmp/pc-consumer/consumer" | grep -q librwin || fail "static pkg-config consumer loads a librwin.so"
fi

# --- the C ABI: a C-only CMake project (rwin::rwin must not need a C++ compiler in it) and plain cc
if [[ $static -eq 0 ]]; then
  cmake -S "$src/tests/install/consumer_c" -B "$tmp/cmake-consumer-c" -G Ninja -DCMAKE_PREFIX_PATH="$P" \
        -DCMAKE_C_FLAGS="-Wall -Wextra -pedantic -Werror $sanflags" >"$tmp/consumer-c.log" 2>&1 &&
    ninja -C "$tmp/cmake-consumer-c" >>"$tmp/consumer-c.log" 2>&1 ||
    { cat "$tmp/consumer-c.log"; fail "find_package C consumer did not build"; }
  export CONSUMER_C_STORE_DIR
  CONSUMER_C_STORE_DIR=$(mktemp -d "$tmp/c-store.XXXXXX")
  run2 "find_package C consumer" "$tmp/cmake-consumer-c/consumer_c"
  # shellcheck disable=SC2086
  cc -std=c11 -Wall -Wextra -pedantic -Werror -O1 $sanflags -o "$tmp/pc-consumer/consumer_c" \
     "$src/tests/install/consumer_c/main.c" $pcflags $rpath >"$tmp/pc-c.log" 2>&1 ||
    { cat "$tmp/pc-c.log"; fail "cc -std=c11 main.c $pcflags did not build"; }
  CONSUMER_C_STORE_DIR=$(mktemp -d "$tmp/c-store.XXXXXX")
  run2 "pkg-config C consumer" "$tmp/pc-consumer/consumer_c"
fi

# --- the Python package (when the build has it)
if [[ -f $build/python/rwin/__init__.py ]]; then
  pkg=$(ls -d "$P"/lib/python3*/*-packages 2>/dev/null | head -1)
  [[ -n $pkg && -f $pkg/rwin/__init__.py ]] || fail "the build has a Python package but $P/lib/python3*/*-packages/rwin is missing"
  pyenv=(PYTHONPATH="$pkg")
  [[ -n $preload ]] && pyenv+=(LD_PRELOAD="$preload" PYTHONMALLOC=malloc ASAN_OPTIONS=detect_leaks=0)
  got=$(cd "$tmp" && env "${pyenv[@]}" /usr/bin/python3 -c 'import rwin; print(rwin.__file__); print(rwin.__version__)' 2>&1) ||
    fail "import rwin from $pkg failed: $got"
  [[ $(sed -n 1p <<<"$got") == "$pkg/rwin/__init__.py" ]] || fail "imported rwin from $(sed -n 1p <<<"$got"), not $pkg"
  [[ $(sed -n 2p <<<"$got") == "$version" ]] || fail "rwin.__version__ is '$(sed -n 2p <<<"$got")', want $version"
  if [[ $static -eq 0 ]]; then
    so=$(ls "$pkg"/rwin/_rwin*.so)
    lib=$(ldd "$so" | awk '$1 ~ /^librwin\.so/ {print $3}')
    [[ -n $lib && $lib -ef $P/$libdir/librwin.so.$major ]] || fail "$so loads librwin from '$lib', want $P/$libdir"
  fi
  log "PASS python: import rwin from $pkg, __version__ $version"
fi

# --- a moved prefix still works (RPATH $ORIGIN/../lib)
mv "$P" "$tmp/moved"
out=$(timeout 120 "$tmp/moved/bin/rwinrun" -n 2 --timeout 90 -- "$tmp/moved/bin/ring_shift" --size 4096 2>&1) ||
  fail "installed ring_shift after moving the prefix:"$'\n'"$out"
[[ $(grep -c '^\[[01]\] OK' <<<"$out") -eq 2 ]] || fail "moved prefix: ring_shift did not print OK on both ranks:"$'\n'"$out"
log "PASS moved prefix: ring_shift on 2 ranks"
echo "PASS consumer-test ($([[ $static -eq 1 ]] && echo static || echo shared) librwin $version)"
