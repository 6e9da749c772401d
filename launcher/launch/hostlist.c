/*
 * hostlist.c -- Slurm host lists and tasks-per-node strings, PBS node files.
 * See hostlist.h for the forms accepted.
 *
 * A Slurm host list is expanded in two passes over each item: the first
 * checks every bracket group and counts the hosts (so that a list of a
 * million hosts is refused before anything is allocated), the second writes
 * the names, recursing once per bracket group so that the first group varies
 * slowest, as in Slurm.
 */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "asr_err.h"
#include "asr_fs.h"
#include "hostlist.h"

/* A number in a range has at most this many digits: 10^18 fits an unsigned long long. */
#define MAX_DIGITS 18

/* How much of an input a message quotes. */
#define QUOTE_MAX 120

/* ------------------------------------------------------------------------ */
/* Messages and the node list                                               */
/* ------------------------------------------------------------------------ */

/* Formats "<what> '<input>': <message>" into errbuf and returns rc. A long
 * input is cut to its first QUOTE_MAX bytes and "...". */
static int __attribute__((format(printf, 6, 7)))
fail(int rc, char *errbuf, size_t errlen, const char *what, const char *input, const char *fmt, ...) {
  if (!errbuf || !errlen) return rc;
  int n = snprintf(errbuf, errlen, "%s '%.*s%s': ", what, QUOTE_MAX, input,
                   strlen(input) > QUOTE_MAX ? "..." : "");
  if (n >= 0 && (size_t)n < errlen) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(errbuf + n, errlen - (size_t)n, fmt, ap);
    va_end(ap);
  }
  return rc;
}

static int fail_nomem(char *errbuf, size_t errlen, const char *what) {
  if (errbuf && errlen) snprintf(errbuf, errlen, "%s: out of memory", what);
  return ASR_ENOMEM;
}

void asr_nodelist_free(asr_nodelist_t *nl) {
  for (int i = 0; i < nl->n; i++) free(nl->name[i]);
  free(nl->name);
  free(nl->slots);
  memset(nl, 0, sizeof *nl);
}

/* Appends a copy of name[0..len) with the given slots. Returns 0 or ASR_ENOMEM. */
static int nodelist_push(asr_nodelist_t *nl, const char *name, size_t len, int slots) {
  if (nl->n == nl->cap) {
    int cap = nl->cap ? nl->cap * 2 : 16;
    char **names = realloc(nl->name, (size_t)cap * sizeof *names);
    if (!names) return ASR_ENOMEM;
    nl->name = names;
    int *s = realloc(nl->slots, (size_t)cap * sizeof *s);
    if (!s) return ASR_ENOMEM;
    nl->slots = s;
    nl->cap = cap;
  }
  char *copy = malloc(len + 1);
  if (!copy) return ASR_ENOMEM;
  memcpy(copy, name, len);
  copy[len] = '\0';
  nl->name[nl->n] = copy;
  nl->slots[nl->n++] = slots;
  return 0;
}

/* Parses s[0..len) as a decimal number of 1..MAX_DIGITS digits. Returns 0,
 * ASR_EINVAL when it is not all digits (or empty), ASR_ETOOBIG when it has
 * too many digits. */
static int parse_number(const char *s, size_t len, unsigned long long *out) {
  if (len == 0) return ASR_EINVAL;
  for (size_t i = 0; i < len; i++)
    if (!isdigit((unsigned char)s[i])) return ASR_EINVAL;
  if (len > MAX_DIGITS) return ASR_ETOOBIG;
  unsigned long long v = 0;
  for (size_t i = 0; i < len; i++) v = v * 10 + (unsigned long long)(s[i] - '0');
  *out = v;
  return 0;
}

/* ------------------------------------------------------------------------ */
/* Slurm host lists                                                         */
/* ------------------------------------------------------------------------ */

/* One "LO-HI" or "N" inside brackets; width is the length of LO as written. */
typedef struct {
  unsigned long long lo, hi;
  int width;
} range_t;

/* What the expansion works on: the whole input (for messages) and the output. */
typedef struct {
  const char *list, *what;
  asr_nodelist_t *out;
  char *errbuf;
  size_t errlen;
} expand_t;

