#!/usr/bin/env bash
# Entrypoint of docker/compose.slurm.yaml's containers (docker/slurm/Dockerfile).
#   rwin-slurm-entrypoint controller   munged + slurmctld; waits for the nodes, then runs
#                                      srun --mpi=pmix -N 3 -n 6 ring_shift --mode put and get and
#                                      exits 0 only if all 6 ranks print OK in both
#   rwin-slurm-entrypoint compute      munged + slurmd -D -N $(hostname) (the container's process)
# The same steps as phase 2 of tests/slurm/slurm-ring.sh, with containers for network namespaces and
# compose's DNS for /etc/netns/<ns>/hosts: slurm.conf comes from the same template, filled the same way.
# env: RWSLURM_NODES (default "n0 n1 n2"), RWSLURM_CTL (default slurmctl),
#      RWSLURM_TASKS (default 6), RWSLURM_TIMEOUT seconds per srun (default 120),
#      RING_SHIFT (default /opt/rwin/bin/ring_shift), RING_SIZE (default 4096),
#      RWSLURM_DIR (/var/lib/rwin-slurm), RWSLURM_KEY_DIR (/shared/munge: the shared volume),
#      RWSLURM_TEMPLATES (/etc/rwin-slurm: slurm.conf.in and cgroup.conf from tests/slurm/)
# Not RWIN_*: srun hands its environment to the tasks, which must see no RWIN_* variable.
set -uo pipefail
ROLE=${1:-compute}
NODES=${RWSLURM_NODES:-"n0 n1 n2"}
CTL=${RWSLURM_CTL:-slurmctl}
TASKS=${RWSLURM_TASKS:-6}
RUN_TIMEOUT=${RWSLURM_TIMEOUT:-120}
RING_SHIFT=${RING_SHIFT:-/opt/rwin/bin/ring_shift}
RING_SIZE=${RING_SIZE:-4096}
SHARED_KEY=${RWSLURM_KEY_DIR:-/shared/munge}/munge.key # the compose volume every container mounts
DIR=${RWSLURM_DIR:-/var/lib/rwin-slurm}
TEMPLATES=${RWSLURM_TEMPLATES:-/etc/rwin-slurm}
say() { echo "rwin-slurm[$ROLE $(hostname)]: $*"; }
die() { say "FAILED: $*"; exit 1; }

# ---- munge: the controller makes the key once (atomically), everyone waits for it (bounded) -------
if [[ $ROLE == controller && ! -s $SHARED_KEY ]]; then
  mkdir -p "${SHARED_KEY%/*}"
  mungekey --create --keyfile="$SHARED_KEY.new" && mv "$SHARED_KEY.new" "$SHARED_KEY" ||
    die "could not create the munge key in $SHARED_KEY"
fi
for ((i = 0; i < 120; i++)); do [[ -s $SHARED_KEY ]] && break; sleep 1; done
[[ -s $SHARED_KEY ]] || die "no munge key in $SHARED_KEY after 120 s (is the controller running?)"
install -o munge -g munge -m 0400 "$SHARED_KEY" /etc/munge/munge.key || die "cannot install the munge key"
install -d -o munge -g munge -m 0755 /run/munge
runuser -u munge -- munged || die "munged did not start (see /var/log/munge/munged.log)"

# ---- slurm.conf: tests/slurm/slurm.conf.in, as slurm-ring.sh fills it ------------------------------
node_lines=""
for n in $NODES; do node_lines+="NodeName=$n NodeHostname=$n CPUs=2 State=UNKNOWN\\n"; done
mkdir -p "$DIR/state" "$DIR/spool-$(hostname)" "$DIR/tmp-$(hostname)"
: >"$DIR/plugstack.conf"
cp "$TEMPLATES/cgroup.conf" "$DIR/cgroup.conf"
sed -e "s|@CLUSTER@|rwin|" -e "s|@CTL_HOST@|$CTL|" -e "s|@CTL_ADDR@|$CTL|" -e "s|@CTL_PORT@|6817|" \
  -e "s|@SLURMD_PORT@|6818|" -e "s|@MUNGE_SOCKET@|/run/munge/munge.socket.2|" -e "s|@DIR@|$DIR|g" \
  -e "s|@NODES@|$node_lines|" "$TEMPLATES/slurm.conf.in" >"$DIR/slurm.conf" || die "cannot write slurm.conf"
export SLURM_CONF=$DIR/slurm.conf

if [[ $ROLE == compute ]]; then
  say "slurmd -D -N $(hostname)"
  exec slurmd -D -N "$(hostname)"
fi
[[ $ROLE == controller ]] || die "unknown role '$ROLE' (controller or compute)"

slurmctld -D -i &
CTLD=$!
trap 'kill $CTLD 2>/dev/null; wait $CTLD 2>/dev/null' EXIT
n_nodes=$(wc -w <<<"$NODES")
for ((i = 0; i < 120; i++)); do
  idle=$(sinfo -h -N -o '%N=%T' 2>/dev/null | grep -c '=idle$')
  ((idle == n_nodes)) && break
  sleep 1
done
((idle == n_nodes)) || die "only $idle of $n_nodes nodes idle after 120 s: $(sinfo -h -N -o '%N=%T' | tr '\n' ' ')"
srun --mpi=list | grep -qw pmix || die "srun --mpi=list does not list pmix"
say "$n_nodes nodes idle; srun --mpi=pmix -N $n_nodes -n $TASKS $RING_SHIFT (no RWIN_* variable)"

failed=0
for mode in put get; do
  log=$DIR/ring-$mode.log
  timeout -k 5 "$RUN_TIMEOUT" srun --mpi=pmix --label -N "$n_nodes" -n "$TASKS" \
    "$RING_SHIFT" --mode "$mode" --size "$RING_SIZE" >"$log" 2>&1
  rc=$?
  cat "$log"
  missing=""
  for ((r = 0; r < TASKS; r++)); do grep -Eq "^ *$r: OK\$" "$log" || missing+=" $r"; done
  if ((rc == 0)) && [[ -z $missing ]] && grep -Eq "^ *0: ring_shift $mode: $TASKS ranks .*: all ranks OK" "$log"; then
    say "OK --mode $mode: $TASKS x OK"
  else
    say "FAILED --mode $mode: exit $rc, no OK from rank(s):${missing:- none}"
    failed=$((failed + 1))
  fi
done
((failed == 0)) && say "all passed" || say "FAILED ($failed of 2)"
exit $((failed > 0))
