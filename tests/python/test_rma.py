"""Tests of the module's one-sided transfers (asr.Memory, Comm.import_memory,
write, read, prepare, notifications) under real asrrun jobs: each test
starts `asrrun -n 2 /usr/bin/python3 rma_job.py CASE` from the build tree
(ASR_BUILDDIR, set by tests/python/run.sh), or the example
examples/kv_cache_write.py, and checks its exit code and every rank's line.
The ranks run under PYTHONMALLOC=debug, so that an object the module frees
while it still uses it fails the test instead of passing by luck; a SEND
comm closed with writes waiting in libasr waits ASR_DRAIN_TIMEOUT_MS (made
1 s here) before it gives up on them."""
import os
import subprocess
import sys

import pytest

from test_asr import BUILD, HERE, PYTHON, all_ok, have, job, module_built

pytestmark = pytest.mark.skipif(not module_built(), reason="the module was not built (python3-dev missing?)")
EXAMPLE = os.path.join(HERE, "..", "..", "examples", "kv_cache_write.py")
RMA_ENV = {"PYTHONMALLOC": "debug", "ASR_DRAIN_TIMEOUT_MS": "1000"}


def rma_job(case, **kw):
    stdout, out = job(case, argv=[os.path.join(HERE, "rma_job.py"), case], env=RMA_ENV, **kw)
    all_ok(case, stdout, 2)
    return stdout


def test_rma_misuse():
    rma_job("rma_args")


@pytest.mark.parametrize("case", ["rma_write", "rma_read", "rma_xfer", "rma_lifetimes", "rma_close_inflight",
                                  "rma_finalize_inflight"])
def test_rma(case):
    rma_job(case)


@pytest.mark.parametrize("provider", ["shm", "tcp;ofi_rxm"])
def test_rma_provider(provider):
    # asr's own path (sm) is test_rma's; these are libfabric's fi_write / fi_read
    for case in ("rma_write", "rma_read", "rma_close_inflight"):
        rma_job(case, extra=("--provider", provider))


@pytest.mark.skipif(not have("torch"), reason="no torch for /usr/bin/python3 (apt-get install python3-torch)")
def test_rma_torch_tensors():
    rma_job("rma_torch")


@pytest.mark.parametrize("kind", ["numpy", "torch"])
def test_rma_kv_cache_write_example(kind):
    if kind == "torch" and not have("torch"):
        pytest.skip("no torch for /usr/bin/python3 (apt-get install python3-torch)")
    argv = [EXAMPLE] + (["--numpy"] if kind == "numpy" else []) + ["32", "8192"]
    stdout, out = job("example", argv=argv, env=RMA_ENV)
    assert "[1] decode: 32 blocks of 8192 bytes (%s) landed in order, each checked" % kind in stdout, out[-4000:]
    assert "[0] prefill: wrote 32 blocks" in stdout, out[-4000:]


def test_rma_help_reads_well():
    r = subprocess.run([PYTHON, "-c", "import asr, pydoc; print(pydoc.render_doc(asr, renderer=pydoc.plaintext))"],
                       capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=os.path.join(BUILD, "python")))
    assert r.returncode == 0, r.stderr
    for s in ("class Memory", "class RemoteMemory", "class Xfer", "import_memory(desc) -> RemoteMemory",
              "write(src, rmem, offset=0, length=None, remote_offset=0, notify=None)", "notifications(max=256",
              "prepare(op, entries) -> Xfer", "MEM_REMOTE_WRITE = 2"):
        assert s in r.stdout, s


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-v"]))
