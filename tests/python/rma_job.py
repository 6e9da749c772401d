"""The ranks' side of tests/python/test_rma.py: one case of one-sided
transfers per run, started as
    asrrun -n 2 /usr/bin/python3 tests/python/rma_job.py CASE
Rank 1 owns the registered memory, rank 0 writes into it and reads from it
over its SEND comm to rank 1. Each rank prints "OK CASE" once its checks
passed; any failure raises."""
import gc
import sys

import asr
import numpy as np

from job import expect, pair, pattern, raises

B = 4096  # bytes of a block
OWNER, WRITER = 1, 0


def share(tx, rx, mem=None):
    """The owner (mem given) sends mem's descriptor over tx; the writer
    receives it on rx and returns its import on tx."""
    if mem is not None:
        d = mem.export()
        expect(isinstance(d, bytes) and 0 < len(d) <= asr.MEM_DESC_MAX, repr(d))
        tx.isend(d).wait(30)
        return None
    buf = bytearray(asr.MEM_DESC_MAX)
    n = rx.irecv(buf).wait(30)
    rm = tx.import_memory(bytes(buf[:n]))
    expect(isinstance(rm, asr.RemoteMemory) and rm.comm is tx and not rm.freed, repr(rm))
    return rm


def nothing_left():
    """No request in flight or list holds a buffer, and libasr holds no
    import, list or registration made through the module."""
    info = asr._cache_info()
    expect(info["busy"] == 0 and info["imports"] == 0 and info["lists"] == 0 and info["memories"] == 0, info)


def take(rx, count):
    """count notifications from rx, each wait bounded."""
    got = []
    while len(got) < count:
        more = rx.notifications(timeout=30)
        expect(more, "no notification within 30 s; got %r so far" % got)
        got += more
    expect(len(got) == count, "more notifications than writes: %r" % got)
    return got


def case_rma_args(job):
    """Misuse is TypeError / ValueError before libasr is called; a damaged
    descriptor is libasr's asr.Error."""
    peer, tx, rx = pair(job)
    a = np.zeros(64, dtype=np.uint8)
    rw = asr.MEM_REMOTE_READ | asr.MEM_REMOTE_WRITE
    expect(asr.MEM_REMOTE_READ == 1 and asr.MEM_REMOTE_WRITE == 2 and asr.MEM_DESC_MAX == 128, "constants")
    expect(asr.XFER_WRITE == 1 and asr.XFER_READ == 2 and asr.NOTIF_DEPTH == 256, "constants")
    e = raises(ValueError, asr.Memory, job.lnc, a, 0)
    expect("MEM_REMOTE_READ" in str(e), str(e))
    raises(ValueError, asr.Memory, job.lnc, a, 4)
    raises(ValueError, asr.Memory, asr.MAX_LNC, a, rw)
    raises(TypeError, asr.Memory, job.lnc, a)  # access is required
    raises(TypeError, asr.Memory, job.lnc, 42, rw)
    e = raises(ValueError, asr.Memory, job.lnc, b"immutable", asr.MEM_REMOTE_WRITE)
    expect("read-only" in str(e) and "MEM_REMOTE_WRITE" in str(e), str(e))
    e = raises(ValueError, asr.Memory, job.lnc, np.zeros((8, 8))[:, 1], asr.MEM_REMOTE_READ)
    expect("contiguous" in str(e), str(e))
    raises(ValueError, asr.Memory, job.lnc, bytearray(), asr.MEM_REMOTE_READ)
    # one-sided calls on the wrong comm, with the wrong types
    e = raises(ValueError, rx.import_memory, bytes(32))
    expect("RECV" in str(e) and "SEND" in str(e), str(e))
    raises(TypeError, tx.import_memory, 42)
    raises(ValueError, tx.import_memory, b"")
    raises(ValueError, tx.import_memory, bytes(asr.MEM_DESC_MAX + 1))
    raises(ValueError, rx.write, a, None)
    raises(ValueError, rx.read, a, None)
    e = raises(TypeError, tx.write, a, "an import")
    expect("RemoteMemory" in str(e), str(e))
    raises(TypeError, tx.read, a, None)
    raises(TypeError, tx.write, a)
    e = raises(ValueError, tx.notifications)
    expect("RECV" in str(e), str(e))
    raises(ValueError, rx.notifications, 0)
    raises(ValueError, rx.notifications, max=-1)
    raises(ValueError, tx.prepare, 3, [])
    raises(ValueError, tx.prepare, asr.XFER_WRITE, [])
    raises(TypeError, tx.prepare, asr.XFER_WRITE, [(a, 0)])
    raises(TypeError, tx.prepare, asr.XFER_WRITE, 5)
    raises(ValueError, rx.prepare, asr.XFER_WRITE, [])
    with asr.Memory(job.lnc, a, rw) as m:
        expect(m.registered and m.nbytes == 64 and m.lnc == job.lnc and m.access == rw, repr(m))
        expect(len(m.export()) <= asr.MEM_DESC_MAX, "descriptor")
    expect(not m.registered and m.buffer is None, repr(m))
    expect(rx.notifications() == [], "no notification")
    e = raises(asr.Error, tx.import_memory, bytes(32))  # a damaged descriptor
    expect(e.status == asr.INVALID, str(e))
    nothing_left()
    for name in ("import_memory", "write", "read", "prepare", "notifications"):
        expect(getattr(asr.Comm, name).__doc__, name)
    asr.barrier()
    tx.close()
    rx.close()


