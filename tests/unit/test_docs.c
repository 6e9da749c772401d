/*
 * test_docs.c -- the man pages (doc/) against the programs they describe.
 *
 * asrrun's flags live in three places: `asrrun --help` (launcher/config/config_cli.c's
 * option table), asrrun(1)'s OPTIONS (doc/asrrun.1.in) and the settings table
 * (common/asr_env.h: each ASRRUN_* row's help names its flags, "..., as
 * --map-by"). These cases check each against the others both ways, so a flag
 * added to one place fails here until it is in the other two (or, for a flag
 * no variable sets, in no_variable[] below with the reason). They also check
 * that the built pages render without warnings, that each page's
 * ENVIRONMENT lists every variable its program reads, and that the README's
 * job-file command works.
 */
#include "config.h"

#include <ctype.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "asr_env.h"
#include "asr_test.h"
#include "asrrun.h"

/* The flags of `asrrun --help` that no ASRRUN_* variable sets, each with why.
 * A flag that gets a variable leaves this list (a case checks that every
 * entry here is still a flag without one). */
static const struct {
  const char *flag, *why;
} no_variable[] = {
    {"-H", "a host list is given once: ASRRUN_HOSTFILE or a job file's hosts: set the hosts instead"},
    {"-f", "names the job file itself, which is read before the variables"},
    {"-x", "repeatable and merged by name: a job file's env: sets the ranks' variables instead"},
    {"--dry-run", "an action of this one command line, not a setting"},
    {"-v", "counted (-vv); a job file's verbose: and ASR_LOG_LEVEL set verbosity instead"},
    {"--version", "prints and exits"},
    {"--list-env", "prints and exits"},
    {"--help", "prints and exits"},
    {"--status", "a command of its own: asks a running job and exits"},
};
#define N_NO_VARIABLE (sizeof no_variable / sizeof no_variable[0])

/* The man pages, as built (doc/Makefile.mk), and who reads the variables each
 * one's ENVIRONMENT must list. */
static const struct {
  const char *page;
  unsigned who;
} pages[] = {
    {"doc/asrrun.1", ASR_ENV_ASRRUN},
    {"doc/asrd.8", ASR_ENV_ASRD},
    {"doc/asrkv.1", ASR_ENV_ASRKV},
    {"doc/libasr.3", ASR_ENV_LIBASR | ASR_ENV_APP},
    {"doc/asrtrace.1", 0}, /* reads no variable of the table (launcher/trace/asrtrace.in) */
};
#define N_PAGES (sizeof pages / sizeof pages[0])

/* --- helpers ---------------------------------------------------------------- */

#define MAX_FLAGS 128
#define MAX_NAMES 4

/* One flag: its names (an alias after the name: "-n", "-np"). For a man page
 * entry, body is the entry's text (malloc'd), else NULL. */
typedef struct {
  char names[MAX_NAMES][48];
  int nnames;
  char *body;
} flag_t;

typedef struct {
  flag_t f[MAX_FLAGS];
  int n;
} flags_t;

static char *slurp(const char *path) {
  int fd = open(path, O_RDONLY);
  ASSERT_MSG(fd >= 0, "cannot open %s (built by make: doc/Makefile.mk)", path);
  char *s = asr_test_read_all(fd, 5000);
  close(fd);
  ASSERT(s);
  return s;
}

static char *path_in(const char *top, const char *rel) {
  static char buf[4][4096];
  static int next;
  char *p = buf[next++ % 4];
  snprintf(p, sizeof buf[0], "%s/%s", top, rel);
  return p;
}

/* Runs argv with stdout captured (stderr into *err when given); returns
 * stdout and sets *status to the wait status. */
static char *run(char *const argv[], int *status, char **err) {
  int out = -1, efd = -1;
  pid_t pid = asr_test_spawn(argv, &out, err ? &efd : NULL);
  ASSERT(pid > 0);
  char *s = asr_test_read_all(out, 20000);
  if (err) *err = asr_test_read_all(efd, 20000);
  *status = asr_test_wait(pid, 20000);
  close(out);
  if (efd >= 0) close(efd);
  ASSERT(s);
  return s;
}

static char *asrrun_out(const char *arg) {
  char *argv[] = {path_in(asr_test_builddir(), "bin/asrrun"), (char *)arg, NULL};
  int st;
  char *s = run(argv, &st, NULL);
  ASSERT_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0, "asrrun %s: status %d", arg, st);
  return s;
}

/* A flag name as a token: "-n," "--list-env[=markdown]" "--map-by=X" give "-n"
 * "--list-env" "--map-by"; 0 when tok is no flag (a value, a word). */