/* Parses the range s[0..len) (one comma-separated piece of a bracket group). */
static int parse_range(const expand_t *x, const char *s, size_t len, range_t *r) {
  const char *dash = memchr(s, '-', len);
  size_t lolen = dash ? (size_t)(dash - s) : len;
  int brc = parse_number(s, lolen, &r->lo);
  if (brc == 0 && dash) brc = parse_number(dash + 1, len - lolen - 1, &r->hi);
  if (brc == 0 && !dash) r->hi = r->lo;
  if (len == 0) return fail(ASR_EINVAL, x->errbuf, x->errlen, x->what, x->list, "empty range inside '[...]'");
  if (brc == ASR_ETOOBIG)
    return fail(ASR_ETOOBIG, x->errbuf, x->errlen, x->what, x->list,
                "'%.*s': a number has more than %d digits", (int)len, s, MAX_DIGITS);
  if (brc != 0)
    return fail(ASR_EINVAL, x->errbuf, x->errlen, x->what, x->list,
                "'%.*s' inside '[...]' is not a number or a range LO-HI", (int)len, s);
  if (r->lo > r->hi)
    return fail(ASR_EINVAL, x->errbuf, x->errlen, x->what, x->list,
                "range '%.*s' goes downwards (LO must not exceed HI)", (int)len, s);
  if (r->hi - r->lo >= ASR_HOSTLIST_MAX)
    return fail(ASR_ETOOBIG, x->errbuf, x->errlen, x->what, x->list, "range '%.*s' has more than %d hosts",
                (int)len, s, ASR_HOSTLIST_MAX);
  r->width = (int)lolen;
  return 0;
}

/* Calls fn(x, &range, arg) for each range of the bracket group g[0..len)
 * (the text between '[' and ']'), in order. Stops at the first non-zero. */
static int for_each_range(const expand_t *x, const char *g, size_t len,
                          int (*fn)(const expand_t *, const range_t *, void *), void *arg) {
  for (size_t pos = 0;;) {
    const char *comma = memchr(g + pos, ',', len - pos);
    size_t n = comma ? (size_t)(comma - (g + pos)) : len - pos;
    range_t r;
    int rc = parse_range(x, g + pos, n, &r);
    if (rc == 0) rc = fn(x, &r, arg);
    if (rc != 0 || !comma) return rc;
    pos += n + 1;
  }
}

/* Adds a range's size to *(unsigned long long *)arg. */
static int add_range_size(const expand_t *x, const range_t *r, void *arg) {
  (void)x;
  *(unsigned long long *)arg += r->hi - r->lo + 1;
  return 0;
}

/* Checks the brackets of item[0..len) (no comma outside brackets in it) and
 * counts the hosts it expands to into *count (at most ASR_HOSTLIST_MAX). */
static int count_item(const expand_t *x, const char *item, size_t len, unsigned long long *count) {
  *count = 1;
  for (size_t i = 0; i < len; i++) {
    if (item[i] == ']')
      return fail(ASR_EINVAL, x->errbuf, x->errlen, x->what, x->list, "']' without a matching '[' in '%.*s'",
                  (int)len, item);
    if (item[i] != '[') continue;
    const char *close = memchr(item + i + 1, ']', len - i - 1);
    const char *open = memchr(item + i + 1, '[', close ? (size_t)(close - item) - i - 1 : len - i - 1);
    if (open)
      return fail(ASR_EINVAL, x->errbuf, x->errlen, x->what, x->list, "'[' inside '[...]' in '%.*s'",
                  (int)len, item);
    if (!close)
      return fail(ASR_EINVAL, x->errbuf, x->errlen, x->what, x->list, "'[' without a matching ']' in '%.*s'",
                  (int)len, item);
    unsigned long long size = 0;
    size_t glen = (size_t)(close - item) - i - 1;
    int rc = for_each_range(x, item + i + 1, glen, add_range_size, &size);
    if (rc != 0) return rc;
    /* both factors are at most 64k (checked as they grow), so no overflow */
    if (size > ASR_HOSTLIST_MAX || (*count *= size) > ASR_HOSTLIST_MAX)
      return fail(ASR_ETOOBIG, x->errbuf, x->errlen, x->what, x->list, "'%.*s' expands to more than %d hosts",
                  (int)len, item, ASR_HOSTLIST_MAX);
    i = (size_t)(close - item);
  }
  return 0;
}

/* The name being built by emit(): name[0..len) so far. */
typedef struct {
  char name[ASR_HOSTLIST_NAME_MAX + 1];
  size_t len;
} name_t;

/* One bracket group being expanded: the name, its length before the group,
 * and the item's text after the group's ']'. On emit()'s stack, since deeper
 * groups have their own. */
typedef struct {
  name_t *nm;
  size_t keep;
  const char *rest;
  size_t restlen;
} group_t;

static int emit(const expand_t *x, name_t *nm, const char *s, size_t len);