def case_rma_write(job):
    """Writes land where they were aimed, notifications come in post order,
    each after its data; misuse is refused and the comm goes on."""
    peer, tx, rx = pair(job)
    if job.rank == OWNER:
        cache = np.zeros(16 * B, dtype=np.uint8)
        refs = sys.getrefcount(cache)
        mem = asr.Memory(job.lnc, cache, asr.MEM_REMOTE_WRITE)
        expect(mem.registered and mem.buffer is cache and mem.nbytes == cache.nbytes, repr(mem))
        expect(mem.access == asr.MEM_REMOTE_WRITE and "write" in repr(mem), repr(mem))
        expect(sys.getrefcount(cache) > refs, "the registration holds the array")
        share(tx, rx, mem)
        got = take(rx, 11)
        expect(got == list(range(8)) + [2**64 - 1, 99, 1000], got)
        blocks = cache.reshape(16, B)
        for i in range(8):
            expect((blocks[15 - i] == pattern(B, i)).all(), "slot %d" % (15 - i))
        expect((blocks[0] == pattern(B, 8)).all(), "slot 0 (a write without notification)")
        expect((blocks[1] == pattern(4 * B, 77)[3 * B:]).all(), "slot 1 (a slice)")
        expect((blocks[2] == pattern(B, 99)).all(), "slot 2 (a dropped request's)")
        expect((blocks[3] == pattern(B, 9)).all(), "slot 3 (after the refused writes)")
        expect(not blocks[4:8].any(), "slots 4-7 untouched")
        asr.barrier()  # the writer is done
        expect(rx.notifications() == [], "nothing more")
        mem.deregister()
        expect(not mem.registered and mem.buffer is None, repr(mem))
        del blocks
        expect(sys.getrefcount(cache) == refs, "the array let go of")
    else:
        rm = share(tx, rx)
        reqs = [tx.write(pattern(B, i), rm, remote_offset=(15 - i) * B, notify=i) for i in range(8)]
        s = tx.write(pattern(B, 8), rm)  # slot 0, no notification
        big = pattern(4 * B, 77)
        t = tx.write(big, rm, offset=3 * B, length=B, remote_offset=B, notify=2**64 - 1)
        expect(t.buffer is big and t.offset == 3 * B and t.length == B and "write" in repr(t), repr(t))
        tx.write(pattern(B, 99), rm, remote_offset=2 * B, notify=99)  # dropped at once
        gc.collect()
        # refused before anything is sent: outside the region, an access not
        # granted, bad arguments
        e = raises(asr.Error, tx.write, pattern(B, 1), rm, remote_offset=15 * B + 1)
        expect(e.status == asr.INVALID and str(e).startswith("asr_write: "), str(e))
        raises(asr.Error, tx.write, bytearray(1), rm, remote_offset=16 * B)
        e = raises(asr.Error, tx.read, bytearray(8), rm)
        expect(e.status == asr.INVALID, str(e))
        raises(ValueError, tx.write, big, rm, notify=-1)
        raises(ValueError, tx.write, big, rm, notify=2**64)
        raises(TypeError, tx.write, big, rm, notify=1.5)
        raises(ValueError, tx.write, big, rm, remote_offset=-1)
        raises(ValueError, tx.write, big, rm, offset=len(big) - 1, length=2)
        e = raises(ValueError, tx.read, b"read-only", rm)
        expect("read-only" in str(e), str(e))
        expect(tx.status == asr.COMM_CONNECTED, tx.status_name)
        last = tx.write(pattern(B, 9), rm, remote_offset=3 * B, notify=1000)
        for r in reqs + [s, t, last]:
            expect(r.wait(30) == B and r.done, repr(r))
        asr.barrier()
        rm.free()  # (tests the dropped request first: it holds rm until then)
        expect(rm.freed, repr(rm))
        rm.free()  # twice: nothing
        nothing_left()
    asr.barrier()
    tx.close()
    rx.close()


