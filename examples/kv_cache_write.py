"""kv_cache_write.py -- disaggregated prefill and decode in miniature, with
one-sided writes: rank 1 ("decode") registers its KV cache and hands its
descriptor and a block table to rank 0 ("prefill"), which writes each KV
block it computed straight into the slot the table names, with the block's
index as the write's notification. Decode posts no receive for the blocks:
it takes the notifications as blocks land (each comes after its block's
data) and checks every block byte for byte.

    asrrun -n 2 /usr/bin/python3 examples/kv_cache_write.py [--numpy] [BLOCKS [BLOCK_BYTES]]

(from a build tree: PYTHONPATH=build/python build/bin/asrrun ...). The
cache is a CPU torch tensor when torch is importable (--numpy: a numpy
array regardless). Exits non-zero, so asrrun names the rank, on any
mismatch."""
import sys
import time

import asr
import numpy as np

args = [a for a in sys.argv[1:] if a != "--numpy"]
torch = None
if "--numpy" not in sys.argv:
    try:
        import torch
    except ImportError:
        pass
blocks = int(args[0]) if args else 64
block_bytes = int(args[1]) if len(args) > 1 else 64 << 10
PREFILL, DECODE = 0, 1
WINDOW = 32  # writes in flight at most (a comm holds 128 requests)


def kv_block(i):
    """Block i's bytes as prefill computes them (fp16 K and V), the same on
    both ranks so that decode can check what landed."""
    vals = np.random.default_rng(i).standard_normal(block_bytes // 2).astype(np.float16)
    return vals.view(np.uint8)


def zeros(shape):
    return torch.zeros(shape, dtype=torch.uint8) if torch else np.zeros(shape, dtype=np.uint8)


def as_numpy(buf):
    """A numpy view of buf's memory (a torch tensor or an array)."""
    return buf.numpy() if torch else buf


with asr.job_init() as job:
    if job.size != 2:
        sys.exit("run it with asrrun -n 2")
    peer = 1 - job.rank
    tx, rx = asr.connect(peer), asr.accept(peer)
    tx.wait_connected(60)
    rx.wait_connected(60)
    if job.rank == DECODE:
        # the cache has a spare slot per block: the table places block i at
        # slot 2i + 1, as a paged cache's allocator would place it anywhere
        cache = zeros((2 * blocks, block_bytes))
        table = np.array([2 * i + 1 for i in range(blocks)], dtype=np.int64)
        with asr.Memory(job.lnc, cache, asr.MEM_REMOTE_WRITE) as mem:
            tx.isend(mem.export()).wait(60)
            tx.isend(table).wait(60)
            view, seen = as_numpy(cache), 0
            while seen < blocks:
                got = rx.notifications(timeout=60)
                if not got:
                    sys.exit("decode: no block within 60 s (%d of %d landed)" % (seen, blocks))
                for i in got:
                    if i != seen:
                        sys.exit("decode: block %d arrived where block %d was due" % (i, seen))
                    if view[table[i]].tobytes() != kv_block(i).tobytes():
                        sys.exit("decode: block %d differs in slot %d" % (i, table[i]))
                    seen += 1
            if view[0::2].any():
                sys.exit("decode: a slot no block was meant for was written")
            asr.barrier()  # prefill is done with the memory
        print("decode: %d blocks of %d bytes (%s) landed in order, each checked"
              % (blocks, block_bytes, "torch" if torch else "numpy"))
    else:
        desc = bytearray(asr.MEM_DESC_MAX)
        n = rx.irecv(desc).wait(60)
        table = np.zeros(blocks, dtype=np.int64)
        rx.irecv(table).wait(60)
        computed = zeros((blocks, block_bytes))
        for i in range(blocks):
            as_numpy(computed)[i] = kv_block(i)
        with tx.import_memory(bytes(desc[:n])) as rmem:
            t0 = time.perf_counter()
            inflight = []
            for i in range(blocks):
                if len(inflight) == WINDOW:
                    inflight.pop(0).wait(60)
                inflight.append(tx.write(computed, rmem, offset=i * block_bytes, length=block_bytes,
                                         remote_offset=int(table[i]) * block_bytes, notify=i))
            for r in inflight:
                r.wait(60)
            secs = time.perf_counter() - t0
            asr.barrier()
        print("prefill: wrote %d blocks (%d bytes each) in %.1f ms, %.0f MB/s"
              % (blocks, block_bytes, secs * 1e3, blocks * block_bytes / secs / 1e6))
    tx.close()
    rx.close()