static int fail_long_name(const expand_t *x) {
  return fail(ASR_ETOOBIG, x->errbuf, x->errlen, x->what, x->list, "a host name is longer than %d bytes",
              ASR_HOSTLIST_NAME_MAX);
}

/* Appends each number of a range to the name and emits the rest of the item. */
static int emit_range(const expand_t *x, const range_t *r, void *arg) {
  const group_t *g = arg;
  size_t keep = g->keep;
  for (unsigned long long v = r->lo; v <= r->hi; v++) {
    char num[MAX_DIGITS + 1];
    int n = snprintf(num, sizeof num, "%0*llu", r->width, v); /* width <= MAX_DIGITS */
    if (keep + (size_t)n > ASR_HOSTLIST_NAME_MAX) return fail_long_name(x);
    memcpy(g->nm->name + keep, num, (size_t)n);
    g->nm->len = keep + (size_t)n;
    int rc = emit(x, g->nm, g->rest, g->restlen);
    if (rc != 0) return rc;
  }
  return 0;
}

/* Emits every name of s[0..len) (a checked item, or its tail) prefixed by
 * nm->name[0..nm->len). Recurses once per bracket group: at most
 * ASR_HOSTLIST_NAME_MAX deep, since each group adds at least one byte. */
static int emit(const expand_t *x, name_t *nm, const char *s, size_t len) {
  const char *open = memchr(s, '[', len);
  size_t lit = open ? (size_t)(open - s) : len;
  if (nm->len + lit > ASR_HOSTLIST_NAME_MAX) return fail_long_name(x);
  memcpy(nm->name + nm->len, s, lit);
  nm->len += lit;
  if (!open) {
    if (nodelist_push(x->out, nm->name, nm->len, 0) != 0) return fail_nomem(x->errbuf, x->errlen, x->what);
    return 0;
  }
  const char *close = memchr(open, ']', len - lit); /* present: count_item checked */
  group_t g = {nm, nm->len, close + 1, len - (size_t)(close + 1 - s)};
  return for_each_range(x, open + 1, (size_t)(close - open) - 1, emit_range, &g);
}

/* Finds the end of the item starting at s: the first comma outside brackets,
 * or the end of the string. Bracket errors are left to count_item. */
static size_t item_length(const char *s) {
  size_t i = 0;
  for (int depth = 0; s[i] && !(s[i] == ',' && depth == 0); i++) {
    if (s[i] == '[') depth++;
    if (s[i] == ']' && depth > 0) depth--;
  }
  return i;
}

static int expand_all(const expand_t *x) {
  unsigned long long total = 0;
  /* pass 1: check everything and count */
  for (const char *p = x->list;; p++) {
    size_t len = item_length(p);
    unsigned long long count;
    if (len == 0)
      return fail(ASR_EINVAL, x->errbuf, x->errlen, x->what, x->list,
                  "empty host name (a comma at an end, or two in a row)");
    int rc = count_item(x, p, len, &count);
    if (rc != 0) return rc;
    if ((total += count) > ASR_HOSTLIST_MAX)
      return fail(ASR_ETOOBIG, x->errbuf, x->errlen, x->what, x->list, "more than %d hosts",
                  ASR_HOSTLIST_MAX);
    p += len;
    if (!*p) break;
  }
  /* pass 2: write the names */
  name_t *nm = malloc(sizeof *nm);
  if (!nm) return fail_nomem(x->errbuf, x->errlen, x->what);
  int rc = 0;
  for (const char *p = x->list; rc == 0; p++) {
    size_t len = item_length(p);
    nm->len = 0;
    rc = emit(x, nm, p, len);
    p += len;
    if (!*p) break;
  }
  free(nm);
  return rc;
}

int asr_slurm_hostlist_expand(const char *list, const char *what, asr_nodelist_t *out, char *errbuf,
                              size_t errlen) {
  expand_t x = {list, what ? what : "Slurm host list", out, errbuf, errlen};
  memset(out, 0, sizeof *out);
  int rc = expand_all(&x);
  if (rc != 0) asr_nodelist_free(out);
  return rc;
}

/* ------------------------------------------------------------------------ */
/* Slurm tasks per node                                                     */
/* ------------------------------------------------------------------------ */

