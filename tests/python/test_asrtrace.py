"""Tests of asrtrace (launcher/trace/asrtrace.in, built as BUILD/bin/asrtrace)
on synthetic trace files written here after doc/trace.md: two hosts, four
ranks, known latencies, connects, stashes, failures and drops. Checks the
summary's numbers exactly (--json), its text, every error's one line and
exit status 2, merge's hand-over to the merger, and that plot writes a
valid PNG and SVG (SKIP lines without matplotlib: scripts/deps.sh --test
installs python3-matplotlib)."""
import json
import os
import struct
import subprocess
import time
import xml.etree.ElementTree as ET

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
BUILD = os.environ.get("ASR_BUILDDIR") or os.path.join(HERE, "..", "..", "build")
ASRTRACE = os.path.join(BUILD, "bin", "asrtrace")
PYTHON = "/usr/bin/python3"  # Debian's, whatever python3 comes first on PATH



@pytest.fixture(autouse=True)
def built():
    # make builds it with everything else: missing, it is a failure, not a skip
    assert os.access(ASRTRACE, os.X_OK), "no %s (make builds it from launcher/trace/asrtrace.in)" % ASRTRACE


def have_matplotlib():
    return subprocess.run([PYTHON, "-c", "import matplotlib"], capture_output=True).returncode == 0


needs_mpl = pytest.mark.skipif(not have_matplotlib(),
                               reason="no matplotlib for %s (scripts/deps.sh --test installs python3-matplotlib)"
                               % PYTHON)


def run(*args, timeout=120):
    r = subprocess.run([ASRTRACE, *args], capture_output=True, text=True, timeout=timeout)
    return r.returncode, r.stdout, r.stderr


# --- a synthetic trace ----------------------------------------------------------------------

H0, H1 = 1, 2  # pids: the hosts


def track(rank, lnc=None):
    """doc/trace.md's tid of a rank's process track (lnc None) or LNC track."""
    return 1000 * (rank + 1) + (0 if lnc is None else 1 + lnc)


def meta(pid, tid, name, rank, lnc):
    return {"name": "thread_name", "ph": "M", "ts": 0, "pid": pid, "tid": tid,
            "args": {"name": name, "rank": rank, "lnc": lnc}}


def X(cat, name, ts, dur, pid, tid, **args):
    return {"name": name, "cat": cat, "ph": "X", "ts": round(ts, 3), "dur": round(dur, 3), "pid": pid, "tid": tid,
            "args": args}


def xfer(kind, ts, dur, pid, rank, peer, comm, seq, nbytes=4096, stashed=0, ok=True):
    return X("xfer", kind, ts, dur, pid, track(rank, 0), comm=comm, peer=peer, peer_lnc=0, bytes=nbytes,
             path="tcp;ofi_rxm", seq=seq, stashed_us=stashed, ok=ok)


