#!/usr/bin/env python3
"""Tensor service, server side: an rwin agent with a registered pool of tensors, and a gRPC service that
hands out their descriptors and job ids (service.py). A client pushes its input into its slot with
put_notify (data, then the slot's doorbell word), the server computes into the slot's output tensor and
notifies the client's signal word, the client pulls the output with get.

  PYTHONPATH=build/python /usr/bin/python3 examples/tensor_service/server.py --ready-file /tmp/ts.addr

One engine thread makes the agent calls of the data path (test the doorbells, compute, notify); gRPC
handler threads make Open's and Close's (import the client's signal region). The agent serialises them
and its progress thread serves the clients' puts and gets while the engine idles.
"""
import argparse
import os
import signal
import sys
import threading
import time
from concurrent import futures

import grpc
import numpy as np

import rwin

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import service  # noqa: E402


class Pool:
    def __init__(self, agent, slots, elements):
        self.agent = agent
        self.elements = elements
        self.inputs = [np.zeros(elements, np.float32) for _ in range(slots)]
        self.outputs = [np.zeros(elements, np.float32) for _ in range(slots)]
        self.doorbells = np.zeros(slots, np.int64)  # slot k's word at byte 8k: the client adds 1 per input
        self.in_regions = [agent.register(a) for a in self.inputs]
        self.out_regions = [agent.register(a) for a in self.outputs]
        self.bell_region = agent.register(self.doorbells)
        self.lock = threading.Lock()
        self.jobs = {}  # job id -> dict(slot, signal (RemoteRegion), rounds)
        self.free = list(range(slots))
        self.next_job = 1
        self.closed = 0

    def open(self, req):
        if int(req.get("elements", -1)) != self.elements:
            raise ValueError(f"this server's tensors have {self.elements} float32 elements, the client asked for "
                             f"{req.get('elements')!r}")
        signal_remote = self.agent.import_region(bytes.fromhex(req["signal"]))  # connects to the client
        with self.lock:
            if not self.free:
                raise ValueError(f"all {len(self.inputs)} slots are busy")
            slot = self.free.pop(0)
            job = self.next_job
            self.next_job += 1
            self.jobs[job] = dict(slot=slot, signal=signal_remote, rounds=0, seen=int(self.doorbells[slot]))
        return {"job": job, "slot": slot, "input": self.in_regions[slot].descriptor().hex(),
                "output": self.out_regions[slot].descriptor().hex(), "doorbell": self.bell_region.descriptor().hex(),
                "doorbell_offset": 8 * slot, "elements": self.elements, "dtype": "float32"}

    def close(self, req):
        with self.lock:
            j = self.jobs.pop(int(req["job"]), None)
            if j is None:
                raise ValueError(f"no open job {req['job']!r}")
            self.free.append(j["slot"])
            self.closed += 1
        return {"job": int(req["job"]), "rounds": j["rounds"]}

    def serve_ready(self):
        """One pass over the open jobs: every slot whose doorbell moved is computed and its client notified."""
        with self.lock:
            jobs = list(self.jobs.items())
        served = 0
        for job, j in jobs:
            slot = j["slot"]
            if not self.agent.test(self.bell_region, 8 * slot, j["seen"] + 1):
                continue
            j["seen"] += 1
            np.copyto(self.outputs[slot], service.compute(self.inputs[slot]))
            # Counted before the notify: the client may close its job (another thread reads "rounds") as
            # soon as the notify lands, which over rwin's own tcp can be before flush() returns here.
            j["rounds"] += 1
            try:
                self.agent.notify(j["signal"], 0, 1)  # the client's word: output of round j["seen"] ready
                self.agent.flush()
            except rwin.PeerFailedError as e:  # the client is gone: its job ends, the slot is reused
                print(f"server: job {job} (slot {slot}) dropped: {e}", flush=True)
                with self.lock:
                    if self.jobs.pop(job, None) is not None:
                        self.free.append(slot)
                        self.closed += 1
                continue
            served += 1
        return served


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--host", default="127.0.0.1", help="address the agent and the gRPC service bind")
    ap.add_argument("--grpc-port", type=int, default=0, help="gRPC port (0: ephemeral, see --ready-file)")
    ap.add_argument("--slots", type=int, default=4)
    ap.add_argument("--elements", type=int, default=1 << 18, help="float32 elements per tensor")
    ap.add_argument("--transport", default="ucx")
    ap.add_argument("--clients", type=int, default=0, help="exit after this many jobs closed (0: run until SIGTERM)")
    ap.add_argument("--ready-file", help="write the gRPC address here once serving")
    ap.add_argument("--timeout", type=float, default=30.0, help="agent operation deadline, seconds")
    args = ap.parse_args()

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with rwin.Agent(listen=f"{args.host}:0", transport=args.transport, progress_thread=True,
                    op_timeout=args.timeout) as agent:
        pool = Pool(agent, args.slots, args.elements)
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        server.add_generic_rpc_handlers((service.handlers(pool.open, pool.close),))
        port = server.add_insecure_port(f"{args.host}:{args.grpc_port}")
        server.start()
        target = f"{args.host}:{port}"
        print(f"server: agent {agent.address}, gRPC {target}, {args.slots} slots of {args.elements} float32", flush=True)
        if args.ready_file:
            tmp = args.ready_file + ".tmp"
            with open(tmp, "w") as f:
                f.write(target + "\n")
            os.replace(tmp, args.ready_file)
        try:
            while not stop.is_set():
                if pool.serve_ready() == 0:
                    if args.clients and pool.closed >= args.clients:
                        break
                    time.sleep(0.0002)  # idle: the progress thread serves the clients' gets meanwhile
        finally:
            server.stop(grace=2).wait()
        print(f"server: {pool.closed} jobs served, done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