def case_rma_read(job):
    """Reads of read-only memory, of slices, and a read after a write on the
    same comm sees the write."""
    peer, tx, rx = pair(job)
    n = 1 << 20
    if job.rank == OWNER:
        src = bytes(pattern(n, 5))  # read-only: fine for MEM_REMOTE_READ
        ro = asr.Memory(job.lnc, src, asr.MEM_REMOTE_READ)
        both = np.zeros(B, dtype=np.uint8)
        rw = asr.Memory(job.lnc, both, asr.MEM_REMOTE_READ | asr.MEM_REMOTE_WRITE)
        share(tx, rx, ro)
        share(tx, rx, rw)
        asr.barrier()
        expect((both == pattern(B, 6)).all(), "the write")
        ro.deregister()
        rw.deregister()
    else:
        rro, rrw = share(tx, rx), share(tx, rx)
        dst = np.zeros(n, dtype=np.uint8)
        expect(tx.read(dst, rro).wait(30) == n, "size")
        expect((dst == pattern(n, 5)).all(), "the whole region")
        ba = bytearray(1000)
        expect(tx.read(ba, rro, offset=10, length=500, remote_offset=n - 500).wait(30) == 500, "slice size")
        expect(ba[10:510] == bytes(pattern(n, 5)[n - 500:]) and not any(ba[:10] + ba[510:]), "slice")
        e = raises(asr.Error, tx.read, ba, rro, remote_offset=n - 1)
        expect(e.status == asr.INVALID, str(e))
        raises(asr.Error, tx.write, ba, rro)  # not granted
        raises(ValueError, tx.read, ba, rro, remote_offset=-1)
        # a read posted after a write on the same comm sees it (no wait between)
        w = tx.write(pattern(B, 6), rrw)
        back = np.zeros(B, dtype=np.uint8)
        r = tx.read(back, rrw)
        expect(w.wait(30) == B and r.wait(30) == B, "sizes")
        expect((back == pattern(B, 6)).all(), "read after write")
        expect("read" in repr(r) and r.buffer is back, repr(r))
        asr.barrier()
    asr.barrier()
    tx.close()
    rx.close()


