# What run.sh and run_netns.sh share (source it; bash): start the server, then CLIENTS clients in
# parallel, print each client's output, and judge the run.
#
#   tensor_service_launch SELF [SERVER_HOST CLIENT_HOST]
#     SELF names the script in messages; the hosts, when given, are the --host of the server and of
#     the clients. Commands are prefixed by the arrays SERVER_PREFIX and CLIENT_PREFIX (e.g.
#     ip netns exec NS env ...; empty: run here). Uses py, here, tmp, CLIENTS, ROUNDS, ELEMENTS; sets
#     addr (the server's address) and keeps the server's pid in pids while it runs (for a clean-up
#     trap). Exits 1 when the server does not come up; returns 1 when a client or the server failed.
#     TRANSPORT (ucx, the default, or tcp: rwin's own sockets) is every agent's --transport.
SERVER_PREFIX=()
CLIENT_PREFIX=()
pids=()

tensor_service_launch() {
  local self=$1 server_host=() client_host=() server i fail=0 cpids=()
  [[ -n ${2:-} ]] && server_host=(--host "$2")
  [[ -n ${3:-} ]] && client_host=(--host "$3")
  "${SERVER_PREFIX[@]}" timeout 120 "$py" "$here/server.py" "${server_host[@]}" --transport "${TRANSPORT:-ucx}" \
    --clients "$CLIENTS" --elements "$ELEMENTS" --ready-file "$tmp/addr" &
  server=$!
  pids+=("$server")
  for _ in $(seq 200); do [[ -s $tmp/addr ]] && break; kill -0 "$server" 2>/dev/null || break; sleep 0.1; done
  if [[ ! -s $tmp/addr ]]; then echo "$self: the server did not come up (see above)" >&2; exit 1; fi
  addr=$(cat "$tmp/addr")
  for i in $(seq "$CLIENTS"); do
    "${CLIENT_PREFIX[@]}" timeout 120 "$py" "$here/client.py" --server "$addr" "${client_host[@]}" --transport "${TRANSPORT:-ucx}" \
      --elements "$ELEMENTS" --rounds "$ROUNDS" --seed "$i" > "$tmp/client$i.out" 2>&1 &
    cpids+=($!)
  done
  for i in $(seq "$CLIENTS"); do
    wait "${cpids[$((i - 1))]}" || fail=1
    cat "$tmp/client$i.out"
    grep -q ": OK job" "$tmp/client$i.out" || fail=1
  done
  ((fail)) && kill "$server" 2>/dev/null  # a failed client never closes its job
  wait "$server" || { echo "$self: the server exited with status $?" >&2; fail=1; }
  pids=()
  return $fail
}