def trace_object(n_large=0):
    ev = [
        {"name": "process_name", "ph": "M", "ts": 0, "pid": H0, "tid": 0, "args": {"name": "h0"}},
        {"name": "process_name", "ph": "M", "ts": 0, "pid": H1, "tid": 0, "args": {"name": "h1"}},
        {"name": "process_sort_index", "ph": "M", "ts": 0, "pid": H0, "tid": 0, "args": {"sort_index": 0}},
        {"name": "process_sort_index", "ph": "M", "ts": 0, "pid": H1, "tid": 0, "args": {"sort_index": 1}},
        meta(H0, 0, "asrrun", -1, -1),
        meta(H0, 1, "asrd", -1, -1),
        meta(H1, 1, "asrd", -1, -1),
    ]
    for rank, pid in ((0, H0), (1, H0), (2, H1), (3, H1)):
        ev.append(meta(pid, track(rank), "rank %d" % rank, rank, -1))
        ev.append(meta(pid, track(rank, 0), "rank %d lnc 0" % rank, rank, 0))
    # (a) the launch: asrrun's phases, a hello per daemon, asrd's spawns, a fence
    ev += [
        X("launch", "agents started", 0, 1200.5, H0, 0, hosts=2),
        X("launch", "hello", 100, 2000, H0, 0, host="h1"),
        X("launch", "daemons up", 1200.5, 2500, H0, 0, hosts=2),
        X("launch", "job sent", 3700.5, 300, H0, 0, hosts=2),
        X("launch", "spawn", 4100, 800, H0, 1, rank=0, os_pid=4242),
        X("launch", "spawn", 4150, 900, H1, 1, rank=2, os_pid=5252),
        X("pmix", "fence", 6000, 1500.25, H1, 1, ranks=2, bytes=512),
        X("launch", "ranks spawned", 4000, 2000, H0, 0, hosts=2),
    ]
    # (c) connects: 0 -> 2 (12 ms), 2 <- 0 (9 ms), 1 -> 3 failed (30 ms); two states of 0's
    c02, c20, c13 = "r0.l0.s.2.l0.0", "r2.l0.r.0.l0.0", "r1.l0.s.3.l0.0"
    ev += [
        X("connect", "connect", 10000, 12000, H0, track(0, 0), comm=c02, type="send", peer=2, peer_lnc=0,
          ordinal=0, result="CONNECTED", path="tcp;ofi_rxm"),
        X("connect", "WAIT_FOR_HOSTNAME", 10000, 3000, H0, track(0, 0), comm=c02),
        X("connect", "NET_CONNECT", 13000, 8000, H0, track(0, 0), comm=c02),
        X("connect", "connect", 11000, 9000, H1, track(2, 0), comm=c20, type="recv", peer=0, peer_lnc=0,
          ordinal=0, result="CONNECTED", path="tcp;ofi_rxm"),
        X("connect", "connect", 10500, 30000, H0, track(1, 0), comm=c13, type="send", peer=3, peer_lnc=0,
          ordinal=0, result="CONNECTION_ERROR", path=""),
    ]
    # (b) 0 -> 2: ten sends of 1..10 ms (the 3rd stashed 250.5 us, its stash
    # span there too), one failed send of 50 ms; 2 <- 0: ten receives of
    # 1.5..10.5 ms, each the end of a flow from its send
    for k in range(1, 11):
        ts = 30000 + 20000 * k
        ev.append(xfer("send", ts, 1000 * k, H0, 0, 2, c02, k, stashed=250.5 if k == 3 else 0))
        ev.append(xfer("recv", ts + 1, 1000 * k + 500, H1, 2, 0, c20, k))
        ev.append({"name": "msg", "cat": "flow", "ph": "s", "id": k, "ts": ts, "pid": H0, "tid": track(0, 0)})
        ev.append({"name": "msg", "cat": "flow", "ph": "f", "bp": "e", "id": k, "ts": ts + 1 + 1000 * k + 500,
                   "pid": H1, "tid": track(2, 0)})
    ev.append(X("stash", "stashed", 90000, 250.5, H0, track(0, 0), comm=c02, seq=3))
    ev.append(xfer("send", 300000, 50000, H0, 0, 2, c02, 11, ok=False))
    # 1 -> 0: 100 writes of 1..100 us; 3 <- 2: 7 reads of 10..70 us
    for k in range(1, 101):
        ev.append(xfer("write", 400000 + 200 * k, k, H0, 1, 0, "r1.l0.s.0.l0.0", k, nbytes=1 << 20))
    for k in range(1, 8):
        ev.append(xfer("read", 500000 + 100 * k, 10 * k, H1, 3, 2, "r3.l0.s.2.l0.0", k, nbytes=100))
    # a stash span of 1 -> 3 whose transfer is not in the file (dropped): counted by its comm
    ev.append(X("stash", "stashed", 40000, 100.125, H0, track(1, 0), comm=c13, seq=7))
    # failures
    ev.append({"name": "failure", "cat": "fail", "ph": "i", "s": "t", "ts": 40500, "pid": H0, "tid": track(1),
               "args": {"what": "connect to rank 3: CONNECTION_ERROR"}})
    ev.append({"name": "failure", "cat": "fail", "ph": "i", "s": "t", "ts": 600000, "pid": H1, "tid": 1,
               "args": {"what": "rank 3 killed by signal 9"}})
    # many transfers, for the large-file case
    for k in range(n_large):
        ev.append(xfer("send" if k % 2 else "recv", 700000 + k, 1 + k % 5000, H1, 3, 2, "r3.l0.s.2.l0.1", k))
    return {
        "traceEvents": ev,
        "displayTimeUnit": "ns",
        "otherData": {
            "asr_trace": 1,
            "job": "asr-1234",
            "clock": "asrrun",
            "hosts": [{"pid": H0, "name": "h0", "offset_ns": 0, "error_ns": 0},
                      {"pid": H1, "name": "h1", "offset_ns": 1500, "error_ns": 40}],
            "drops": [{"pid": H1, "tid": track(2, 0), "dropped": 12}],
            "processes": [{"pid": H0, "os_pid": 4242, "rank": 0, "kind": "rank", "exited": "code 0"},
                          {"pid": H0, "os_pid": 4243, "rank": 1, "kind": "rank", "exited": "code 0"},
                          {"pid": H1, "os_pid": 5252, "rank": 2, "kind": "rank", "exited": "code 0"},
                          {"pid": H1, "os_pid": 5253, "rank": 3, "kind": "rank", "exited": "signal 9"}],
        },
    }


