"""torch_slice.py -- moves a slice of a torch tensor from rank 0 to rank 1:
elements 1000..1999 of rank 0's tensor land at elements 0..999 of rank 1's
(offsets and lengths are in bytes), then the two ranks all_reduce with
torch.distributed's gloo backend, which finds the job through the
torchrun variables asrrun sets (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT).

    asrrun -n 2 /usr/bin/python3 examples/torch_slice.py"""
import asr
import torch
import torch.distributed as dist

with asr.job_init() as job:
    x = torch.arange(4096, dtype=torch.float32)
    es = x.element_size()
    if job.rank == 0:
        with asr.connect(1) as tx:
            tx.wait_connected(60)
            tx.isend(x, 1000 * es, 1000 * es).wait()
    elif job.rank == 1:
        y = torch.zeros(1000, dtype=torch.float32)
        with asr.accept(0) as rx:
            rx.wait_connected(60)
            n = rx.irecv(y).wait()
        assert torch.equal(y, x[1000:2000]), "the slice differs"
        print("rank 1: got %d bytes: elements %g..%g" % (n, y[0], y[-1]))
    dist.init_process_group("gloo")
    t = torch.ones(4) * (job.rank + 1)
    dist.all_reduce(t)
    print("rank %d: all_reduce -> %s" % (job.rank, t.tolist()))
    dist.destroy_process_group()
    asr.barrier()