def case_rma_xfer(job):
    """Prepared lists: a write list's one notification after all of its data,
    reposts, a read list, and what a live list holds."""
    peer, tx, rx = pair(job)
    if job.rank == OWNER:
        cache = np.zeros(8 * B, dtype=np.uint8)
        mem = asr.Memory(job.lnc, cache, asr.MEM_REMOTE_READ | asr.MEM_REMOTE_WRITE)
        share(tx, rx, mem)
        blocks = cache.reshape(8, B)
        for k, note in ((0, 7), (1, 8)):
            expect(take(rx, 1) == [note], "one notification per post")
            for i in range(4):
                expect((blocks[2 * i + 1] == pattern(B, 10 * k + i)).all(), "post %d, entry %d" % (k, i))
            expect(not blocks[0::2].any(), "even slots untouched")
            asr.barrier()
        expect(take(rx, 1) == [9], "a list posted without notify delivered none")
        asr.barrier()
        mem.deregister()
    else:
        rm = share(tx, rx)
        a, b = np.zeros(2 * B, dtype=np.uint8), np.zeros(3 * B, dtype=np.uint8)

        def fill(k):
            a[:B], a[B:] = pattern(B, 10 * k), pattern(B, 10 * k + 1)
            b[B:2 * B], b[2 * B:] = pattern(B, 10 * k + 2), pattern(B, 10 * k + 3)

        # entries: (local, offset, length, rmem, remote_offset); odd slots
        entries = [(a, 0, B, rm, B), (a, B, None, rm, 3 * B), (b, B, B, rm, 5 * B), (b, 2 * B, B, rm, 7 * B)]
        x = tx.prepare(asr.XFER_WRITE, entries)
        expect(x.nbytes == 4 * B and x.op == asr.XFER_WRITE and not x.freed and len(x.entries) == 4, repr(x))
        expect(asr._cache_info()["busy"] >= 2, "the list holds its buffers")
        e = raises(RuntimeError, rm.free)
        expect("list" in str(e), str(e))
        for k, note in ((0, 7), (1, 8)):
            fill(k)
            r = x.post(notify=note)
            raises(RuntimeError, x.post, notify=note)  # the first is in flight
            raises(RuntimeError, x.free)
            expect(r.wait(30) == 4 * B and r.buffer is x and "list" in repr(r), repr(r))
            asr.barrier()
        fill(2)
        expect(x.post().wait(30) == 4 * B, "without notification")
        tx.write(bytearray(1), rm, notify=9).wait(30)  # slot 0's first byte stays 0
        back = np.zeros(4 * B, dtype=np.uint8)
        rd = tx.prepare(asr.XFER_READ, [(back, i * B, B, rm, (2 * i + 1) * B) for i in range(4)])
        raises(ValueError, rd.post, notify=1)
        expect(rd.post().wait(30) == 4 * B, "read list")
        for i in range(4):
            expect((back[i * B:(i + 1) * B] == pattern(B, 20 + i)).all(), "read list entry %d" % i)
        e = raises(ValueError, tx.prepare, asr.XFER_READ, [(b"read-only", 0, 1, rm, 0)])
        expect("entry 0" in str(e) and "read-only" in str(e), str(e))
        raises(ValueError, tx.prepare, asr.XFER_WRITE, [(a, 0, B, rm, 0), (a, 0, B, rm, -1)])
        raises(TypeError, tx.prepare, asr.XFER_WRITE, [(a, 0, B, "an import", 0)])
        raises(ValueError, tx.prepare, asr.XFER_WRITE, [(a, 0, 3 * B, rm, 0)])
        with rd:
            pass
        expect(rd.freed, repr(rd))
        x.free()
        x.free()  # twice: nothing
        raises(ValueError, x.post)
        expect(asr._cache_info()["busy"] == 0, asr._cache_info())
        rm.free()
        nothing_left()
        e = raises(ValueError, tx.write, a, rm)
        expect("freed" in str(e), str(e))
        asr.barrier()
    tx.close()
    rx.close()


