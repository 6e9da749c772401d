/*
 * tree.h -- the tree of daemons (issue 28): which daemon starts, supervises
 * and relays for which. asrrun is the root; hosts are numbered 0..n-1 in
 * the job's host order and laid out as a k-ary heap below it:
 *
 *   asrrun's children    hosts 0 .. k-1
 *   host i's children    hosts k*(i+1) .. k*(i+1)+k-1 (those below n)
 *   host i's parent      host i/k - 1 (-1: asrrun)
 *
 * so asrrun holds at most k connections, a daemon at most k+1, and the
 * deepest daemon is at depth d, the least with k + k^2 + ... + k^d >= n
 * (at most ceil(log_k n) hops from asrrun). A job of at most k hosts is
 * the flat star of radix 0, in which every daemon is asrrun's child.
 * doc/tree.md works out what the tree costs at scale and where its limits
 * sit.
 */
#ifndef ASR_TREE_H
#define ASR_TREE_H

/* Host h's parent: a host, or -1 for asrrun (radix 0: always -1). */
static inline int asr_tree_parent(int radix, int h) { return radix <= 0 ? -1 : h / radix - 1; }

/* The first of parent p's children (p = -1: asrrun's) and how many it has. */
static inline int asr_tree_first_child(int radix, int p) { return radix <= 0 ? 0 : radix * (p + 1); }
static inline int asr_tree_nchildren(int radix, int nhosts, int p) {
  if (radix <= 0) return p < 0 ? nhosts : 0;
  long first = (long)radix * (p + 1);
  if (first >= nhosts) return 0;
  return (int)(nhosts - first < radix ? nhosts - first : radix);
}

/* Whether host h is in the subtree of host top (top itself included). */
static inline int asr_tree_in_subtree(int radix, int top, int h) {
  if (radix <= 0) return h == top;
  while (h > top) h = h / radix - 1;
  return h == top;
}

/* The child of top (top = -1: asrrun) whose subtree holds host h (a host
 * below top), or -1 when h is not below top. */
static inline int asr_tree_child_toward(int radix, int top, int h) {
  if (radix <= 0) return top < 0 ? h : -1;
  int prev = -1;
  while (h > top) {
    prev = h;
    h = h / radix - 1;
  }
  return h == top ? prev : -1;
}

/* Hops from asrrun to host h (asrrun's children: 1). */
static inline int asr_tree_depth(int radix, int h) {
  int d = 1;
  while (radix > 0 && (h = h / radix - 1) >= 0) d++;
  return d;
}

#endif /* ASR_TREE_H */