@pytest.fixture
def trace(tmp_path):
    p = tmp_path / "job.json"
    p.write_text(json.dumps(trace_object()))
    return str(p)


def summary_json(path, *extra):
    rc, out, err = run("summary", path, "--json", *extra)
    assert rc == 0, err
    assert err == ""
    return json.loads(out)


# --- summary ------------------------------------------------------------------------------


def test_summary_peers(trace):
    s = summary_json(trace)
    rows = {(r["rank"], r["peer"], r["kind"]): r for r in s["peers"]}
    assert list(rows) == [(0, 2, "send"), (1, 0, "write"), (1, 3, "send"), (2, 0, "recv"), (3, 2, "read")]
    # nearest rank: of 1..10 ms, p50 the 5th, p99 the 10th; the failed 50 ms send is
    # counted, but neither in the bytes nor in the latencies
    assert rows[(0, 2, "send")] == {"rank": 0, "peer": 2, "kind": "send", "msgs": 11, "bytes": 40960, "failed": 1,
                                    "stashed": 1, "stashed_us": 250.5, "p50_us": 5000, "p99_us": 10000,
                                    "max_us": 10000}
    assert rows[(2, 0, "recv")]["msgs"] == 10
    assert (rows[(2, 0, "recv")]["p50_us"], rows[(2, 0, "recv")]["p99_us"], rows[(2, 0, "recv")]["max_us"]) == \
        (5500, 10500, 10500)
    # of 1..100 us: the 50th and the 99th; of 10..70 us: ceil(3.5) = 4th, ceil(6.93) = 7th
    w = rows[(1, 0, "write")]
    assert (w["msgs"], w["bytes"], w["p50_us"], w["p99_us"], w["max_us"]) == (100, 100 << 20, 50, 99, 100)
    r = rows[(3, 2, "read")]
    assert (r["msgs"], r["bytes"], r["p50_us"], r["p99_us"], r["max_us"]) == (7, 700, 40, 70, 70)
    # the stash whose transfer was dropped: counted for its comm's rank, peer and kind
    o = rows[(1, 3, "send")]
    assert (o["msgs"], o["stashed"], o["stashed_us"], o["p50_us"], o["max_us"]) == (0, 1, 100.125, None, None)
    assert s["stash_without_xfer"] == 1


def test_summary_launch_connects_drops_clock(trace):
    s = summary_json(trace)
    assert (s["job"], s["clock"], s["format"]) == ("asr-1234", "asrrun", 1)
    launch = [(l["name"], l["host"], l["start_ms"], l["dur_ms"]) for l in s["launch"]]
    assert launch == [("agents started", "h0", 0.0, 1.2005), ("hello", "h0", 0.1, 2.0),
                      ("daemons up", "h0", 1.2005, 2.5), ("job sent", "h0", 3.7005, 0.3),
                      ("ranks spawned", "h0", 4.0, 2.0), ("spawn", "h0", 4.1, 0.8), ("spawn", "h1", 4.15, 0.9),
                      ("fence", "h1", 6.0, 1.50025)]
    assert s["launch"][1]["args"] == {"host": "h1"}
    assert s["launch"][-1]["args"] == {"ranks": 2, "bytes": 512}
    assert (s["connect_count"], s["connect_failed"]) == (3, 1)
    assert s["connect_stats_ms"] == {"p50": 12.0, "p99": 30.0, "max": 30.0}
    assert [(c["comm"], c["type"], c["rank"], c["peer"], c["host"], c["dur_ms"], c["result"], c["path"])
            for c in s["connects"]] == [
        ("r1.l0.s.3.l0.0", "send", 1, 3, "h0", 30.0, "CONNECTION_ERROR", ""),
        ("r0.l0.s.2.l0.0", "send", 0, 2, "h0", 12.0, "CONNECTED", "tcp;ofi_rxm"),
        ("r2.l0.r.0.l0.0", "recv", 2, 0, "h1", 9.0, "CONNECTED", "tcp;ofi_rxm")]
    assert s["connect_states"] == [{"state": "NET_CONNECT", "count": 1, "total_ms": 8.0, "max_ms": 8.0},
                                   {"state": "WAIT_FOR_HOSTNAME", "count": 1, "total_ms": 3.0, "max_ms": 3.0}]
    assert [(f["ts_ms"], f["host"], f["track"]) for f in s["failures"]] == [(40.5, "h0", "rank 1"),
                                                                          (600.0, "h1", "asrd")]
    assert s["drops"] == [{"host": "h1", "track": "rank 2 lnc 0", "pid": 2, "tid": 3001, "dropped": 12}]
    assert s["dropped"] == 12
    assert s["hosts"][1] == {"pid": 2, "name": "h1", "offset_ns": 1500, "error_ns": 40}


