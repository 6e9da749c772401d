"""Tests of the job's trace (issue 52, doc/trace.md): real asrrun --trace jobs
(tests/apps/trace_job, examples/pairwise) and an ASR_TRACE=DIR run without a
launcher (tests/apps/ring) merged by asr-trace-merge; each merged file is
parsed and checked against what the program did and said it did."""
import collections
import glob
import json
import os
import re
import signal
import subprocess
import tempfile

import pytest

BUILD = os.environ.get("ASR_BUILDDIR", "")
ASRRUN = os.path.join(BUILD, "bin", "asrrun")
JOB = os.path.join(BUILD, "tests", "apps", "trace_job")
MERGE = os.path.join(BUILD, "launcher", "trace", "asr-trace-merge")

pytestmark = pytest.mark.skipif(not os.path.exists(JOB), reason="tests/apps/trace_job is not built")


def traced(args, n, expect_rc=0, extra=(), timeout=120, env=None):
    """Runs asrrun --trace under a fresh directory; returns (trace, stdout, all output)."""
    d = tempfile.mkdtemp(prefix="asrtrace-test.")
    path = os.path.join(d, "job.json")
    cmd = [ASRRUN, "--timeout", str(timeout - 20), "--trace", path, "-n", str(n), *extra, *args]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=dict(os.environ, **(env or {})))
    out = r.stdout + r.stderr
    if expect_rc is not None:
        assert r.returncode == expect_rc, "asrrun exited %d:\n%s" % (r.returncode, out[-4000:])
    assert os.path.exists(path), "no trace written:\n" + out[-4000:]
    with open(path) as f:
        t = json.load(f)
    subprocess.run(["rm", "-rf", d])
    return t, r.stdout, out


def events(t, cat=None, name=None, ph=None):
    return [e for e in t["traceEvents"] if (cat is None or e.get("cat") == cat) and
            (name is None or e.get("name") == name) and (ph is None or e.get("ph") == ph)]


def tracks(t):
    """(pid, tid) -> thread_name args."""
    return {(e["pid"], e["tid"]): e["args"] for e in events(t, name="thread_name", ph="M")}


def rank_of(t, e):
    return tracks(t)[(e["pid"], e["tid"])]["rank"]


def check_flows(t, one_host=True):
    """Every ok send has one flow to an ok recv of the same bytes on its peer;
    returns the number of flows."""
    xfers = events(t, "xfer")
    by_start = {}
    for e in xfers:
        if e["name"] == "send" and e["args"]["ok"]:
            by_start.setdefault((e["pid"], e["tid"], e["ts"]), []).append(e)
    by_end = {}
    for e in xfers:
        if e["name"] == "recv" and e["args"]["ok"]:
            by_end.setdefault((e["pid"], e["tid"], round(e["ts"] + e["dur"], 3)), []).append(e)
    s = {e["id"]: e for e in events(t, "flow", ph="s")}
    f = {e["id"]: e for e in events(t, "flow", ph="f")}
    assert set(s) == set(f), "flows without both ends"
    for i, fs in s.items():
        ff = f[i]
        assert ff["bp"] == "e"
        sends = by_start.get((fs["pid"], fs["tid"], fs["ts"]))
        recvs = by_end.get((ff["pid"], ff["tid"], ff["ts"]))
        assert sends and recvs, "flow %s does not start at a send and end at a receive" % i
        assert any(a["args"]["bytes"] == b["args"]["bytes"] for a in sends for b in recvs), "flow %s: bytes differ" % i
        assert rank_of(t, fs) == recvs[0]["args"]["peer"] and rank_of(t, ff) == sends[0]["args"]["peer"]
        # a send's flow never ends before it starts (one host: one clock; else aligned)
        assert ff["ts"] >= fs["ts"], "flow %s ends %.3f us before it starts" % (i, fs["ts"] - ff["ts"])
    nsend = sum(1 for e in xfers if e["name"] == "send" and e["args"]["ok"])
    assert len(s) == nsend, "%d ok sends, %d flows" % (nsend, len(s))
    return len(s)


def said_counts(stdout):
    """rank -> (sent, sent bytes, received, received bytes) as trace_job printed them."""
    got = {}
    for m in re.finditer(r"rank (\d+): sent (\d+) messages \((\d+) bytes\), received (\d+) \((\d+)\)", stdout):
        got[int(m.group(1))] = tuple(int(x) for x in m.group(2, 3, 4, 5))
    return got


