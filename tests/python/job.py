"""The ranks' side of tests/python/test_asr.py: one case per run, started as
    asrrun -n N /usr/bin/python3 tests/python/job.py CASE
Each rank prints "OK CASE" once its checks passed; any failure raises."""
import gc
import os
import signal
import sys
import threading
import time

import asr
import numpy as np


def pair(job):
    peer = job.rank ^ 1
    tx, rx = asr.connect(peer), asr.accept(peer)
    tx.wait_connected(30)
    rx.wait_connected(30)
    return peer, tx, rx


def pattern(n, seed):
    return ((np.arange(n, dtype=np.uint64) * 2654435761 + seed) % 251).astype(np.uint8)


def expect(cond, what):
    if not cond:
        raise AssertionError(what)


def raises(exc, fn, *args, **kw):
    try:
        fn(*args, **kw)
    except exc as e:
        return e
    raise AssertionError("%s%r did not raise %s" % (getattr(fn, "__name__", fn), args, exc.__name__))


def case_basic(job):
    expect(job.size == 2 and 0 <= job.rank < 2 and job.lnc == job.local_rank, repr(job))
    addr, lnc = asr.peer(job.rank ^ 1)
    expect(lnc == job.rank ^ 1 and addr == "127.0.0.1", (addr, lnc))
    peer, tx, rx = pair(job)
    expect(tx.status == asr.COMM_CONNECTED and rx.status_name == "CONNECTED", tx.status)
    expect(tx.error is None and rx.error is None, (tx.error, rx.error))
    # one host: asr's own path (sm), or --provider's, carries both comms
    want = os.environ.get("ASR_PROVIDER") or "sm"
    expect(tx.provider == want and rx.provider == want, (tx.provider, rx.provider, want))
    expect(tx.is_send == 1 and rx.is_send == 0 and tx.peer_rank == peer and "rank" in repr(tx), repr(tx))
    # numpy, bytearray, memoryview, bytes (send), array slices by offset/length
    n = 1 << 20
    a = pattern(n, job.rank)
    b = np.zeros(n + 64, dtype=np.uint8)
    r = rx.irecv(b, 64)
    s = tx.isend(a)
    expect(s.wait(10) == n and r.wait(10) == n and r.nbytes == n and r.done, "sizes")
    expect((b[64:] == pattern(n, peer)).all() and not b[:64].any(), "numpy data")
    rx.flush()
    ba = bytearray(1000)
    r = rx.irecv(memoryview(ba), offset=10, length=500)
    s = tx.isend(bytes(pattern(1000, 7 + job.rank)), 100, 500)
    expect(s.wait(10) == 500 and r.wait(10) == 500, "sizes 2")
    expect(ba[10:510] == bytes(pattern(1000, 7 + peer)[100:600]), "bytearray data")
    # a receive larger than the message reports what arrived; an empty message
    r = rx.irecv(b)
    s = tx.isend(a, 0, 3)
    expect(s.wait() == 3 and r.wait() == 3, "short")
    r = rx.irecv(bytearray())
    s = tx.isend(b"")
    expect(s.wait() == 0 and r.wait() == 0, "empty")
    expect(r.test() is True, "test after done")
    # by address, on this rank's LNC
    tx2 = asr.connect(addr, lnc, lnc=job.lnc)
    rx2 = asr.accept(addr, lnc, lnc=job.lnc)
    tx2.wait_connected(30)
    rx2.wait_connected(30)
    r = rx2.irecv(b)
    s = tx2.isend(a)
    while not s.test():
        pass
    while not r.test():
        pass
    expect((b[:n] == pattern(n, peer)).all(), "by address")
    for c in (tx2, rx2, tx, rx):
        c.close()
    c.close()  # twice: nothing
    expect(tx.closed, "closed")
    expect(asr.strerror(asr.QUEUE_FULL).startswith("Maximum number"), asr.strerror(4))
    expect(asr.comm_status_name(6) == "CONNECTED", "name")
    expect("isend" in asr.Comm.isend.__doc__ and asr.__doc__, "docs")
    asr.barrier()