def test_summary_top(trace):
    s = summary_json(trace, "--top", "1")
    assert [c["comm"] for c in s["connects"]] == ["r1.l0.s.3.l0.0"]
    assert s["connect_count"] == 3  # the counts are of all
    assert len(summary_json(trace, "--top", "0")["connects"]) == 3


def test_summary_text(trace):
    rc, out, err = run("summary", trace)
    assert rc == 0 and err == "", err
    lines = out.splitlines()

    def row(*first):
        got = [l.split() for l in lines if l.split()[:len(first)] == list(first)]
        assert len(got) == 1, (first, out)
        return got[0]

    # rank peer kind msgs bytes p50 p99 max stashed stashed-us failed
    assert row("0", "2", "send") == ["0", "2", "send", "11", "40960", "5000.0", "10000.0", "10000.0", "1", "250.5",
                                     "1"]
    assert row("1", "0", "write")[5:8] == ["50.0", "99.0", "100.0"]
    assert row("agents", "started")[2:6] == ["h0", "asrrun", "0.000", "1.200"]
    assert row("r1.l0.s.3.l0.0")[-2:] == ["CONNECTION_ERROR", "-"]
    assert "connects: 3, 1 failed; ms p50 12.000 p99 30.000 max 30.000" in out
    assert "drops: 12 records lost" in out
    assert row("2", "h1", "1500", "40")
    assert "clock: asrrun" in out
    assert "processes: 4, 1 ended otherwise than with code 0: rank 3 (signal 9)" in out
    assert "failures: 2" in out


def test_summary_of_an_empty_trace(tmp_path):
    p = tmp_path / "empty.json"
    p.write_text(json.dumps({"traceEvents": [], "otherData": {"asr_trace": 1, "job": "", "clock": "one host"}}))
    rc, out, err = run("summary", str(p))
    assert rc == 0 and err == "", err
    assert "drops: none" in out and "connects: 0, 0 failed" in out
    s = summary_json(str(p))
    assert (s["peers"], s["connects"], s["launch"], s["connect_stats_ms"]) == ([], [], [], None)


def test_unknown_events_are_passed_over(tmp_path):
    # doc/trace.md, "Reading it": within a version, new categories, names and args are read past
    t = trace_object()
    t["traceEvents"] += [X("future", "thing", 5, 1, H0, track(0, 0), shape=[1, 2]),
                         {"name": "counter", "cat": "future", "ph": "C", "ts": 7, "pid": H0, "tid": 0,
                          "args": {"v": 3}},
                         X("xfer", "send", 9, 1000, H0, track(0, 0), peer=2, new_arg={"x": 1})]
    s = summary_json(write(tmp_path, "future.json", t))
    row = [r for r in s["peers"] if (r["rank"], r["peer"], r["kind"]) == (0, 2, "send")][0]
    assert (row["msgs"], row["p50_us"]) == (12, 5000)  # the new 1 ms send counted as any other
    if have_matplotlib():
        rc, _, err = run("plot", str(tmp_path / "future.json"), "-o", str(tmp_path / "future.png"))
        assert rc == 0 and err == "", err


def test_summary_through_a_closed_pipe(trace):
    # asrtrace summary FILE | head -1: no traceback when the reader goes away
    r = subprocess.run("%s summary %s | head -1" % (ASRTRACE, trace), shell=True, capture_output=True, text=True)
    assert r.stdout.startswith("trace ") and r.stderr == "", r.stderr


# --- errors: one line, exit status 2 --------------------------------------------------------


