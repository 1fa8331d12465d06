"""Helper of test_agent.py: one independent process with an rwin.Agent, driven over its stdin/stdout by
JSON lines (one request, one reply). argv[1]: the Agent's keyword arguments as JSON.

Requests {"op": ..., ...}; replies {"ok": result} or {"err": "<rwin exception class>", "msg": "..."}.
Data never crosses the pipe: puts send pattern(seed, n), gets and reads answer the SHA-256 of the bytes,
so tests compare digests of what each side computed independently.
"""
import hashlib
import json
import os
import sys
import time

import numpy as np

import rwin


def pattern(seed, n):
    """n bytes, distinct per seed and index (the same function in both processes)."""
    return ((np.arange(n, dtype=np.int64) * 31 + seed * 7 + 1) % 251).astype(np.uint8)


def sha(a):
    return hashlib.sha256(np.ascontiguousarray(a).view(np.uint8).tobytes()).hexdigest()


CMP = {c: getattr(rwin.WaitCmp, c) for c in ("Eq", "Ne", "Gt", "Ge", "Lt", "Le")}
OPS = {"AtomicAdd": rwin.NotifyOp.AtomicAdd, "Set": rwin.NotifyOp.Set}


def main():
    # Replies go to a private copy of stdout; fd 1 itself becomes stderr, so what UCX or rwin print
    # (UCX logs to stdout) never corrupts the JSON lines.
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    agent = rwin.Agent(**json.loads(sys.argv[1]))
    regions, remotes = {}, {}

    def reply(**kw):
        out.write(json.dumps(kw) + "\n")
        out.flush()

    reply(ok={"address": agent.address, "pid": os.getpid()})
    for line in sys.stdin:
        q = json.loads(line)
        op = q["op"]
        try:
            if op == "register":
                a = np.zeros(q["n"] // np.dtype(q["dtype"]).itemsize, dtype=q["dtype"])
                if q.get("seed") is not None:
                    a.view(np.uint8)[:] = pattern(q["seed"], q["n"])
                r = agent.register(a)
                regions[q["id"]] = r
                res = r.descriptor().hex()
            elif op == "deregister":
                regions[q["id"]].deregister()
                res = None
            elif op == "import":
                remotes[q["id"]] = agent.import_region(bytes.fromhex(q["desc"]))
                res = {"nbytes": remotes[q["id"]].nbytes, "peer": remotes[q["id"]].peer}
            elif op == "stale":
                res = remotes[q["id"]].stale
            elif op == "put":
                agent.put(remotes[q["rid"]], q["off"], pattern(q["seed"], q["n"]))
                res = None
            elif op == "put_notify":
                agent.put_notify(remotes[q["rid"]], q["off"], pattern(q["seed"], q["n"]), remotes[q["srid"]], q["soff"],
                                 q["value"], OPS[q.get("opname", "AtomicAdd")])
                res = None
            elif op == "notify":
                agent.notify(remotes[q["srid"]], q["soff"], q["value"], OPS[q.get("opname", "AtomicAdd")])
                res = None
            elif op == "flush":
                agent.flush()
                res = None
            elif op == "get":
                a = np.zeros(q["n"], np.uint8)
                agent.get(a, remotes[q["rid"]], q["off"])
                res = sha(a)
            elif op == "wait":
                agent.wait(regions[q["id"]], q["off"], q["expected"], CMP[q.get("cmp", "Ge")], q.get("timeout", 20))
                res = None
            elif op == "test":
                res = agent.test(regions[q["id"]], q["off"], q["expected"], CMP[q.get("cmp", "Ge")])
            elif op == "read":  # local bytes of a region: their digest, or int64 words
                a = regions[q["id"]].array.view(np.uint8)[q["off"]:q["off"] + q["n"]]
                res = a.view(np.int64).tolist() if q.get("words") else sha(a)
            elif op == "sleep":  # passive: asleep in Python, only the progress thread serves peers
                reply(ok="sleeping")
                time.sleep(q["seconds"])
                continue
            elif op == "block":  # passive: blocked reading stdin until the next line arrives
                reply(ok="blocked")
                sys.stdin.readline()
                res = "woken"
            elif op == "grpc_block":  # passive: blocked in a gRPC call the test answers when it is done
                import grpc
                reply(ok="calling")
                with grpc.insecure_channel(q["target"]) as ch:
                    call = ch.unary_unary("/test.Gate/Wait", request_serializer=None, response_deserializer=None)
                    res = call(b"waiting", timeout=60).decode()
            elif op == "close":
                agent.close()
                res = None
            elif op == "exit":
                reply(ok=None)
                return 0
            else:
                raise ValueError(f"agent_worker: unknown op {op!r}")
            reply(ok=res)
        except rwin.Error as e:
            reply(err=type(e).__name__, msg=str(e))
    return 0


if __name__ == "__main__":
    sys.exit(main())
