"""Tests of the Python module `asr` (python/asrmodule.c) under real asrrun
jobs: each test starts `asrrun -n N /usr/bin/python3 job.py CASE` from the
build tree (ASR_BUILDDIR, set by tests/python/run.sh) and checks its exit
code and every rank's "OK CASE" line."""
import os
import subprocess
import sys

import pytest

BUILD = os.environ.get("ASR_BUILDDIR", "")
HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON = "/usr/bin/python3"  # Debian's, whatever python3 comes first on PATH


def module_built():
    d = os.path.join(BUILD, "python")
    return os.path.isdir(d) and any(f.startswith("asr.") and f.endswith(".so") for f in os.listdir(d))


def have(mod):
    r = subprocess.run([PYTHON, "-c", "import " + mod], capture_output=True)
    return r.returncode == 0


pytestmark = pytest.mark.skipif(not module_built(), reason="the module was not built (python3-dev missing?)")


def job(case, n=2, expect_rc=0, timeout=240, env=None, extra=(), argv=None):
    """Runs job.py CASE (or the program and arguments argv) under asrrun -n N."""
    e = dict(os.environ, PYTHONPATH=os.path.join(BUILD, "python"), **(env or {}))
    cmd = [os.path.join(BUILD, "bin", "asrrun"), "--timeout", str(timeout - 10), "-n", str(n), *extra,
           PYTHON, *(argv or [os.path.join(HERE, "job.py"), case])]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=e)
    out = r.stdout + r.stderr
    assert r.returncode == expect_rc, "asrrun exited %d, expected %d:\n%s" % (r.returncode, expect_rc, out[-4000:])
    return r.stdout, out


def all_ok(case, stdout, n):
    for rank in range(n):
        assert ("[%d] OK %s" % (rank, case)) in stdout, stdout[-4000:]


@pytest.mark.parametrize("case", ["basic", "errors", "gc", "threads"])
def test_case(case):
    stdout, _ = job(case)
    all_ok(case, stdout, 2)


@pytest.mark.parametrize("provider", ["sm", "shm", "tcp;ofi_rxm"])
def test_basic_provider(provider):
    # sm: asr's own same-host path, libasr's default (no --provider)
    stdout, _ = job("basic", extra=() if provider == "sm" else ("--provider", provider))
    all_ok("basic", stdout, 2)


def test_fresh_arrays_flat_rss():
    stdout, _ = job("fresh")
    all_ok("fresh", stdout, 2)
    print(stdout)


@pytest.mark.skipif(not have("torch"), reason="no torch for /usr/bin/python3 (apt-get install python3-torch)")
def test_torch_tensors():
    stdout, _ = job("torch")
    all_ok("torch", stdout, 2)


@pytest.mark.skipif(not have("torch"), reason="no torch for /usr/bin/python3 (apt-get install python3-torch)")
def test_gloo_all_reduce_torchrun_env():
    stdout, _ = job("gloo", n=4)
    all_ok("gloo", stdout, 4)


def test_rank_killed_mid_transfer():
    stdout, out = job("kill", expect_rc=137)  # rank 1 died of SIGKILL
    assert "[0] OK kill" in stdout, out[-4000:]


def test_help_reads_well():
    r = subprocess.run([PYTHON, "-c", "import asr, pydoc; print(pydoc.render_doc(asr, renderer=pydoc.plaintext))"],
                       capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=os.path.join(BUILD, "python")))
    assert r.returncode == 0, r.stderr
    for s in ("asr - asr -- asynchronous", "class Comm", "isend(buffer, offset=0, length=None)", "wait(timeout=None)",
              "job_init() -> JobInfo", "class Timeout"):
        assert s in r.stdout, s


def test_without_launcher_is_a_clear_error():
    e = dict(os.environ, PYTHONPATH=os.path.join(BUILD, "python"))
    for k in list(e):
        if k.startswith(("PMIX_", "ASR_")):
            del e[k]
    r = subprocess.run([PYTHON, "-c", "import asr\ntry:\n    asr.job_init()\nexcept asr.Error as x:\n    print('E', x)"],
                       capture_output=True, text=True, env=e, timeout=60)
    assert r.stdout.startswith("E asr_job_init"), r.stdout + r.stderr


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-v"]))
