#!/usr/bin/env python3
"""Plumbing check for the multi-node scripts: a ring shift over plain TCP sockets, no rwin inside.

It takes the same command line and environment as build/bin/ring_shift (--mode put|get --size ELEMS,
RWIN_RANK, RWIN_NRANKS, RWIN_ROOT=host:port served by rank 0) and prints one line ending in OK per
rank, so netns-ring.sh / mpirun-ring.sh / slurm-env-ring.sh can be checked (namespaces, addresses,
routes, launch, timeouts, clean-up) independently of the library. Not a test of rwin.

Rank r's ring data is int64 values r*1e9 + i. In put mode every rank sends its data to rank r+1; in
get mode every rank fetches rank r-1's data. Each rank checks it holds rank r-1's values.
"""
import argparse
import os
import socket
import struct
import sys
import threading
import time

DEADLINE_S = 60.0


def env_int(*names):
    for n in names:
        if os.environ.get(n):
            return int(os.environ[n])
    raise SystemExit("standin: none of %s set" % (names,))


def recv_exact(sock, n):
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(min(1 << 20, n - len(buf)))
        if not chunk:
            raise ConnectionError("peer closed after %d of %d bytes" % (len(buf), n))
        buf += chunk
    return bytes(buf)


def data_of(rank, size):
    base = rank * 1_000_000_000
    return struct.pack("<%dq" % size, *range(base, base + size))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", choices=["put", "get"], required=True)
    ap.add_argument("--size", type=int, required=True)
    args = ap.parse_args()
    rank = env_int("RWIN_RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID")
    n = env_int("RWIN_NRANKS", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS")
    root_host, root_port = os.environ["RWIN_ROOT"].rsplit(":", 1)
    socket.setdefaulttimeout(DEADLINE_S)

    # Every rank listens for its ring neighbour on an ephemeral port of all local addresses.
    lsock = socket.socket()
    lsock.bind(("0.0.0.0", 0))
    lsock.listen(4)
    my_port = lsock.getsockname()[1]

    # Rendezvous: rank 0 collects (rank, address as seen by rank 0, port) and sends the table back.
    if rank == 0:
        srv = socket.socket()
        srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        srv.bind((root_host, int(root_port)))
        srv.listen(n)
        table = {0: (root_host, my_port)}
        conns = []
        while len(table) < n:
            c, (addr, _) = srv.accept()
            r, p = struct.unpack("<ii", recv_exact(c, 8))
            table[r] = (addr, p)
            conns.append(c)
        blob = ";".join("%s,%d" % table[r] for r in range(n)).encode()
        for c in conns:
            c.sendall(struct.pack("<i", len(blob)) + blob)
            c.close()
        srv.close()
    else:
        c = None
        for _ in range(int(DEADLINE_S * 10)):
            try:
                c = socket.create_connection((root_host, int(root_port)), timeout=1)
                break
            except OSError:
                time.sleep(0.1)
        if c is None:
            raise SystemExit("standin rank %d: root %s:%s unreachable" % (rank, root_host, root_port))
        c.sendall(struct.pack("<ii", rank, my_port))
        (ln,) = struct.unpack("<i", recv_exact(c, 4))
        blob = recv_exact(c, ln).decode()
        c.close()
        table = {i: (a, int(p)) for i, (a, p) in enumerate(x.split(",") for x in blob.split(";"))}

    right, left = (rank + 1) % n, (rank - 1) % n
    nbytes = 8 * args.size
    mine = data_of(rank, args.size)
    # The send runs on a thread: every rank sends before it receives, and a large ring would
    # otherwise deadlock once the socket buffers fill.
    if args.mode == "put":
        out = socket.create_connection(table[right])
        sender = threading.Thread(target=out.sendall, args=(mine,))
        sender.start()
        inc, _ = lsock.accept()
        got = recv_exact(inc, nbytes)
    else:
        # get: our right neighbour connects and fetches our data; we fetch from the left one.
        out = socket.create_connection(table[left])
        inc, _ = lsock.accept()
        sender = threading.Thread(target=inc.sendall, args=(mine,))
        sender.start()
        got = recv_exact(out, nbytes)
    sender.join()
    out.close()
    inc.close()
    if got != data_of(left, args.size):
        print("standin rank %d/%d: mode=%s size=%d MISMATCH" % (rank, n, args.mode, args.size))
        return 1
    print("standin rank %d/%d: mode=%s size=%d from rank %d OK" % (rank, n, args.mode, args.size, left))
    return 0


if __name__ == "__main__":
    sys.exit(main())