def one_line_error(args, want):
    rc, out, err = run(*args)
    assert rc == 2, (args, rc, out, err)
    assert out == ""
    assert err.count("\n") == 1 and err.startswith("asrtrace: "), err
    assert "Traceback" not in err
    assert want in err, err
    return err


def write(tmp_path, name, content):
    p = tmp_path / name
    p.write_text(content if isinstance(content, str) else json.dumps(content))
    return str(p)


def bad_event_trace(**change):
    t = trace_object()
    t["traceEvents"].append(dict({"name": "send", "cat": "xfer", "ph": "X", "ts": 1, "dur": 2, "pid": 1,
                                  "tid": 1001, "args": {"peer": 2}}, **change))
    return t


@pytest.mark.parametrize("case,content,want", [
    ("not_json", "{ not json", "is not JSON"),
    ("binary", None, "is not JSON"),
    ("array_format", [{"name": "x", "ph": "X", "ts": 0, "dur": 1, "pid": 1, "tid": 1}], "is not an asr trace"),
    ("no_asr_trace", {"traceEvents": [], "otherData": {"job": "x"}}, "no otherData.asr_trace"),
    ("no_other_data", {"traceEvents": []}, "no otherData.asr_trace"),
    ("version_2", {"traceEvents": [], "otherData": {"asr_trace": 2}}, "format version 2"),
    ("events_not_list", {"traceEvents": {}, "otherData": {"asr_trace": 1}}, "traceEvents is not a list"),
    ("event_without_ts", bad_event_trace(ts=None), "has no number ts"),
    ("x_without_dur", bad_event_trace(dur="1"), "without a number dur"),
    ("bad_arg", bad_event_trace(args={"peer": "two"}), "args.peer is not an integer"),
    ("bad_drops", {"traceEvents": [], "otherData": {"asr_trace": 1, "drops": [{"dropped": "x"}]}},
     "otherData.drops[0].dropped"),
])
def test_bad_file(tmp_path, case, content, want):
    if content is None:
        p = tmp_path / "bin.json"
        p.write_bytes(b"\xff\xfe\x00garbage")
        path = str(p)
    else:
        path = write(tmp_path, case + ".json", content)
    err = one_line_error(["summary", path], want)
    assert path in err
    if case not in ("binary",) and have_matplotlib():
        one_line_error(["plot", path, "-o", str(tmp_path / "x.png")], want)


def test_missing_file(tmp_path):
    one_line_error(["summary", str(tmp_path / "nope.json")], "No such file or directory")
    one_line_error(["summary", str(tmp_path)], "cannot read")  # a directory


@pytest.mark.parametrize("args,want", [
    ([], "no command"),
    (["bogus"], "invalid choice"),
    (["summary"], "required: FILE"),
    (["summary", "x.json", "--top", "-1"], "--top -1"),
    (["summary", "x.json", "--top", "many"], "invalid int value"),
    (["summary", "x.json", "--bogus"], "unrecognized arguments"),
    (["plot", "x.json"], "required: -o"),
    (["plot", "x.json", "-o", "out.jpg"], "name a .png or .svg file"),
    (["plot", "x.json", "-o", "out"], "name a .png or .svg file"),
    (["plot", "x.json", "-o", "a.png", "--flows", "-2"], "--flows -2"),
    (["merge", "somedir"], "required: -o"),
])
def test_bad_command_line(args, want):
    one_line_error(args, want)


def test_help_and_version():
    rc, out, _ = run("--version")
    assert rc == 0 and out.startswith("asrtrace (asr) ")
    for cmd in ([], ["merge"], ["summary"], ["plot"]):
        rc, out, _ = run(*cmd, "--help")
        assert rc == 0 and out.startswith("usage: asrtrace")


def test_man_page_names_every_option():
    page = os.path.join(BUILD, "doc", "asrtrace.1")
    if not os.path.isfile(page):
        pytest.skip("no %s (make builds it)" % page)
    text = open(page).read().replace("\\-", "-")
    for cmd in ("merge", "summary", "plot"):
        assert ("asrtrace %s" % cmd) in text
        _, out, _ = run(cmd, "--help")
        for word in out.split():
            if word.startswith("--") and word.rstrip(",") != "--help":
                assert word.rstrip(",") in text, "asrtrace(1) does not name %s %s" % (cmd, word)


# --- merge: the C merger's front --------------------------------------------------------------