static int flag_token(const char *tok, size_t len, char *out, size_t outlen) {
  if (len < 2 || tok[0] != '-') return 0;
  size_t start = tok[1] == '-' ? 2 : 1;
  if (len <= start || !isalpha((unsigned char)tok[start])) return 0;
  size_t n = start;
  while (n < len && (isalnum((unsigned char)tok[n]) || tok[n] == '-')) n++;
  if (n >= outlen) return 0;
  memcpy(out, tok, n);
  out[n] = '\0';
  return 1;
}

/* The flags a line starts with: "-n, -np N  help" gives -n and -np. */
static int leading_flags(const char *line, flag_t *f) {
  f->nnames = 0;
  const char *p = line;
  for (;;) {
    while (*p == ' ' || *p == ',' || *p == '\t') p++;
    size_t len = strcspn(p, " ,\t\n");
    if (!len || !flag_token(p, len, f->names[f->nnames], sizeof f->names[0])) break;
    if (++f->nnames == MAX_NAMES) break;
    p += len;
  }
  return f->nnames;
}

/* A roff line's text: the macro name dropped, quotes, font changes and
 * escapes ("\-", "\&", "\fB") undone. */
static void unroff(const char *line, char *out, size_t outlen) {
  const char *p = line;
  if (*p == '.') p += strcspn(p, " \n");
  size_t o = 0;
  while (*p && *p != '\n' && o + 1 < outlen) {
    if (*p == '"') {
      p++;
    } else if (*p == '\\' && p[1] == 'f' && p[2]) {
      p += p[2] == '(' ? 5 : 3;
    } else if (*p == '\\' && p[1] == '&') {
      p += 2;
    } else if (*p == '\\' && p[1] == 'e') {
      out[o++] = '\\', p += 2;
    } else if (*p == '\\' && p[1]) {
      out[o++] = p[1], p += 2;
    } else {
      out[o++] = *p++;
    }
  }
  out[o] = '\0';
}

static flag_t *find_flag(flags_t *fs, const char *name) {
  for (int i = 0; i < fs->n; i++)
    for (int k = 0; k < fs->f[i].nnames; k++)
      if (strcmp(fs->f[i].names[k], name) == 0) return &fs->f[i];
  return NULL;
}

/* The flags `asrrun --help` lists: its lines "  -X, --xx VALUE   help". */
static void help_flags(flags_t *fs) {
  char *help = asrrun_out("--help");
  fs->n = 0;
  for (char *line = strtok(help, "\n"); line; line = strtok(NULL, "\n")) {
    if (strncmp(line, "  -", 3) != 0) continue;
    ASSERT(fs->n < MAX_FLAGS);
    flag_t *f = &fs->f[fs->n];
    f->body = NULL;
    if (leading_flags(line, f)) fs->n++;
  }
  ASSERT_MSG(fs->n > 10, "asrrun --help listed only %d flags", fs->n);
  free(help);
}

/* The entries of asrrun(1)'s OPTIONS: each ".TP" and the line after it (its
 * tag: the flag, its alias and value), then its text up to the next .TP, .SS
 * or .SH. */
