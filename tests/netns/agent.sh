#!/bin/sh
# tests/netns/agent.sh PREFIX PER HOST COMMAND... -- the launch agent of the
# emulated hosts of lib.sh's netns_setup_many: runs COMMAND (asrd and its
# arguments) in HOST's namespace with --addr HOST's own address, as ssh
# would run it on HOST. HOST is PREFIX eJ; its namespace and address follow
# from J and PER (PER hosts to a namespace), as lib.sh lays them out.
prefix=$1 per=$2 host=$3
shift 3
j=${host#"${prefix}e"}
case $j in '' | *[!0-9]*) echo "agent.sh: '$host' is not an emulated host of $prefix" >&2; exit 255 ;; esac
k=$(((j - 1) / per + 1)) s=$(((j - 1) % per + 1))
exec ip netns exec "${prefix}n$k" "$@" --addr "198.19.$k.$s"
