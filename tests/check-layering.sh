#!/usr/bin/env bash
# check-layering.sh -- checks that the modules of asr use each other one way
# only (doc/design.md, "Parts and layers"), from the object files of a
# build.
#
#   tests/check-layering.sh [--verbose] BUILD_DIR
#
# It reads, with nm, every object file under BUILD_DIR's common/,
# bootstrap/, runtime/ and launcher/ (libtool's PIC objects in .libs/
# included) and maps each back to its module: the source file's folder and
# stem, as automake names the object "<target>-<stem>.o"
# (runtime/libasr_la-comm.o is runtime/comm, launcher/asrd/pmi/
# bin_asrd-asrd_pmix.o is launcher/asrd/pmi/asrd_pmix). A module uses
# another when one of its undefined symbols (nm: U) is a function the other
# defines (T). Three kinds of use are violations:
#
#   circle  two modules use each other's functions (A calls B and B calls
#           A), so neither can be read, tested or replaced without the other:
#           each such pair is named with the functions that make it;
#   longer  a circle through three or more modules (A -> B -> C -> A) that
#           the pairs do not already explain: the modules that all reach each
#           other (a strongly connected component), one circle through them,
#           and their uses of each other that are not in a pair;
#   layer   a module uses one of a layer it must not see. The layers, one way
#           only: common < bootstrap < runtime and common < bootstrap <
#           launcher; runtime and launcher never use each other. Inside
#           launcher/ each folder is a layer of its own, in three tiers
#           (doc/design.md, "Parts and layers"):
#             bottom  launcher/config, launcher/ctl, launcher/trace, launcher/metrics
#             middle  launcher/place, launcher/launch, launcher/tree
#             top     launcher/asrrun, launcher/asrd (with launcher/asrd/pmi)
#           a folder uses its own modules and those of a lower tier only:
#           never a folder of its own tier (asrrun and asrd never use each
#           other) nor of a higher one.
#
# Every launcher folder of the tiers above must yield at least one object,
# and no object may sit at launcher/'s top level or in a folder that has no
# tier: either means the layout changed under the check (it would pass by
# reading nothing), so the check stops with status 2 and says which.
#
# Only functions count: a module that reads another's global variable is not
# seen (asr__ctxs in runtime/context.c, for one). A function defined by more
# than one module is reported on stderr (main excepted): usually an object
# left behind by a moved or removed source file; make clean removes it.
#
# --verbose also prints the module graph: each module, its layer, and the
# modules it uses with the functions it calls there.
#
# Exit status: 0 no violation, 1 violations (each printed, with the
# functions that make it), 2 a usage error or nothing to read.
set -euo pipefail

prog=check-layering
usage() {
  echo "usage: tests/check-layering.sh [--verbose] BUILD_DIR"
  echo "Checks the module graph of a built asr tree: no circles between modules, and"
  echo "common < bootstrap < runtime, common < bootstrap < launcher (runtime and launcher apart);"
  echo "in launcher/: config, ctl, trace, metrics < place, launch, tree < asrrun, asrd (a tier's folders apart)."
}

bad_usage() {
  echo "$prog: $1" >&2
  usage >&2
  exit 2
}

verbose=0
dir=
while [ $# -gt 0 ]; do
  case $1 in
    -v | --verbose) verbose=1 ;;
    -h | --help) usage; exit 0 ;;
    --)
      shift
      [ $# -eq 1 ] || bad_usage "give one build directory"
      dir=$1
      break
      ;;
    -*) bad_usage "unknown option '$1'" ;;
    *)
      [ -z "$dir" ] || bad_usage "give one build directory"
      dir=$1
      ;;
  esac
  shift
done
[ -n "$dir" ] || bad_usage "give the build directory"
if [ ! -d "$dir" ]; then
  echo "$prog: '$dir' is not a directory (give the build directory)" >&2
  exit 2
fi
if ! command -v nm >/dev/null; then
  echo "$prog: nm not found (apt-get install binutils)" >&2
  exit 2
fi