def test_trace_counts_match_the_program():
    t, stdout, out = traced([JOB, "-m", "5", "-s", "4096"], 4)
    said = said_counts(stdout)
    assert len(said) == 4, out[-4000:]
    for rank, (ns, bs, nr, br) in said.items():
        mine = [e for e in events(t, "xfer") if rank_of(t, e) == rank]
        sends = [e for e in mine if e["name"] == "send" and e["args"]["ok"]]
        recvs = [e for e in mine if e["name"] == "recv" and e["args"]["ok"]]
        assert (len(sends), sum(e["args"]["bytes"] for e in sends)) == (ns, bs)
        assert (len(recvs), sum(e["args"]["bytes"] for e in recvs)) == (nr, br)
        # each comm connected, with a span per state before it
        conns = [e for e in events(t, "connect", "connect") if rank_of(t, e) == rank]
        assert len(conns) == 6 and all(e["args"]["result"] == "CONNECTED" for e in conns)
        assert len({e["args"]["comm"] for e in conns}) == 6
        assert all(e["args"]["path"] == "sm" for e in conns)
    assert check_flows(t) == sum(v[0] for v in said.values())
    assert t["otherData"]["drops"] == []
    assert t["otherData"]["clock"] == "one host"
    launch = {e["name"] for e in events(t, "launch")}
    assert {"agents started", "hello", "daemons up", "job sent", "ranks spawned", "job ran", "spawn"} <= launch
    assert len(events(t, "launch", "spawn")) == 4
    procs = t["otherData"]["processes"]
    assert sorted(p["rank"] for p in procs if p["kind"] == "rank") == [0, 1, 2, 3]
    assert all(p["exited"] == "code 0" for p in procs if p["kind"] == "rank")


def test_trace_pairwise_example():
    pairwise = os.path.join(BUILD, "examples", "pairwise")
    t, stdout, out = traced([pairwise], 4)
    conns = events(t, "connect", "connect")
    assert len(conns) == 24 and all(e["args"]["result"] == "CONNECTED" for e in conns), out[-2000:]
    assert check_flows(t) > 2000
    assert t["otherData"]["drops"] == [], "the default buffer holds a pairwise run whole"
    kv = events(t, "kv")
    assert kv and all(e["args"]["ok"] for e in kv)


ASRTRACE = os.path.join(BUILD, "bin", "asrtrace")


