/* asr_env.c -- the table of environment variables and its one parser (asr_env.h). */
#include "config.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "asr_env.h"
#include "asr_err.h"
#include "asr_netif.h"

extern char **environ;

static const asr_env_row_t rows[ASR_ENV__COUNT] = {
#define ASR__ENV_ROW(id_, name_, type_, min_, max_, words_, dflt_, who_, doc_) \
  [ASR_ENV_##id_] = {ASR_ENV_##id_, name_, ASR_ENV_T_##type_, min_, max_, words_, dflt_, who_, doc_},
    ASR_ENV_ROWS(ASR__ENV_ROW)
#undef ASR__ENV_ROW
};

static const struct {
  asr_env_id_t id;
  const char *name, *doc;
} aliases[] = {
#define ASR__ENV_ALIAS(id_, name_, doc_) {ASR_ENV_##id_, name_, doc_},
    ASR_ENV_ALIASES(ASR__ENV_ALIAS)
#undef ASR__ENV_ALIAS
};
#define N_ALIASES (sizeof aliases / sizeof aliases[0])

const asr_env_row_t *asr_env_row(asr_env_id_t id) { return (unsigned)id < ASR_ENV__COUNT ? &rows[id] : NULL; }

const char *asr_env_alias(asr_env_id_t id) {
  for (size_t i = 0; i < N_ALIASES; i++)
    if (aliases[i].id == id) return aliases[i].name;
  return NULL;
}

/* The length of the name in "NAME" or "NAME=value". */
static size_t name_len(const char *s) { return strcspn(s, "="); }

const asr_env_row_t *asr_env_find(const char *name) {
  size_t n = name_len(name);
  for (int i = 0; i < ASR_ENV__COUNT; i++) {
    size_t rn = strlen(rows[i].name);
    if (rows[i].who & ASR_ENV_FAMILY ? n > rn && strncmp(name, rows[i].name, rn) == 0
                                     : n == rn && strncmp(name, rows[i].name, n) == 0)
      return &rows[i];
  }
  for (size_t i = 0; i < N_ALIASES; i++)
    if (strlen(aliases[i].name) == n && strncmp(name, aliases[i].name, n) == 0) return &rows[aliases[i].id];
  return NULL;
}

/* The value of id and the name it was found under: the row's own name wins
 * over its alias unless it is empty, so that `ASR_BOOTSTRAP_PORT= prog`
 * still lets the seed's variable through, as it did in the seed. */
static const char *lookup(asr_env_id_t id, const char **name) {
  const char *v = getenv(rows[id].name), *alias = asr_env_alias(id);
  const char *av = alias ? getenv(alias) : NULL;
  *name = rows[id].name;
  if (v && *v) return v;
  if (av && *av) {
    *name = alias;
    return av;
  }
  return v ? v : av;
}

const char *asr_env_raw(asr_env_id_t id) {
  const char *name;
  return (unsigned)id < ASR_ENV__COUNT ? lookup(id, &name) : NULL;
}

int asr_env_is_set(asr_env_id_t id) {
  const char *v = asr_env_raw(id);
  return v && *v;
}

/* ------------------------------------------------------------------------ */
/* The value parsers                                                        */
/* ------------------------------------------------------------------------ */

/* A plain decimal number: no sign, no spaces, no suffix. strtol alone would
 * take " 4", "+4" and "4abc" up to the junk. Returns 0 or ASR_EINVAL. */
static int parse_decimal(const char *s, long *out) {
  if (!isdigit((unsigned char)s[0])) return ASR_EINVAL;
  errno = 0;
  char *end;
  long v = strtol(s, &end, 10);
  if (errno || *end) return ASR_EINVAL;
  *out = v;
  return 0;
}

int asr_env_parse_long(const char *what, const char *val, long min, long max, long *out, char *errbuf,
                       size_t errlen) {
  const char *kind = min == 1 ? "a positive number" : "a number";
  long v;
  if (!*val) return asr_errf(errbuf, errlen, ASR_ECONFIG, "%s: needs a value (%s)", what, kind);
  if (parse_decimal(val, &v) != 0 || (min == 1 && v < 1))
    return asr_errf(errbuf, errlen, ASR_ECONFIG, "%s: '%s' is not %s", what, val, kind);
  if (v < min || v > max)
    return asr_errf(errbuf, errlen, ASR_ECONFIG, "%s: '%s' is out of range: use %ld to %ld", what, val, min,
                    max);
  *out = v;
  return 0;
}

/* The YAML 1.1 spellings as well as 0/1, so that a value reads the same in
 * a YAML file and in a variable. */
int asr_env_parse_bool(const char *what, const char *val, int *out, char *errbuf, size_t errlen) {
  static const char *const yes[] = {"1", "true", "yes", "on"}, *const no[] = {"0", "false", "no", "off"};
  for (size_t i = 0; i < 4; i++) {
    if (strcasecmp(val, yes[i]) == 0 || strcasecmp(val, no[i]) == 0) {
      *out = strcasecmp(val, yes[i]) == 0;
      return 0;
    }
  }
  return asr_errf(errbuf, errlen, ASR_ECONFIG, "%s: '%s' is not a boolean: use true or false (1 or 0)", what,
                  val);
}

void asr_env_join_words(const char *const *words, char *buf, size_t len) {
  size_t used = 0;
  buf[0] = '\0';
  for (size_t i = 0; words[i] && used < len; i++) {
    int n = snprintf(buf + used, len - used, "%s%s", i ? ", " : "", words[i]);
    if (n < 0) break;
    used += (size_t)n;
  }
}

int asr_env_parse_word(const char *what, const char *val, const char *const *words, int *out, char *errbuf,
                       size_t errlen) {
  for (int i = 0; words[i]; i++)
    if (strcmp(val, words[i]) == 0) {
      *out = i;
      return 0;
    }
  char list[256];
  asr_env_join_words(words, list, sizeof list);
  return asr_errf(errbuf, errlen, ASR_ECONFIG, "%s: '%s' is not one of %s", what, val, list);
}

int asr_env_parse_text(const char *what, const char *val, long min, long max, char *errbuf, size_t errlen) {
  size_t n = strlen(val);
  if ((long)n < min)
    return min == 1 ? asr_errf(errbuf, errlen, ASR_ECONFIG, "%s: needs a non-empty value", what)
                    : asr_errf(errbuf, errlen, ASR_ECONFIG, "%s: needs at least %ld bytes", what, min);
  if (max > 0 && (long)n > max)
    return asr_errf(errbuf, errlen, ASR_ECONFIG, "%s: '%.40s...' is too long (at most %ld bytes)", what, val,
                    max);
  return 0;
}

static int is_int_type(asr_env_type_t t) {
  return t == ASR_ENV_T_INT || t == ASR_ENV_T_PORT || t == ASR_ENV_T_MS || t == ASR_ENV_T_SECONDS ||
         t == ASR_ENV_T_BYTES;
}

static int is_text_type(asr_env_type_t t) {
  return t == ASR_ENV_T_STR || t == ASR_ENV_T_PATH || t == ASR_ENV_T_CMD || t == ASR_ENV_T_IPV4 ||
         t == ASR_ENV_T_IFSPEC || t == ASR_ENV_T_SECRET;
}

/* Checks val (non-empty) against row r; what names it in the message. The
 * number of an integer, boolean or word row goes to *num. */
static int check_value(const asr_env_row_t *r, const char *what, const char *val, long *num, char *errbuf,
                       size_t errlen) {
  int i = 0, rc;
  struct in_addr a;
  char inner[256];
  switch (r->type) {
    case ASR_ENV_T_INT:
    case ASR_ENV_T_PORT:
    case ASR_ENV_T_MS:
    case ASR_ENV_T_SECONDS:
    case ASR_ENV_T_BYTES: return asr_env_parse_long(what, val, r->min, r->max, num, errbuf, errlen);
    case ASR_ENV_T_BOOL:
      rc = asr_env_parse_bool(what, val, &i, errbuf, errlen);
      *num = i;
      return rc;
    case ASR_ENV_T_WORD:
      rc = asr_env_parse_word(what, val, r->words, &i, errbuf, errlen);
      *num = i;
      return rc;
    case ASR_ENV_T_STR:
    case ASR_ENV_T_PATH:
    case ASR_ENV_T_CMD: return asr_env_parse_text(what, val, r->min, r->max, errbuf, errlen);
    case ASR_ENV_T_IPV4:
      if (inet_pton(AF_INET, val, &a) == 1) return 0;
      return asr_errf(errbuf, errlen, ASR_ECONFIG, "%s: '%.64s' is not an IPv4 address: use A.B.C.D", what,
                      val);
    case ASR_ENV_T_IFSPEC:
      if (asr_netif_check_spec(val, inner, sizeof inner) == 0) return 0;
      return asr_errf(errbuf, errlen, ASR_ECONFIG, "%s: %s", what, inner);
    case ASR_ENV_T_SECRET:
      /* The value is never repeated in the message: it may be most of a
       * real secret, and messages end up in logs. */
      for (const char *p = val; *p; p++)
        if (!isxdigit((unsigned char)*p)) i = 1;
      if (!i && (long)strlen(val) == r->min) return 0;
      return asr_errf(
          errbuf, errlen, ASR_ECONFIG,
          "%s: the value (%zu characters) is not %ld hex digits; unset it or copy it from the job's "
          "launcher",
          what, strlen(val), r->min);
  }
  return asr_errf(errbuf, errlen, ASR_ECONFIG, "%s: internal error: type %d", what, (int)r->type);
}

/* The row of id when its type is one the getter reads; else NULL and a
 * message (a caller's bug, found by the first test that reaches it). */
static const asr_env_row_t *typed_row(asr_env_id_t id, int (*ok)(asr_env_type_t), const char *getter,
                                      char *errbuf, size_t errlen) {
  const asr_env_row_t *r = asr_env_row(id);
  if (r && !(r->who & ASR_ENV_FAMILY) && ok(r->type)) return r;
  asr_errf(errbuf, errlen, ASR_ECONFIG, "internal error: %s cannot read %s", getter,
           r ? r->name : "an unknown variable");
  return NULL;
}

static int is_bool_type(asr_env_type_t t) { return t == ASR_ENV_T_BOOL; }
static int is_word_type(asr_env_type_t t) { return t == ASR_ENV_T_WORD; }

/* The number a getter returns for r: the variable's, or the default's. */
static int get_number(const asr_env_row_t *r, long *out, char *errbuf, size_t errlen) {
  const char *name, *v = lookup(r->id, &name);
  long x = 0;
  int rc = 0;
  if (v && *v)
    rc = check_value(r, name, v, &x, errbuf, errlen);
  else if (r->dflt) /* every default parses (test_env checks it) */
    rc = check_value(r, r->name, r->dflt, &x, errbuf, errlen);
  if (rc == 0) *out = x;
  return rc;
}

int asr_env_int(asr_env_id_t id, long *out, char *errbuf, size_t errlen) {
  const asr_env_row_t *r = typed_row(id, is_int_type, "asr_env_int", errbuf, errlen);
  return r ? get_number(r, out, errbuf, errlen) : ASR_EINVAL;
}

int asr_env_bool(asr_env_id_t id, int *out, char *errbuf, size_t errlen) {
  const asr_env_row_t *r = typed_row(id, is_bool_type, "asr_env_bool", errbuf, errlen);
  long x;
  int rc = r ? get_number(r, &x, errbuf, errlen) : ASR_EINVAL;
  if (rc == 0) *out = (int)x;
  return rc;
}

int asr_env_word(asr_env_id_t id, int *out, char *errbuf, size_t errlen) {
  const asr_env_row_t *r = typed_row(id, is_word_type, "asr_env_word", errbuf, errlen);
  long x;
  int rc = r ? get_number(r, &x, errbuf, errlen) : ASR_EINVAL;
  if (rc == 0) *out = (int)x;
  return rc;
}

int asr_env_str(asr_env_id_t id, const char **out, char *errbuf, size_t errlen) {
  const asr_env_row_t *r = typed_row(id, is_text_type, "asr_env_str", errbuf, errlen);
  if (!r) return ASR_EINVAL;
  const char *name, *v = lookup(id, &name);
  long unused;
  if (!v || !*v) {
    *out = r->dflt;
    return 0;
  }
  int rc = check_value(r, name, v, &unused, errbuf, errlen);
  if (rc == 0) *out = v;
  return rc;
}

int asr_env_check(asr_env_id_t id, char *errbuf, size_t errlen) {
  const asr_env_row_t *r = asr_env_row(id);
  if (!r || r->who & ASR_ENV_FAMILY) return 0;
  const char *name, *v = lookup(id, &name);
  long unused;
  return v && *v ? check_value(r, name, v, &unused, errbuf, errlen) : 0;
}

int asr_env_check_value(asr_env_id_t id, const char *what, const char *val, char *errbuf, size_t errlen) {
  const asr_env_row_t *r = asr_env_row(id);
  long unused;
  if (!r || r->who & ASR_ENV_FAMILY) return 0;
  return check_value(r, what, val, &unused, errbuf, errlen);
}

int asr_env_check_all(unsigned who, char *errbuf, size_t errlen) {
  for (int i = 0; i < ASR_ENV__COUNT; i++) {
    if (!(rows[i].who & who)) continue;
    int rc = asr_env_check((asr_env_id_t)i, errbuf, errlen);
    if (rc) return rc;
  }
  return 0;
}

/* ------------------------------------------------------------------------ */
/* Unknown names                                                            */
/* ------------------------------------------------------------------------ */

/* The Levenshtein distance of a and b, or a large number when either is too
 * long to be a name worth suggesting. */
static size_t distance(const char *a, const char *b) {
  size_t na = strlen(a), nb = strlen(b), prev[65], cur[65];
  if (na > 64 || nb > 64) return 1000;
  for (size_t j = 0; j <= nb; j++) prev[j] = j;
  for (size_t i = 1; i <= na; i++) {
    cur[0] = i;
    for (size_t j = 1; j <= nb; j++) {
      size_t sub = prev[j - 1] + (a[i - 1] != b[j - 1]), del = prev[j] + 1, ins = cur[j - 1] + 1;
      cur[j] = sub < del ? (sub < ins ? sub : ins) : (del < ins ? del : ins);
    }
    memcpy(prev, cur, (nb + 1) * sizeof *cur);
  }
  return prev[nb];
}

/* The part of an ASR_* or ASRRUN_* name after its prefix. */
static const char *suffix_of(const char *name) {
  return strncmp(name, "ASRRUN_", 7) == 0 ? name + 7 : strncmp(name, "ASR_", 4) == 0 ? name + 4 : name;
}

/* The row an unknown name was probably meant to be: the same name under the
 * other prefix (ASRRUN_NP for ASR_NP), else the one row whose name starts
 * with it (ASRRUN_BIND_TO for ASRRUN_BIND), else the one row at most two
 * edits away; NULL when there is none, or more than one of a kind. */
static const char *near_row(const char *name) {
  const char *pick = NULL;
  int n = 0;
  for (int i = 0; i < ASR_ENV__COUNT; i++)
    if (!(rows[i].who & ASR_ENV_FAMILY) && strcmp(suffix_of(rows[i].name), suffix_of(name)) == 0)
      return rows[i].name;
  for (int i = 0; i < ASR_ENV__COUNT; i++)
    if (!(rows[i].who & ASR_ENV_FAMILY) && *suffix_of(name) &&
        strncmp(rows[i].name, name, strlen(name)) == 0) {
      pick = rows[i].name;
      n++;
    }
  if (n == 1) return pick;
  size_t best = 3;
  int ties = 0;
  pick = NULL;
  for (int i = 0; i < ASR_ENV__COUNT; i++) {
    if (rows[i].who & ASR_ENV_FAMILY) continue;
    size_t d = distance(name, rows[i].name);
    if (d < best) {
      best = d;
      pick = rows[i].name;
      ties = 0;
    } else if (d == best) {
      ties++;
    }
  }
  return ties ? NULL : pick;
}

int asr_env_each_unknown(char *const *envp, void (*fn)(void *arg, const char *name, const char *near),
                         void *arg) {
  int n = 0;
  for (char *const *e = envp; e && *e; e++) {
    if (strncmp(*e, "ASR_", 4) != 0 && strncmp(*e, "ASRRUN_", 7) != 0) continue;
    if (asr_env_find(*e)) continue;
    char name[128];
    snprintf(name, sizeof name, "%.*s", (int)name_len(*e), *e);
    if (fn) fn(arg, name, near_row(name));
    n++;
  }
  return n;
}

/* ------------------------------------------------------------------------ */
/* The table, printed                                                       */
/* ------------------------------------------------------------------------ */

static void type_text(const asr_env_row_t *r, char *buf, size_t len) {
  static const char *const int_names[] = {
      [ASR_ENV_T_INT] = "integer",     [ASR_ENV_T_PORT] = "port",   [ASR_ENV_T_MS] = "milliseconds",
      [ASR_ENV_T_SECONDS] = "seconds", [ASR_ENV_T_BYTES] = "bytes",
  };
  char words[256];
  switch (r->type) {
    case ASR_ENV_T_INT:
    case ASR_ENV_T_PORT:
    case ASR_ENV_T_MS:
    case ASR_ENV_T_SECONDS:
    case ASR_ENV_T_BYTES: snprintf(buf, len, "%s %ld..%ld", int_names[r->type], r->min, r->max); return;
    case ASR_ENV_T_BOOL: snprintf(buf, len, "boolean"); return;
    case ASR_ENV_T_WORD:
      asr_env_join_words(r->words, words, sizeof words);
      snprintf(buf, len, "one of %s", words);
      return;
    case ASR_ENV_T_STR:
    case ASR_ENV_T_PATH:
    case ASR_ENV_T_CMD: {
      const char *what = r->type == ASR_ENV_T_STR ? "text" : r->type == ASR_ENV_T_PATH ? "path" : "command";
      if (r->max > 0)
        snprintf(buf, len, "%s, at most %ld bytes", what, r->max);
      else
        snprintf(buf, len, "%s", what);
      return;
    }
    case ASR_ENV_T_IPV4: snprintf(buf, len, "IPv4 address"); return;
    case ASR_ENV_T_IFSPEC: snprintf(buf, len, "interface, A.B.C.D/N or A.B.C.D"); return;
    case ASR_ENV_T_SECRET: snprintf(buf, len, "%ld hex digits", r->min); return;
  }
  snprintf(buf, len, "?");
}

static void who_text(unsigned who, char *buf, size_t len) {
  static const struct {
    unsigned bit;
    const char *name;
  } readers[] = {{ASR_ENV_ASRRUN, "asrrun"}, {ASR_ENV_ASRD, "asrd"},        {ASR_ENV_LIBASR, "libasr"},
                 {ASR_ENV_ASRKV, "asrkv"},   {ASR_ENV_APP, "applications"}, {ASR_ENV_TESTS, "tests"}};
  size_t used = 0;
  buf[0] = '\0';
  for (size_t i = 0; i < sizeof readers / sizeof readers[0] && used < len; i++)
    if (who & readers[i].bit) {
      int n = snprintf(buf + used, len - used, "%s%s", used ? ", " : "", readers[i].name);
      if (n < 0) break;
      used += (size_t)n;
    }
  if (who & ASR_ENV_SET && used < len) snprintf(buf + used, len - used, "; asrd sets it for every rank");
}

void asr_env_print(FILE *f, int markdown) {
  char type[320], who[160];
  if (markdown) {
    fprintf(f, "| Variable | Type | Default | Read by | Meaning |\n|---|---|---|---|---|\n");
  } else {
    fprintf(f,
            "asr's environment variables. Unset or empty means the default; a bad value is an error\n"
            "(asrrun exits 2, asr_init fails); an unknown ASRRUN_* name is an error, an unknown ASR_* one\n"
            "a warning.\n");
  }
  for (int i = 0; i < ASR_ENV__COUNT; i++) {
    const asr_env_row_t *r = &rows[i];
    const char *star = r->who & ASR_ENV_FAMILY ? "*" : "";
    type_text(r, type, sizeof type);
    who_text(r->who, who, sizeof who);
    if (markdown) {
      fprintf(f, "| `%s%s` | %s | %s%s%s | %s | %s |\n", r->name, star, type, r->dflt ? "`" : "",
              r->dflt ? r->dflt : "-", r->dflt ? "`" : "", who, r->doc);
    } else {
      fprintf(f, "\n%s%s\n    %s; default: %s; read by %s\n    %s\n", r->name, star, type,
              r->dflt ? r->dflt : "-", who, r->doc);
    }
    for (size_t k = 0; k < N_ALIASES; k++) {
      if (aliases[k].id != r->id) continue;
      if (markdown)
        fprintf(f, "| `%s` | alias | | | %s; `%s` wins when both are set |\n", aliases[k].name,
                aliases[k].doc, r->name);
      else
        fprintf(f, "\n%s\n    alias of %s, which wins when both are set\n    %s\n", aliases[k].name, r->name,
                aliases[k].doc);
    }
  }
}

/* Writes s as roff text: '\\' and '-' escaped, `code` in bold, a leading
 * '.' or '\'' kept from being read as a request. */
static void roff_text(FILE *f, const char *s) {
  int bold = 0;
  if (*s == '.' || *s == '\'') fputs("\\&", f);
  for (; *s; s++) {
    if (*s == '\\')
      fputs("\\e", f);
    else if (*s == '-')
      fputs("\\-", f);
    else if (*s == '`')
      fputs((bold = !bold) ? "\\fB" : "\\fR", f);
    else
      fputc(*s, f);
  }
  if (bold) fputs("\\fR", f);
}

void asr_env_print_man(FILE *f, unsigned who) {
  char type[320], whos[160];
  for (int i = 0; i < ASR_ENV__COUNT; i++) {
    const asr_env_row_t *r = &rows[i];
    if (!(r->who & who)) continue;
    type_text(r, type, sizeof type);
    who_text(r->who, whos, sizeof whos);
    fprintf(f, ".TP\n.B %s%s\n", r->name, r->who & ASR_ENV_FAMILY ? "*" : "");
    roff_text(f, r->doc);
    fputs(".\n.br\n", f);
    roff_text(f, type);
    fputs("; default: ", f);
    if (r->dflt) {
      fputs("\\fB", f);
      roff_text(f, r->dflt);
      fputs("\\fR", f);
    } else {
      fputs("none", f);
    }
    fputs("; read by ", f);
    roff_text(f, whos);
    fputs(".\n", f);
    for (size_t k = 0; k < N_ALIASES; k++) {
      if (aliases[k].id != r->id) continue;
      fprintf(f, ".TP\n.B %s\n", aliases[k].name);
      fprintf(f, "alias of\n.BR %s ,\nwhich wins when both are set: ", r->name);
      roff_text(f, aliases[k].doc);
      fputs(".\n", f);
    }
  }
}
