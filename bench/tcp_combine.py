#!/usr/bin/env python3
"""Combines bench/tcp_compare.sh's CSVs into issue 26's ratio table (stdout)."""
import csv
import json
import os
import sys


def rows(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return list(csv.DictReader(f))


def main(out):
    own = {(r["test"], int(r["size"])): r for r in rows(os.path.join(out, "rwin_own.csv"))}
    ucx = {(r["test"], int(r["size"])): r for r in rows(os.path.join(out, "rwin_ucx.csv"))}
    thread = {(r["test"], int(r["size"])): r for r in rows(os.path.join(out, "rwin_own_thread.csv"))}
    # put_nbi / get_nbi rows: rwin-perf --nbi's put_bw and get_bw (16 in flight per quiet)
    nbi = {"own": "rwin_own_nbi.csv", "ucx": "rwin_ucx_nbi.csv"}
    for name, d in (("own", own), ("ucx", ucx)):
        for r in rows(os.path.join(out, nbi[name])):
            d[(r["test"].replace("_bw", "_nbi"), int(r["size"]))] = r
    ref = {}
    with open(os.path.join(out, "tcp_ref.csv")) as f:
        for line in f:
            kind, size, p50, avg, mibs = line.strip().split(",")
            ref[(kind, int(size))] = {"p50": float(p50) if p50 else None, "avg": float(avg) if avg else None,
                                      "mibs": float(mibs)}
    sizes = sorted({s for (_, s) in own} | {s for (_, s) in ucx})

    def f(d, key, field):
        r = d.get(key)
        return float(r[field]) if r and r.get(field) else None

    def fmt(x, spec="{:.1f}"):
        return "-" if x is None else spec.format(x)

    def ratio(a, b):
        return None if a is None or b is None or b == 0 else a / b

    print("bandwidth, MiB/s (16 ops + quiet; reference: one TCP stream of the same write size; frames: the runtime's;")
    print("put_bw, get_bw: blocking puts and gets; put_nbi, get_nbi: put_nbi/get_nbi, 16 in flight, as ucx_perftest)")
    print(f"{'test':8} {'size':>9} | {'own tcp':>8} {'ucx tcp':>8} {'stream':>8} {'frames':>8} | {'own/stream':>10} {'own/frames':>10} {'own/ucx':>8}")
    for t in ("put_bw", "put_nbi", "get_bw", "get_nbi"):
        for s in sizes:
            if s < 4096 or (t, s) not in own and (t, s) not in ucx:
                continue
            o, u = f(own, (t, s), "mibs"), f(ucx, (t, s), "mibs")
            st = ref.get(("tcp_stream", s), {}).get("mibs")
            fr = ref.get(("tcp_frames", s), {}).get("mibs")
            print(f"{t:8} {s:>9} | {fmt(o):>8} {fmt(u):>8} {fmt(st):>8} {fmt(fr):>8} | "
                  f"{fmt(ratio(o, st), '{:.2f}'):>10} {fmt(ratio(o, fr), '{:.2f}'):>10} {fmt(ratio(o, u), '{:.2f}'):>8}")
    print()
    print("latency, p50 us (put_lat: put + notify + wait, one way, against the busy-poll TCP ping-pong's one way;")
    print("get_lat: a blocking get, a round trip, against the ping-pong's round trip = 2 x its one way;")
    print("pp 2sock: the same ping-pong with each direction on a connection of its own, as rwin's tcp sends)")
    print(f"{'test':8} {'size':>9} | {'own tcp':>8} {'ucx tcp':>8} {'pingpong':>8} {'pp 2sock':>8} | "
          f"{'own/pp':>8} {'ucx/pp':>8} {'own/2sock':>9}")
    for t in ("put_lat", "get_lat"):
        for s in sizes:
            o, u = f(own, (t, s), "p50_us"), f(ucx, (t, s), "p50_us")
            pp = ref.get(("tcp_pingpong_spin", s), {}).get("p50")
            pp2 = ref.get(("tcp_pingpong_spin_2sock", s), {}).get("p50")
            if t == "get_lat":  # a get's request and reply share its connection: no 2-socket figure
                pp = pp * 2 if pp is not None else None
                pp2 = None
            print(f"{t:8} {s:>9} | {fmt(o, '{:.2f}'):>8} {fmt(u, '{:.2f}'):>8} {fmt(pp, '{:.2f}'):>8} "
                  f"{fmt(pp2, '{:.2f}'):>8} | {fmt(ratio(o, pp), '{:.2f}'):>8} {fmt(ratio(u, pp), '{:.2f}'):>8} "
                  f"{fmt(ratio(o, pp2), '{:.2f}'):>9}")
    print()
    print("who serves arrivals (own tcp, p50 us): the waiting owner (default) vs the receiver thread alone")
    for t in ("put_lat", "get_lat"):
        for s in (8, 4096):
            o, th = f(own, (t, s), "p50_us"), f(thread, (t, s), "p50_us")
            print(f"{t:8} {s:>9} | owner {fmt(o, '{:.2f}'):>8} | thread {fmt(th, '{:.2f}'):>8} | "
                  f"thread/owner {fmt(ratio(th, o), '{:.2f}')}")
    agents = {}
    for name in ("own", "ucx", "own_pinned", "ucx_pinned"):
        path = os.path.join(out, f"agent_{name}.json")
        if os.path.exists(path) and os.path.getsize(path) > 0:
            with open(path) as fh:
                agents[name] = json.load(fh)
    if agents:
        print()
        print("agent, passive server (rwin-agent-perf --progress-thread: blocking puts then a flush, blocking gets;")
        print("reference: one TCP stream of the same write size)")
        print(f"{'MiB/s':8} {'size':>9} | {'own tcp':>8} {'ucx tcp':>8} {'stream':>8} | {'own/stream':>10} {'own/ucx':>8}")
        bw = {n: {r["bytes"]: r for r in a.get("bandwidth", [])} for n, a in agents.items()}
        for kind, field in (("put", "put_MiBps"), ("get", "get_MiBps")):
            for s in sorted(bw.get("own", {})):
                o = bw["own"][s][field]
                u = bw.get("ucx", {}).get(s, {}).get(field)
                st = ref.get(("tcp_stream", s), {}).get("mibs")
                print(f"{kind:8} {s:>9} | {fmt(o):>8} {fmt(u):>8} {fmt(st):>8} | "
                      f"{fmt(ratio(o, st), '{:.2f}'):>10} {fmt(ratio(o, u), '{:.2f}'):>8}")
        pp = ref.get(("tcp_pingpong_spin", 4096), {}).get("p50")
        rt = None if pp is None else 2 * pp
        o, u = (agents.get(n, {}).get("get_4k_p50_us") for n in ("own", "ucx"))
        print(f"4 KiB get p50 us (a round trip), the server's main thread polling: own {fmt(o, '{:.2f}')}, ucx {fmt(u, '{:.2f}')}, "
              f"ping-pong round trip {fmt(rt, '{:.2f}')}: own/pp {fmt(ratio(o, rt), '{:.2f}')}")
        o, u = (agents.get(n, {}).get("get_4k_passive_p50_us") for n in ("own", "ucx"))
        oa, ua = (agents.get(n, {}).get("get_4k_passive_avg_us") for n in ("own", "ucx"))
        o9, u9 = (agents.get(n, {}).get("get_4k_passive_p99_us") for n in ("own", "ucx"))
        print(f"4 KiB get p50 (avg, p99) us, the server passive (its main thread asleep): own {fmt(o, '{:.2f}')}"
              f" ({fmt(oa, '{:.1f}')}, {fmt(o9, '{:.1f}')}), ucx {fmt(u, '{:.2f}')} ({fmt(ua, '{:.1f}')}, {fmt(u9, '{:.1f}')}):"
              f" own/pp {fmt(ratio(o, rt), '{:.2f}')}")
        o, u = (agents.get(n, {}).get("get_4k_passive_p50_us") for n in ("own_pinned", "ucx_pinned"))
        if o is not None or u is not None:
            print(f"the same, client and server on CPUs of their own (--pin): own {fmt(o, '{:.2f}')}, ucx {fmt(u, '{:.2f}')}:"
                  f" own/pp {fmt(ratio(o, rt), '{:.2f}')}")
        o, u = (agents.get(n, {}).get("put_notify_4k_one_way_p50_us") for n in ("own", "ucx"))
        print(f"4 KiB put_notify one way p50 us: own {fmt(o, '{:.2f}')}, ucx {fmt(u, '{:.2f}')}, "
              f"ping-pong one way {fmt(pp, '{:.2f}')}: own/pp {fmt(ratio(o, pp), '{:.2f}')}")
        for n, a in agents.items():
            if n.endswith("_pinned"):
                continue
            print(f"first-use connect + import ({n}): {a.get('connect_us', 0):.0f} us")
    print()
    print("the runtime's frame transfer alone (MiB/s):",
          ", ".join(f"{s}: {v['mibs']:.0f}" for (k, s), v in sorted(ref.items()) if k == "tcp_frames"))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else ".")