def test_trace_summary_matches_known_latencies():
    # rank 1 sends message i DELAY * (i + 1) after rank 0 posted all its
    # receives: each receive takes at least that, and at most what rank 0
    # measured around its own calls
    delay_ms, n = 20, 5
    t, stdout, out = traced([JOB, "-E", "-m", str(n), "-d", str(delay_ms)], 2)
    app = [float(m.group(2)) for m in re.finditer(r"delayed (\d+) ([0-9.]+)", stdout)]
    assert len(app) == n, out[-4000:]
    recvs = sorted(e["dur"] for e in events(t, "xfer", "recv") if rank_of(t, e) == 0)
    assert len(recvs) == n
    for i, (trace_us, app_us) in enumerate(zip(recvs, app)):
        assert delay_ms * 1000 * (i + 1) <= trace_us <= app_us, (i, trace_us, app_us)
    with tempfile.NamedTemporaryFile("w", suffix=".json") as f:
        json.dump(t, f)
        f.flush()
        r = subprocess.run([ASRTRACE, "summary", f.name, "--json"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout)
    row = [p for p in s["peers"] if p["rank"] == 0 and p["peer"] == 1 and p["kind"] == "recv"]
    assert len(row) == 1 and row[0]["msgs"] == n and row[0]["bytes"] == 8 * n, row
    # nearest rank: p50 is the 3rd of 5, p99 and max the 5th
    assert row[0]["p50_us"] == pytest.approx(recvs[2], abs=0.001)
    assert row[0]["p99_us"] == pytest.approx(recvs[4], abs=0.001)
    assert row[0]["max_us"] == pytest.approx(recvs[4], abs=0.001)
    assert s["connect_count"] == 4 and s["connect_failed"] == 0


def test_trace_plot_of_a_real_job():
    t, stdout, out = traced([JOB, "-m", "3"], 3)
    d = tempfile.mkdtemp(prefix="asrtrace-plot.")
    try:
        path = os.path.join(d, "t.json")
        with open(path, "w") as f:
            json.dump(t, f)
        for ext in ("png", "svg"):
            r = subprocess.run([ASRTRACE, "plot", path, "-o", os.path.join(d, "t." + ext)], capture_output=True,
                               text=True, timeout=120)
            if r.returncode != 0 and "matplotlib" in r.stderr:
                pytest.skip("no matplotlib for /usr/bin/python3 (apt-get install python3-matplotlib)")
            assert r.returncode == 0, r.stderr
        with open(os.path.join(d, "t.png"), "rb") as f:
            assert f.read(8) == b"\x89PNG\r\n\x1a\n"
        import xml.etree.ElementTree as ET
        assert ET.parse(os.path.join(d, "t.svg")).getroot().tag.endswith("svg")
    finally:
        subprocess.run(["rm", "-rf", d])


def test_trace_keeps_a_killed_ranks_records():
    t, stdout, out = traced([JOB, "-m", "4", "-k", "2"], 3, expect_rc=None)
    m = re.search(r"rank 1: killing itself after (\d+) sends", stdout)
    assert m, out[-4000:]
    procs = {p["rank"]: p for p in t["otherData"]["processes"] if p["kind"] == "rank"}
    assert procs[1]["exited"] == "signal 9"
    sends = [e for e in events(t, "xfer", "send") if rank_of(t, e) == 1 and e["args"]["ok"]]
    assert len(sends) == int(m.group(1)), "rank 1 completed %s sends; the trace has %d" % (m.group(1), len(sends))


def test_trace_of_a_job_ended_by_timeout():
    t, stdout, out = traced([JOB, "-m", "2", "-h", "60"], 2, expect_rc=124, extra=("--timeout", "3"))
    procs = [p for p in t["otherData"]["processes"] if p["kind"] == "rank"]
    assert len(procs) == 2 and all(p["exited"].startswith("signal") for p in procs), procs
    assert len(events(t, "xfer", "send")) > 10


def test_trace_of_a_job_ended_by_ctrl_c():
    d = tempfile.mkdtemp(prefix="asrtrace-int.")
    path = os.path.join(d, "job.json")
    try:
        # as from a terminal: SIGINT's default action, whatever this test
        # runner's (a background shell starts its jobs with SIGINT ignored,
        # which the ranks would inherit)
        p = subprocess.Popen([ASRRUN, "--timeout", "100", "--trace", path, "-n", "2", JOB, "-m", "2", "-h", "60"],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        seen = []
        for line in p.stdout:  # the ranks are connected and sending once both said so
            seen.append(line)
            if sum("connected" in x for x in seen) == 2:
                break
        p.send_signal(signal.SIGINT)
        rest, _ = p.communicate(timeout=60)
        out = "".join(seen) + rest
        assert p.returncode == 130, out[-4000:]
        with open(path) as f:
            t = json.load(f)
        procs = [x for x in t["otherData"]["processes"] if x["kind"] == "rank"]
        assert len(procs) == 2 and all(x["exited"] == "signal 2" for x in procs), procs
        assert len(events(t, "connect", "connect")) == 4
    finally:
        subprocess.run(["rm", "-rf", d])


def test_trace_buffer_wraps_and_says_so():
    # 64 records a thread: the ring wraps; the connect spans and phases do not
    t, stdout, out = traced([JOB, "-m", "2", "-h", "2"], 2, extra=("-x", "ASR_TRACE_BUF=64"))
    drops = t["otherData"]["drops"]
    assert drops and all(d["dropped"] > 0 for d in drops), drops
    said = said_counts(stdout)
    for rank in (0, 1):
        xf = [e for e in events(t, "xfer") if rank_of(t, e) == rank]
        lost = sum(d["dropped"] for d in drops if tracks(t)[(d["pid"], d["tid"])]["rank"] == rank)
        ns, _, nr, _ = said[rank]
        # what is there plus what was dropped is what was done (requests and KV requests)
        kv = [e for e in events(t, "kv") if rank_of(t, e) == rank]
        assert len(xf) + len(kv) + lost >= ns + nr
        assert all(e["args"]["bytes"] in (8, 4096) for e in xf)
    assert len(events(t, "connect", "connect")) == 4
    assert {"daemons up", "ranks spawned", "job ran"} <= {e["name"] for e in events(t, "launch")}


def test_trace_refuses_an_unwritable_file():
    r = subprocess.run([ASRRUN, "--trace", "/nonexistent-dir/x.json", "-n", "1", "/bin/true"], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 2 and "--trace /nonexistent-dir/x.json: cannot write in /nonexistent-dir" in r.stderr


def test_trace_dir_without_a_launcher_merged():
    ring = os.path.join(BUILD, "tests", "apps", "ring")
    d = tempfile.mkdtemp(prefix="asrtrace-dir.")
    try:
        r = subprocess.run([ring, "-n", "3", "-k", "12", "-q"], capture_output=True, text=True, timeout=120,
                           env=dict(os.environ, ASR_TRACE=d))
        assert r.returncode == 0, r.stdout + r.stderr
        assert len(glob.glob(os.path.join(d, "*.trc"))) == 3
        # a damaged file is named and left out; the rest merge
        with open(os.path.join(d, "junk.trc"), "wb") as f:
            f.write(b"ASRTRC1\0" + b"\xff" * 5000)
        out = os.path.join(d, "merged.json")
        m = subprocess.run([MERGE, d, "-o", out], capture_output=True, text=True, timeout=60)
        assert m.returncode == 1 and "junk.trc" in m.stderr, m.stderr
        with open(out) as f:
            t = json.load(f)
        assert t["otherData"]["clock"] == "one host"
        assert len(t["otherData"]["processes"]) == 3
        names = {a["name"] for a in tracks(t).values()}
        assert {"process 0", "process 1", "process 2"} <= names, names
        assert check_flows(t) == 3 * 12
    finally:
        subprocess.run(["rm", "-rf", d])


def test_trace_merge_errors():
    d = tempfile.mkdtemp(prefix="asrtrace-empty.")
    try:
        m = subprocess.run([MERGE, d, "-o", os.path.join(d, "x.json")], capture_output=True, text=True)
        assert m.returncode == 2 and "holds no trace files" in m.stderr
        m = subprocess.run([MERGE, d], capture_output=True, text=True)
        assert m.returncode == 2 and "usage" in m.stderr
    finally:
        subprocess.run(["rm", "-rf", d])
