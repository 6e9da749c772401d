/*
 * man_env.c -- builds a man page from its template (doc/NAME.in), at build
 * time (doc/Makefile.mk):
 *
 *   doc/man-env [-D NAME=VALUE]... TEMPLATE OUTPUT
 *
 * copies TEMPLATE to OUTPUT, replacing each @NAME@ with its -D value (the
 * install paths, the version) and each line
 *
 *   .\" env-table: READER...
 *
 * with the rows of common/asr_env.h that one of the READERs reads (asrrun,
 * asrd, libasr, asrkv, applications; set: what asrd sets in every rank), as
 * man(7) entries. The settings table is thus the one source of every page's
 * ENVIRONMENT, as it is of `asrrun --list-env` and the README's table. An
 * @NAME@ without a -D, or an unknown READER, is an error (exit 1).
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "asr_env.h"

#define MAX_DEFS 16
static const char *def_name[MAX_DEFS], *def_value[MAX_DEFS];
static size_t def_len[MAX_DEFS];
static int ndefs;

static int fail(const char *tmpl, int line, const char *what) {
  fprintf(stderr, "man-env: %s:%d: %s\n", tmpl, line, what);
  return 1;
}

static int readers(const char *tmpl, int lineno, char *words, unsigned *who) {
  static const struct {
    const char *word;
    unsigned bit;
  } names[] = {{"asrrun", ASR_ENV_ASRRUN}, {"asrd", ASR_ENV_ASRD},        {"libasr", ASR_ENV_LIBASR},
               {"asrkv", ASR_ENV_ASRKV},   {"applications", ASR_ENV_APP}, {"set", ASR_ENV_SET}};
  *who = 0;
  for (char *w = strtok(words, " \t\n"); w; w = strtok(NULL, " \t\n")) {
    size_t i = 0;
    while (i < sizeof names / sizeof names[0] && strcmp(names[i].word, w) != 0) i++;
    if (i == sizeof names / sizeof names[0]) return fail(tmpl, lineno, "env-table: unknown reader");
    *who |= names[i].bit;
  }
  return *who ? 0 : fail(tmpl, lineno, "env-table: no reader named");
}

/* Writes line with its @NAME@s replaced. */
static int substitute(FILE *out, const char *tmpl, int lineno, const char *line) {
  for (const char *p = line; *p;) {
    const char *at = strchr(p, '@');
    if (!at) {
      fputs(p, out);
      break;
    }
    fwrite(p, 1, (size_t)(at - p), out);
    const char *end = strchr(at + 1, '@');
    int d = 0;
    while (end && d < ndefs &&
           !((size_t)(end - at - 1) == def_len[d] && !memcmp(at + 1, def_name[d], def_len[d])))
      d++;
    if (!end || d == ndefs) return fail(tmpl, lineno, "an @NAME@ that no -D NAME=VALUE gives");
    fputs(def_value[d], out);
    p = end + 1;
  }
  return 0;
}

int main(int argc, char **argv) {
  int i = 1;
  for (; i + 1 < argc && strcmp(argv[i], "-D") == 0; i += 2) {
    char *eq = strchr(argv[i + 1], '=');
    if (!eq || ndefs == MAX_DEFS) break;
    def_name[ndefs] = argv[i + 1];
    def_len[ndefs] = (size_t)(eq - argv[i + 1]);
    def_value[ndefs++] = eq + 1;
  }
  if (argc - i != 2) {
    fprintf(stderr, "usage: man-env [-D NAME=VALUE]... TEMPLATE OUTPUT\n");
    return 2;
  }
  const char *tmpl = argv[i], *outpath = argv[i + 1];
  FILE *in = fopen(tmpl, "r");
  if (!in) {
    perror(tmpl);
    return 1;
  }
  char tmp[4096];
  snprintf(tmp, sizeof tmp, "%s.tmp", outpath);
  FILE *out = fopen(tmp, "w");
  if (!out) {
    perror(tmp);
    fclose(in);
    return 1;
  }
  static const char marker[] = ".\\\" env-table:";
  char line[4096];
  int lineno = 0, rc = 0;
  while (!rc && fgets(line, sizeof line, in)) {
    lineno++;
    unsigned who;
    if (strncmp(line, marker, sizeof marker - 1) == 0) {
      rc = readers(tmpl, lineno, line + sizeof marker - 1, &who);
      if (!rc) asr_env_print_man(out, who);
    } else {
      rc = substitute(out, tmpl, lineno, line);
    }
  }
  fclose(in);
  if (fclose(out) != 0 && !rc) rc = fail(tmpl, lineno, "cannot write the page");
  if (!rc && rename(tmp, outpath) != 0) {
    perror(outpath);
    rc = 1;
  }
  if (rc) remove(tmp);
  return rc;
}