static void man_flags(flags_t *fs) {
  char *page = slurp(path_in(asr_test_builddir(), "doc/asrrun.1"));
  fs->n = 0;
  int in_options = 0, after_tp = 0;
  flag_t *cur = NULL;
  size_t bodylen = 0;
  char *save = NULL;
  for (char *line = strtok_r(page, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
    int is_sh = strncmp(line, ".SH", 3) == 0;
    if (is_sh) in_options = strstr(line, "OPTIONS") != NULL;
    if (is_sh || strncmp(line, ".SS", 3) == 0 || strncmp(line, ".TP", 3) == 0) cur = NULL;
    if (!in_options) continue;
    if (strncmp(line, ".TP", 3) == 0) {
      after_tp = 1;
      continue;
    }
    if (after_tp) {
      after_tp = 0;
      char text[512];
      unroff(line, text, sizeof text);
      ASSERT(fs->n < MAX_FLAGS);
      flag_t *f = &fs->f[fs->n];
      ASSERT_MSG(leading_flags(text, f) > 0, "asrrun(1) OPTIONS: the entry '%s' names no flag", line);
      fs->n++;
      cur = f;
      cur->body = calloc(1, 1);
      bodylen = 0;
      continue;
    }
    if (cur) {
      char text[1024];
      unroff(line, text, sizeof text);
      size_t n = strlen(text);
      cur->body = realloc(cur->body, bodylen + n + 2);
      memcpy(cur->body + bodylen, text, n);
      cur->body[bodylen + n] = ' ';
      cur->body[bodylen + n + 1] = '\0';
      bodylen += n + 1;
    }
  }
  free(page);
}

static int is_asrrun_row(const asr_env_row_t *r) { return strncmp(r->name, "ASRRUN_", 7) == 0; }

/* The flags an ASRRUN_* row's help names ("..., as --tag-output / --no-tag-output"). */
static int row_flags(const asr_env_row_t *r, char names[][48], int max) {
  int n = 0;
  const char *p = r->doc;
  while (*p && n < max) {
    size_t len = strcspn(p, " ,;()/");
    if (len && flag_token(p, len, names[n], sizeof names[0])) n++;
    p += len ? len : 1;
  }
  return n;
}

/* The ASRRUN_* row that names one of f's names, or NULL. */
static const asr_env_row_t *row_of(const flag_t *f) {
  for (int i = 0; i < ASR_ENV__COUNT; i++) {
    const asr_env_row_t *r = asr_env_row((asr_env_id_t)i);
    if (!is_asrrun_row(r)) continue;
    char names[8][48];
    int n = row_flags(r, names, 8);
    for (int j = 0; j < n; j++)
      for (int k = 0; k < f->nnames; k++)
        if (strcmp(names[j], f->names[k]) == 0) return r;
  }
  return NULL;
}

static const char *no_variable_reason(const flag_t *f) {
  for (size_t i = 0; i < N_NO_VARIABLE; i++)
    for (int k = 0; k < f->nnames; k++)
      if (strcmp(no_variable[i].flag, f->names[k]) == 0) return no_variable[i].why;
  return NULL;
}

static flags_t help, man;

/* --- asrrun's flags: --help, asrrun(1), the settings table ------------------ */

TEST(help_flags_have_man_entries) {
  help_flags(&help);
  man_flags(&man);
  for (int i = 0; i < help.n; i++)
    for (int k = 0; k < help.f[i].nnames; k++)
      ASSERT_MSG(find_flag(&man, help.f[i].names[k]),
                 "asrrun --help lists %s but asrrun(1) has no entry for it: add one to doc/asrrun.1.in's "
                 "OPTIONS (the comment there says how)",
                 help.f[i].names[k]);
}

TEST(man_entries_are_help_flags) {
  help_flags(&help);
  man_flags(&man);
  ASSERT(man.n > 0);
  for (int i = 0; i < man.n; i++)
    for (int k = 0; k < man.f[i].nnames; k++)
      ASSERT_MSG(find_flag(&help, man.f[i].names[k]),
                 "asrrun(1) OPTIONS has an entry for %s, which asrrun --help does not list",
                 man.f[i].names[k]);
}

TEST(help_flags_are_in_settings_table) {
  help_flags(&help);
  for (int i = 0; i < help.n; i++) {
    const flag_t *f = &help.f[i];
    const asr_env_row_t *r = row_of(f);
    const char *why = no_variable_reason(f);
    ASSERT_MSG(r || why,
               "asrrun --help lists %s but no ASRRUN_* row of common/asr_env.h names it (\"..., as %s\"): "
               "add the row, or add %s to no_variable[] in tests/unit/test_docs.c with the reason",
               f->names[0], f->names[0], f->names[0]);
    ASSERT_MSG(!(r && why), "%s is in no_variable[] (tests/unit/test_docs.c) but %s names it: drop it there",
               f->names[0], r->name);
  }
  /* every exception is a flag of --help */
  for (size_t i = 0; i < N_NO_VARIABLE; i++)
    ASSERT_MSG(find_flag(&help, no_variable[i].flag),
               "no_variable[] names %s, which asrrun --help does not list", no_variable[i].flag);
}

TEST(settings_table_flags_are_in_help) {
  help_flags(&help);
  int rows = 0;
  for (int i = 0; i < ASR_ENV__COUNT; i++) {
    const asr_env_row_t *r = asr_env_row((asr_env_id_t)i);
    if (!is_asrrun_row(r)) continue;
    rows++;
    char names[8][48];
    int n = row_flags(r, names, 8);
    ASSERT_MSG(n > 0, "%s's help in common/asr_env.h names no flag (\"..., as --flag\")", r->name);
    for (int j = 0; j < n; j++)
      ASSERT_MSG(find_flag(&help, names[j]), "%s's help names %s, which asrrun --help does not list", r->name,
                 names[j]);
  }
  ASSERT(rows > 10);
}

/* An option's entry names the variable that sets it too, so that asrrun(1)
 * answers "how do I set this for every job" where the flag is described. */
TEST(man_entries_name_their_variable) {
  man_flags(&man);
  for (int i = 0; i < man.n; i++) {
    const asr_env_row_t *r = row_of(&man.f[i]);
    if (!r) continue;
    ASSERT_MSG(strstr(man.f[i].body, r->name),
               "asrrun(1): the entry of %s does not name %s (doc/asrrun.1.in)", man.f[i].names[0], r->name);
  }
}

TEST(help_names_the_man_page) {
  char *s = asrrun_out("--help");
  ASSERT_CONTAINS(s, "man asrrun");
  free(s);
}

/* --- the pages themselves ----------------------------------------------------- */

/* Each page's ENVIRONMENT (generated from common/asr_env.h) names every
 * variable its program reads, and nothing of the template is left over. */
TEST(pages_list_their_variables) {
  for (size_t p = 0; p < N_PAGES; p++) {
    char *page = slurp(path_in(asr_test_builddir(), pages[p].page));
    ASSERT_MSG(!strchr(page, '@'), "%s: an @...@ is left unreplaced", pages[p].page);
    char *env = strstr(page, "\n.SH ENVIRONMENT");
    ASSERT_MSG(env, "%s has no ENVIRONMENT section", pages[p].page);
    for (int i = 0; i < ASR_ENV__COUNT; i++) {
      const asr_env_row_t *r = asr_env_row((asr_env_id_t)i);
      if (!(r->who & pages[p].who)) continue;
      char want[128];
      snprintf(want, sizeof want, "\n.B %s\n", r->name);
      ASSERT_MSG(strstr(env, want), "%s: ENVIRONMENT does not list %s", pages[p].page, r->name);
    }
    free(page);
  }
}

/* asrrun(1)'s EXIT STATUS has an entry for each of asrrun's own codes. */
TEST(asrrun_page_lists_exit_codes) {
  char *page = slurp(path_in(asr_test_builddir(), "doc/asrrun.1"));
  char *sec = strstr(page, "\n.SH \"EXIT STATUS\"");
  ASSERT_MSG(sec, "asrrun(1) has no EXIT STATUS section");
  char *end = strstr(sec + 1, "\n.SH");
  if (end) *end = '\0';
  static const int codes[] = {0, ASRRUN_EXIT_USAGE, ASRRUN_EXIT_TIMEOUT, ASRRUN_EXIT_LAUNCH,
                              ASRRUN_EXIT_NOTFOUND};
  for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++) {
    char want[32];
    snprintf(want, sizeof want, "\n.B %d\n", codes[i]);
    ASSERT_MSG(strstr(sec, want), "asrrun(1) EXIT STATUS has no entry '.B %d'", codes[i]);
  }
  free(page);
}