/* Parses one COUNT or COUNT(xREPEAT) item of spec, s[0..len). */
static int parse_tasks_item(const char *spec, const char *what, const char *s, size_t len, int *count,
                            int *repeat, char *errbuf, size_t errlen) {
  const char *paren = memchr(s, '(', len);
  size_t clen = paren ? (size_t)(paren - s) : len;
  unsigned long long c = 0, r = 1;
  int crc = parse_number(s, clen, &c), rrc = 0;
  if (paren) {
    /* "(x" REPEAT ")" must fill the rest of the item */
    size_t plen = len - clen;
    rrc = plen >= 4 && paren[1] == 'x' && paren[plen - 1] == ')' ? parse_number(paren + 2, plen - 3, &r)
                                                                 : ASR_EINVAL;
  }
  if (len == 0)
    return fail(ASR_EINVAL, errbuf, errlen, what, spec, "empty count (a comma at an end, or two in a row)");
  if (crc == ASR_EINVAL || rrc == ASR_EINVAL)
    return fail(ASR_EINVAL, errbuf, errlen, what, spec, "'%.*s' is not COUNT or COUNT(xREPEAT)", (int)len, s);
  if (crc == ASR_ETOOBIG || rrc == ASR_ETOOBIG || c > ASR_HOSTLIST_MAX || r > ASR_HOSTLIST_MAX)
    return fail(ASR_ETOOBIG, errbuf, errlen, what, spec, "'%.*s': a number is larger than %d", (int)len, s,
                ASR_HOSTLIST_MAX);
  if (c == 0 || r == 0)
    return fail(ASR_EINVAL, errbuf, errlen, what, spec, "'%.*s': counts and repeats must be at least 1",
                (int)len, s);
  *count = (int)c;
  *repeat = (int)r;
  return 0;
}

/* Appends repeat copies of count to *v (n used, *cap allocated). */
static int push_counts(int **v, int *n, int *cap, int count, int repeat) {
  if (*n + repeat > *cap) {
    int newcap = *cap ? *cap : 16;
    while (newcap < *n + repeat) newcap *= 2;
    int *nv = realloc(*v, (size_t)newcap * sizeof *nv);
    if (!nv) return ASR_ENOMEM;
    *v = nv;
    *cap = newcap;
  }
  for (int i = 0; i < repeat; i++) (*v)[(*n)++] = count;
  return 0;
}

static int expand_tasks(const char *spec, const char *what, int **v, int *n, char *errbuf, size_t errlen) {
  int cap = 0;
  for (const char *p = spec;; p++) {
    const char *comma = strchr(p, ',');
    size_t len = comma ? (size_t)(comma - p) : strlen(p);
    int count = 0, repeat = 0;
    int rc = parse_tasks_item(spec, what, p, len, &count, &repeat, errbuf, errlen);
    if (rc != 0) return rc;
    if (*n + repeat > ASR_HOSTLIST_MAX) /* both at most 64k: no overflow */
      return fail(ASR_ETOOBIG, errbuf, errlen, what, spec, "more than %d counts", ASR_HOSTLIST_MAX);
    if (push_counts(v, n, &cap, count, repeat) != 0) return fail_nomem(errbuf, errlen, what);
    if (!comma) return 0;
    p = comma;
  }
}

int asr_slurm_tasks_expand(const char *spec, const char *what, int **counts, int *ncounts, char *errbuf,
                           size_t errlen) {
  int *v = NULL, n = 0;
  int rc = expand_tasks(spec, what ? what : "Slurm tasks per node", &v, &n, errbuf, errlen);
  if (rc != 0) {
    free(v);
    v = NULL;
    n = 0;
  }
  *counts = v;
  *ncounts = n;
  return rc;
}

int asr_slurm_tasks_check(const char *tasks_what, int ncounts, const char *nodes_what, int nnodes,
                          char *errbuf, size_t errlen) {
  if (ncounts == nnodes) return 0;
  if (errbuf && errlen)
    snprintf(errbuf, errlen, "%s gives %d task count%s but %s has %d node%s; they must match one for one",
             tasks_what, ncounts, ncounts == 1 ? "" : "s", nodes_what, nnodes, nnodes == 1 ? "" : "s");
  return ASR_EINVAL;
}

/* ------------------------------------------------------------------------ */
/* PBS node files                                                           */
/* ------------------------------------------------------------------------ */

/* Counts one more line for name[0..len): a new host, or one more slot. last
 * caches the host of the previous line, as a node file lists each host's
 * lines together (so most lines need no search). */
static int pbs_count(asr_nodelist_t *nl, const char *name, size_t len, int *last) {
  int h = *last;
  if (h < 0 || strlen(nl->name[h]) != len || memcmp(nl->name[h], name, len) != 0)
    for (h = 0; h < nl->n; h++)
      if (strlen(nl->name[h]) == len && memcmp(nl->name[h], name, len) == 0) break;
  *last = h;
  if (h < nl->n) {
    nl->slots[h]++;
    return 0;
  }
  return nodelist_push(nl, name, len, 1);
}

