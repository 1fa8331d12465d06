#!/usr/bin/env bash
# Installs what is missing (Debian 12, as root) and builds rwin into ./build (binaries in build/bin).
# Used by both README commands and by CI. Idempotent: a second run only rebuilds what changed.
#   --packages-only   install the packages and stop (docker/Dockerfile's cached package layer)
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(build-essential cmake ninja-build pkg-config git
          libucx-dev ucx-utils libibverbs-dev rdma-core ibverbs-providers ibverbs-utils perftest
          googletest libgtest-dev libbenchmark-dev libssl-dev
          openmpi-bin libopenmpi-dev iproute2 gnuplot-nox
          clang libclang-rt-14-dev   # clang + libFuzzer: tests/fuzz, tests/sanitizers.sh
          python3-dev pybind11-dev python3-pybind11 python3-numpy python3-pytest  # python/: import rwin
          python3-grpcio  # examples/tensor_service, bench/agent_vs_grpc.py: the runtime's gRPC path
          libcli11-dev nlohmann-json3-dev libspdlog-dev libfmt-dev  # tools' arguments, JSON, logging
          libmicrohttpd-dev python3-prometheus-client  # agents' metrics endpoint (RWIN_METRICS); its Python test's parser
          libpmix-dev slurm-wlm slurmd slurmctld munge  # PMIx bootstrap; the Slurm test (tests/slurm)
          patchelf stress-ng)  # tests/rxe/location.sh (a relocated build tree); tests/ledger.sh --load
missing=()
for p in "${packages[@]}"; do
  [[ $(dpkg-query -W -f='${Status}' "$p" 2>/dev/null) == *"install ok installed"* ]] || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  if [[ $(id -u) -ne 0 ]]; then
    echo "setup: need root to apt-get install: ${missing[*]}" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
[[ ${1:-} == --packages-only ]] && exit 0

build_type=${RWIN_BUILD_TYPE:-RelWithDebInfo}
werror=OFF
[[ "${CI:-}" == "true" ]] && werror=ON
# The test programs at -O0 -g1 (RWIN_TEST_CXX_FLAGS): 30-50 % less compile time than -O1 -g1 (measured on
# test_contract.cpp and test_tcp_transport.cpp), for code that is not what users run or what the
# benchmarks time (the sanitizer trees run the same tests at -O0). The tools, examples, benchmarks and
# the Python package keep the build type's -O with line tables only (RWIN_PROGRAM_CXX_FLAGS=-g1: 24-32 %
# less, rwin_perf.cpp and a binding file); librwin keeps the build type's flags whole.
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE="$build_type" -DRWIN_WERROR="$werror" \
  -DRWIN_TEST_CXX_FLAGS="${RWIN_TEST_CXX_FLAGS--O0 -g1}" -DRWIN_PROGRAM_CXX_FLAGS="${RWIN_PROGRAM_CXX_FLAGS--g1}" >/dev/null
ninja -C build -j"$(nproc)"