def case_rma_lifetimes(job):
    """Deregistration revokes; a dropped Memory deregisters; closing a comm
    frees its imports and lists; finalize deregisters what is left."""
    peer, tx, rx = pair(job)
    if job.rank == OWNER:
        cache = np.zeros(B, dtype=np.uint8)
        refs = sys.getrefcount(cache)
        with asr.Memory(job.lnc, cache, asr.MEM_REMOTE_WRITE) as mem:
            share(tx, rx, mem)
            expect(take(rx, 1) == [1], "the first write")
            expect((cache == pattern(B, 1)).all(), "the first write's data")
        expect(not mem.registered and sys.getrefcount(cache) == refs, "deregistered by the with block")
        raises(ValueError, mem.export)
        mem.deregister()  # twice: nothing
        asr.barrier()  # the writer's write after the deregistration
        asr.barrier()
        expect((cache == pattern(B, 1)).all(), "a revoked region is not written")
        expect(rx.notifications() == [], "a refused write notifies nothing")
        # dropped without deregister(): the Memory lets go when it goes
        other = np.zeros(B, dtype=np.uint8)
        refs = sys.getrefcount(other)
        m = asr.Memory(job.lnc, other, asr.MEM_REMOTE_READ)
        share(tx, rx, m)
        asr.barrier()  # the writer imported it
        del m
        gc.collect()
        expect(sys.getrefcount(other) == refs, "a dropped Memory let go of its array")
        last = asr.Memory(job.lnc, np.zeros(B, dtype=np.uint8), asr.MEM_REMOTE_READ)
        tx.close()
        rx.close()
        asr.finalize()  # closes the job's LNC: its memory is deregistered first
        expect(not last.registered and last.buffer is None, repr(last))
        nothing_left()
    else:
        rm = share(tx, rx)
        tx.write(pattern(B, 1), rm, notify=1).wait(30)
        asr.barrier()
        try:  # refused at the post, or failed at completion: never written
            tx.write(pattern(B, 2), rm, notify=2).wait(30)
            refused = False
        except asr.Error:
            refused = True
        expect(refused, "a write after the owner deregistered went through")
        asr.barrier()
        rm2 = share(tx, rx)
        x = tx.prepare(asr.XFER_READ, [(bytearray(B), 0, B, rm2, 0)])
        asr.barrier()
        tx.close()
        expect(rm.freed and rm2.freed and x.freed, (rm, rm2, x))
        raises(asr.Unconnected, tx.write, bytearray(1), rm)
        raises(asr.Unconnected, x.post)
        rx.close()
        nothing_left()
        asr.finalize()


def stall(tx, rm, x):
    """Fills the owner's notification ring (it takes none) with 1-byte
    notifying writes of zeros, then posts 8 notifying writes of blocks and a
    post of list x beyond it, which wait in libasr: returns their Requests,
    in flight."""
    one = bytearray(1)
    for k in range(0, asr.NOTIF_DEPTH, 64):
        for r in [tx.write(one, rm, remote_offset=i, notify=i) for i in range(k, k + 64)]:
            r.wait(30)
    held = [tx.write(pattern(B, i), rm, notify=asr.NOTIF_DEPTH + i) for i in range(8)]
    held.append(x.post(notify=2**64 - 1))
    for r in held:
        expect(not r.test(), "%r completed with the owner's ring full" % r)
    return held


def case_rma_close_inflight(job):
    """Closing a SEND comm while writes and a list post on its import are in
    flight (waiting for room in the owner's notification ring) cancels
    them, then frees the import and the list in libasr; the buffers are let
    go of. The owner gets the notifications of the writes that landed, and
    nothing of those cancelled."""
    peer, tx, rx = pair(job)
    if job.rank == OWNER:
        cache = np.zeros(2 * B, dtype=np.uint8)
        with asr.Memory(job.lnc, cache, asr.MEM_REMOTE_WRITE) as mem:
            share(tx, rx, mem)
            asr.barrier()  # the writer closed its SEND comm with writes in flight
            got = rx.notifications(max=2 * asr.NOTIF_DEPTH)
            expect(got == list(range(asr.NOTIF_DEPTH)), got)
            expect(rx.notifications(timeout=0.5) == [] and not cache.any(), "a cancelled write landed")
        nothing_left()
    else:
        rm = share(tx, rx)
        a = pattern(2 * B, 3)
        refs = sys.getrefcount(a)
        x = tx.prepare(asr.XFER_WRITE, [(a, 0, B, rm, 0), (a, B, B, rm, B)])
        held = stall(tx, rm, x)
        expect(tx.pending == len(held), tx.pending)
        tx.close()
        for r in held:
            expect(r.done and r.nbytes is None, repr(r))
            raises(asr.Unconnected, r.wait)
        expect(rm.freed and x.freed and tx.pending == 0, (rm, x, tx.pending))
        raises(asr.Unconnected, x.post)
        nothing_left()
        del held, r, x  # (x.entries names a)
        asr.forget(a)  # the cache's idle record of a goes: then nothing else holds a
        expect(sys.getrefcount(a) == refs, "the list let go of its buffer")
        asr.barrier()
    rx.close()


