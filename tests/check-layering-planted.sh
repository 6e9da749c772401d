#!/usr/bin/env bash
# check-layering-planted.sh -- proves that tests/check-layering.sh fails on
# each kind of violation it names, and refuses a layout it cannot read.
#
#   tests/check-layering-planted.sh
#
# It builds, in a temporary directory, a tree of object files laid out as a
# build of asr is (common/, bootstrap/, runtime/ and every launcher folder,
# one tiny module each, compiled with cc), sees the check pass on it, and
# then plants one fault at a time on a fresh copy and sees the check fail
# with the status and the words that name it: a pair of modules that use
# each other, a longer circle, each kind of use across layers (a lower
# launcher tier using a higher one, two folders of one tier, asrrun and
# asrd, runtime and launcher, bootstrap using runtime), an empty launcher
# folder, an object at launcher/'s top level and a folder without a tier.
# Prints one line per case and exits non-zero when any case went wrong.
set -uo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
check=$top/tests/check-layering.sh
cc=${CC:-cc}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0

# obj DIR STEM DEFINES [CALLS...]: compiles DIR/t-STEM.o into the current
# tree, defining function DEFINES and calling each of CALLS.
obj() {
  local dir=$1 stem=$2 def=$3 c src
  shift 3
  mkdir -p "$dir"
  src="$dir/$stem.c"
  : >"$src"
  for c in "$@"; do echo "void $c(void);" >>"$src"; done
  {
    echo "void $def(void) {"
    for c in "$@"; do echo "  $c();"; done
    echo "}"
  } >>"$src"
  "$cc" -c -o "$dir/t-$stem.o" "$src" || exit 2
  rm -f "$src"
}

# The clean layout: each layer one module, each using one below it the way
# the layers allow.
mkdir -p "$tmp/clean"
(
  cd "$tmp/clean" || exit 2
  obj common c_util c_util
  obj bootstrap b_kv b_kv c_util
  obj runtime r_comm r_comm b_kv
  obj launcher/config l_config l_config c_util
  obj launcher/ctl l_ctl l_ctl b_kv
  obj launcher/trace l_trace l_trace c_util
  obj launcher/metrics l_metrics l_metrics c_util
  obj launcher/place l_place l_place l_config
  obj launcher/launch l_launch l_launch l_config
  obj launcher/tree l_tree l_tree l_ctl
  obj launcher/asrrun l_asrrun l_asrrun l_tree l_place
  obj launcher/asrd l_asrd l_asrd l_tree l_launch
  obj launcher/asrd/pmi l_pmi l_pmi l_asrd l_ctl
)

# case NAME STATUS WORDS SETUP: copies the clean tree, runs SETUP in it,
# and expects the check to exit STATUS with WORDS in what it printed.
case_() {
  local name=$1 want=$2 words=$3 setup=$4 out rc
  rm -rf "$tmp/case"
  cp -r "$tmp/clean" "$tmp/case"
  (cd "$tmp/case" && eval "$setup") || { echo "FAIL: layering-planted/$name (setup)"; fails=$((fails + 1)); return; }
  out=$("$check" "$tmp/case" 2>&1)
  rc=$?
  if [ "$rc" -ne "$want" ] || ! grep -qF -- "$words" <<<"$out"; then
    echo "FAIL: layering-planted/$name: exit $rc (want $want), output:"
    sed 's/^/    /' <<<"$out"
    fails=$((fails + 1))
  else
    echo "PASS: layering-planted/$name"
  fi
}

case_ clean 0 "no circles" ":"
case_ pair 1 "circle: launcher/place/p1 <-> launcher/place/p2" \
  "obj launcher/place p1 p1 p2; obj launcher/place p2 p2 p1"
case_ longer 1 "circle through 3 modules" \
  "obj launcher/launch a1 a1 a2; obj launcher/launch a2 a2 a3; obj launcher/launch a3 a3 a1"
case_ lower_uses_higher 1 "layer: launcher/config/l_config2 (launcher/config) uses launcher/place/l_place" \
  "obj launcher/config l_config2 l_config2 l_place"
case_ bottom_tier_apart 1 "layer: launcher/ctl/l_ctl2 (launcher/ctl) uses launcher/config/l_config" \
  "obj launcher/ctl l_ctl2 l_ctl2 l_config"
case_ middle_tier_apart 1 "layer: launcher/place/l_place2 (launcher/place) uses launcher/launch/l_launch" \
  "obj launcher/place l_place2 l_place2 l_launch"
case_ asrrun_uses_asrd 1 "layer: launcher/asrrun/l_asrrun2 (launcher/asrrun) uses launcher/asrd/pmi/l_pmi" \
  "obj launcher/asrrun l_asrrun2 l_asrrun2 l_pmi"
case_ asrd_uses_asrrun 1 "layer: launcher/asrd/l_asrd2 (launcher/asrd) uses launcher/asrrun/l_asrrun" \
  "obj launcher/asrd l_asrd2 l_asrd2 l_asrrun"
case_ runtime_uses_launcher 1 "layer: runtime/r_comm2 (runtime) uses launcher/ctl/l_ctl" \
  "obj runtime r_comm2 r_comm2 l_ctl"
case_ bootstrap_uses_runtime 1 "layer: bootstrap/b_kv2 (bootstrap) uses runtime/r_comm" \
  "obj bootstrap b_kv2 b_kv2 r_comm"
case_ empty_folder 2 "no object files under $tmp/case/launcher/tree" "rm launcher/tree/*.o"
case_ top_level_object 2 "an object at launcher/'s top level" "obj launcher l_stray l_stray"
case_ folder_without_tier 2 "launcher/extra is not a folder this check knows" "obj launcher/extra l_extra l_extra"

[ "$fails" -eq 0 ]
