#!/usr/bin/env bash
# Installs, with apt, whatever this project needs that is missing on a Debian
# bookworm machine (run as root). Installs nothing when all is present.
#   scripts/deps.sh          what the quick start needs (build and run)
#   scripts/deps.sh --test   that and what the test suite needs on top: groff
#                            (test_docs renders the man pages), Open MPI and
#                            MPICH (test_mpi, launch_bench), the Python
#                            module's headers, numpy, pytest and torch, UCX's
#                            ucx_perftest (rma_bench's UCX column),
#                            matplotlib (asrtrace plot's tests),
#                            prometheus_client (test_metrics.py)
#                            (about 180 packages more; scripts/test.sh)
set -euo pipefail
pkgs=(
  build-essential autoconf automake libtool pkg-config
  libfabric-dev libfabric-bin libpmix-dev libhwloc-dev hwloc-nox libyaml-dev
  iproute2 procps clang-format valgrind
  clang libclang-rt-14-dev # tests/fuzz/run.sh: clang's libFuzzer and sanitizer runtimes
)
if [ "${1:-}" = --test ]; then
  pkgs+=(groff-base)
  # tests/integration/test_mpi: real Open MPI and MPICH programs (the two install side by
  # side: each names its binaries mpicc.openmpi, mpicc.mpich, ...; mpicc itself is an alternative)
  pkgs+=(openmpi-bin libopenmpi-dev mpich libmpich-dev)
  # ... and PMI-2 programs, against Slurm's PMI-2 client library
  pkgs+=(libpmi2-0-dev)
  # tests/integration/test_stall: --get-stack-traces's first choice, eu-stack
  pkgs+=(elfutils)
  # python/: the module is built for Debian's /usr/bin/python3 against its
  # headers; its tests (tests/python/) import numpy and torch under pytest.
  pkgs+=(python3-dev python3-numpy python3-pytest python3-torch)
  # tests/python/test_asrtrace.py: asrtrace plot draws with matplotlib
  pkgs+=(python3-matplotlib)
  # tests/python/test_metrics.py: asrrun --metrics-port scraped by a real
  # Prometheus text parser
  pkgs+=(python3-prometheus-client)
  # tests/bench/rma_bench.sh's outside column: UCX's ucx_perftest (ucp_put_lat, ucp_put_bw)
  pkgs+=(ucx-utils)
fi
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "deps: all ${#pkgs[@]} packages present"
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "deps: missing packages: ${missing[*]}" >&2
  echo "deps: run this as root (or: sudo apt-get install ${missing[*]})" >&2
  exit 1
fi
echo "deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "deps: done"
