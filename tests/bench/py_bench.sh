#!/usr/bin/env bash
# py_bench.sh -- the Python module against the C API, in the same run:
# tests/bench/pingpong.py beside tests/apps/pingpong (the same pattern, two
# processes on one host over libasr), REPS interleaved runs of each, and a
# table of the medians: one-way latency 1 B - 4 MiB, and bandwidth at 1 MiB
# (window of 64), with Python's ratio to C (and its latency above C).
#   tests/bench/py_bench.sh BUILD_DIR
# Knobs: REPS (5), ITERS (1000), PROVIDER (shm).
set -euo pipefail
build=$(cd "${1:?usage: tests/bench/py_bench.sh BUILD_DIR}" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
py=/usr/bin/python3
REPS=${REPS:-5} ITERS=${ITERS:-1000} PROVIDER=${PROVIDER:-shm}
ls "$build"/python/asr.*so >/dev/null 2>&1 || { echo "py_bench: the module was not built in $build" >&2; exit 77; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
port_base=$((20000 + RANDOM % 20000))
next_port=$port_base
pair() { # label unused command... (each pair gets a port of its own)
  local label=$1 port=$((next_port++)); shift 2
  ASR_BOOTSTRAP_PORT=$port ASR_PROVIDER=$PROVIDER ASR_KV_LOCK_DIR=$out PYTHONPATH=$build/python \
    "$@" -l 1 -p 0 -r 1 >/dev/null &
  local p1=$!
  ASR_BOOTSTRAP_PORT=$port ASR_PROVIDER=$PROVIDER ASR_KV_LOCK_DIR=$out PYTHONPATH=$build/python \
    "$@" -l 0 -p 1 -r 0 >>"$out/$label"
  wait $p1
}
for ((i = 0; i < REPS; i++)); do
  for side in c py; do
    port=$((port_base + 2 * i)); [ $side = py ] && port=$((port + 1))
    if [ $side = c ]; then
      pair c $port "$build/tests/apps/pingpong" -n "$ITERS" -m lat
      pair c $((port + 1000)) "$build/tests/apps/pingpong" -n "$ITERS" -m bw -s 1048576 -S 1048576
    else
      pair py $port $py "$here/pingpong.py" -n "$ITERS" -m lat
      pair py $((port + 1000)) $py "$here/pingpong.py" -n "$ITERS" -m bw -s 1048576 -S 1048576
    fi
  done
done
$py - "$out/c" "$out/py" "$REPS" "$PROVIDER" <<'PY'
import statistics, sys
def load(f):
    d = {}
    for line in open(f):
        k, s, v = line.split()
        d.setdefault((k, int(s)), []).append(float(v))
    return {k: statistics.median(v) for k, v in d.items()}
c, p = load(sys.argv[1]), load(sys.argv[2])
print("Python module vs C, %s, medians of %s runs (one-way latency in us, bandwidth in MB/s)" % (sys.argv[4], sys.argv[3]))
print("%-4s %9s %10s %10s %8s %9s" % ("", "size", "C", "Python", "ratio", "Py - C"))
met = []
for k in sorted(c):
    if k in p:
        ratio = p[k] / c[k]
        diff = "%+.3f" % (p[k] - c[k]) if k[0] == "lat" else ""
        print("%-4s %9d %10.3f %10.3f %7.3fx %9s" % (k[0], k[1], c[k], p[k], ratio, diff))
        if k[1] >= 1 << 20:  # Python at least 0.95x C's speed
            met.append(("%s %d B" % k, (c[k] / p[k] if k[0] == "lat" else ratio) >= 0.95))
        elif k[0] == "lat" and k[1] <= 4096:
            met.append(("lat %d B (+1 us)" % k[1], p[k] - c[k] <= 1.0))
bad = [n for n, ok in met if not ok]
print("goal (>= 1 MiB: at least 0.95x C's speed; up to 4 KiB: at most 1 us above C): %s" %
      ("met" if not bad else "not met at " + ", ".join(bad)))
print("(load average: %s)" % open("/proc/loadavg").read().strip())
PY
