#!/usr/bin/env bash
# selftest.sh - CI check of the Soft-RoCE guest runner: boots one guest and
# checks that rxe0 is PORT_ACTIVE and that an RDMA write loopback over it works
# (ib_write_bw server + client on rxe0, client -> the guest's own IP); then two
# guests that each miss RWIN_RXE_BOOT_LIMIT: each is booted again once, and the
# two commands start together and reach each other.
# Exit 0 on success; otherwise a one-line "rxe selftest: FAIL: ..." and non-zero.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
start=$SECONDS

# Runs inside the guest.  Every step is bounded by 'timeout': a perftest server
# whose client never comes waits forever.
read -r -d '' guest <<'EOF'
fail() { echo "rxe selftest: FAIL: $*" >&2; exit 1; }
state=$(ibv_devinfo -d "$RWIN_RXE_DEV" 2>&1) || fail "ibv_devinfo -d $RWIN_RXE_DEV failed: $state"
grep -q 'state:[[:space:]]*PORT_ACTIVE' <<< "$state" || fail "$RWIN_RXE_DEV port is not PORT_ACTIVE: $state"
echo "rxe selftest: $RWIN_RXE_DEV PORT_ACTIVE, gid index $RWIN_RXE_GID_INDEX, ip $RWIN_RXE_IP"
bw=(ib_write_bw -d "$RWIN_RXE_DEV" -x "$RWIN_RXE_GID_INDEX" -s 65536 -n 200)
timeout 60 "${bw[@]}" > /tmp/server.log 2>&1 & server=$!
ok=
for _ in $(seq 40); do   # the server needs a moment before it listens
  timeout 60 "${bw[@]}" "$RWIN_RXE_PEER_IP" > /tmp/client.log 2>&1 && { ok=1; break; }
  kill -0 $server 2>/dev/null || break
  sleep 0.25
done
wait $server; src=$?
[ -n "$ok" ] && [ $src = 0 ] || fail "ib_write_bw loopback on $RWIN_RXE_DEV failed (server rc $src):
--- client:
$(tail -n 8 /tmp/client.log)
--- server:
$(tail -n 8 /tmp/server.log)"
line=$(awk '$1 == 65536 && $2 == 200' /tmp/client.log)
[ -n "$line" ] || fail "ib_write_bw printed no result line: $(tail -n 5 /tmp/client.log)"
echo "rxe selftest: ib_write_bw loopback ok: 200 x 64 KiB, $(awk '{print $4}' <<< "$line") MB/s average"
EOF

RWIN_RXE_NODES=1 "$here/run-in-guest.sh" bash -c "$guest"
rc=$?

# Two nodes, each "stuck in its boot" past RWIN_RXE_BOOT_LIMIT=1 s: the runner boots each again once,
# and both commands start together (node 0 listens once, node 1 connects over the link between them).
read -r -d '' pair <<'EOF'
if [ "$RWIN_RXE_NODE" = 0 ]; then
  timeout 60 /usr/bin/python3 -c 'import socket; s = socket.create_server(("0.0.0.0", 5555)); s.settimeout(50); c, _ = s.accept(); print("rxe selftest: node 0 got", c.recv(64).decode())'
else
  timeout 60 /usr/bin/python3 -c 'import socket, sys, time
for i in range(200):
    try:
        socket.create_connection((sys.argv[1], 5555), timeout=2).sendall(b"hello over the link"); break
    except OSError: time.sleep(0.1)
else: sys.exit("rxe selftest: node 1 never reached node 0")' "$RWIN_RXE_PEER_IP"
fi
EOF
if [ $rc = 0 ]; then
  out=$(RWIN_RXE_NODES=2 RWIN_RXE_BOOT_LIMIT=1 "$here/run-in-guest.sh" bash -c "$pair" 2>&1); prc=$?
  n=$(grep -c "not booted after 1s (RWIN_RXE_BOOT_LIMIT), booting it again" <<< "$out")
  if [ $prc != 0 ] || [ "$n" != 2 ] || ! grep -q "node 0 got hello over the link" <<< "$out"; then
    echo "rxe selftest: FAIL: two nodes booted again after RWIN_RXE_BOOT_LIMIT: exit $prc, $n relaunches (want 2):" >&2
    tail -n 15 <<< "$out" >&2; rc=1
  else
    echo "rxe selftest: two nodes booted again after RWIN_RXE_BOOT_LIMIT=1 s each, then started together and talked"
  fi
fi
case $rc in
  0) echo "rxe selftest: PASS ($((SECONDS - start)) s)" ;;
  1) ;;   # the guest already said what failed
  124) echo "rxe selftest: FAIL: guest timed out (RWIN_RXE_TIMEOUT)" >&2 ;;
  125) echo "rxe selftest: FAIL: guest did not boot or set up rxe0 (see the console lines above)" >&2 ;;
  *) echo "rxe selftest: FAIL: guest command exited with $rc" >&2 ;;
esac
exit $rc
