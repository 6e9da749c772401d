"""pingpong.py -- tests/apps/pingpong.c's latency and bandwidth pattern through
the Python module (tests/bench/py_bench.sh runs both, interleaved).

    pingpong.py -l LNC -p PEER_LNC -r 0|1 [-s MIN] [-S MAX] [-n ITERS] [-w WINDOW] [-m lat|bw|all]

Needs ASR_BOOTSTRAP_PORT. As the C program: rank 0 starts each exchange,
rank 1 answers; each message's first 8 bytes carry a stamp the receiver
checks, and every byte of the last message of each size is compared.
Rank 0 prints "lat SIZE one-way-usec" and "bw SIZE MB/s"."""
import argparse
import struct
import sys
import time

import asr
import numpy as np


def c_like_buffer(n):
    """Memory as the C program's asr_tensor_alloc gives it (page-aligned,
    every page written, no transparent-huge-page hint), so that the two
    programs differ only in the module: numpy's own large arrays ask for
    huge pages, and np.zeros leaves its pages unwritten (a send from them
    reads the shared zero page)."""
    set_hint = getattr(np.core.multiarray, "_set_madvise_hugepage", None)  # numpy >= 1.20
    if set_hint:
        set_hint(False)
    b = np.ones(n + 4096, dtype=np.uint8)
    b[:] = 0
    off = -b.ctypes.data % 4096
    return b[off:off + n]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-l", type=int, required=True)
    ap.add_argument("-p", type=int, required=True)
    ap.add_argument("-r", type=int, required=True)
    ap.add_argument("-s", type=int, default=1)
    ap.add_argument("-S", type=int, default=4 << 20)
    ap.add_argument("-n", type=int, default=1000)
    ap.add_argument("-w", type=int, default=64)
    ap.add_argument("-m", default="all")
    a = ap.parse_args()
    asr.init(a.l)
    tx = asr.connect("127.0.0.1", a.p, lnc=a.l)
    rx = asr.accept("127.0.0.1", a.p, lnc=a.l)
    tx.wait_connected(60)
    rx.wait_connected(60)
    sbuf, rbuf = c_like_buffer(a.S * a.w), c_like_buffer(a.S * a.w)
    pat = (np.arange(a.S, dtype=np.uint64) * 131 % 256).astype(np.uint8)
    sv, rv = memoryview(sbuf), memoryview(rbuf)
    isend, irecv = tx.isend, rx.irecv

    def check(size, stamp):
        if size >= 8 and struct.unpack_from("<Q", rv, 0)[0] != stamp:
            sys.exit("pingpong.py: wrong stamp in a %d-byte message" % size)

    def lat(size, n):
        sbuf[:size] = pat[:size]
        t0 = 0
        for i in range(-10, n):
            if i == 0:
                t0 = time.perf_counter_ns()
            stamp = ((i + 10) << 32) | size
            if a.r == 0:
                if size >= 8:
                    struct.pack_into("<Q", sv, 0, stamp)
                isend(sbuf, 0, size).wait()
                irecv(rbuf, 0, size).wait()
            else:
                irecv(rbuf, 0, size).wait()
                if size >= 8:
                    struct.pack_into("<Q", sv, 0, stamp)
                isend(sbuf, 0, size).wait()
        us = (time.perf_counter_ns() - t0) / 1e3 / n / 2  # the clock stops before the check, as in C
        check(size, ((n - 1 + 10) << 32) | size)
        if size > 8 and not (rbuf[8:size] == pat[8:size]).all():
            sys.exit("pingpong.py: the last %d-byte message differs" % size)
        return us

    def bw(size, n, w):
        t0 = 0
        for i in range(-2, n):
            if i == 0:
                t0 = time.perf_counter_ns()
            if a.r == 0:
                reqs = [isend(sbuf, k * size, size) for k in range(w)]
            else:
                reqs = [irecv(rbuf, k * size, size) for k in range(w)]
            for q in reqs:
                q.wait()
            (irecv(rbuf, 0, 1) if a.r == 0 else isend(sbuf, 0, 1)).wait()
        return (time.perf_counter_ns() - t0) / 1e9

    def lat_rounds(size):  # bench_util.h's bench_lat_rounds
        return max(a.n // 10, 10) if size >= 1 << 20 else a.n

    do_lat, do_bw = a.m in ("lat", "all"), a.m in ("bw", "all")
    sz = a.s
    if do_lat:
        lat(a.s, 200)
    while sz <= a.S and do_lat:
        us = lat(sz, lat_rounds(sz))
        if a.r == 0:
            print("lat %d %.3f" % (sz, us), flush=True)
        sz *= 2
    sz = a.s
    while sz <= a.S and do_bw:
        n = max(5, min(16384, (256 << 20) // (sz * a.w)))
        secs = bw(sz, n, a.w)
        if a.r == 0:
            print("bw %d %.3f" % (sz, sz * a.w * n / secs / 1e6), flush=True)
        sz *= 2
    tx.close()
    rx.close()
    asr.close(a.l)


if __name__ == "__main__":
    main()