static int on_path(const char *prog) {
  const char *path = getenv("PATH");
  char buf[4096];
  while (path && *path) {
    size_t n = strcspn(path, ":");
    snprintf(buf, sizeof buf, "%.*s/%s", (int)n, path, prog);
    if (access(buf, X_OK) == 0) return 1;
    path += n + (path[n] == ':');
  }
  return 0;
}

/* What `man -l` would say: groff -man -ww -z prints every warning (and
 * mandoc -T lint, where it is installed, its style complaints). */
TEST(pages_render_without_warnings) {
  int have_groff = on_path("groff"), have_mandoc = on_path("mandoc");
  if (!have_groff && !have_mandoc)
    SKIP("neither groff nor mandoc is installed (scripts/deps.sh installs groff)");
  for (size_t p = 0; p < N_PAGES; p++) {
    char *page = path_in(asr_test_builddir(), pages[p].page);
    int st;
    char *err = NULL, *out;
    if (have_groff) {
      char *argv[] = {"/bin/sh", "-c", "exec groff -man -ww -z \"$0\"", page, NULL};
      out = run(argv, &st, &err);
      ASSERT_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0 && !*err && !*out,
                 "groff -man -ww -z %s: status %d: %s%s", pages[p].page, st, out, err);
      free(out), free(err);
    }
    if (have_mandoc) {
      char *argv[] = {"/bin/sh", "-c", "exec mandoc -T lint -W warning \"$0\"", page, NULL};
      out = run(argv, &st, &err);
      ASSERT_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0 && !*out && !*err, "mandoc -T lint %s: %s%s",
                 pages[p].page, out, err);
      free(out), free(err);
    }
  }
}

/* --- the README's commands ------------------------------------------------------- */

/* README: `asrrun -f conf/job-example.yaml --dry-run` prints the example's map. */
TEST(job_example_dry_run_works) {
  char *argv[] = {path_in(asr_test_builddir(), "bin/asrrun"), "-f",
                  path_in(ASR_TOP_SRCDIR, "conf/job-example.yaml"), "--dry-run", NULL};
  int st;
  char *err = NULL;
  char *out = run(argv, &st, &err);
  ASSERT_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %d: %s", st, err);
  ASSERT_CONTAINS(out, "rank 0 -> host node1");
  free(out), free(err);
}