def private_asrtrace(tmp_path, merger_body=None):
    """A copy of asrtrace in TMP/bin whose install-time merger is TMP/libexec/asr-trace-merge
    (absent); when merger_body is given, TMP is a build tree with a stand-in merger at
    TMP/launcher/trace/asr-trace-merge."""
    (tmp_path / "bin").mkdir()
    src = open(ASRTRACE).read()
    lines = [('PKGLIBEXECDIR = "%s"' % (tmp_path / "libexec")) if l.startswith("PKGLIBEXECDIR = ") else l
             for l in src.splitlines()]
    exe = tmp_path / "bin" / "asrtrace"
    exe.write_text("\n".join(lines) + "\n")
    exe.chmod(0o755)
    if merger_body is not None:
        (tmp_path / "config.status").write_text("")  # what makes TMP a build tree
        d = tmp_path / "launcher" / "trace"
        d.mkdir(parents=True)
        (d / "asr-trace-merge").write_text("#!/bin/sh\n" + merger_body)
        (d / "asr-trace-merge").chmod(0o755)
    return str(exe)


def test_merge_without_merger(tmp_path):
    exe = private_asrtrace(tmp_path)
    (tmp_path / "in").mkdir()
    r = subprocess.run([exe, "merge", str(tmp_path / "in"), "-o", str(tmp_path / "out.json")], capture_output=True,
                       text=True)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.count("\n") == 1 and "asr-trace-merge is not installed" in r.stderr, r.stderr
    assert str(tmp_path / "libexec" / "asr-trace-merge") in r.stderr


def test_merge_runs_the_merger(tmp_path):
    exe = private_asrtrace(tmp_path, 'echo "merger: $*"; exit 7\n')
    (tmp_path / "in").mkdir()
    r = subprocess.run([exe, "merge", str(tmp_path / "in"), "-o", "out.json"], capture_output=True, text=True)
    assert r.returncode == 7, r.stderr  # the merger's own status
    assert r.stdout == "merger: %s -o out.json\n" % (tmp_path / "in")


def test_merge_of_no_directory(tmp_path):
    one_line_error(["merge", str(tmp_path / "none"), "-o", str(tmp_path / "o.json")], "is not a directory")


# --- plot ------------------------------------------------------------------------------------


def png_size(path):
    with open(path, "rb") as f:
        head = f.read(33)
    assert head[:8] == b"\x89PNG\r\n\x1a\n", head[:8]
    length, kind = struct.unpack(">I4s", head[8:16])
    assert (length, kind) == (13, b"IHDR")
    return struct.unpack(">II", head[16:24])


@needs_mpl
def test_plot_png(trace, tmp_path):
    out = str(tmp_path / "timeline.png")
    rc, so, err = run("plot", trace, "-o", out)
    assert rc == 0 and err == "", err
    w, h = png_size(out)
    assert w > 100 and h > 100


@needs_mpl
def test_plot_svg(trace, tmp_path):
    out = str(tmp_path / "timeline.SVG")  # the extension in any case
    rc, so, err = run("plot", trace, "-o", out, "--flows", "3")
    assert rc == 0 and err == "", err
    root = ET.parse(out).getroot()
    assert root.tag.endswith("}svg") or root.tag == "svg", root.tag


@needs_mpl
def test_plot_empty_trace(tmp_path):
    p = write(tmp_path, "e.json", {"traceEvents": [], "otherData": {"asr_trace": 1}})
    rc, _, err = run("plot", p, "-o", str(tmp_path / "e.png"))
    assert rc == 0 and err == "", err
    png_size(str(tmp_path / "e.png"))


@needs_mpl
def test_plot_unwritable_output(trace, tmp_path):
    one_line_error(["plot", trace, "-o", str(tmp_path / "no" / "dir" / "x.png")], "cannot write")


@needs_mpl
def test_plot_and_summary_of_a_large_trace(tmp_path):
    # 100,000 transfers: drawn as one collection per category, not an artist each
    p = write(tmp_path, "large.json", trace_object(n_large=100000))
    t0 = time.monotonic()
    rc, _, err = run("plot", p, "-o", str(tmp_path / "large.png"), timeout=300)
    took = time.monotonic() - t0
    assert rc == 0 and err == "", err
    png_size(str(tmp_path / "large.png"))
    s = summary_json(p)
    big = [r for r in s["peers"] if r["rank"] == 3 and r["peer"] == 2 and r["kind"] in ("send", "recv")]
    assert sum(r["msgs"] for r in big) == 100000
    print("plot of 100,000 transfers: %.1f s" % took)