def case_errors(job):
    peer, tx, rx = pair(job)
    ro = np.zeros(16, dtype=np.uint8)
    ro.flags.writeable = False
    e = raises(ValueError, rx.irecv, ro)
    expect("read-only" in str(e), str(e))
    raises(ValueError, rx.irecv, b"immutable")
    e = raises(ValueError, tx.isend, np.zeros((8, 8))[:, 1])
    expect("contiguous" in str(e), str(e))
    e = raises(ValueError, tx.isend, bytearray(10), 11)
    expect("offset" in str(e), str(e))
    raises(ValueError, tx.isend, bytearray(10), 4, 7)
    raises(ValueError, tx.isend, bytearray(10), 0, -1)
    raises(ValueError, tx.isend, bytearray(10), -1)
    raises(TypeError, tx.isend, 42)
    e = raises(ValueError, tx.irecv, bytearray(10))
    expect("RECV" not in str(e) and "SEND" in str(e), str(e))
    raises(ValueError, rx.isend, bytearray(10))
    expect(asr._cache_info()["busy"] == 0, "nothing posted by misuse")
    # a comm that never connects: unconnected posts, a timed-out wait
    lone = asr.connect("127.0.0.1", 100, lnc=job.lnc)
    e = raises(asr.Unconnected, lone.isend, bytearray(8))
    expect(e.status == asr.UNCONNECTED and "not connected" in str(e).lower() or "unconnected" in str(e).lower(), str(e))
    e = raises(asr.Timeout, lone.wait_connected, 0.2)
    expect(isinstance(e, TimeoutError) and e.status == asr.TIMEOUT, repr(e))
    # 128 requests in flight, then the 129th
    bufs = [bytearray(8) for _ in range(asr.MAX_REQUESTS)]
    reqs = [rx.irecv(x) for x in bufs]
    e = raises(asr.QueueFull, rx.irecv, bytearray(8))
    expect(e.status == asr.QUEUE_FULL and "Maximum number of pending requests 128" in str(e), str(e))
    e = raises(asr.Timeout, reqs[0].wait, 0.05)
    expect(not reqs[0].done and rx.pending == 128, "still in flight")
    asr.barrier()
    rx.close()  # cancels them
    e = raises(asr.Unconnected, reqs[0].wait)
    expect("cancelled" in str(e), str(e))
    raises(asr.Unconnected, reqs[1].test)
    raises(asr.Unconnected, rx.irecv, bytearray(8))
    raises(asr.Unconnected, rx.flush)
    raises(ValueError, asr.init, 200)
    e = raises(asr.Error, asr.init, job.lnc)  # up already (connect by rank brought it up)
    expect(e.status == asr.INVALID and str(e).startswith("asr_init: "), str(e))
    raises(TypeError, asr.connect, "127.0.0.1")
    raises(TypeError, asr.connect, 1, 2)
    # every rank alive (no launcher's report of a death): ALIVE, incarnation 0
    expect(asr.rank_state(peer) == (asr.RANK_ALIVE, 0), repr(asr.rank_state(peer)))
    e = raises(asr.Error, asr.rank_state, 99)
    expect(e.status == asr.INVALID, str(e))
    lone.close()
    tx.close()
    asr.barrier()


def case_gc(job):
    """A request outlives every other reference to its buffer (and itself)."""
    peer, tx, rx = pair(job)
    n = 1 << 18
    reqs = [rx.irecv(np.zeros(n, dtype=np.uint8)) for _ in range(8)]
    # sends of temporaries whose requests are dropped at once
    for i in range(8):
        tx.isend(pattern(n, 100 * job.rank + i))
    gc.collect()
    asr.barrier()
    for i, r in enumerate(reqs):
        expect(r.wait(30) == n, "size")
        expect((r.buffer == pattern(n, 100 * peer + i)).all(), "data of receive %d" % i)
    del reqs, r
    gc.collect()
    # dropped sends are tested when room is needed: 3 x 128 dropped posts
    # (a post reaps what nobody references; one that finds 128 still in
    # flight, the peer behind, is QueueFull: wait for it, bounded)
    deadline = time.time() + 30
    for i in range(3 * asr.MAX_REQUESTS):
        for post in (lambda: rx.irecv(bytearray(8)), lambda: tx.isend(np.full(8, i % 256, dtype=np.uint8))):
            while True:
                try:
                    post()
                    break
                except asr.QueueFull:
                    expect(time.time() < deadline, "dropped requests were never reaped")
                    time.sleep(0.001)
    last = bytearray(8)
    r, s = rx.irecv(last), tx.isend(np.full(8, 201, dtype=np.uint8))
    expect(s.wait(30) == 8 and r.wait(30) == 8 and last == bytes([201] * 8), "after the dropped ones")
    expect(tx.pending <= asr.MAX_REQUESTS and rx.pending <= asr.MAX_REQUESTS, "bounded")
    asr.barrier()
    tx.close()
    rx.close()


def case_threads(job):
    """Threads post while another waits (GIL released in wait)."""
    peer, tx, rx = pair(job)
    n, rounds = 4096, 200
    got = []
    big = np.zeros(n * rounds, dtype=np.uint8)

    def receiver():
        for i in range(rounds):
            got.append(rx.irecv(big, i * n, n).wait(30))

    t = threading.Thread(target=receiver)
    t.start()
    lock = threading.Lock()
    errs = []

    def sender(k):
        try:
            for i in range(k, rounds, 4):
                with lock:  # the n-th send matches the n-th receive: keep them in order
                    while len(sent) != i:
                        lock.release()
                        time.sleep(0)
                        lock.acquire()
                    r = tx.isend(pattern(n, i + 1000 * job.rank))
                    sent.append(i)
                r.wait(30)
        except Exception as e:  # noqa: BLE001
            errs.append(e)

    sent = []
    ts = [threading.Thread(target=sender, args=(k,)) for k in range(4)]
    for s in ts:
        s.start()
    for s in ts:
        s.join()
    t.join()
    expect(not errs, errs)
    expect(got == [n] * rounds, "sizes")
    for i in range(rounds):
        expect((big[i * n : (i + 1) * n] == pattern(n, i + 1000 * peer)).all(), "data %d" % i)
    # a second waiter on one request is refused
    r = rx.irecv(bytearray(8))
    th = threading.Thread(target=lambda: r.wait(5))
    th.start()
    time.sleep(0.2)
    raises(RuntimeError, r.wait)
    raises(RuntimeError, rx.close)
    expect(r.test() is False, "test while another waits")
    asr.barrier()
    tx.isend(bytearray(8)).wait(10)
    th.join()
    asr.barrier()
    tx.close()
    rx.close()