cd "$dir"
layers=()
for l in common bootstrap runtime launcher; do [ -d "$l" ] && layers+=("$l"); done
objs=()
if [ ${#layers[@]} -gt 0 ]; then
  while IFS= read -r o; do objs+=("$o"); done < <(find "${layers[@]}" -name '*.o' -type f | LC_ALL=C sort)
fi
if [ ${#objs[@]} -eq 0 ]; then
  echo "$prog: no object files under $dir/{common,bootstrap,runtime,launcher} (build it first)" >&2
  exit 2
fi

# The launcher's folders and their tiers (the header above); asrd/pmi is
# part of asrd's layer.
launcher_tiers="config:1 ctl:1 trace:1 metrics:1 place:2 launch:2 tree:2 asrrun:3 asrd:3"
if [ -d launcher ]; then
  bad=0
  for o in "${objs[@]}"; do
    case $o in launcher/*) ;; *) continue ;; esac
    d=${o#launcher/}
    d=${d%/*}
    d=${d%/.libs}
    f=${d%%/*}
    if [ "$d" = "${o#launcher/}" ] || [ "$d" = .libs ]; then
      echo "$prog: $dir/$o: an object at launcher/'s top level (every source belongs in a folder of launcher/; make clean if it is left from an older layout)" >&2
      bad=1
    elif [[ " $launcher_tiers " != *" $f:"* ]]; then
      echo "$prog: $dir/$o: launcher/$f is not a folder this check knows (give it a tier in tests/check-layering.sh)" >&2
      bad=1
    fi
  done
  for t in $launcher_tiers; do
    f=${t%%:*}
    n=0
    for o in "${objs[@]}"; do
      case $o in launcher/"$f"/*) n=$((n + 1)) ;; esac
    done
    if [ "$n" -eq 0 ]; then
      echo "$prog: no object files under $dir/launcher/$f (a launcher folder moved or unbuilt: the check would read nothing of it)" >&2
      bad=1
    fi
  done
  [ "$bad" -eq 0 ] || exit 2
fi

# One line per use of a function another module defines, "USER DEFINER
# FUNCTION", sorted, so that the report below lists everything in order.
# nm -P -A prints "FILE: SYMBOL TYPE [VALUE SIZE]".
uses=$(nm -P -A "${objs[@]}" | LC_ALL=C awk -v prog="$prog" '
  function module(file,   d, base) {
    d = file; sub(/\/[^\/]*$/, "", d); sub(/\/\.libs$/, "", d)
    base = file; sub(/^.*\//, "", base); sub(/\.o$/, "", base); sub(/^.*-/, "", base)
    return d "/" base
  }
  {
    file = $1; sub(/:$/, "", file)
    m = module(file); sym = $2; type = $3
    if (type == "T") {
      if ((sym, m) in defined) next
      defined[sym, m] = 1
      if (sym in def) {
        def[sym] = def[sym] " " m
        if (sym != "main")
          printf "%s: %s is defined by more than one module (%s): an object left by a moved or removed source? (make clean)\n", prog, sym, def[sym] > "/dev/stderr"
      } else {
        def[sym] = m
      }
    } else if (type == "U") {
      used[m, sym] = 1
    }
  }
  END {
    for (k in used) {
      split(k, p, SUBSEP)
      if (!(p[2] in def)) continue
      n = split(def[p[2]], d, " ")
      for (i = 1; i <= n; i++)
        if (d[i] != p[1]) print p[1], d[i], p[2]
    }
  }' | LC_ALL=C sort -u)
modules=$(for o in "${objs[@]}"; do
  d=${o%/*}
  d=${d%/.libs}
  b=${o##*/}
  b=${b%.o}
  echo "$d/${b##*-}"
done | LC_ALL=C sort -u)

printf '%s\n' "$uses" | LC_ALL=C awk -v prog="$prog" -v verbose="$verbose" -v modlist="$modules" -v tiers="$launcher_tiers" '
  # A module'"'"'s layer: its top folder, or for launcher/ the folder below it
  # (launcher/asrd/pmi/x is in launcher/asrd).
  function layer(m,   p) {
    split(m, p, "/")
    return p[1] == "launcher" ? p[1] "/" p[2] : p[1]
  }
  # Whether a module of layer a may use one of layer b (doc/design.md,
  # "Parts and layers"; the tiers of launcher/ are the header'"'"'s).
  function allowed(a, b) {
    if (a == b || b == "common") return 1
    if (b == "bootstrap") return a == "runtime" || a ~ /^launcher\//
    if (a ~ /^launcher\// && b ~ /^launcher\//) return tier[a] > tier[b]
    return 0
  }
  function add(list, f) { return list == "" ? f : list ", " f }
  # Tarjan: numbers the strongly connected components (comp[]): the sets of
  # modules that all reach each other, which is what a circle of any length is.
  function strong(v,   n, i, w, to) {
    idx[v] = low[v] = ++counter
    stack[++sp] = v
    onstack[v] = 1
    n = split(out[v], to, ", ")
    for (i = 1; i <= n; i++) {
      w = to[i]
      if (!(w in idx)) {
        strong(w)
        if (low[w] < low[v]) low[v] = low[w]
      } else if (onstack[w] && idx[w] < low[v]) {
        low[v] = idx[w]
      }
    }
    if (low[v] == idx[v]) {
      ncomp++
      do {
        w = stack[sp--]
        onstack[w] = 0
        comp[w] = ncomp
        size[ncomp]++
      } while (w != v)
    }
  }
  # One way back from b to a inside their component (breadth first): "b -> ... -> a".
  function path_back(b, a, c,   head, tail, q, prev, v, n, i, to, p) {
    head = 1; tail = 1; q[1] = b; prev[b] = ""
    while (head <= tail) {
      v = q[head++]
      if (v == a) break
      n = split(out[v], to, ", ")
      for (i = 1; i <= n; i++)
        if (comp[to[i]] == c && !(to[i] in prev)) { prev[to[i]] = v; q[++tail] = to[i] }
    }
    p = a
    for (v = prev[a]; v != ""; v = prev[v]) p = v " -> " p
    return p
  }
  BEGIN {
    n = split(tiers, t, " ")
    for (i = 1; i <= n; i++) { split(t[i], kv, ":"); tier["launcher/" kv[1]] = kv[2] }
  }
  NF == 3 {
    a = $1; b = $2
    if (!((a, b) in fns)) { order[++nedges] = a SUBSEP b; out[a] = add(out[a], b) }
    fns[a, b] = add(fns[a, b], $3)
  }
  END {
    nmod = split(modlist, mods, "\n")
    if (verbose) {
      print "module graph (" nmod " modules, " nedges " uses; each module, its layer, then the modules it uses: the functions it calls there):"
      for (i = 1; i <= nmod; i++) {
        m = mods[i]
        print m " [" layer(m) "]"
        n = split(out[m], to, ", ")
        for (j = 1; j <= n; j++) print "    -> " to[j] ": " fns[m, to[j]]
      }
      print ""
    }
    pairs = 0; longer = 0; crossings = 0
    for (e = 1; e <= nedges; e++) {
      split(order[e], p, SUBSEP); a = p[1]; b = p[2]
      if ((b, a) in fns) {
        paired[a, b] = 1
        if (a < b) {
          pairs++
          print prog ": circle: " a " <-> " b
          print "    " a " uses " b ": " fns[a, b]
          print "    " b " uses " a ": " fns[b, a]
        }
      }
    }
    # Circles through more than two modules: a component that holds a use
    # which is not one of the pairs above (a component made of pairs alone,
    # such as a star of them, has no circle the pairs have not named).
    for (i = 1; i <= nmod; i++) if (!(mods[i] in idx)) strong(mods[i])
    for (e = 1; e <= nedges; e++) {
      split(order[e], p, SUBSEP); a = p[1]; b = p[2]
      c = comp[a]
      if (c != comp[b] || ((a, b) in paired) || (c in shown)) continue
      shown[c] = 1
      longer++
      members = ""
      for (i = 1; i <= nmod; i++) if (comp[mods[i]] == c) members = add(members, mods[i])
      print prog ": circle through " size[c] " modules: " members
      print "    for one: " a " -> " path_back(b, a, c)
      for (f = 1; f <= nedges; f++) {
        split(order[f], q, SUBSEP)
        if (comp[q[1]] == c && comp[q[2]] == c && !((q[1], q[2]) in paired))
          print "    " q[1] " uses " q[2] ": " fns[q[1], q[2]]
      }
    }
    for (e = 1; e <= nedges; e++) {
      split(order[e], p, SUBSEP); a = p[1]; b = p[2]
      if (!allowed(layer(a), layer(b))) {
        crossings++
        print prog ": layer: " a " (" layer(a) ") uses " b " (" layer(b) "): " fns[a, b]
      }
    }
    if (pairs || longer || crossings) {
      print prog ": " pairs + longer + crossings " violation(s): " pairs " pair(s) of modules that use each other, " longer " longer circle(s), " crossings " use(s) across layers"
      exit 1
    }
    print prog ": " nmod " modules, " nedges " uses between them: no circles, every use one way down the layers"
  }'
