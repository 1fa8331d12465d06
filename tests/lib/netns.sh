# Network-namespace "hosts" on this machine, for scripts that run as root (source it; bash).
#
#   source tests/lib/netns.sh
#   NETNS_SELF=my-script                          # names this script in the messages below
#   trap 'netns_cleanup' EXIT                     # or call netns_cleanup from the script's own clean-up
#   netns_bridge "$P-br"                          # namespace $P-br holding bridge br0 (optional address)
#   netns_star "$P-br" rw0 24 "$P-h0=10.77.0.1" "$P-h1=10.77.0.2"   # hosts on it: veth rw0 <-> p0, p1, ...
#   netns_add "$P-s"; netns_add "$P-c"; netns_link "$P-s" a0 10.77.9.1/24 "$P-c" a1 10.77.9.2/24
#   netns_hosts_file "$P-h0" "127.0.0.1 localhost" "10.77.0.1 h0"   # /etc/netns/<ns>/hosts
#
# Every veth is created directly inside the namespaces: no end of one ever exists in the host's namespace,
# and the host's own interfaces and routes are never touched. Callers use private addresses only
# (10.0.0.0/8 here), which exist only inside these namespaces.
#
# A set-up function that fails prints "$NETNS_SELF: set-up step failed: <command>: <its error>" on stderr
# and returns 1 (the caller decides: die, abort, exit). netns_cleanup kills whatever still runs in the
# namespaces made here, deletes them (veths and bridges go with them) and the /etc/netns entries, and is
# safe to call more than once.

NETNS_SELF=${NETNS_SELF:-netns}
NETNS_CREATED=()  # namespaces made by netns_add, in order
NETNS_ETC=()      # /etc/netns/<ns> directories made by netns_hosts_file
NETNS_ETC_NEW=0   # 1: /etc/netns did not exist before netns_hosts_file made it

_netns_run() {
  local err
  err=$("$@" 2>&1) && return 0
  echo "$NETNS_SELF: set-up step failed: $*${err:+: $err}" >&2
  return 1
}

# netns_add NS: a new namespace with its loopback up, removed by netns_cleanup.
netns_add() {
  _netns_run ip netns add "$1" || return 1
  NETNS_CREATED+=("$1")
  _netns_run ip -n "$1" link set lo up
}

# netns_bridge NS [ADDR/LEN]: a new namespace holding bridge br0 (up, with ADDR/LEN when given).
netns_bridge() {
  netns_add "$1" || return 1
  _netns_run ip -n "$1" link add br0 type bridge || return 1
  if [[ -n ${2:-} ]]; then _netns_run ip -n "$1" addr add "$2" dev br0 || return 1; fi
  _netns_run ip -n "$1" link set br0 up
}

# netns_star BRIDGE_NS IFNAME LEN NS=ADDR...: a new namespace per NS=ADDR, each with interface IFNAME
# (address ADDR/LEN, up) on a veth whose other end is port p<i> of br0 in BRIDGE_NS (i from 0).
netns_star() {
  local br=$1 ifname=$2 len=$3 i=0 spec ns
  shift 3
  for spec in "$@"; do
    ns=${spec%%=*}
    netns_add "$ns" || return 1
    _netns_run ip link add "$ifname" netns "$ns" type veth peer name "p$i" netns "$br" || return 1
    _netns_run ip -n "$br" link set "p$i" master br0 || return 1
    _netns_run ip -n "$br" link set "p$i" up || return 1
    _netns_run ip -n "$ns" addr add "${spec#*=}/$len" dev "$ifname" || return 1
    _netns_run ip -n "$ns" link set "$ifname" up || return 1
    i=$((i + 1))
  done
}

# netns_link NS1 IF1 ADDR1/LEN NS2 IF2 ADDR2/LEN: a direct veth IF1 (in NS1) <-> IF2 (in NS2), both up.
netns_link() {
  _netns_run ip link add "$2" netns "$1" type veth peer name "$5" netns "$4" || return 1
  _netns_run ip -n "$1" addr add "$3" dev "$2" || return 1
  _netns_run ip -n "$4" addr add "$6" dev "$5" || return 1
  _netns_run ip -n "$1" link set "$2" up || return 1
  _netns_run ip -n "$4" link set "$5" up
}

# netns_wait_carrier NS IF [NS IF...]: waits (at most 10 s) until every interface reports carrier
# (UCX refuses an interface without it). Returns 1 when one still has none.
netns_wait_carrier() {
  local try i
  for ((try = 0; try < 100; try++)); do
    for ((i = 1; i < $#; i += 2)); do
      grep -q LOWER_UP <<<"$(ip -n "${!i}" link show "${@:i+1:1}" 2>/dev/null)" || break
    done
    ((i >= $#)) && return 0
    sleep 0.1
  done
  return 1
}

# netns_hosts_file NS LINE...: /etc/netns/NS/hosts holding the lines, which `ip netns exec NS`
# bind-mounts over /etc/hosts (names resolve inside NS only).
netns_hosts_file() {
  local ns=$1
  shift
  [[ -d /etc/netns ]] || NETNS_ETC_NEW=1
  _netns_run mkdir -p "/etc/netns/$ns" || return 1
  NETNS_ETC+=("/etc/netns/$ns")
  printf '%s\n' "$@" >"/etc/netns/$ns/hosts"
}

# netns_cleanup: see the top of this file.
netns_cleanup() {
  local ns pid d
  # Anything still running inside our namespaces was started by this script (e.g. an orted that
  # outlived a killed mpirun): end it by pid before the namespace goes.
  for ns in "${NETNS_CREATED[@]}"; do
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null; done
  done
  for ns in "${NETNS_CREATED[@]}"; do
    ip netns del "$ns" 2>/dev/null || echo "$NETNS_SELF: could not delete namespace $ns" >&2
  done
  for d in "${NETNS_ETC[@]}"; do rm -rf "$d"; done
  [[ $NETNS_ETC_NEW == 1 ]] && rmdir /etc/netns 2>/dev/null # only if this script made it
  NETNS_CREATED=()
  NETNS_ETC=()
  NETNS_ETC_NEW=0
  return 0
}