/* Reads one line (already stripped of white space at both ends, len > 0). */
static int pbs_line(asr_nodelist_t *nl, const char *path, unsigned lineno, const char *s, size_t len,
                    int *last, char *errbuf, size_t errlen) {
  for (size_t i = 0; i < len; i++)
    if (isspace((unsigned char)s[i])) {
      if (errbuf && errlen)
        snprintf(errbuf, errlen, "PBS node file %s:%u: '%.*s' is not one host name (one name a line)", path,
                 lineno, len > QUOTE_MAX ? QUOTE_MAX : (int)len, s);
      return ASR_EINVAL;
    }
  if (len > ASR_HOSTLIST_NAME_MAX) {
    if (errbuf && errlen)
      snprintf(errbuf, errlen, "PBS node file %s:%u: host name '%.40s...' is longer than %d bytes", path,
               lineno, s, ASR_HOSTLIST_NAME_MAX);
    return ASR_ETOOBIG;
  }
  int rc = pbs_count(nl, s, len, last);
  if (rc != 0) return fail_nomem(errbuf, errlen, path);
  if (nl->n > ASR_HOSTLIST_MAX || nl->slots[*last] > ASR_HOSTLIST_MAX) {
    if (errbuf && errlen)
      snprintf(errbuf, errlen, "PBS node file %s:%u: more than %d %s", path, lineno, ASR_HOSTLIST_MAX,
               nl->n > ASR_HOSTLIST_MAX ? "hosts" : "lines for one host");
    return ASR_ETOOBIG;
  }
  return 0;
}

/* Reads text[0..len) line by line. A NUL byte is refused: it would end the
 * host's name where C strings end while the line went on, so "a<NUL>b" and
 * "a<NUL>c" counted as two hosts both named "a". */
static int pbs_read_lines(const char *text, size_t len, const char *name, asr_nodelist_t *nl, char *errbuf,
                          size_t errlen) {
  const char *line = text, *end = text + len;
  int rc = 0, last = -1;
  for (unsigned lineno = 1; rc == 0 && line < end; lineno++) {
    const char *eol = memchr(line, '\n', (size_t)(end - line));
    size_t start = 0, stop = eol ? (size_t)(eol - line) : (size_t)(end - line);
    if (memchr(line, '\0', stop)) {
      if (errbuf && errlen)
        snprintf(errbuf, errlen, "PBS node file %s:%u: a NUL byte; a node file is text, one host name a line",
                 name, lineno);
      return ASR_EINVAL;
    }
    while (start < stop && isspace((unsigned char)line[start])) start++;
    while (stop > start && isspace((unsigned char)line[stop - 1])) stop--;
    if (stop > start) rc = pbs_line(nl, name, lineno, line + start, stop - start, &last, errbuf, errlen);
    line = eol ? eol + 1 : end;
  }
  return rc;
}

int asr_pbs_nodefile_parse(const char *name, const void *buf, size_t len, asr_nodelist_t *out, char *errbuf,
                           size_t errlen) {
  memset(out, 0, sizeof *out);
  int rc = pbs_read_lines(len ? buf : "", len, name, out, errbuf, errlen); /* no arithmetic on NULL */
  if (rc == 0 && out->n == 0) {
    if (errbuf && errlen) snprintf(errbuf, errlen, "PBS node file '%s' lists no hosts", name);
    rc = ASR_EINVAL;
  }
  if (rc != 0) asr_nodelist_free(out);
  return rc;
}

int asr_pbs_nodefile_read(const char *path, asr_nodelist_t *out, char *errbuf, size_t errlen) {
  char *text;
  size_t len;
  memset(out, 0, sizeof *out);
  int rc = asr_fs_read_file(path, ASR_HOSTLIST_FILE_MAX, &text, &len);
  if (rc == ASR_ETOOBIG) {
    if (errbuf && errlen)
      snprintf(errbuf, errlen, "PBS node file '%s' is larger than %d MiB", path, ASR_HOSTLIST_FILE_MAX >> 20);
    return rc;
  }
  if (rc != 0) {
    int err = errno;
    if (errbuf && errlen) snprintf(errbuf, errlen, "cannot open PBS node file '%s': %s", path, strerror(err));
    return rc;
  }
  rc = asr_pbs_nodefile_parse(path, text, len, out, errbuf, errlen);
  free(text);
  return rc;
}
