#!/usr/bin/env bash
# Container entrypoint for docker/compose.rxe.yaml: puts a Soft-RoCE device on this container's
# eth0, points rwin's verbs transport at it, runs the command, and removes the device afterwards.
#
#   env: RWIN_RXE_NAME   device name (default rxe0). RDMA devices are shared by every network
#                        namespace unless the host ran `rdma system set netns exclusive`, so
#                        containers on one host need distinct names: compose.rxe.yaml gives rxe0..rxe2.
#        RWIN_RXE_NETDEV interface to bind (default eth0)
# Needs a privileged container on a host whose kernel has rdma_rxe (`modprobe rdma_rxe` on the host;
# a container cannot load modules of the host's kernel unless /lib/modules is mounted).
set -euo pipefail
name=${RWIN_RXE_NAME:-rxe0}
netdev=${RWIN_RXE_NETDEV:-eth0}
fail() { echo "rxe-entrypoint: $*" >&2; exit 1; }

ip -4 -o addr show dev "$netdev" >/dev/null 2>&1 || fail "no interface $netdev in this container"
addr=$(ip -4 -o addr show dev "$netdev" | awk '{split($4, a, "/"); print a[1]; exit}')
[[ -n $addr ]] || fail "$netdev has no ipv4 address"

modprobe rdma_rxe 2>/dev/null || true # harmless when the host already loaded it
rdma link add "$name" type rxe netdev "$netdev" ||
  fail "rdma link add $name type rxe netdev $netdev failed (is rdma_rxe loaded on the host? is the container privileged? does $name exist already?)"
cleanup() { rdma link delete "$name" 2>/dev/null || true; }
trap cleanup EXIT

# Port state 4 is ACTIVE; bounded wait (10 s) like every other wait in rwin.
sys=/sys/class/infiniband/$name
for ((i = 0; i < 200; i++)); do
  read -r state _ <"$sys/ports/1/state" 2>/dev/null && [[ $state == 4: ]] && break
  sleep 0.05
done
[[ ${state:-} == 4: ]] || fail "$name never became ACTIVE"

# RoCE v2 needs the GID that carries this container's IPv4 address (an IPv4-mapped IPv6 GID).
IFS=. read -r o1 o2 o3 o4 <<<"$addr"
want=$(printf '0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x' "$o1" "$o2" "$o3" "$o4")
gid_index=
for g in "$sys"/ports/1/gids/*; do
  [[ $(cat "$g" 2>/dev/null) == "$want" ]] || continue
  idx=${g##*/}
  # Prefer RoCE v2 (routable, UDP) when both types list the same address.
  type=$(cat "$sys/ports/1/gid_attrs/types/$idx" 2>/dev/null || true)
  if [[ -z $gid_index || $type == "RoCE v2" ]]; then gid_index=$idx; fi
done
[[ -n $gid_index ]] || fail "no gid on $name carries $addr"

export RWIN_TRANSPORT=verbs RWIN_IB_DEVICE="$name" RWIN_GID_INDEX="$gid_index"
echo "rxe-entrypoint: $name on $netdev ($addr), gid index $gid_index, running: $*"
# Not exec: the trap must remove the device when the command ends.
"$@"