def rss_kib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return -1


def case_fresh(job):
    """100,000 fresh arrays through one comm: RSS stays flat."""
    peer, tx, rx = pair(job)
    total = int(os.environ.get("FRESH_N", "100000"))
    big = np.zeros(64 * 1024 * 16, dtype=np.uint8)  # slices at new addresses
    out = np.zeros(64, dtype=np.uint8)
    rss0 = 0
    for i in range(total):
        if i == total // 10:
            gc.collect()
            rss0 = rss_kib()
        if job.rank == 0:
            if i % 2:
                a = np.full(64, i % 251, dtype=np.uint8)
            else:
                k = (i // 2) % (len(big) // 64 - 1)
                a = big[k * 64 + 1 : k * 64 + 65]  # a new view each time, at a new address
                a[:] = i % 251
            tx.isend(a).wait(30)
        else:
            rx.irecv(out).wait(30)
            if out[0] != i % 251 or out[63] != i % 251:
                raise AssertionError("message %d holds %d" % (i, out[0]))
    gc.collect()
    rss1 = rss_kib()
    info = asr._cache_info()
    print("rank %d: RSS %d -> %d KiB over %d messages; %r" % (job.rank, rss0, rss1, total * 9 // 10, info))
    expect(info["records"] <= info["idle_max"] + 2, info)
    expect(rss1 - rss0 < 4096, "RSS grew by %d KiB" % (rss1 - rss0))
    asr.barrier()
    tx.close()
    rx.close()


def case_torch(job):
    import torch

    peer, tx, rx = pair(job)
    t = torch.arange(1000, dtype=torch.float32) * (job.rank + 1)
    u = torch.zeros(1000, dtype=torch.float32)
    # a slice of 100 floats at element 200: offset and length in bytes
    r = rx.irecv(u, 200 * 4, 100 * 4)
    s = tx.isend(t, 500 * 4, 100 * 4)
    expect(s.wait(30) == 400 and r.wait(30) == 400, "sizes")
    want = torch.arange(500, 600, dtype=torch.float32) * (peer + 1)
    expect(torch.equal(u[200:300], want) and not u[:200].any() and not u[300:].any(), "tensor slice")
    raises(ValueError, tx.isend, torch.zeros(10, 10).t())  # not contiguous
    g = torch.zeros(4, requires_grad=True)
    r = rx.irecv(g.detach())
    s = tx.isend(torch.ones(4) * 3)
    s.wait(30)
    r.wait(30)
    expect(torch.equal(g.detach(), torch.ones(4) * 3), "into a grad tensor")
    asr.barrier()
    tx.close()
    rx.close()


def case_gloo(job):
    import torch
    import torch.distributed as dist

    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        expect(k in os.environ, k)
    expect(int(os.environ["RANK"]) == job.rank, "RANK")
    dist.init_process_group("gloo")
    expect(dist.get_rank() == job.rank and dist.get_world_size() == job.size, "gloo view")
    x = torch.ones(8) * (job.rank + 1)
    dist.all_reduce(x)
    expect(torch.equal(x, torch.ones(8) * sum(range(1, job.size + 1))), "all_reduce %r" % x)
    dist.destroy_process_group()
    asr.barrier()


def case_kill(job):
    """Rank 1 is killed mid-transfer; rank 0's wait fails instead of hanging."""
    peer, tx, rx = pair(job)
    n = 64 << 20
    if job.rank == 0:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # asrrun ends the job; see the error first
        buf = np.zeros(n, dtype=np.uint8)
        reqs = [rx.irecv(buf, 0, 1 << 20), rx.irecv(buf)]
        asr.barrier()
        expect(reqs[0].wait(30) == 1 << 20, "first")
        e = raises(asr.Error, reqs[1].wait, 30)
        expect(rx.error is not None and "exited" in rx.error, (rx.error, tx.error))
        print("OK kill (%s)" % e, flush=True)
        os._exit(0)
    a = np.ones(n, dtype=np.uint8)
    asr.barrier()
    tx.isend(a, 0, 1 << 20).wait(30)
    time.sleep(0.5)
    os.kill(os.getpid(), signal.SIGKILL)


def main():
    case = sys.argv[1]
    with asr.job_init() as job:
        globals()["case_" + case](job)
        print("OK %s" % case, flush=True)


if __name__ == "__main__":
    main()
