# shellcheck shell=bash
# Two network-namespace "hosts" joined by a veth, for the tcp benchmarks that run rank 0 on one and
# rank 1 on the other (tcp_duplex.sh, tcp_stripes.sh). Source it from bash, as root:
#
#   source "$ROOT/bench/lib/two_hosts.sh"
#   two_hosts_up my-script 10.77.41 || exit 1     # namespaces $TH_NS-a (.1, v0) and $TH_NS-b (.2, v1)
#   two_hosts_rwin_perf OUT.csv LOG PORT "-t put_lat -s 8" RWIN_TCP_SOCKETS=2   # both ranks
#   bench_machine_info "rounds: 3" >OUT/machine.txt
#
# TH_PIN=1 puts host a's rank on CPU 0 and host b's on CPU 1. The namespaces go at exit (netns_cleanup).

# shellcheck source=../../tests/lib/netns.sh
source "$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/tests/lib/netns.sh"

TH_NET=""
TH_NS=""
TH_PIN=${TH_PIN:-0}

# two_hosts_up NAME NET: the two namespaces, addresses NET.1 and NET.2 (/24), removed at exit.
two_hosts_up() {
  NETNS_SELF=$1
  TH_NET=$2
  TH_NS=th$$
  trap netns_cleanup EXIT
  trap 'exit 130' INT TERM
  netns_add "$TH_NS-a" && netns_add "$TH_NS-b" &&
    netns_link "$TH_NS-a" v0 "$TH_NET.1/24" "$TH_NS-b" v1 "$TH_NET.2/24"
}

# two_hosts_rwin_perf CSV LOG PORT "RWIN_PERF_ARGS" [VAR=VALUE...]: rwin-perf over rwin's own tcp, rank 0
# on host a (its store on PORT), rank 1 on host b, a fresh job key, the extra environment on both;
# waits for both (300 s at most each) and returns a non-zero exit status if either failed.
two_hosts_rwin_perf() {
  local csv=$1 log=$2 port=$3 args=$4 key rank ns ifname cpu rc=0 pids=() p
  shift 4
  key=$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')
  for rank in 0 1; do
    ns=$TH_NS-a ifname=v0 cpu=0
    ((rank == 1)) && ns=$TH_NS-b ifname=v1 cpu=1
    local pin=()
    ((TH_PIN)) && pin=(taskset -c "$cpu")
    # shellcheck disable=SC2086  # args is a word list
    ip netns exec "$ns" env RWIN_RANK=$rank RWIN_NRANKS=2 RWIN_ROOT="$TH_NET.1:$port" RWIN_JOB_KEY="$key" \
      RWIN_TRANSPORT=tcp RWIN_IFNAME=$ifname RWIN_HOST_ID=h$rank "$@" \
      timeout -s KILL 300 "${pin[@]}" "$BIN/rwin-perf" $args --timeout-ms 60000 -o "$csv" >>"$log" 2>&1 &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || rc=$?; done
  return "$rc"
}

# bench_machine_info LINE...: date, host, CPU, load and commit, then the caller's lines.
bench_machine_info() {
  echo "date: $(date -u +%FT%TZ)"; echo "host: $(uname -srm)"; lscpu | grep -E "Model name|^CPU\(s\)"
  echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "commit: $(git -C "$(dirname "${BASH_SOURCE[0]}")" rev-parse --short HEAD 2>/dev/null)"
  local l
  for l in "$@"; do echo "$l"; done
}
