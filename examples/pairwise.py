"""pairwise.py -- examples/pairwise.c's job in Python: every rank connects to
every other rank through libasr, moves verified data both ways, and rank 0
measures latency and bandwidth to rank 1.

    asrrun -n 4 /usr/bin/python3 examples/pairwise.py [SIZE [ITERS]]

(from a build tree: PYTHONPATH=build/python build/bin/asrrun ...).
Exits non-zero, so asrrun names the rank, on any mismatch."""
import sys
import time

import asr
import numpy as np

size = int(sys.argv[1]) if len(sys.argv) > 1 else 1 << 20
iters = int(sys.argv[2]) if len(sys.argv) > 2 else 1000


def pattern(src, dst):
    return ((np.arange(size, dtype=np.uint32) * 31 + src * 7 + dst) % 251).astype(np.uint8)


with asr.job_init() as job:
    peers = [r for r in range(job.size) if r != job.rank]
    tx = {r: asr.connect(r) for r in peers}
    rx = {r: asr.accept(r) for r in peers}
    for c in list(tx.values()) + list(rx.values()):
        c.wait_connected(60)
    # everyone to everyone, both ways, every byte checked
    out = {r: pattern(job.rank, r) for r in peers}
    inb = {r: np.zeros(size, dtype=np.uint8) for r in peers}
    recvs = [rx[r].irecv(inb[r]) for r in peers]
    sends = [tx[r].isend(out[r]) for r in peers]
    for q in sends + recvs:
        q.wait(60)
    for r in peers:
        if not (inb[r] == pattern(r, job.rank)).all():
            sys.exit("rank %d: data from rank %d differs" % (job.rank, r))
    asr.barrier()
    if job.rank < 2 and job.size >= 2:
        peer, small = 1 - job.rank, np.zeros(8, dtype=np.uint8)
        t0 = time.perf_counter()
        for _ in range(iters):
            if job.rank == 0:
                tx[peer].isend(small).wait()
                rx[peer].irecv(small).wait()
            else:
                rx[peer].irecv(small).wait()
                tx[peer].isend(small).wait()
        lat = (time.perf_counter() - t0) / iters / 2 * 1e6
        big, n = out[peer], 50
        t0 = time.perf_counter()
        for _ in range(n):
            if job.rank == 0:
                tx[peer].isend(big).wait()
            else:
                rx[peer].irecv(inb[peer]).wait()
        (rx[peer].irecv(small) if job.rank == 0 else tx[peer].isend(small)).wait()
        secs = time.perf_counter() - t0
        if job.rank == 0:
            print("rank 0 <-> rank 1: latency %.2f us (8 B one way), bandwidth %.0f MB/s (%d B messages)"
                  % (lat, size * n / secs / 1e6, size))
    asr.barrier()
    for c in list(tx.values()) + list(rx.values()):
        c.close()
    print("rank %d: %d peers, %d bytes each way, verified" % (job.rank, len(peers), size))