def case_rma_finalize_inflight(job):
    """The same with nothing closed by hand and every object dropped: the
    writer's finalize closes its LNC with the requests, list and import in
    flight on a comm that only they still reference."""
    peer, tx, rx = pair(job)
    if job.rank == OWNER:
        cache = np.zeros(2 * B, dtype=np.uint8)
        mem = asr.Memory(job.lnc, cache, asr.MEM_REMOTE_WRITE)
        share(tx, rx, mem)
        asr.barrier()  # the writer's writes wait for the ring, which this rank never empties
        rx.close()
        tx.close()
        asr.finalize()
        expect(not mem.registered, repr(mem))
    else:
        rm = share(tx, rx)
        a = pattern(2 * B, 3)
        refs = sys.getrefcount(a)
        x = tx.prepare(asr.XFER_WRITE, [(a, 0, B, rm, 0), (a, B, B, rm, B)])
        stall(tx, rm, x)  # the Requests are dropped
        del x, rm, tx, rx
        gc.collect()
        asr.barrier()
        asr.finalize()
        gc.collect()
        asr.forget(a)
        expect(sys.getrefcount(a) == refs, "the list let go of its buffer")
    nothing_left()


def case_rma_torch(job):
    """CPU torch tensors as registered memory and as write / read buffers."""
    import torch

    peer, tx, rx = pair(job)
    if job.rank == OWNER:
        t = torch.zeros(4096, dtype=torch.float32)
        raises(ValueError, asr.Memory, job.lnc, torch.zeros(8, 8).t(), asr.MEM_REMOTE_READ)
        mem = asr.Memory(job.lnc, t, asr.MEM_REMOTE_READ | asr.MEM_REMOTE_WRITE)
        expect(mem.nbytes == 4096 * 4 and mem.buffer is t, repr(mem))
        share(tx, rx, mem)
        expect(take(rx, 1) == [42], "notification")
        want = torch.arange(1000, 1100, dtype=torch.float32)
        expect(torch.equal(t[200:300], want) and not t[:200].any() and not t[300:].any(), "elements 200..299")
        asr.barrier()
        mem.deregister()
    else:
        rm = share(tx, rx)
        src = torch.arange(4096, dtype=torch.float32)
        es = src.element_size()
        # elements 1000..1099 of src to elements 200..299 of the owner's (bytes)
        w = tx.write(src, rm, offset=1000 * es, length=100 * es, remote_offset=200 * es, notify=42)
        back = torch.zeros(100, dtype=torch.float32)
        r = tx.read(back, rm, remote_offset=200 * es)
        expect(w.wait(30) == 400 and r.wait(30) == 400, "sizes")
        expect(torch.equal(back, src[1000:1100]), "read back")
        raises(ValueError, tx.write, torch.zeros(10, 10).t(), rm)
        asr.barrier()
        rm.free()
    asr.barrier()
    tx.close()
    rx.close()


def main():
    case = sys.argv[1]
    with asr.job_init() as job:
        expect(job.size == 2, "run with -n 2")
        globals()["case_" + case](job)
        print("OK %s" % case, flush=True)


if __name__ == "__main__":
    main()
