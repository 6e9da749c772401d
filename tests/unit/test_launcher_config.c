/* test_launcher_config.c -- asrrun's settings (defaults, system/user/job YAML,
 * ASRRUN_* variables, command line), hostfiles, -H lists and rank mapping. */
#include "config.h"

#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include "asr_env.h"
#include "asr_err.h"
#include "asr_test.h"
#include "bind.h"
#include "config_int.h" /* launcher/: found by -I; it brings job_config.h (asr_config_t) */
#include "map.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#endif

extern char **environ;

#define NARGS(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* Each case ends in the harness's _exit(), where LeakSanitizer never looks;
 * ask it here so a leak fails the case that caused it. */
static void check_no_leaks(void) {
#if defined(__SANITIZE_ADDRESS__)
  ASSERT_MSG(__lsan_do_recoverable_leak_check() == 0, "LeakSanitizer found leaks (see above)");
#endif
}

/* The settings of the machine running the tests must not leak in: no
 * ASRRUN_* variables, no system or user file. */
static void isolate_env(void) {
  char names[64][128];
  int n = 0;
  for (char **e = environ; *e && n < 64; e++)
    if (strncmp(*e, "ASRRUN_", 7) == 0) {
      size_t len = strcspn(*e, "=");
      snprintf(names[n++], sizeof names[0], "%.*s", (int)len, *e);
    }
  for (int i = 0; i < n; i++) unsetenv(names[i]);
  setenv("ASR_SYSTEM_CONFIG", "", 1);
  setenv("ASR_USER_CONFIG", "", 1);
}

static asr_config_t *cfg_new(void) {
  asr_config_t *cfg = malloc(sizeof *cfg);
  ASSERT(cfg);
  asr_config_defaults(cfg);
  return cfg;
}

static void cfg_del(asr_config_t *cfg) {
  asr_config_free(cfg);
  free(cfg);
}

/* Writes content to a file in the case's temp dir; returns its path (static). */
static const char *write_file(const char *name, const char *content) {
  static char paths[8][PATH_MAX];
  static int next;
  char *path = paths[next++ % 8];
  snprintf(path, PATH_MAX, "%s/%s", asr_test_tmpdir(), name);
  FILE *f = fopen(path, "w");
  ASSERT_MSG(f, "cannot write %s", path);
  fputs(content, f);
  fclose(f);
  return path;
}

/* Runs asr_config_parse_args on "asrrun ARGS..." (NULL-ended). */
static int parse(asr_config_t *cfg, char *err, size_t errlen, const char *const *args) {
  char *argv[64] = {"asrrun"};
  int argc = 1;
  while (args[argc - 1]) {
    ASSERT(argc < 63);
    argv[argc] = (char *)args[argc - 1];
    argc++;
  }
  err[0] = '\0';
  return asr_config_parse_args(cfg, argc, argv, err, errlen);
}
#define PARSE(cfg, err, ...) parse((cfg), (err), sizeof(err), (const char *const[]){__VA_ARGS__, NULL})

/* Runs asr_config_parse_args with stdout going to a file; returns what it printed (malloc'd). */
static char *parse_captured(asr_config_t *cfg, const char *const *args, int *rc) {
  char err[512], path[PATH_MAX];
  snprintf(path, sizeof path, "%s/stdout.txt", asr_test_tmpdir());
  fflush(stdout);
  int saved = dup(1), fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0600);
  ASSERT(saved >= 0 && fd >= 0);
  dup2(fd, 1);
  close(fd);
  *rc = parse(cfg, err, sizeof err, args);
  fflush(stdout);
  dup2(saved, 1);
  close(saved);
  FILE *f = fopen(path, "r");
  char *out = calloc(1, 16384);
  ASSERT(f && out);
  size_t n = fread(out, 1, 16383, f);
  out[n] = '\0';
  fclose(f);
  return out;
}

static const char *env_value(const asr_config_t *cfg, const char *name, int *has_value) {
  for (int i = 0; i < cfg->nenv; i++)
    if (strcmp(cfg->env[i].name, name) == 0) {
      *has_value = cfg->env[i].has_value;
      return cfg->env[i].value;
    }
  return NULL;
}

/* ------------------------------------------------------------------------ */
/* Defaults and precedence                                                  */
/* ------------------------------------------------------------------------ */

TEST(defaults) {
  asr_config_t *cfg = cfg_new();
  ASSERT_EQ(cfg->np, 0);
  ASSERT_EQ(cfg->nhosts, 0);
  ASSERT_EQ(cfg->lnc_per_host, 0);
  ASSERT_EQ(cfg->map_by, ASR_MAP_SLOT);
  ASSERT_EQ(cfg->bind_to, ASR_BIND_AUTO);
  ASSERT_EQ(cfg->report_bindings, 0);
  ASSERT_EQ(cfg->npernode, 0);
  ASSERT_EQ(cfg->cpus_per_rank, 1);
  ASSERT_EQ(cfg->oversubscribe, 0);
  ASSERT_EQ(cfg->nrf, 0);
  ASSERT_EQ(cfg->nenv, 0);
  ASSERT_EQ(cfg->tag_output, 1);
  ASSERT_STREQ(cfg->output_dir, "");
  ASSERT_EQ(cfg->timeout_s, 0);
  ASSERT_EQ(cfg->bootstrap_port, 0);
  ASSERT_STREQ(cfg->provider, "");
  ASSERT_EQ(cfg->dry_run, 0);
  ASSERT_EQ(cfg->verbose, 0);
  ASSERT_EQ(cfg->launcher, ASR_LAUNCHER_AUTO);
  ASSERT_STREQ(cfg->launch_agent, "ssh");
  ASSERT_STREQ(cfg->prefix, "");
  ASSERT_STREQ(cfg->if_include, "");
  ASSERT_EQ(cfg->ppr, 0);
  ASSERT_EQ(cfg->timestamp_output, 0);
  ASSERT_STREQ(cfg->wdir, "");
  ASSERT_STREQ(cfg->stdin_to, "0");
  ASSERT_EQ(cfg->heartbeat_timeout_s, 10);
  ASSERT_EQ(cfg->tree_radix, 16);
  ASSERT_EQ(cfg->allow_early_exit, 0);
  ASSERT_EQ(cfg->report_state_on_timeout, 0);
  ASSERT_EQ(cfg->get_stack_traces, 0);
  ASSERT_EQ(cfg->quiet, 0);
  ASSERT_STREQ(cfg->program, "");
  ASSERT_EQ(cfg->nargs, 0);
  cfg_del(cfg);
  check_no_leaks();
}

/* Each layer sets some keys; each key must come from the highest layer that
 * sets it, and keys a layer does not set must keep the lower value. */
TEST(precedence_every_layer) {
  isolate_env();
  setenv("ASR_SYSTEM_CONFIG",
         write_file("system.yaml",
                    "np: 2\nmap_by: node\nbind_to: numa\ntimeout: 10\nprovider: sys\nlauncher: local\n"
                    "tag_output: false\nprefix: /sys\n"),
         1);
  setenv("ASR_USER_CONFIG", write_file("user.yaml", "np: 3\nbind_to: package\ntimeout: 20\nprovider: usr\n"),
         1);
  const char *job = write_file("job.yaml", "np: 4\ntimeout: 30\nprogram: ./from_job\nargs: [a, b]\n");
  setenv("ASRRUN_NP", "5", 1);
  setenv("ASRRUN_TIMEOUT", "40", 1);
  char *argv[] = {"asrrun", "-f", (char *)job, "--timeout", "50", NULL};
  char err[512] = "";
  asr_config_t *cfg = malloc(sizeof *cfg);
  ASSERT_OK(asr_config_load(cfg, NARGS(argv) - 1, argv, err, sizeof err));
  ASSERT_EQ(cfg->timeout_s, 50);            /* command line */
  ASSERT_EQ(cfg->np, 5);                    /* env */
  ASSERT_STREQ(cfg->program, "./from_job"); /* job */
  ASSERT_EQ(cfg->nargs, 2);
  ASSERT_STREQ(cfg->args[1], "b");
  ASSERT_STREQ(cfg->job_file, job);
  ASSERT_STREQ(cfg->provider, "usr");           /* user */
  ASSERT_EQ(cfg->bind_to, ASR_BIND_PACKAGE);    /* user */
  ASSERT_EQ(cfg->map_by, ASR_MAP_NODE);         /* system */
  ASSERT_EQ(cfg->launcher, ASR_LAUNCHER_LOCAL); /* system */
  ASSERT_EQ(cfg->tag_output, 0);                /* system */
  ASSERT_STREQ(cfg->prefix, "/sys");            /* system */
  ASSERT_STREQ(cfg->launch_agent, "ssh");       /* default */
  ASSERT_EQ(cfg->lnc_per_host, 0);              /* default */
  cfg_del(cfg);

  /* each layer alone over the defaults */
  unsetenv("ASRRUN_NP");
  unsetenv("ASRRUN_TIMEOUT");
  char *argv2[] = {"asrrun", "prog", NULL};
  cfg = malloc(sizeof *cfg);
  ASSERT_OK(asr_config_load(cfg, 2, argv2, err, sizeof err));
  ASSERT_EQ(cfg->np, 3);
  ASSERT_EQ(cfg->timeout_s, 20);
  ASSERT_EQ(cfg->map_by, ASR_MAP_NODE);
  ASSERT_STREQ(cfg->program, "prog");
  cfg_del(cfg);
  check_no_leaks();
}

TEST(precedence_cli_program_replaces_job_program_and_args) {
  isolate_env();
  const char *job = write_file("job.yaml", "program: ./from_job\nargs: [a, b, c]\n");
  char *argv[] = {"asrrun", "-f", (char *)job, "./mine", "x", NULL};
  char err[512] = "";
  asr_config_t *cfg = malloc(sizeof *cfg);
  ASSERT_OK(asr_config_load(cfg, NARGS(argv) - 1, argv, err, sizeof err));
  ASSERT_STREQ(cfg->program, "./mine");
  ASSERT_EQ(cfg->nargs, 1);
  ASSERT_STREQ(cfg->args[0], "x");
  cfg_del(cfg);
  check_no_leaks();
}

/* Variables merge by name: each layer replaces only the names it sets. */
TEST(precedence_env_vars_merge_by_name) {
  isolate_env();
  setenv("ASR_SYSTEM_CONFIG", write_file("s.yaml", "env:\n  A: sys\n  B: sys\n"), 1);
  const char *job = write_file("j.yaml", "env: [\"B=job\", C]\n");
  char *argv[] = {"asrrun", "-f", (char *)job, "-x", "C=cli", "-x", "D", "prog", NULL};
  char err[512] = "";
  asr_config_t *cfg = malloc(sizeof *cfg);
  ASSERT_OK(asr_config_load(cfg, NARGS(argv) - 1, argv, err, sizeof err));
  int hv = -1;
  ASSERT_EQ(cfg->nenv, 4);
  ASSERT_STREQ(env_value(cfg, "A", &hv), "sys");
  ASSERT_EQ(hv, 1);
  ASSERT_STREQ(env_value(cfg, "B", &hv), "job");
  ASSERT_STREQ(env_value(cfg, "C", &hv), "cli");
  ASSERT_EQ(hv, 1);
  ASSERT_STREQ(env_value(cfg, "D", &hv), "");
  ASSERT_EQ(hv, 0);
  cfg_del(cfg);
  check_no_leaks();
}

/* A host list is one key: a higher layer's list replaces the lower one. */
TEST(precedence_hosts_replace_lower_layers) {
  isolate_env();
  setenv("ASR_SYSTEM_CONFIG", write_file("s.yaml", "hosts: [a, b:2]\n"), 1);
  char err[512] = "";
  asr_config_t *cfg = malloc(sizeof *cfg);
  char *argv[] = {"asrrun", "-H", "c:3", "prog", NULL};
  ASSERT_OK(asr_config_load(cfg, NARGS(argv) - 1, argv, err, sizeof err));
  ASSERT_EQ(cfg->nhosts, 1);
  ASSERT_STREQ(cfg->hosts[0].name, "c");
  ASSERT_EQ(cfg->hosts[0].slots, 3);
  cfg_del(cfg);

  /* hosts: [] in the job file undoes the system file's list */
  const char *job = write_file("j.yaml", "hosts: []\n");
  char *argv2[] = {"asrrun", "-f", (char *)job, "prog", NULL};
  cfg = malloc(sizeof *cfg);
  ASSERT_OK(asr_config_load(cfg, NARGS(argv2) - 1, argv2, err, sizeof err));
  ASSERT_EQ(cfg->nhosts, 0);
  cfg_del(cfg);

  /* ASRRUN_HOSTFILE (env) replaces the system file's hosts */
  setenv("ASRRUN_HOSTFILE", write_file("hosts.txt", "x slots=2\ny\n"), 1);
  cfg = malloc(sizeof *cfg);
  ASSERT_OK(asr_config_load(cfg, NARGS(argv2) - 1, argv2, err, sizeof err));
  ASSERT_EQ(cfg->nhosts, 2);
  ASSERT_STREQ(cfg->hosts[0].name, "x");
  ASSERT_CONTAINS(cfg->hostfile, "hosts.txt");
  cfg_del(cfg);
  check_no_leaks();
}

TEST(load_skips_missing_system_and_user_files) {
  isolate_env();
  setenv("ASR_SYSTEM_CONFIG", "/nonexistent/asr/asrrun.yaml", 1);
  unsetenv("ASR_USER_CONFIG");
  setenv("HOME", asr_test_tmpdir(), 1); /* no .config/asr/asrrun.yaml there */
  char *argv[] = {"asrrun", "prog", NULL};
  char err[512] = "";
  asr_config_t *cfg = malloc(sizeof *cfg);
  ASSERT_OK(asr_config_load(cfg, 2, argv, err, sizeof err));
  cfg_del(cfg);

  /* the default user path is ~/.config/asr/asrrun.yaml */
  char dir[PATH_MAX];
  snprintf(dir, sizeof dir, "%s/.config", asr_test_tmpdir());
  mkdir(dir, 0700);
  snprintf(dir, sizeof dir, "%s/.config/asr", asr_test_tmpdir());
  mkdir(dir, 0700);
  write_file(".config/asr/asrrun.yaml", "np: 7\n");
  cfg = malloc(sizeof *cfg);
  ASSERT_OK(asr_config_load(cfg, 2, argv, err, sizeof err));
  ASSERT_EQ(cfg->np, 7);
  cfg_del(cfg);
  check_no_leaks();
}

TEST(load_reports_bad_system_file) {
  isolate_env();
  const char *sys = write_file("system.yaml", "map_by: node\nbindto: core\n");
  setenv("ASR_SYSTEM_CONFIG", sys, 1);
  char *argv[] = {"asrrun", "prog", NULL};
  char err[512] = "", want[PATH_MAX + 64];
  asr_config_t *cfg = malloc(sizeof *cfg);
  ASSERT_EQ(asr_config_load(cfg, 2, argv, err, sizeof err), ASR_ECONFIG);
  snprintf(want, sizeof want, "%s:2: bindto: unknown key", sys);
  ASSERT_CONTAINS(err, want);
  cfg_del(cfg);
  check_no_leaks();
}

TEST(load_missing_job_file_is_an_error) {
  isolate_env();
  char *argv[] = {"asrrun", "-f", "/nonexistent/job.yaml", NULL};
  char err[512] = "";
  asr_config_t *cfg = malloc(sizeof *cfg);
  ASSERT_EQ(asr_config_load(cfg, 3, argv, err, sizeof err), ASR_ECONFIG);
  ASSERT_STREQ(err, "-f: job file '/nonexistent/job.yaml' does not exist");
  cfg_del(cfg);
  check_no_leaks();
}

/* -f after a flag that takes a value, or among the program's arguments, is
 * not the job file; the pre-scan must walk argv like the parser. */
TEST(load_prescan_finds_only_real_job_file) {
  isolate_env();
  char *argv[] = {"asrrun", "--output-dir", "-f", "prog", "-f", "/nonexistent.yaml", NULL};
  char err[512] = "";
  asr_config_t *cfg = malloc(sizeof *cfg);
  ASSERT_OK(asr_config_load(cfg, NARGS(argv) - 1, argv, err, sizeof err));
  ASSERT_STREQ(cfg->output_dir, "-f");
  ASSERT_STREQ(cfg->program, "prog");
  ASSERT_EQ(cfg->nargs, 2);
  ASSERT_STREQ(cfg->job_file, "");
  cfg_del(cfg);
  check_no_leaks();
}

TEST(load_help_reads_no_files) {
  isolate_env();
  setenv("ASR_SYSTEM_CONFIG", write_file("broken.yaml", "np: [\n"), 1);
  asr_config_t *cfg = malloc(sizeof *cfg);
  char err[512] = "";
  char *argv[] = {"asrrun", "--help", NULL};
  fflush(stdout);
  int saved = dup(1), devnull = open("/dev/null", O_WRONLY);
  dup2(devnull, 1);
  int rc = asr_config_load(cfg, 2, argv, err, sizeof err);
  fflush(stdout);
  dup2(saved, 1);
  close(saved);
  close(devnull);
  ASSERT_EQ(rc, 1);
  cfg_del(cfg);
  /* without --help the broken file is reported */
  char *argv2[] = {"asrrun", "prog", NULL};
  cfg = malloc(sizeof *cfg);
  ASSERT_EQ(asr_config_load(cfg, 2, argv2, err, sizeof err), ASR_ECONFIG);
  ASSERT_CONTAINS(err, "broken.yaml:");
  cfg_del(cfg);
  check_no_leaks();
}

/* ------------------------------------------------------------------------ */
/* The command line                                                         */
/* ------------------------------------------------------------------------ */

TEST(cli_every_flag) {
  isolate_env();
  const char *hf = write_file("hosts.txt", "h1 slots=2\n");
  const char *rf = write_file("ranks.txt", "rank 0=h1 slot=0\n");
  asr_config_t *cfg = cfg_new();
  char err[512];
  ASSERT_OK(PARSE(cfg, err, "-n", "6", "--hostfile", hf, "--lnc-per-host", "4", "-f", "job.yaml", "--map-by",
                  "node", "--bind-to", "numa", "--report-bindings", "-x", "A=1", "-x", "B", "--no-tag-output",
                  "--output-dir", "/tmp/out", "--timeout", "90", "--bootstrap-port", "4242", "--provider",
                  "tcp", "--dry-run", "-v", "--launcher", "rsh", "--launch-agent", "ip netns exec ns1",
                  "--prefix", "/opt/asr", "--if-include", "eth1", "--npernode", "2", "--cpus-per-rank", "3",
                  "--oversubscribe", "--rankfile", rf, "./app", "arg1", "--arg2"));
  ASSERT_EQ(cfg->npernode, 2);
  ASSERT_EQ(cfg->cpus_per_rank, 3);
  ASSERT_EQ(cfg->oversubscribe, 1);
  ASSERT_STREQ(cfg->rankfile, rf);
  ASSERT_EQ(cfg->nrf, 1);
  ASSERT_EQ(cfg->np, 6);
  ASSERT_EQ(cfg->nhosts, 1);
  ASSERT_STREQ(cfg->hosts[0].name, "h1");
  ASSERT_EQ(cfg->hosts[0].slots, 2);
  ASSERT_STREQ(cfg->hostfile, hf);
  ASSERT_EQ(cfg->lnc_per_host, 4);
  ASSERT_STREQ(cfg->job_file, "job.yaml");
  ASSERT_EQ(cfg->map_by, ASR_MAP_NODE);
  ASSERT_EQ(cfg->bind_to, ASR_BIND_NUMA);
  ASSERT_EQ(cfg->report_bindings, 1);
  ASSERT_EQ(cfg->nenv, 2);
  ASSERT_STREQ(cfg->env[0].name, "A");
  ASSERT_STREQ(cfg->env[0].value, "1");
  ASSERT_EQ(cfg->env[0].has_value, 1);
  ASSERT_STREQ(cfg->env[1].name, "B");
  ASSERT_EQ(cfg->env[1].has_value, 0);
  ASSERT_EQ(cfg->tag_output, 0);
  ASSERT_STREQ(cfg->output_dir, "/tmp/out");
  ASSERT_EQ(cfg->timeout_s, 90);
  ASSERT_EQ(cfg->bootstrap_port, 4242);
  ASSERT_STREQ(cfg->provider, "tcp");
  ASSERT_EQ(cfg->dry_run, 1);
  ASSERT_EQ(cfg->verbose, 1);
  ASSERT_EQ(cfg->launcher, ASR_LAUNCHER_RSH);
  ASSERT_STREQ(cfg->launch_agent, "ip netns exec ns1");
  ASSERT_STREQ(cfg->prefix, "/opt/asr");
  ASSERT_STREQ(cfg->if_include, "eth1");
  ASSERT_STREQ(cfg->program, "./app");
  ASSERT_EQ(cfg->nargs, 2);
  ASSERT_STREQ(cfg->args[0], "arg1");
  ASSERT_STREQ(cfg->args[1], "--arg2");
  cfg_del(cfg);
  check_no_leaks();
}

TEST(cli_equals_form_and_aliases) {
  asr_config_t *cfg = cfg_new();
  char err[512];
  ASSERT_OK(PARSE(cfg, err, "-np=3", "--host=a:2,b", "--map-by=node", "--bind-to=none", "--timeout=7",
                  "--bootstrap-port=0", "--provider=shm", "--launcher=slurm", "--output-dir=d", "-x=V=a=b",
                  "--launch-agent=ssh -q", "--prefix=/p", "--if-include=10.0.0.1", "--lnc-per-host=128",
                  "--tag-output", "-f=j.yaml", "prog"));
  ASSERT_EQ(cfg->np, 3);
  ASSERT_EQ(cfg->nhosts, 2);
  ASSERT_EQ(cfg->hosts[0].slots, 2);
  ASSERT_EQ(cfg->hosts[1].slots, 0);
  ASSERT_EQ(cfg->map_by, ASR_MAP_NODE);
  ASSERT_EQ(cfg->bind_to, ASR_BIND_NONE);
  ASSERT_EQ(cfg->timeout_s, 7);
  ASSERT_STREQ(cfg->provider, "shm");
  ASSERT_EQ(cfg->launcher, ASR_LAUNCHER_SLURM);
  ASSERT_STREQ(cfg->output_dir, "d");
  ASSERT_STREQ(cfg->env[0].name, "V");
  ASSERT_STREQ(cfg->env[0].value, "a=b");
  ASSERT_STREQ(cfg->launch_agent, "ssh -q");
  ASSERT_STREQ(cfg->if_include, "10.0.0.1");
  ASSERT_EQ(cfg->lnc_per_host, 128);
  ASSERT_EQ(cfg->tag_output, 1);
  ASSERT_STREQ(cfg->job_file, "j.yaml");
  ASSERT_STREQ(cfg->program, "prog");
  cfg_del(cfg);

  /* the last of a repeated flag wins; -x of the same name replaces */
  cfg = cfg_new();
  ASSERT_OK(PARSE(cfg, err, "-n", "2", "-n", "3", "-x", "A=1", "-x", "A=2", "--bind-to", "core", "--bind-to",
                  "package", "prog"));
  ASSERT_EQ(cfg->np, 3);
  ASSERT_EQ(cfg->nenv, 1);
  ASSERT_STREQ(cfg->env[0].value, "2");
  ASSERT_EQ(cfg->bind_to, ASR_BIND_PACKAGE);
  cfg_del(cfg);
  check_no_leaks();
}

TEST(cli_program_ends_options) {
  asr_config_t *cfg = cfg_new();
  char err[512];
  ASSERT_OK(PARSE(cfg, err, "-n", "2", "prog", "-n", "5", "--foo", "--"));
  ASSERT_EQ(cfg->np, 2);
  ASSERT_STREQ(cfg->program, "prog");
  ASSERT_EQ(cfg->nargs, 4);
  ASSERT_STREQ(cfg->args[0], "-n");
  ASSERT_STREQ(cfg->args[2], "--foo");
  ASSERT_STREQ(cfg->args[3], "--");
  cfg_del(cfg);

  /* "--" ends the options, so the program may start with a dash */
  cfg = cfg_new();
  ASSERT_OK(PARSE(cfg, err, "--dry-run", "--", "-weird", "x"));
  ASSERT_STREQ(cfg->program, "-weird");
  ASSERT_EQ(cfg->nargs, 1);
  ASSERT_EQ(cfg->dry_run, 1);
  cfg_del(cfg);

  /* a second program replaces the first and frees its arguments */
  cfg = cfg_new();
  ASSERT_OK(PARSE(cfg, err, "a", "1", "2"));
  ASSERT_OK(PARSE(cfg, err, "b"));
  ASSERT_STREQ(cfg->program, "b");
  ASSERT_EQ(cfg->nargs, 0);
  cfg_del(cfg);
  check_no_leaks();
}

TEST(cli_verbose_counts) {
  asr_config_t *cfg = cfg_new();
  char err[512];
  ASSERT_OK(PARSE(cfg, err, "-v", "-v", "-vvv", "prog"));
  ASSERT_EQ(cfg->verbose, 5);
  cfg_del(cfg);
  check_no_leaks();
}

TEST(cli_help_lists_every_flag) {
  static const char *const flags[] = {"-n, -np N",
                                      "-H, --host HOST[:SLOTS],...",
                                      "--hostfile FILE",
                                      "--lnc-per-host N",
                                      "-f FILE",
                                      "--npernode, -ppn N",
                                      "--map-by slot|node|core|numa|package|ppr:N:OBJ",
                                      "--rankfile FILE",
                                      "--bind-to auto|none|core|numa|package",
                                      "--cpus-per-rank N",
                                      "--oversubscribe",
                                      "--report-bindings",
                                      "-x VAR[=VAL]",
                                      "--tag-output",
                                      "--no-tag-output",
                                      "--output-dir DIR",
                                      "--timeout SECONDS",
                                      "--bootstrap-port P",
                                      "--provider NAME",
                                      "--dry-run",
                                      "-v ",
                                      "--version",
                                      "--list-env[=markdown]",
                                      "-h, --help",
                                      "--launcher auto|local|rsh|slurm",
                                      "--launch-agent CMD",
                                      "--prefix DIR",
                                      "--if-include IFACE|NET/N|ADDR",
                                      "--heartbeat-timeout SECONDS",
                                      "--tree-radix N",
                                      "--allow-early-exit",
                                      "--on-failure abort|continue|restart",
                                      "--max-restarts N",
                                      "--report-state-on-timeout",
                                      "--get-stack-traces",
                                      "--metrics-port PORT|ADDR:PORT",
                                      "--status[=JOB]",
                                      "--timestamp-output",
                                      "--wdir DIR",
                                      "--trace FILE",
                                      "--stdin RANK|all|none",
                                      "-q, --quiet"};
  asr_config_t *cfg = cfg_new();
  int rc;
  char *out = parse_captured(cfg, (const char *const[]){"--help", NULL}, &rc);
  ASSERT_EQ(rc, 1);
  ASSERT_CONTAINS(out, "usage: asrrun [options] PROGRAM [ARGS...]");
  for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++) {
    char line[128];
    snprintf(line, sizeof line, "\n  %s", flags[i]);
    ASSERT_CONTAINS(out, line);
  }
  /* one line per flag, and every line fits the 110-column house width */
  int option_lines = 0;
  for (char *l = out; *l;) {
    char *nl = strchr(l, '\n');
    size_t len = nl ? (size_t)(nl - l) : strlen(l);
    /* (the installed system file's path is on a line of its own: its length is the prefix's) */
    const char *sys = strstr(l, "/asr/asrrun.yaml");
    ASSERT_MSG(len <= 110 || (sys && sys < l + len), "help line too long: %.*s", (int)len, l);
    if (len > 3 && l[0] == ' ' && l[1] == ' ' && l[2] == '-') option_lines++;
    l += len + (nl ? 1 : 0);
  }
  ASSERT_EQ(option_lines, (int)(sizeof flags / sizeof flags[0]));
  free(out);
  out = parse_captured(cfg, (const char *const[]){"-n", "2", "-h", NULL}, &rc);
  ASSERT_EQ(rc, 1);
  ASSERT_CONTAINS(out, "--bind-to");
  free(out);
  cfg_del(cfg);
  check_no_leaks();
}

TEST(cli_version) {
  asr_config_t *cfg = cfg_new();
  int rc;
  char *out = parse_captured(cfg, (const char *const[]){"--version", NULL}, &rc);
  ASSERT_EQ(rc, 1);
  ASSERT_STREQ(out, "asrrun (asr) " PACKAGE_VERSION "\n");
  free(out);
  cfg_del(cfg);
  check_no_leaks();
}

/* Every class of bad input: ASR_ECONFIG and a message that says what. */
TEST(cli_bad_inputs) {
  static char long_arg[2100];
  memset(long_arg, 'x', sizeof long_arg - 1);
  const char *hf = write_file("hosts.txt", "a\n");
  struct {
    const char *args[6];
    const char *msg; /* the whole message, or a prefix ending in '*' */
  } cases[] = {
      {{"--bind-to", "cores", "p"}, "--bind-to: 'cores' is not one of none, core, numa, package, auto"},
      {{"-n", "abc", "p"}, "-n: 'abc' is not a positive number"},
      {{"-n", "0", "p"}, "-n: '0' is not a positive number"},
      {{"-np", "-3", "p"}, "-np: '-3' is not a positive number"},
      {{"-n", "4x", "p"}, "-n: '4x' is not a positive number"},
      {{"-n", " 4", "p"}, "-n: ' 4' is not a positive number"},
      {{"-n", "999999999999999999999", "p"}, "-n: '999999999999999999999' is not a positive number"},
      {{"-n", "200000", "p"}, "-n: '200000' is out of range: use 1 to 131072"},
      {{"--foo", "p"}, "unknown option '--foo' (see asrrun --help)"},
      {{"--foo=1", "p"}, "unknown option '--foo' (see asrrun --help)"},
      {{"-N", "2", "p"}, "unknown option '-N' (see asrrun --help)"},
      {{"-n", "2"}, "no program given: asrrun [options] PROGRAM [ARGS]"},
      {{"--"}, "no program given: asrrun [options] PROGRAM [ARGS]"},
      {{"--map-by", "socket", "p"},
       "--map-by: 'socket' is not one of slot, node, core, numa, package, ppr:N:node, ppr:N:numa, "
       "ppr:N:package"},
      {{"--map-by", "ppr:0:node", "p"}, "--map-by: 'ppr:0:node': N must be a number from 1 to 128"},
      {{"--map-by", "ppr:x:numa", "p"}, "--map-by: 'ppr:x:numa': N must be a number from 1 to 128"},
      {{"--map-by", "ppr:2:core", "p"}, "--map-by: 'ppr:2:core': the object must be node, numa or package"},
      {{"--map-by", "ppr:2", "p"}, "--map-by: 'ppr:2': write ppr:N:node, ppr:N:numa or ppr:N:package"},
      {{"--npernode", "0", "p"}, "--npernode: '0' is not a positive number"},
      {{"-ppn", "129", "p"}, "-ppn: '129' is out of range: use 1 to 128"},
      {{"--cpus-per-rank", "0", "p"}, "--cpus-per-rank: '0' is not a positive number"},
      {{"--oversubscribe=1", "p"}, "--oversubscribe takes no value (got '--oversubscribe=1')"},
      {{"--rankfile", "/nonexistent/rf", "p"},
       "--rankfile: cannot open rankfile '/nonexistent/rf': No such file or directory"},
      {{"--launcher", "ssh", "p"}, "--launcher: 'ssh' is not one of auto, local, rsh, slurm"},
      {{"--lnc-per-host", "200", "p"}, "--lnc-per-host: '200' is out of range: use 1 to 128"},
      {{"--lnc-per-host", "0", "p"}, "--lnc-per-host: '0' is not a positive number"},
      {{"--timeout", "-1", "p"}, "--timeout: '-1' is not a number"},
      {{"--timeout", "1h", "p"}, "--timeout: '1h' is not a number"},
      {{"--timeout", "99999999", "p"}, "--timeout: '99999999' is out of range: use 0 to 31536000"},
      {{"--bootstrap-port", "70000", "p"}, "--bootstrap-port: '70000' is out of range: use 0 to 65535"},
      {{"--provider", long_arg, "p"},
       "--provider: 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx...' is too long (at most 63 bytes)"},
      {{"--output-dir", long_arg, "p"}, "--output-dir: '*"},
      {{"--launch-agent", "", "p"}, "--launch-agent: needs a non-empty value"},
      {{"-x", "1FOO=2", "p"},
       "-x: '1FOO' is not a variable name (letters, digits and '_', not starting with a digit)"},
      {{"-x", "A-B", "p"}, "-x: 'A-B' is not a variable name*"},
      {{"-x", "=v", "p"}, "-x: '' is not a variable name*"},
      {{"-x", long_arg, "p"}, "-x: variable name 'xxxx*"},
      {{"-n"}, "-n needs a value: -n N"},
      {{"--version=2", "p"}, "--version takes no value (got '--version=2')"},
      {{"--bind-to"}, "--bind-to needs a value: --bind-to auto|none|core|numa|package"},
      {{"--dry-run=1", "p"}, "--dry-run takes no value (got '--dry-run=1')"},
      {{"-H", "a,,b", "p"}, "-H: empty host in 'a,,b'; write HOST[:SLOTS],..."},
      {{"--host", "", "p"}, "--host: empty host in ''; write HOST[:SLOTS],..."},
      {{"-H", "a:x", "p"}, "-H: 'a:x': slots 'x' is not a number from 1 to 128"},
      {{"-H", "a:0", "p"}, "-H: 'a:0': slots '0' is not a number from 1 to 128"},
      {{"-H", "a:129", "p"}, "-H: 'a:129': slots '129' is not a number from 1 to 128"},
      {{"-H", ":2", "p"}, "-H: empty host name"},
      {{"-H", "a,b,a:2", "p"}, "-H: host 'a' is listed twice; list it once with all its slots"},
      {{"-H", "a b", "p"}, "-H: 'a b' is not a host name (letters, digits, '-', '.', '_')"},
      {{"-H", "a", "--hostfile", hf, "p"}, "-H and --hostfile both given; use one of them"},
      {{"--hostfile", hf, "--host", "a", "p"}, "-H and --hostfile both given; use one of them"},
      {{"--hostfile", "/nonexistent/h", "p"},
       "--hostfile: cannot open hostfile '/nonexistent/h': No such file or directory"},
      {{"-f", "", "p"}, "-f: needs a file name"},
      {{"--tag-output=no", "p"}, "--tag-output takes no value (got '--tag-output=no')"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    asr_config_t *cfg = cfg_new();
    char err[512];
    const char *args[8] = {0};
    memcpy(args, cases[i].args, sizeof cases[i].args);
    int rc = parse(cfg, err, sizeof err, args);
    ASSERT_MSG(rc == ASR_ECONFIG, "case %zu (%s): rc %d, err '%s'", i, args[0], rc, err);
    size_t n = strlen(cases[i].msg);
    if (cases[i].msg[n - 1] == '*')
      ASSERT_MSG(strncmp(err, cases[i].msg, n - 1) == 0, "case %zu: '%s' does not start with '%.*s'", i, err,
                 (int)n - 1, cases[i].msg);
    else
      ASSERT_MSG(strcmp(err, cases[i].msg) == 0, "case %zu: got '%s', want '%s'", i, err, cases[i].msg);
    cfg_del(cfg);
  }
  check_no_leaks();
}

TEST(cli_too_many_vars_and_args) {
  asr_config_t *cfg = cfg_new();
  char err[512];
  for (int i = 0; i < ASR_CFG_MAX_ENV; i++) {
    char spec[32];
    snprintf(spec, sizeof spec, "V%d=%d", i, i);
    ASSERT_OK(asr__config_put_env_spec(cfg, spec, "-x", err, sizeof err));
  }
  ASSERT_OK(asr__config_put_env_spec(cfg, "V3=again", "-x", err, sizeof err)); /* a replacement still fits */
  ASSERT_EQ(asr__config_put_env_spec(cfg, "ONE_MORE", "-x", err, sizeof err), ASR_ECONFIG);
  ASSERT_STREQ(err, "-x: more than 256 exported variables");
  cfg_del(cfg);

  static char *argv[ASR_CFG_MAX_ARGS + 3];
  argv[0] = "asrrun";
  for (int i = 1; i < ASR_CFG_MAX_ARGS + 3; i++) argv[i] = "a";
  cfg = cfg_new();
  ASSERT_OK(
      asr_config_parse_args(cfg, ASR_CFG_MAX_ARGS + 2, argv, err, sizeof err)); /* program + 1024 args */
  ASSERT_EQ(cfg->nargs, ASR_CFG_MAX_ARGS);
  ASSERT_EQ(asr_config_parse_args(cfg, ASR_CFG_MAX_ARGS + 3, argv, err, sizeof err), ASR_ECONFIG);
  ASSERT_STREQ(err, "program: 1025 program arguments, at most 1024");
  ASSERT_EQ(cfg->nargs, ASR_CFG_MAX_ARGS); /* the old program is kept */
  cfg_del(cfg);
  check_no_leaks();
}

/* ------------------------------------------------------------------------ */
/* The environment                                                          */
/* ------------------------------------------------------------------------ */

TEST(env_every_variable) {
  isolate_env();
  const char *hf = write_file("hosts.txt", "e1 slots=3\ne2\n");
  setenv("ASRRUN_NP", "9", 1);
  setenv("ASRRUN_MAP_BY", "node", 1);
  setenv("ASRRUN_BIND_TO", "package", 1);
  setenv("ASRRUN_TIMEOUT", "33", 1);
  setenv("ASRRUN_PROVIDER", "verbs", 1);
  setenv("ASRRUN_BOOTSTRAP_PORT", "5555", 1);
  setenv("ASRRUN_LNC_PER_HOST", "16", 1);
  setenv("ASRRUN_TAG_OUTPUT", "0", 1);
  setenv("ASRRUN_OUTPUT_DIR", "/out", 1);
  setenv("ASRRUN_HOSTFILE", hf, 1);
  setenv("ASRRUN_LAUNCHER", "local", 1);
  setenv("ASRRUN_LAUNCH_AGENT", "rsh", 1);
  setenv("ASRRUN_PREFIX", "/pre", 1);
  setenv("ASRRUN_IF_INCLUDE", "ib0", 1);
  setenv("ASRRUN_REPORT_BINDINGS", "1", 1);
  setenv("ASRRUN_NPERNODE", "3", 1);
  setenv("ASRRUN_CPUS_PER_RANK", "2", 1);
  setenv("ASRRUN_OVERSUBSCRIBE", "yes", 1);
  setenv("ASRRUN_RANKFILE", write_file("ranks.txt", "rank 0=e1 slot=1\n"), 1);
  asr_config_t *cfg = cfg_new();
  char err[512] = "";
  ASSERT_OK(asr_config_load_env(cfg, err, sizeof err));
  ASSERT_EQ(cfg->np, 9);
  ASSERT_EQ(cfg->map_by, ASR_MAP_NODE);
  ASSERT_EQ(cfg->bind_to, ASR_BIND_PACKAGE);
  ASSERT_EQ(cfg->timeout_s, 33);
  ASSERT_STREQ(cfg->provider, "verbs");
  ASSERT_EQ(cfg->bootstrap_port, 5555);
  ASSERT_EQ(cfg->lnc_per_host, 16);
  ASSERT_EQ(cfg->tag_output, 0);
  ASSERT_STREQ(cfg->output_dir, "/out");
  ASSERT_EQ(cfg->nhosts, 2);
  ASSERT_EQ(cfg->hosts[0].slots, 3);
  ASSERT_STREQ(cfg->hostfile, hf);
  ASSERT_EQ(cfg->launcher, ASR_LAUNCHER_LOCAL);
  ASSERT_STREQ(cfg->launch_agent, "rsh");
  ASSERT_STREQ(cfg->prefix, "/pre");
  ASSERT_STREQ(cfg->if_include, "ib0");
  ASSERT_EQ(cfg->report_bindings, 1);
  ASSERT_EQ(cfg->npernode, 3);
  ASSERT_EQ(cfg->cpus_per_rank, 2);
  ASSERT_EQ(cfg->oversubscribe, 1);
  ASSERT_EQ(cfg->nrf, 1);
  ASSERT_STREQ(cfg->rf[0].cores, "1");
  cfg_del(cfg);
  isolate_env();
  setenv("ASRRUN_MAP_BY", "ppr:4:package", 1);
  cfg = cfg_new();
  ASSERT_OK(asr_config_load_env(cfg, err, sizeof err));
  ASSERT_EQ(cfg->map_by, ASR_MAP_PPR_PACKAGE);
  ASSERT_EQ(cfg->ppr, 4);
  cfg_del(cfg);

  /* an empty variable counts as unset */
  isolate_env();
  setenv("ASRRUN_NP", "", 1);
  setenv("ASRRUN_TAG_OUTPUT", "", 1);
  cfg = cfg_new();
  ASSERT_OK(asr_config_load_env(cfg, err, sizeof err));
  ASSERT_EQ(cfg->np, 0);
  ASSERT_EQ(cfg->tag_output, 1);
  cfg_del(cfg);
  check_no_leaks();
}

TEST(env_bad_values_name_the_variable) {
  struct {
    const char *var, *val, *msg;
  } cases[] = {
      {"ASRRUN_BIND_TO", "cores", "ASRRUN_BIND_TO: 'cores' is not one of none, core, numa, package, auto"},
      {"ASRRUN_NP", "many", "ASRRUN_NP: 'many' is not a positive number"},
      {"ASRRUN_MAP_BY", "socket",
       "ASRRUN_MAP_BY: 'socket' is not one of slot, node, core, numa, package, ppr:N:node, ppr:N:numa, "
       "ppr:N:package"},
      {"ASRRUN_NPERNODE", "0", "ASRRUN_NPERNODE: '0' is not a positive number"},
      {"ASRRUN_CPUS_PER_RANK", "x", "ASRRUN_CPUS_PER_RANK: 'x' is not a positive number"},
      {"ASRRUN_OVERSUBSCRIBE", "2", "ASRRUN_OVERSUBSCRIBE: '2' is not a boolean: use true or false (1 or 0)"},
      {"ASRRUN_RANKFILE", "/nonexistent/rf",
       "ASRRUN_RANKFILE: cannot open rankfile '/nonexistent/rf': No such file or directory"},
      {"ASRRUN_TIMEOUT", "soon", "ASRRUN_TIMEOUT: 'soon' is not a number"},
      {"ASRRUN_BOOTSTRAP_PORT", "65536", "ASRRUN_BOOTSTRAP_PORT: '65536' is out of range: use 0 to 65535"},
      {"ASRRUN_LNC_PER_HOST", "129", "ASRRUN_LNC_PER_HOST: '129' is out of range: use 1 to 128"},
      {"ASRRUN_TAG_OUTPUT", "maybe",
       "ASRRUN_TAG_OUTPUT: 'maybe' is not a boolean: use true or false (1 or 0)"},
      {"ASRRUN_REPORT_BINDINGS", "2",
       "ASRRUN_REPORT_BINDINGS: '2' is not a boolean: use true or false (1 or 0)"},
      {"ASRRUN_LAUNCHER", "pbs", "ASRRUN_LAUNCHER: 'pbs' is not one of auto, local, rsh, slurm"},
      {"ASRRUN_HOSTFILE", "/nonexistent/hosts",
       "ASRRUN_HOSTFILE: cannot open hostfile '/nonexistent/hosts': No such file or directory"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    isolate_env();
    setenv(cases[i].var, cases[i].val, 1);
    asr_config_t *cfg = cfg_new();
    char err[512] = "";
    ASSERT_EQ(asr_config_load_env(cfg, err, sizeof err), ASR_ECONFIG);
    ASSERT_STREQ(err, cases[i].msg);
    cfg_del(cfg);
  }
  /* booleans take the YAML words too */
  isolate_env();
  setenv("ASRRUN_TAG_OUTPUT", "No", 1);
  setenv("ASRRUN_REPORT_BINDINGS", "on", 1);
  asr_config_t *cfg = cfg_new();
  char err[512];
  ASSERT_OK(asr_config_load_env(cfg, err, sizeof err));
  ASSERT_EQ(cfg->tag_output, 0);
  ASSERT_EQ(cfg->report_bindings, 1);
  cfg_del(cfg);
  check_no_leaks();
}

/* Each key takes its variable, type, range, words and help from its row of
 * common/asr_env.h (config_int.h), so what remains to hold is what the table
 * cannot say of asrrun's fields: every ASRRUN_* row is one key's (or
 * ASRRUN_HOSTFILE or ASRRUN_RANKFILE, which asrrun reads as files), only
 * asrrun reads it, its type is one a key stores, its value fits the key's
 * field, its words are in the order of the field's enum, and its default
 * parses (asr_config_defaults sets it and cannot report a failure). The
 * table that --list-env prints and README.md shows is then what asrrun
 * accepts. */
TEST(env_rows_are_the_key_table) {
  int keyed = 0;
  for (size_t i = 0; i < asr__cfg_nkeys; i++) {
    const asr__cfg_key_t *k = &asr__cfg_keys[i];
    const asr_env_row_t *r = asr__config_key_row(k);
    ASSERT_MSG(r, "%s: no row", k->name);
    if (k->own) {
      ASSERT_MSG(!r->name && k->row == ASR_ENV__COUNT, "%s: its own row has no variable", k->name);
    } else {
      ASSERT_MSG(r == asr_env_row(k->row) && !strncmp(r->name, "ASRRUN_", 7), "%s: no ASRRUN_* row", k->name);
      ASSERT_MSG(r->who == ASR_ENV_ASRRUN, "%s: only asrrun reads it", r->name);
      for (size_t j = 0; j < i; j++)
        ASSERT_MSG(asr__cfg_keys[j].own || asr__cfg_keys[j].row != k->row, "%s: keys %s and %s", r->name,
                   asr__cfg_keys[j].name, k->name);
      keyed++;
    }
    const char *what = r->name ? r->name : k->name;
    switch (asr__config_key_kind(k)) {
      case ASR__KEY_INT:
        ASSERT_MSG(k->cap == sizeof(int) && r->min >= INT_MIN && r->max <= INT_MAX && r->min <= r->max,
                   "%s: range %ld..%ld in an int", what, r->min, r->max);
        break;
      case ASR__KEY_BOOL:
      case ASR__KEY_WORD:
      case ASR__KEY_MAP: ASSERT_MSG(k->cap == sizeof(int), "%s: stored in an int", what); break;
      case ASR__KEY_STR:
        ASSERT_MSG(r->max > 0 && (size_t)r->max == k->cap - 1, "%s: at most %ld bytes in a field of %zu",
                   what, r->max, k->cap);
        break;
      case ASR__KEY_INVALID: ASSERT_MSG(0, "%s: type %d is no key's", what, (int)r->type); break;
    }
    /* the row's default parses, and is what asr_config_defaults set */
    asr_config_t *dflt = cfg_new(), *set = cfg_new();
    char err[512] = "";
    if (r->dflt)
      ASSERT_MSG(asr__config_set(set, k, r->dflt, what, err, sizeof err) == 0, "%s: %s", what, err);
    ASSERT_MSG(memcmp(dflt, set, sizeof *dflt) == 0, "%s: the default '%s' is not asrrun's", what,
               r->dflt ? r->dflt : "(none)");
    cfg_del(dflt);
    cfg_del(set);
  }
  int rows = 0;
  for (int i = 0; i < ASR_ENV__COUNT; i++) {
    const asr_env_row_t *r = asr_env_row((asr_env_id_t)i);
    if (strncmp(r->name, "ASRRUN_", 7) != 0) continue;
    rows++;
    int found = r->id == ASR_ENV_ASRRUN_HOSTFILE || r->id == ASR_ENV_ASRRUN_RANKFILE;
    for (size_t j = 0; j < asr__cfg_nkeys && !found; j++)
      found = !asr__cfg_keys[j].own && asr__cfg_keys[j].row == r->id;
    ASSERT_MSG(found, "%s is a row but no key's", r->name);
  }
  ASSERT_EQ(rows, keyed + 2);
  /* ranges that are the sizes of asrrun's tables */
  ASSERT_EQ(asr_env_row(ASR_ENV_ASRRUN_LNC_PER_HOST)->max, ASR_CFG_MAX_SLOTS);
  ASSERT_EQ(asr_env_row(ASR_ENV_ASRRUN_NPERNODE)->max, ASR_CFG_MAX_SLOTS);
  /* a WORD key stores the index of the word: the words are in enum order */
  static const struct {
    int v;
    const char *word;
  } bind[] = {{ASR_BIND_NONE, "none"},       {ASR_BIND_CORE, "core"}, {ASR_BIND_NUMA, "numa"},
              {ASR_BIND_PACKAGE, "package"}, {ASR_BIND_AUTO, "auto"}, {ASR_BIND_AUTO + 1, "?"}},
    launcher[] = {{ASR_LAUNCHER_AUTO, "auto"},
                  {ASR_LAUNCHER_LOCAL, "local"},
                  {ASR_LAUNCHER_RSH, "rsh"},
                  {ASR_LAUNCHER_SLURM, "slurm"},
                  {ASR_LAUNCHER_SLURM + 1, "?"}};
  for (size_t i = 0; i < sizeof bind / sizeof bind[0]; i++)
    ASSERT_STREQ(asr__config_bind_to_name((asr_bind_to_t)bind[i].v), bind[i].word);
  for (size_t i = 0; i < sizeof launcher / sizeof launcher[0]; i++)
    ASSERT_STREQ(asr__config_launcher_name((asr_launcher_t)launcher[i].v), launcher[i].word);
}

/* asrrun checks its whole environment: an unknown ASRRUN_* name is an error
 * like an unknown flag, an unknown ASR_* one a warning (once), and a bad
 * value of any row an error. */
TEST(env_names_and_values_checked) {
  isolate_env();
  char err[512] = "";
  unsetenv("ASR_SEQ_BITS");
  setenv("ASRRUN_BOGUS", "1", 1);
  ASSERT_EQ(asr_config_check_env(err, sizeof err), ASR_ECONFIG);
  ASSERT_STREQ(err, "unknown variable ASRRUN_BOGUS; asrrun --list-env lists them");
  asr_config_t *cfg = malloc(sizeof *cfg);
  char *argv[] = {"asrrun", "-n", "2", "prog", NULL};
  ASSERT_EQ(asr_config_load(cfg, 4, argv, err, sizeof err), ASR_ECONFIG);
  ASSERT_STREQ(err, "unknown variable ASRRUN_BOGUS; asrrun --list-env lists them");
  cfg_del(cfg);
  unsetenv("ASRRUN_BOGUS");
  setenv("ASRRUN_BIND", "core", 1);
  ASSERT_EQ(asr_config_check_env(err, sizeof err), ASR_ECONFIG);
  ASSERT_STREQ(err,
               "unknown variable ASRRUN_BIND (did you mean ASRRUN_BIND_TO?); asrrun --list-env lists them");
  unsetenv("ASRRUN_BIND");
  /* a bad ASR_* value, which only the ranks would have read */
  setenv("ASR_SEQ_BITS", "99", 1);
  ASSERT_EQ(asr_config_check_env(err, sizeof err), ASR_ECONFIG);
  ASSERT_STREQ(err, "ASR_SEQ_BITS: '99' is out of range: use 8 to 40");
  unsetenv("ASR_SEQ_BITS");
  /* --help, --version and --list-env check nothing */
  setenv("ASRRUN_NP", "abc", 1);
  char *help[] = {"asrrun", "--list-env", NULL};
  fflush(stdout);
  int saved = dup(1), devnull = open("/dev/null", O_WRONLY);
  dup2(devnull, 1);
  cfg = malloc(sizeof *cfg);
  int rc = asr_config_load(cfg, 2, help, err, sizeof err);
  fflush(stdout);
  dup2(saved, 1);
  close(saved);
  close(devnull);
  ASSERT_EQ(rc, 1);
  cfg_del(cfg);
  unsetenv("ASRRUN_NP");
  /* an unknown ASR_* name: one warning, however often asrrun checks */
  setenv("ASR_BOGUS_SETTING", "1", 1);
  char path[PATH_MAX];
  snprintf(path, sizeof path, "%s/stderr.txt", asr_test_tmpdir());
  int fd = open(path, O_CREAT | O_TRUNC | O_RDWR, 0600), saved2 = dup(2);
  dup2(fd, 2);
  int rc1 = asr_config_check_env(err, sizeof err), rc2 = asr_config_check_env(err, sizeof err);
  dup2(saved2, 2);
  close(saved2);
  lseek(fd, 0, SEEK_SET);
  char *out = asr_test_read_all(fd, 1000);
  close(fd);
  ASSERT_OK(rc1);
  ASSERT_OK(rc2);
  ASSERT_STREQ(out, "asrrun: warning: unknown variable ASR_BOGUS_SETTING; asrrun --list-env lists them\n");
  free(out);
  check_no_leaks();
}

/* A value asrrun exports for one of asr's variables is checked as the
 * variable would be: the ranks would fail on it anyway, one message each. */
TEST(exported_values_checked) {
  asr_config_t *cfg = cfg_new();
  char err[512];
  ASSERT_EQ(PARSE(cfg, err, "-x", "ASR_SEQ_BITS=99", "p"), ASR_ECONFIG);
  ASSERT_STREQ(err, "-x: ASR_SEQ_BITS: '99' is out of range: use 8 to 40");
  ASSERT_EQ(PARSE(cfg, err, "-x", "ASR_KV_SERVER=outside", "p"), ASR_ECONFIG);
  ASSERT_STREQ(err, "-x: ASR_KV_SERVER: 'outside' is not one of auto, external");
  ASSERT_OK(PARSE(cfg, err, "-x", "ASR_SEQ_BITS=8", "-x", "ASR_SEQ_BITS", "-x", "ASR_PROVIDER=", "-x",
                  "ASR_SLURM_X=anything", "p"));
  const char *y = write_file("env.yaml", "env:\n  ASR_OFI_PSM: perhaps\n");
  ASSERT_EQ(asr_config_load_yaml(cfg, y, err, sizeof err), ASR_ECONFIG);
  ASSERT_CONTAINS(err, "ASR_OFI_PSM: 'perhaps' is not a boolean");
  cfg_del(cfg);
  check_no_leaks();
}

TEST(cli_list_env) {
  asr_config_t *cfg = cfg_new();
  int rc;
  char *out = parse_captured(cfg, (const char *const[]){"--list-env", NULL}, &rc);
  ASSERT_EQ(rc, 1);
  for (int i = 0; i < ASR_ENV__COUNT; i++) ASSERT_CONTAINS(out, asr_env_row((asr_env_id_t)i)->name);
  free(out);
  out = parse_captured(cfg, (const char *const[]){"--list-env=markdown", NULL}, &rc);
  ASSERT_EQ(rc, 1);
  ASSERT_CONTAINS(out, "| Variable | Type | Default | Read by | Meaning |\n");
  ASSERT_CONTAINS(out, "\n| `ASRRUN_NP` | integer 1..131072 | - | asrrun | ");
  free(out);
  char err[512];
  ASSERT_EQ(PARSE(cfg, err, "--list-env=html"), ASR_ECONFIG);
  ASSERT_STREQ(err, "--list-env: 'html' is not one of text, markdown");
  cfg_del(cfg);
  check_no_leaks();
}

/* ------------------------------------------------------------------------ */
/* YAML                                                                     */
/* ------------------------------------------------------------------------ */

TEST(yaml_every_key) {
  const char *path = write_file("all.yaml",
                                "# a comment\n"
                                "np: 12\n"
                                "hosts:\n"
                                "  - alpha\n"
                                "  - \"beta:4\"\n"
                                "  - {name: gamma, slots: 8}\n"
                                "  - name: delta\n"
                                "lnc_per_host: 2\n"
                                "map_by: node\n"
                                "bind_to: none\n"
                                "report_bindings: yes\n"
                                "env:\n"
                                "  OMP_NUM_THREADS: 2\n"
                                "  HOME: ~\n"
                                "  EMPTY: \"\"\n"
                                "tag_output: off\n"
                                "output_dir: /logs\n"
                                "timeout: 3600\n"
                                "bootstrap_port: 7000\n"
                                "provider: \"tcp;ofi_rxm\"\n"
                                "launcher: rsh\n"
                                "launch_agent: ssh -x\n"
                                "prefix: /opt/asr\n"
                                "if_include: 192.168.1.0\n"
                                "heartbeat_timeout: 7\n"
                                "npernode: 5\n"
                                "cpus_per_rank: 2\n"
                                "oversubscribe: true\n"
                                "verbose: 2\n"
                                "program: ./train\n"
                                "args:\n"
                                "  - --epochs\n"
                                "  - 3\n");
  asr_config_t *cfg = cfg_new();
  char err[512] = "";
  ASSERT_OK(asr_config_load_yaml(cfg, path, err, sizeof err));
  ASSERT_EQ(cfg->np, 12);
  ASSERT_EQ(cfg->nhosts, 4);
  ASSERT_STREQ(cfg->hosts[0].name, "alpha");
  ASSERT_EQ(cfg->hosts[0].slots, 0);
  ASSERT_STREQ(cfg->hosts[1].name, "beta");
  ASSERT_EQ(cfg->hosts[1].slots, 4);
  ASSERT_STREQ(cfg->hosts[2].name, "gamma");
  ASSERT_EQ(cfg->hosts[2].slots, 8);
  ASSERT_STREQ(cfg->hosts[3].name, "delta");
  ASSERT_EQ(cfg->hosts[3].slots, 0);
  ASSERT_EQ(cfg->lnc_per_host, 2);
  ASSERT_EQ(cfg->map_by, ASR_MAP_NODE);
  ASSERT_EQ(cfg->bind_to, ASR_BIND_NONE);
  ASSERT_EQ(cfg->report_bindings, 1);
  int hv = -1;
  ASSERT_EQ(cfg->nenv, 3);
  ASSERT_STREQ(env_value(cfg, "OMP_NUM_THREADS", &hv), "2");
  ASSERT_EQ(hv, 1);
  env_value(cfg, "HOME", &hv);
  ASSERT_EQ(hv, 0); /* ~: copied from asrrun's environment */
  ASSERT_STREQ(env_value(cfg, "EMPTY", &hv), "");
  ASSERT_EQ(hv, 1); /* "": set to the empty string */
  ASSERT_EQ(cfg->tag_output, 0);
  ASSERT_STREQ(cfg->output_dir, "/logs");
  ASSERT_EQ(cfg->timeout_s, 3600);
  ASSERT_EQ(cfg->bootstrap_port, 7000);
  ASSERT_STREQ(cfg->provider, "tcp;ofi_rxm");
  ASSERT_EQ(cfg->launcher, ASR_LAUNCHER_RSH);
  ASSERT_STREQ(cfg->launch_agent, "ssh -x");
  ASSERT_STREQ(cfg->prefix, "/opt/asr");
  ASSERT_STREQ(cfg->if_include, "192.168.1.0");
  ASSERT_EQ(cfg->heartbeat_timeout_s, 7);
  ASSERT_EQ(cfg->npernode, 5);
  ASSERT_EQ(cfg->cpus_per_rank, 2);
  ASSERT_EQ(cfg->oversubscribe, 1);
  ASSERT_EQ(cfg->verbose, 2);
  ASSERT_STREQ(cfg->program, "./train");
  ASSERT_EQ(cfg->nargs, 2);
  ASSERT_STREQ(cfg->args[0], "--epochs");
  ASSERT_STREQ(cfg->args[1], "3");
  cfg_del(cfg);
  check_no_leaks();
}

TEST(yaml_env_as_list_and_empty_files) {
  asr_config_t *cfg = cfg_new();
  char err[512] = "";
  ASSERT_OK(
      asr_config_load_yaml(cfg, write_file("l.yaml", "env: [\"A=1\", B, \"C=x=y\"]\n"), err, sizeof err));
  int hv = -1;
  ASSERT_EQ(cfg->nenv, 3);
  ASSERT_STREQ(env_value(cfg, "A", &hv), "1");
  env_value(cfg, "B", &hv);
  ASSERT_EQ(hv, 0);
  ASSERT_STREQ(env_value(cfg, "C", &hv), "x=y");
  cfg_del(cfg);
  /* an empty file, or only comments, sets nothing */
  cfg = cfg_new();
  ASSERT_OK(asr_config_load_yaml(cfg, write_file("e.yaml", ""), err, sizeof err));
  ASSERT_OK(asr_config_load_yaml(cfg, write_file("c.yaml", "# nothing\n\n# here\n"), err, sizeof err));
  ASSERT_OK(asr_config_load_yaml(cfg, write_file("d.yaml", "---\n...\n"), err, sizeof err));
  ASSERT_EQ(cfg->np, 0);
  ASSERT_EQ(cfg->bind_to, ASR_BIND_AUTO);
  cfg_del(cfg);
  check_no_leaks();
}

TEST(yaml_missing_file_is_enoent) {
  asr_config_t *cfg = cfg_new();
  char err[512] = "";
  ASSERT_EQ(asr_config_load_yaml(cfg, "/nonexistent/asrrun.yaml", err, sizeof err), ASR_ENOENT);
  ASSERT_CONTAINS(err, "/nonexistent/asrrun.yaml");
  ASSERT_EQ(asr_config_load_yaml(cfg, asr_test_tmpdir(), err, sizeof err), ASR_ECONFIG);
  ASSERT_CONTAINS(err, "is a directory");
  cfg_del(cfg);
  check_no_leaks();
}

/* A relative hostfile in a YAML file is found next to that file. */
TEST(yaml_hostfile_relative_to_the_file) {
  char dir[PATH_MAX], path[PATH_MAX];
  snprintf(dir, sizeof dir, "%s/jobs", asr_test_tmpdir());
  ASSERT_OK(mkdir(dir, 0700));
  write_file("jobs/hosts.txt", "n1 slots=2\nn2 slots=5 # big one\n");
  snprintf(path, sizeof path, "%s", write_file("jobs/job.yaml", "hostfile: hosts.txt\n"));
  asr_config_t *cfg = cfg_new();
  char err[512] = "";
  ASSERT_OK(asr_config_load_yaml(cfg, path, err, sizeof err));
  ASSERT_EQ(cfg->nhosts, 2);
  ASSERT_EQ(cfg->hosts[1].slots, 5);
  ASSERT_CONTAINS(cfg->hostfile, "jobs/hosts.txt");
  cfg_del(cfg);
  check_no_leaks();
}

/* Unknown keys, wrong types, bad values and syntax errors: all name
 * FILE:LINE: KEY. */
TEST(yaml_errors_name_file_line_key) {
  struct {
    const char *yaml, *msg; /* msg follows "PATH:" */
  } cases[] = {
      {"np: 4\nnpp: 3\n",
       "2: npp: unknown key; the keys are np, lnc_per_host, npernode, map_by, bind_to, cpus_per_rank, "
       "oversubscribe, report_bindings, tag_output, timestamp_output, output_dir, trace, wdir, stdin, "
       "timeout, "
       "bootstrap_port, provider, launcher, launch_agent, prefix, if_include, heartbeat_timeout, tree_radix, "
       "allow_early_exit, on_failure, max_restarts, report_state_on_timeout, get_stack_traces, metrics_port, "
       "verbose, "
       "quiet, hosts, hostfile, "
       "rankfile, env, program, args"},
      {"np: [1, 2]\n", "1: np: expected a number, not a list"},
      {"np:\n  a: 1\n", "2: np: expected a number, not a mapping"},
      {"np:\n", "1: np: needs a value (a positive number)"},
      {"np: 0\n", "1: np: '0' is not a positive number"},
      {"timeout: 1.5\n", "1: timeout: '1.5' is not a number"},
      {"map_by: slot\n\nbind_to: cores\n",
       "3: bind_to: 'cores' is not one of none, core, numa, package, auto"},
      {"map_by: ppr:2:pu\n", "1: map_by: 'ppr:2:pu': the object must be node, numa or package"},
      {"map_by: [slot]\n", "1: map_by: expected a word, not a list"},
      {"npernode: 200\n", "1: npernode: '200' is out of range: use 1 to 128"},
      {"oversubscribe: sometimes\n",
       "1: oversubscribe: 'sometimes' is not a boolean: use true or false (1 or 0)"},
      {"rankfile: [a]\n", "1: rankfile: expected a file name, not a list"},
      {"rankfile: nope.txt\n", "*cannot open rankfile"},
      {"tag_output: maybe\n", "1: tag_output: 'maybe' is not a boolean: use true or false (1 or 0)"},
      {"report_bindings: [true]\n", "1: report_bindings: expected true or false, not a list"},
      {"launcher: [rsh]\n", "1: launcher: expected a word, not a list"},
      {"provider: {a: 1}\n", "1: provider: expected a string, not a mapping"},
      {"launch_agent: ~\n", "1: launch_agent: needs a non-empty value"},
      {"verbose: lots\n", "1: verbose: 'lots' is not a number"},
      {"np: 4\nnp: 5\n", "2: np: given twice (first on line 1)"},
      {"- a\n- b\n", "1: the file must be a mapping of 'key: value' lines, not a list"},
      {"just text\n", "1: the file must be a mapping of 'key: value' lines, not a single value"},
      {"[a]: 1\n", "1: a key must be a word, not a list"},
      {"hosts: a\n", "1: hosts: expected a list of hosts, not a single value"},
      {"hosts:\n  - a\n  - {name: b, slot: 2}\n",
       "3: hosts: unknown key 'slot' in a host; a host has name and slots"},
      {"hosts:\n  - {slots: 2}\n", "2: hosts: a host needs a name: {name: HOST, slots: N}"},
      {"hosts:\n  - {name: b, slots: 0}\n", "2: hosts: slots '0' is not a number from 1 to 128"},
      {"hosts:\n  - {name: b, slots: [1]}\n", "2: hosts: a host is written as {name: HOST, slots: N}"},
      {"hosts:\n  - a:0\n", "2: hosts: 'a:0': slots '0' is not a number from 1 to 128"},
      {"hosts:\n  - a\n  - a\n", "3: hosts: host 'a' is listed twice; list it once with all its slots"},
      {"hosts:\n  - [a]\n",
       "2: hosts: a host is \"NAME\", \"NAME:SLOTS\" or {name: NAME, slots: N}, not a list"},
      {"hosts: [a]\nhostfile: h.txt\n", "2: hostfile: hosts is also given (line 1); use one of them"},
      {"hostfile: h.txt\nhosts: [a]\n", "2: hosts: hostfile is also given (line 1); use one of them"},
      {"hostfile: [a]\n", "1: hostfile: expected a file name, not a list"},
      {"hostfile:\n", "1: hostfile: needs a file name"},
      {"env: 5\n", "1: env: expected a mapping (VAR: value) or a list (\"VAR=value\"), not a single value"},
      {"env:\n  1X: a\n",
       "2: env: '1X' is not a variable name (letters, digits and '_', not starting with a digit)"},
      {"env:\n  A: [1]\n", "2: env: the value of A must be a single value, not a list"},
      {"env:\n  - [A]\n", "2: env: expected \"VAR\" or \"VAR=value\", not a list"},
      {"program: p\nargs: a b\n",
       "2: args: expected a list of strings, not a single value (write args: [\"-a\", \"b\"])"},
      {"program: p\nargs:\n  - [x]\n", "3: args: each argument must be a single value, not a list"},
      {"args: [a]\n", "1: args: given without program; add 'program: PATH'"},
      {"program: [a]\n", "1: program: expected a program path, not a list"},
      {"program:\n", "1: program: needs a program path"},
      {"np: 1\n---\nnp: 2\n", "3: a second YAML document; keep all settings in one"},
      {"np: [1, 2\nmap_by: slot\n", "*YAML syntax error"},
      {"np: 1\n bad indent: 2\n", "2: YAML syntax error: mapping values are not allowed in this context"},
      {"np: \"4\n", "*YAML syntax error: found unexpected end of stream"},
  };
  write_file("h.txt", "a\n"); /* for the hostfile-then-hosts case */
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char name[32], want[2048];
    snprintf(name, sizeof name, "bad%zu.yaml", i);
    const char *path = write_file(name, cases[i].yaml);
    asr_config_t *cfg = cfg_new();
    char err[1024] = "";
    int rc = asr_config_load_yaml(cfg, path, err, sizeof err);
    ASSERT_MSG(rc == ASR_ECONFIG, "case %zu: rc %d, err '%s'", i, rc, err);
    if (cases[i].msg[0] == '*') {
      /* a syntax error: the file and a line, then what libyaml says */
      snprintf(want, sizeof want, "%s:", path);
      ASSERT_MSG(
          strncmp(err, want, strlen(want)) == 0 && err[strlen(want)] >= '1' && err[strlen(want)] <= '9',
          "case %zu: '%s' does not name file:line", i, err);
      ASSERT_CONTAINS(err, cases[i].msg + 1);
    } else {
      snprintf(want, sizeof want, "%s:%s", path, cases[i].msg);
      ASSERT_MSG(strcmp(err, want) == 0, "case %zu:\n got '%s'\nwant '%s'", i, err, want);
    }
    cfg_del(cfg);
  }
  check_no_leaks();
}

/* asr_config_load_yaml reads the file and hands it to the buffer parser:
 * both give the same settings and the same messages, the name standing for
 * the path. A file past the size bound is refused. */
TEST(yaml_buffer_is_the_file_parser) {
  static const char doc[] = "np: 6\nbind_to: numa\nhosts: [a:2, b]\nprogram: /bin/x\nargs: [-v, y]\n";
  asr_config_t *a = cfg_new(), *b = cfg_new();
  char err[512] = "", want[600];
  ASSERT_OK(asr_config_load_yaml(a, write_file("j.yaml", doc), err, sizeof err));
  ASSERT_OK(asr_config_load_yaml_buffer(b, "mem.yaml", doc, strlen(doc), err, sizeof err));
  ASSERT(a->np == 6 && b->np == 6 && a->bind_to == ASR_BIND_NUMA && b->bind_to == ASR_BIND_NUMA);
  ASSERT(a->nhosts == 2 && b->nhosts == 2 && b->hosts[0].slots == 2);
  ASSERT(a->nargs == 2 && b->nargs == 2);
  ASSERT_STREQ(b->args[1], "y");
  ASSERT_STREQ(b->program, "/bin/x");
  /* no NUL is needed: the length ends the document */
  ASSERT_OK(asr_config_load_yaml_buffer(b, "mem.yaml", "np: 3garbage", 5, err, sizeof err));
  ASSERT_EQ(b->np, 3);
  ASSERT_OK(asr_config_load_yaml_buffer(b, "mem.yaml", NULL, 0, err, sizeof err));
  ASSERT_EQ(asr_config_load_yaml_buffer(b, "mem.yaml", "np: 1\nnp: 2\n", 12, err, sizeof err), ASR_ECONFIG);
  ASSERT_STREQ(err, "mem.yaml:2: np: given twice (first on line 1)");
  ASSERT_EQ(asr_config_load_yaml(b, "/dev/zero", err, sizeof err), ASR_ECONFIG);
  snprintf(want, sizeof want, "'/dev/zero' is larger than %d MiB; a settings file is far smaller",
           ASR_CFG_FILE_MAX >> 20);
  ASSERT_STREQ(err, want);
  cfg_del(a);
  cfg_del(b);
  check_no_leaks();
}

TEST(yaml_hostfile_errors_are_nested) {
  const char *hf = write_file("h.txt", "a\nb slots=x\n");
  (void)hf;
  const char *path = write_file("j.yaml", "np: 2\nhostfile: h.txt\n");
  asr_config_t *cfg = cfg_new();
  char err[1024] = "", want[1024];
  ASSERT_EQ(asr_config_load_yaml(cfg, path, err, sizeof err), ASR_ECONFIG);
  snprintf(want, sizeof want, "%s:2: hostfile: %s/h.txt:2: 'slots=x': slots must be a number from 1 to 128",
           path, asr_test_tmpdir());
  ASSERT_STREQ(err, want);
  cfg_del(cfg);
  check_no_leaks();
}

/* ------------------------------------------------------------------------ */
/* Hostfiles and -H                                                         */
/* ------------------------------------------------------------------------ */

TEST(hostfile_parses_hosts_slots_comments) {
  const char *path = write_file("hosts",
                                "# the cluster\n"
                                "\n"
                                "node1 slots=4\n"
                                "   node2\t  slots=2   # trailing comment\n"
                                "node3\n"
                                "10.0.0.4 slots=128\r\n"
                                "   \n"
                                "#node5 slots=9\n");
  asr_config_t *cfg = cfg_new();
  char err[512] = "";
  asr_config_parse_hostlist(cfg, "old:1", err, sizeof err);
  ASSERT_OK(asr_config_read_hostfile(cfg, path, err, sizeof err));
  ASSERT_EQ(cfg->nhosts, 4);
  ASSERT_STREQ(cfg->hosts[0].name, "node1");
  ASSERT_EQ(cfg->hosts[0].slots, 4);
  ASSERT_STREQ(cfg->hosts[1].name, "node2");
  ASSERT_EQ(cfg->hosts[1].slots, 2);
  ASSERT_STREQ(cfg->hosts[2].name, "node3");
  ASSERT_EQ(cfg->hosts[2].slots, 0);
  ASSERT_STREQ(cfg->hosts[3].name, "10.0.0.4");
  ASSERT_EQ(cfg->hosts[3].slots, 128);
  ASSERT_STREQ(cfg->hostfile, path);
  cfg_del(cfg);
  check_no_leaks();
}

TEST(hostfile_errors_name_file_and_line) {
  struct {
    const char *text, *msg; /* msg follows "PATH" */
  } cases[] = {
      {"a\nb slots=0\n", ":2: 'slots=0': slots must be a number from 1 to 128"},
      {"a slots=abc\n", ":1: 'slots=abc': slots must be a number from 1 to 128"},
      {"a slots=129\n", ":1: 'slots=129': slots must be a number from 1 to 128"},
      {"a\n\n# c\nb max_slots=4\n",
       ":4: unexpected 'max_slots=4' after the host name; write 'HOST [slots=N]'"},
      {"a b\n", ":1: unexpected 'b' after the host name; write 'HOST [slots=N]'"},
      {"a slots=1 slots=2\n", ":1: slots given twice; write 'HOST [slots=N]'"},
      {"a\nb\na slots=2\n", ":3: host 'a' is listed twice; list it once with all its slots"},
      {"a:2\n", ":1: 'a:2' is not a host name (letters, digits, '-', '.', '_')"},
      {"# only comments\n\n", ": no hosts in the file (one 'HOST [slots=N]' a line)"},
      {"", ": no hosts in the file (one 'HOST [slots=N]' a line)"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char name[32], want[1024], err[1024] = "";
    snprintf(name, sizeof name, "hosts%zu", i);
    const char *path = write_file(name, cases[i].text);
    asr_config_t *cfg = cfg_new();
    asr_config_parse_hostlist(cfg, "keep:2", err, sizeof err);
    ASSERT_EQ(asr_config_read_hostfile(cfg, path, err, sizeof err), ASR_ECONFIG);
    snprintf(want, sizeof want, "%s%s", path, cases[i].msg);
    ASSERT_MSG(strcmp(err, want) == 0, "case %zu:\n got '%s'\nwant '%s'", i, err, want);
    ASSERT_EQ(cfg->nhosts, 1); /* a bad file leaves the hosts as they were */
    ASSERT_STREQ(cfg->hosts[0].name, "keep");
    cfg_del(cfg);
  }
  /* a name of 128 bytes does not fit */
  char line[200];
  memset(line, 'h', 128);
  strcpy(line + 128, "\n");
  asr_config_t *cfg = cfg_new();
  char err[512];
  ASSERT_EQ(asr_config_read_hostfile(cfg, write_file("long", line), err, sizeof err), ASR_ECONFIG);
  ASSERT_CONTAINS(err, ":1: host name 'hhhh");
  ASSERT_CONTAINS(err, "is longer than 127 bytes");
  line[127] = '\n';
  line[128] = '\0';
  ASSERT_OK(asr_config_read_hostfile(cfg, write_file("long2", line), err, sizeof err));
  ASSERT_EQ(strlen(cfg->hosts[0].name), 127);
  cfg_del(cfg);
  check_no_leaks();
}

/* The buffer entry point is the file reader's parser: same hosts, and the
 * name stands for the path in messages and in cfg->hostfile. */
TEST(hostfile_buffer_is_the_file_parser) {
  static const char text[] = "# c\nn1 slots=3\n\n  n2\t# x\nn3 slots=1"; /* no newline at the end */
  asr_config_t *cfg = cfg_new();
  char err[512] = "";
  ASSERT_OK(asr_config_read_hostfile_buffer(cfg, "mem-hosts", text, strlen(text), err, sizeof err));
  ASSERT_EQ(cfg->nhosts, 3);
  ASSERT_STREQ(cfg->hosts[0].name, "n1");
  ASSERT_EQ(cfg->hosts[0].slots, 3);
  ASSERT_STREQ(cfg->hosts[1].name, "n2");
  ASSERT_EQ(cfg->hosts[1].slots, 0);
  ASSERT_EQ(cfg->hosts[2].slots, 1);
  ASSERT_STREQ(cfg->hostfile, "mem-hosts");
  /* the length ends the text, whatever follows */
  ASSERT_OK(asr_config_read_hostfile_buffer(cfg, "m", "a\nb slots=x", 2, err, sizeof err));
  ASSERT_EQ(cfg->nhosts, 1);
  ASSERT_EQ(asr_config_read_hostfile_buffer(cfg, "m", "a\nb slots=x", 11, err, sizeof err), ASR_ECONFIG);
  ASSERT_STREQ(err, "m:2: 'slots=x': slots must be a number from 1 to 128");
  /* a NUL byte would cut its line short unseen: "a<NUL> slots=9" was host a
   * with no slots */
  ASSERT_EQ(asr_config_read_hostfile_buffer(cfg, "m", "b\na\0 slots=9\n", 14, err, sizeof err), ASR_ECONFIG);
  ASSERT_STREQ(err, "m:2: a NUL byte; a hostfile is text, 'HOST [slots=N]' a line");
  ASSERT_EQ(asr_config_read_hostfile_buffer(cfg, "m", NULL, 0, err, sizeof err), ASR_ECONFIG);
  ASSERT_STREQ(err, "m: no hosts in the file (one 'HOST [slots=N]' a line)");
  ASSERT_EQ(cfg->nhosts, 1); /* a bad text leaves the hosts as they were */
  ASSERT_EQ(asr_config_read_hostfile(cfg, "/dev/zero", err, sizeof err), ASR_ECONFIG);
  ASSERT_CONTAINS(err, "hostfile '/dev/zero' is larger than 16 MiB");
  cfg_del(cfg);
  check_no_leaks();
}

TEST(hostfile_at_most_1024_hosts) {
  char path[PATH_MAX];
  snprintf(path, sizeof path, "%s/many", asr_test_tmpdir());
  FILE *f = fopen(path, "w");
  ASSERT(f);
  for (int i = 0; i < ASR_CFG_MAX_HOSTS; i++) fprintf(f, "h%d slots=128\n", i);
  fclose(f);
  asr_config_t *cfg = cfg_new();
  char err[512] = "";
  ASSERT_OK(asr_config_read_hostfile(cfg, path, err, sizeof err));
  ASSERT_EQ(cfg->nhosts, ASR_CFG_MAX_HOSTS);
  f = fopen(path, "a");
  fprintf(f, "one-more\n");
  fclose(f);
  ASSERT_EQ(asr_config_read_hostfile(cfg, path, err, sizeof err), ASR_ECONFIG);
  ASSERT_CONTAINS(err, ":1025: more than 1024 hosts");
  cfg_del(cfg);
  check_no_leaks();
}

TEST(hostlist_parses_names_and_slots) {
  asr_config_t *cfg = cfg_new();
  char err[512] = "";
  ASSERT_OK(asr_config_parse_hostlist(cfg, "a:2,b,c-3.example.org:4", err, sizeof err));
  ASSERT_EQ(cfg->nhosts, 3);
  ASSERT_STREQ(cfg->hosts[0].name, "a");
  ASSERT_EQ(cfg->hosts[0].slots, 2);
  ASSERT_STREQ(cfg->hosts[1].name, "b");
  ASSERT_EQ(cfg->hosts[1].slots, 0);
  ASSERT_STREQ(cfg->hosts[2].name, "c-3.example.org");
  ASSERT_EQ(cfg->hosts[2].slots, 4);
  /* a new list replaces the old one; a bad one keeps it */
  ASSERT_OK(asr_config_parse_hostlist(cfg, "z", err, sizeof err));
  ASSERT_EQ(cfg->nhosts, 1);
  ASSERT_EQ(asr_config_parse_hostlist(cfg, "y,z:", err, sizeof err), ASR_ECONFIG);
  ASSERT_STREQ(err, "-H: 'z:': slots '' is not a number from 1 to 128");
  ASSERT_EQ(asr_config_parse_hostlist(cfg, "y,", err, sizeof err), ASR_ECONFIG);
  ASSERT_STREQ(err, "-H: empty host in 'y,'; write HOST[:SLOTS],...");
  ASSERT_EQ(cfg->nhosts, 1);
  ASSERT_STREQ(cfg->hosts[0].name, "z");
  cfg_del(cfg);
  check_no_leaks();
}

/* ------------------------------------------------------------------------ */
/* Rank mapping                                                             */
/* ------------------------------------------------------------------------ */

static asr_config_t *cfg_hosts(const char *list, int np, asr_map_by_t by) {
  asr_config_t *cfg = cfg_new();
  char err[512];
  if (list) ASSERT_OK(asr_config_parse_hostlist(cfg, list, err, sizeof err));
  cfg->np = np;
  cfg->map_by = by;
  return cfg;
}

static void expect_ranks(const asr_map_t *m, const char *const *hosts, const int *lncs, int n) {
  ASSERT_EQ(m->nranks, n);
  for (int r = 0; r < n; r++) {
    ASSERT_EQ(m->ranks[r].rank, r);
    ASSERT_MSG(strcmp(m->host_names[m->ranks[r].host], hosts[r]) == 0, "rank %d on %s, want %s", r,
               m->host_names[m->ranks[r].host], hosts[r]);
    ASSERT_MSG(m->ranks[r].lnc == lncs[r], "rank %d lnc %d, want %d", r, m->ranks[r].lnc, lncs[r]);
  }
}

TEST(map_by_slot_three_hosts) {
  asr_config_t *cfg = cfg_hosts("a:3,b:1,c:2", 5, ASR_MAP_SLOT);
  asr_map_t m;
  char err[512];
  ASSERT_OK(asr_map_build(cfg, "me", &m, err, sizeof err));
  expect_ranks(&m, (const char *const[]){"a", "a", "a", "b", "c"}, (const int[]){0, 1, 2, 0, 0}, 5);
  ASSERT_EQ(m.nhosts, 3);
  ASSERT_EQ(m.nlocal[0], 3);
  ASSERT_EQ(m.nlocal[1], 1);
  ASSERT_EQ(m.nlocal[2], 1);
  asr_map_free(&m);
  cfg_del(cfg);
  check_no_leaks();
}

TEST(map_by_node_three_hosts) {
  asr_config_t *cfg = cfg_hosts("a:3,b:1,c:2", 6, ASR_MAP_NODE);
  asr_map_t m;
  char err[512];
  ASSERT_OK(asr_map_build(cfg, "me", &m, err, sizeof err));
  /* round robin; b is full after rank 1, c after rank 4 */
  expect_ranks(&m, (const char *const[]){"a", "b", "c", "a", "c", "a"}, (const int[]){0, 0, 0, 1, 1, 2}, 6);
  ASSERT_EQ(m.nlocal[0], 3);
  ASSERT_EQ(m.nlocal[1], 1);
  ASSERT_EQ(m.nlocal[2], 2);
  asr_map_free(&m);
  cfg->np = 4;
  ASSERT_OK(asr_map_build(cfg, "me", &m, err, sizeof err));
  expect_ranks(&m, (const char *const[]){"a", "b", "c", "a"}, (const int[]){0, 0, 0, 1}, 4);
  asr_map_free(&m);
  cfg_del(cfg);
  check_no_leaks();
}

TEST(map_np0_fills_every_slot) {
  asr_config_t *cfg = cfg_hosts("a:3,b:1,c:2", 0, ASR_MAP_SLOT);
  asr_map_t m;
  char err[512];
  ASSERT_OK(asr_map_build(cfg, "me", &m, err, sizeof err));
  expect_ranks(&m, (const char *const[]){"a", "a", "a", "b", "c", "c"}, (const int[]){0, 1, 2, 0, 0, 1}, 6);
  asr_map_free(&m);
  cfg_del(cfg);
  /* hosts without a count take --lnc-per-host, else 1 */
  cfg = cfg_hosts("a,b:2,c", 0, ASR_MAP_SLOT);
  ASSERT_OK(asr_map_build(cfg, "me", &m, err, sizeof err));
  ASSERT_EQ(m.nranks, 4);
  asr_map_free(&m);
  cfg->lnc_per_host = 3;
  ASSERT_OK(asr_map_build(cfg, "me", &m, err, sizeof err));
  ASSERT_EQ(m.nranks, 8);
  ASSERT_EQ(m.nlocal[0], 3);
  ASSERT_EQ(m.nlocal[1], 2);
  ASSERT_EQ(m.nlocal[2], 3);
  asr_map_free(&m);
  cfg_del(cfg);
  check_no_leaks();
}

TEST(map_local_host) {
  asr_config_t *cfg = cfg_hosts(NULL, 4, ASR_MAP_SLOT);
  asr_map_t m;
  char err[512];
  ASSERT_OK(asr_map_build(cfg, "myhost", &m, err, sizeof err));
  ASSERT_EQ(m.nhosts, 1);
  ASSERT_STREQ(m.host_names[0], "myhost");
  expect_ranks(&m, (const char *const[]){"myhost", "myhost", "myhost", "myhost"}, (const int[]){0, 1, 2, 3},
               4);
  asr_map_free(&m);
  cfg->np = 0; /* no hosts, no -n: one rank */
  ASSERT_OK(asr_map_build(cfg, "myhost", &m, err, sizeof err));
  ASSERT_EQ(m.nranks, 1);
  asr_map_free(&m);
  cfg->lnc_per_host = 6;
  ASSERT_OK(asr_map_build(cfg, "myhost", &m, err, sizeof err));
  ASSERT_EQ(m.nranks, 6);
  asr_map_free(&m);
  cfg->np = 7; /* --lnc-per-host bounds the local host too */
  ASSERT_EQ(asr_map_build(cfg, "myhost", &m, err, sizeof err), ASR_ECONFIG);
  ASSERT_STREQ(
      err,
      "7 ranks requested but only 6 slots on 1 host; add hosts or slots, use --lnc-per-host, or allow it "
      "with --oversubscribe");
  cfg->lnc_per_host = 0;
  cfg->np = 128;
  ASSERT_OK(asr_map_build(cfg, "myhost", &m, err, sizeof err));
  ASSERT_EQ(m.ranks[127].lnc, 127);
  asr_map_free(&m);
  cfg->np = 129;
  ASSERT_EQ(asr_map_build(cfg, "myhost", &m, err, sizeof err), ASR_ECONFIG);
  ASSERT_STREQ(err,
               "-n 129 puts 129 ranks on host 'myhost' but a host runs at most 128 (one per LNC); "
               "add hosts with -H or --hostfile");
  cfg_del(cfg);
  check_no_leaks();
}

TEST(map_too_many_ranks) {
  asr_config_t *cfg = cfg_hosts("a:2,b:2", 8, ASR_MAP_NODE);
  asr_map_t m = {0};
  char err[512];
  ASSERT_EQ(asr_map_build(cfg, "me", &m, err, sizeof err), ASR_ECONFIG);
  ASSERT_STREQ(
      err,
      "8 ranks requested but only 4 slots on 2 hosts; add hosts or slots, use --lnc-per-host, or allow it "
      "with --oversubscribe");
  ASSERT(m.ranks == NULL); /* not written on failure */
  cfg_del(cfg);
  cfg = cfg_hosts("a", 2, ASR_MAP_SLOT);
  ASSERT_EQ(asr_map_build(cfg, "me", &m, err, sizeof err), ASR_ECONFIG);
  ASSERT_STREQ(
      err,
      "2 ranks requested but only 1 slot on 1 host; add hosts or slots, use --lnc-per-host, or allow "
      "it with --oversubscribe");
  cfg_del(cfg);
  check_no_leaks();
}

TEST(map_host_over_128_slots) {
  asr_config_t *cfg = cfg_hosts("a:2", 0, ASR_MAP_SLOT);
  cfg->hosts[0].slots = 200; /* set directly: the parsers refuse it earlier */
  asr_map_t m;
  char err[512];
  ASSERT_EQ(asr_map_build(cfg, "me", &m, err, sizeof err), ASR_ECONFIG);
  ASSERT_STREQ(err,
               "host 'a' has 200 slots but a host runs at most 128 ranks (one per LNC); lower its slots or "
               "add hosts");
  cfg_del(cfg);
  check_no_leaks();
}

/* Hosts that get no rank are left out of the map. */
TEST(map_unused_hosts_left_out) {
  asr_config_t *cfg = cfg_hosts("a:2,b:2,c:2", 3, ASR_MAP_SLOT);
  asr_map_t m;
  char err[512];
  ASSERT_OK(asr_map_build(cfg, "me", &m, err, sizeof err));
  ASSERT_EQ(m.nhosts, 2);
  ASSERT_STREQ(m.host_names[1], "b");
  ASSERT_EQ(m.nlocal[1], 1);
  ASSERT_EQ(m.ranks[2].host, 1);
  asr_map_free(&m);
  asr_map_free(&m); /* idempotent */
  cfg_del(cfg);
  check_no_leaks();
}

TEST(map_largest_job) {
  asr_config_t *cfg = cfg_new();
  for (int h = 0; h < ASR_CFG_MAX_HOSTS; h++) {
    snprintf(cfg->hosts[h].name, sizeof cfg->hosts[h].name, "n%04d", h);
    cfg->hosts[h].slots = 128;
  }
  cfg->nhosts = ASR_CFG_MAX_HOSTS;
  cfg->map_by = ASR_MAP_NODE;
  asr_map_t m;
  char err[512];
  ASSERT_OK(asr_map_build(cfg, "me", &m, err, sizeof err));
  ASSERT_EQ(m.nranks, 131072);
  ASSERT_EQ(m.ranks[131071].host, 1023);
  ASSERT_EQ(m.ranks[131071].lnc, 127);
  ASSERT_EQ(m.ranks[1024].host, 0);
  ASSERT_EQ(m.ranks[1024].lnc, 1);
  asr_map_free(&m);
  cfg_del(cfg);
  check_no_leaks();
}

TEST(map_dry_run_print) {
  asr_config_t *cfg = cfg_new();
  char err[512];
  ASSERT_OK(PARSE(cfg, err, "--dry-run", "-H", "a:2,b:1,c:2", "-n", "4", "--map-by", "node", "./app", "x"));
  ASSERT_EQ(cfg->dry_run, 1);
  asr_map_t m;
  ASSERT_OK(asr_map_build(cfg, "me", &m, err, sizeof err));
  char *buf = NULL;
  size_t len = 0;
  FILE *out = open_memstream(&buf, &len);
  ASSERT(out);
  asr_map_print(&m, cfg, out);
  fclose(out);
  ASSERT_STREQ(buf,
               "asrrun dry run: 4 ranks on 3 hosts (map-by node, bind-to auto): ./app x\n"
               "rank 0 -> host a lnc 0\n"
               "rank 1 -> host b lnc 0\n"
               "rank 2 -> host c lnc 0\n"
               "rank 3 -> host a lnc 1\n"
               "host a: 2 ranks\n"
               "host b: 1 rank\n"
               "host c: 1 rank\n");
  free(buf);
  asr_map_free(&m);
  cfg_del(cfg);
  check_no_leaks();
}

/* ------------------------------------------------------------------------ */
/* The shipped files                                                        */
/* ------------------------------------------------------------------------ */

/* conf/asrrun.yaml must parse and change nothing; conf/job-example.yaml must
 * parse and mention every key. */
TEST(conf_files_parse) {
  char path[PATH_MAX], err[1024] = "";
  asr_config_t *cfg = cfg_new(), *dflt = cfg_new();
  snprintf(path, sizeof path, "%s/conf/asrrun.yaml", ASR_TOP_SRCDIR);
  ASSERT_OK(asr_config_load_yaml(cfg, path, err, sizeof err));
  ASSERT(memcmp(cfg, dflt, sizeof *cfg) == 0);
  snprintf(path, sizeof path, "%s/conf/job-example.yaml", ASR_TOP_SRCDIR);
  ASSERT_MSG(asr_config_load_yaml(cfg, path, err, sizeof err) == 0, "%s", err);
  ASSERT_STREQ(cfg->program, "./my_app");
  FILE *f = fopen(path, "r");
  ASSERT(f);
  char *text = calloc(1, 65536);
  size_t n = fread(text, 1, 65535, f);
  fclose(f);
  text[n] = '\0';
  static const char *const keys[] = {"np",         "hosts",         "hostfile",        "lnc_per_host",
                                     "map_by",     "bind_to",       "report_bindings", "env",
                                     "tag_output", "output_dir",    "timeout",         "bootstrap_port",
                                     "provider",   "launcher",      "launch_agent",    "prefix",
                                     "if_include", "verbose",       "program",         "args",
                                     "npernode",   "cpus_per_rank", "oversubscribe",   "rankfile"};
  for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
    char line[64];
    snprintf(line, sizeof line, "\n%s:", keys[i]);
    char commented[64];
    snprintf(commented, sizeof commented, "\n# %s:", keys[i]);
    ASSERT_MSG(strstr(text, line) || strstr(text, commented), "job-example.yaml does not document %s",
               keys[i]);
  }
  free(text);
  cfg_del(cfg);
  cfg_del(dflt);
  check_no_leaks();
}

/* ------------------------------------------------------------------------ */
/* This machine listed once (asr_map_check_hosts)                           */
/* ------------------------------------------------------------------------ */

/* The test's idea of "this machine": the names in arg (NULL-ended). */
static int here_in(const asr_config_t *cfg, const char *host, void *arg) {
  if (cfg->launcher == ASR_LAUNCHER_LOCAL) return 1;
  for (const char *const *n = arg; *n; n++)
    if (!strcmp(*n, host)) return 1;
  return 0;
}

TEST(map_check_hosts_this_machine_once) {
  static const char *const me[] = {"localhost", "me", "127.0.0.2", NULL};
  char err[512];
  asr_config_t *cfg = cfg_hosts("localhost:2,b:1,me:2", 0, ASR_MAP_SLOT);
  ASSERT_EQ(asr_map_check_hosts(cfg, "me", here_in, (void *)me, err, sizeof err), ASR_ECONFIG);
  ASSERT_STREQ(err,
               "hosts 'localhost' and 'me' are both this machine (me), and asrrun starts one asrd per "
               "machine: list it once, with all 4 of its slots");
  cfg_del(cfg);
  /* slots not given count as --lnc-per-host (else 1), as the map counts them */
  cfg = cfg_hosts("a,127.0.0.2,me", 0, ASR_MAP_SLOT);
  cfg->lnc_per_host = 3;
  ASSERT_EQ(asr_map_check_hosts(cfg, "me", here_in, (void *)me, err, sizeof err), ASR_ECONFIG);
  ASSERT_CONTAINS(err, "hosts '127.0.0.2' and 'me' are both this machine (me)");
  ASSERT_CONTAINS(err, "all 6 of its slots");
  cfg_del(cfg);
  /* one name of this machine, or none, or no list at all: fine */
  static const char *const lists[] = {"a:2,me:2,b", "a,b,c", "localhost:128", NULL};
  for (int i = 0; lists[i]; i++) {
    cfg = cfg_hosts(lists[i], 0, ASR_MAP_SLOT);
    ASSERT_MSG(asr_map_check_hosts(cfg, "me", here_in, (void *)me, err, sizeof err) == 0, "%s: %s", lists[i],
               err);
    cfg_del(cfg);
  }
  cfg = cfg_hosts(NULL, 4, ASR_MAP_SLOT);
  ASSERT_OK(asr_map_check_hosts(cfg, "me", here_in, (void *)me, err, sizeof err));
  /* --launcher local starts every host's asrd here: two hosts are two asrd */
  cfg_del(cfg);
  cfg = cfg_hosts("a:1,b:1", 0, ASR_MAP_SLOT);
  cfg->launcher = ASR_LAUNCHER_LOCAL;
  ASSERT_EQ(asr_map_check_hosts(cfg, "me", here_in, (void *)me, err, sizeof err), ASR_ECONFIG);
  ASSERT_STREQ(err,
               "hosts 'a' and 'b' are both this machine (me) under --launcher local, which starts every "
               "asrd here, and asrrun starts one asrd per machine: list it once, with all 2 of its slots");
  cfg->nhosts = 1;
  ASSERT_OK(asr_map_check_hosts(cfg, "me", here_in, (void *)me, err, sizeof err));
  cfg_del(cfg);
  check_no_leaks();
}

/* ------------------------------------------------------------------------ */
/* Placement: --npernode, --map-by ppr/core/numa/package, --rankfile,       */
/* --cpus-per-rank, --oversubscribe, and the binding each rank gets         */
/* ------------------------------------------------------------------------ */

/* Two packages of two NUMA nodes of two cores: core L#i is PU P#i, NUMA node
 * j holds cores 2j and 2j+1, package p cores 4p..4p+3. */
#define TOPO_2P4N8C "pack:2 numa:2 core:2 pu:1"
/* One package, one NUMA node, two cores (this test machine's shape). */
#define TOPO_1P2C "pack:1 core:2 pu:1"

/* "PATH" + rest, for messages about a rankfile (static). */
static const char *fmt_rf(const char *path, const char *rest) {
  static char buf[2][1024];
  static int next;
  char *b = buf[next++ % 2];
  snprintf(b, sizeof buf[0], "%s%s", path, rest);
  return b;
}

static asr_topo_t *topo_of(const char *synthetic) {
  asr_topo_t *t = NULL;
  char err[512] = "";
  ASSERT_MSG(asr_topo_load(synthetic, &t, err, sizeof err) == 0, "topology '%s': %s", synthetic, err);
  return t;
}

/* Parses "asrrun ARGS... prog" into a new config (NULL-ended args). */
static asr_config_t *cfg_args(const char *const *args) {
  asr_config_t *cfg = cfg_new();
  char err[512];
  int rc = parse(cfg, err, sizeof err, args);
  ASSERT_MSG(rc == 0, "parse: %s", err);
  return cfg;
}
#define CFG_ARGS(...) cfg_args((const char *const[]){__VA_ARGS__, "prog", NULL})

/* Builds the map on topology t (NULL: none) and returns its binding lines
 * (malloc'd), or NULL with err set when the map is refused. */
static char *bindings_of(const asr_config_t *cfg, const asr_topo_t *t, asr_map_t *m, char *err,
                         size_t errlen) {
  if (asr_map_build_topo(cfg, "me", t, m, err, errlen) != 0) return NULL;
  char *buf = NULL;
  size_t len = 0;
  FILE *out = open_memstream(&buf, &len);
  ASSERT(out);
  asr_map_print_bindings(m, cfg, t, out);
  fclose(out);
  return buf;
}

TEST(place_cli_yaml_forms) {
  asr_config_t *cfg = CFG_ARGS("-ppn", "3", "--map-by", "ppr:2:numa", "--bind-to", "auto");
  ASSERT_EQ(cfg->npernode, 3);
  ASSERT_EQ(cfg->map_by, ASR_MAP_PPR_NUMA);
  ASSERT_EQ(cfg->ppr, 2);
  ASSERT_EQ(cfg->bind_to, ASR_BIND_AUTO);
  cfg_del(cfg);
  static const struct {
    const char *word;
    asr_map_by_t by;
    int ppr;
  } forms[] = {{"slot", ASR_MAP_SLOT, 0},
               {"node", ASR_MAP_NODE, 0},
               {"core", ASR_MAP_CORE, 0},
               {"numa", ASR_MAP_NUMA, 0},
               {"package", ASR_MAP_PACKAGE, 0},
               {"ppr:1:node", ASR_MAP_PPR_NODE, 1},
               {"ppr:128:numa", ASR_MAP_PPR_NUMA, 128},
               {"ppr:4:package", ASR_MAP_PPR_PACKAGE, 4}};
  for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++) {
    cfg = CFG_ARGS("--map-by", forms[i].word);
    ASSERT_MSG(cfg->map_by == forms[i].by && cfg->ppr == forms[i].ppr, "%s", forms[i].word);
    char name[64];
    asr__config_map_by_format(cfg, name, sizeof name);
    ASSERT_STREQ(name, forms[i].word);
    /* a later layer's plain word forgets the count */
    char err[512];
    ASSERT_OK(PARSE(cfg, err, "--map-by", "node", "p"));
    ASSERT_EQ(cfg->ppr, 0);
    cfg_del(cfg);
  }
  /* the YAML keys, a rankfile found next to the job file */
  write_file("rf.txt", "rank 0=n1 slot=0-1\nrank 1=n2 slot=2\n");
  const char *y = write_file("place.yaml",
                             "npernode: 2\nmap_by: ppr:3:package\nrankfile: rf.txt\ncpus_per_rank: 2\n"
                             "oversubscribe: yes\nbind_to: numa\n");
  cfg = cfg_new();
  char err[1024] = "";
  ASSERT_MSG(asr_config_load_yaml(cfg, y, err, sizeof err) == 0, "%s", err);
  ASSERT_EQ(cfg->npernode, 2);
  ASSERT_EQ(cfg->map_by, ASR_MAP_PPR_PACKAGE);
  ASSERT_EQ(cfg->ppr, 3);
  ASSERT_EQ(cfg->cpus_per_rank, 2);
  ASSERT_EQ(cfg->oversubscribe, 1);
  ASSERT_EQ(cfg->bind_to, ASR_BIND_NUMA);
  ASSERT_EQ(cfg->nrf, 2);
  ASSERT_STREQ(cfg->rf[0].host, "n1");
  ASSERT_STREQ(cfg->rf[0].cores, "0-1");
  ASSERT_STREQ(cfg->rf[1].host, "n2");
  ASSERT_EQ(cfg->rf[1].line, 2);
  /* a later layer's rankfile replaces the list */
  ASSERT_OK(asr_config_read_rankfile(cfg, write_file("rf2.txt", "rank 0=x slot=3\n"), err, sizeof err));
  ASSERT_EQ(cfg->nrf, 1);
  ASSERT_STREQ(cfg->rf[0].host, "x");
  cfg_del(cfg);
  check_no_leaks();
}

TEST(rankfile_parses_ranks_hosts_cores) {
  static const char text[] =
      "# a rankfile\n"
      "rank 1=b slot=2,4-5   # rank 1\n"
      "\n"
      "  rank\t0=a   slot=0\n"
      "rank 2=a slot=1";
  asr_config_t *cfg = cfg_new();
  char err[512] = "";
  ASSERT_OK(asr_config_read_rankfile_buffer(cfg, "RF", text, sizeof text - 1, err, sizeof err));
  ASSERT_STREQ(cfg->rankfile, "RF");
  ASSERT_EQ(cfg->nrf, 3);
  /* kept in rank order, each with its line */
  ASSERT_STREQ(cfg->rf[0].host, "a");
  ASSERT_STREQ(cfg->rf[0].cores, "0");
  ASSERT_EQ(cfg->rf[0].line, 4);
  ASSERT_STREQ(cfg->rf[1].host, "b");
  ASSERT_STREQ(cfg->rf[1].cores, "2,4-5");
  ASSERT_EQ(cfg->rf[1].line, 2);
  ASSERT_EQ(cfg->rf[2].line, 5);
  cfg_del(cfg);
  check_no_leaks();
}

/* Every bad line is a "FILE:LINE: what" error, and a bad file keeps the
 * ranks of the layer below. */
TEST(rankfile_errors_name_file_and_line) {
  struct {
    const char *text, *msg; /* msg follows "PATH" */
  } cases[] = {
      {"rank 0=a slot=0\nrnk 1=a slot=1\n", ":2: expected 'rank R=HOST slot=CORES', not 'rnk'"},
      {"rank\n", ":1: 'rank' needs R=HOST slot=CORES"},
      {"rank 0 a slot=0\n", ":1: '0' is not R=HOST (a rank number, '=', a host name)"},
      {"rank x=a slot=0\n", ":1: rank 'x' is not a number from 0 to 131071"},
      {"rank -1=a slot=0\n", ":1: rank '-1' is not a number from 0 to 131071"},
      {"rank 131072=a slot=0\n", ":1: rank '131072' is not a number from 0 to 131071"},
      {"rank 0= slot=0\n", ":1: rank 0 has an empty host name"},
      {"rank 0=a;b slot=0\n", ":1: 'a;b' is not a host name (letters, digits, '-', '.', '_')"},
      {"rank 0=a\n", ":1: rank 0 has no slot=CORES"},
      {"rank 0=a cores=1\n", ":1: unexpected 'cores=1'; write 'rank R=HOST slot=CORES'"},
      {"rank 0=a slot=\n", ":1: slot '' is not a core list (N, N-M, comma-separated)"},
      {"rank 0=a slot=1-\n", ":1: slot '1-' is not a core list (N, N-M, comma-separated)"},
      {"rank 0=a slot=3-1\n", ":1: slot '3-1' is not a core list (N, N-M, comma-separated)"},
      {"rank 0=a slot=0:1\n", ":1: slot '0:1' is not a core list (N, N-M, comma-separated)"},
      {"rank 0=a slot=1,,2\n", ":1: slot '1,,2' is not a core list (N, N-M, comma-separated)"},
      {"rank 0=a slot=70000\n", ":1: slot '70000' is not a core list (N, N-M, comma-separated)"},
      {"rank 0=a slot=0 extra\n", ":1: unexpected 'extra' after slot=CORES"},
      {"rank 0=a slot=0\n# c\nrank 0=b slot=1\n", ":3: rank 0 is given twice (first on line 1)"},
      {"rank 0=a slot=0\nrank 2=a slot=1\n",
       ": no line for rank 1 (a rankfile names every rank from 0 to 2)"},
      {"# only comments\n\n", ": no ranks in the file (one 'rank R=HOST slot=CORES' a line)"},
      {"rank 0=a slot=0\0\n", ":1: a NUL byte; a rankfile is text, 'rank R=HOST slot=CORES' a line"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char name[32], want[1024], err[1024] = "";
    snprintf(name, sizeof name, "rf%zu", i);
    asr_config_t *cfg = cfg_new();
    ASSERT_OK(asr_config_read_rankfile_buffer(cfg, "keep", "rank 0=k slot=0\n", 16, err, sizeof err));
    size_t len = strlen(cases[i].text);
    if (strstr(cases[i].msg, "NUL")) len += 2; /* the NUL and the newline after it */
    ASSERT_EQ(asr_config_read_rankfile_buffer(cfg, name, cases[i].text, len, err, sizeof err), ASR_ECONFIG);
    snprintf(want, sizeof want, "%s%s", name, cases[i].msg);
    ASSERT_MSG(strcmp(err, want) == 0, "case %zu:\n got '%s'\nwant '%s'", i, err, want);
    ASSERT_EQ(cfg->nrf, 1);
    ASSERT_STREQ(cfg->rf[0].host, "k");
    ASSERT_STREQ(cfg->rankfile, "keep");
    cfg_del(cfg);
  }
  /* the file reader says which file it could not open */
  asr_config_t *cfg = cfg_new();
  char err[512];
  ASSERT_EQ(asr_config_read_rankfile(cfg, "/nonexistent/rf", err, sizeof err), ASR_ECONFIG);
  ASSERT_STREQ(err, "cannot open rankfile '/nonexistent/rf': No such file or directory");
  cfg_del(cfg);
  check_no_leaks();
}

TEST(map_npernode) {
  asr_config_t *cfg = CFG_ARGS("-H", "a:4,b:4,c:4", "--npernode", "2");
  asr_map_t m;
  char err[512];
  ASSERT_OK(asr_map_build(cfg, "me", &m, err, sizeof err));
  expect_ranks(&m, (const char *const[]){"a", "a", "b", "b", "c", "c"}, (const int[]){0, 1, 0, 1, 0, 1}, 6);
  ASSERT(m.warnings == NULL);
  asr_map_free(&m);
  cfg_del(cfg);
  /* -ppn is the same, and combines with --map-by node */
  cfg = CFG_ARGS("-H", "a:4,b:4,c:4", "-ppn", "2", "--map-by", "node", "-n", "5");
  ASSERT_OK(asr_map_build(cfg, "me", &m, err, sizeof err));
  expect_ranks(&m, (const char *const[]){"a", "b", "c", "a", "b"}, (const int[]){0, 0, 0, 1, 1}, 5);
  asr_map_free(&m);
  cfg->np = 7;
  ASSERT_EQ(asr_map_build(cfg, "me", &m, err, sizeof err), ASR_ECONFIG);
  ASSERT_STREQ(err, "-n 7 but --npernode 2 runs at most 6 ranks on 3 hosts; raise it or add hosts");
  cfg_del(cfg);
  /* ppr:N:node is --npernode N */
  cfg = CFG_ARGS("-H", "a:4,b:4", "--map-by", "ppr:3:node");
  ASSERT_OK(asr_map_build(cfg, "me", &m, err, sizeof err));
  expect_ranks(&m, (const char *const[]){"a", "a", "a", "b", "b", "b"}, (const int[]){0, 1, 2, 0, 1, 2}, 6);
  asr_map_free(&m);
  cfg_del(cfg);
  /* more than a host's slots: an error, or with --oversubscribe a warning */
  cfg = CFG_ARGS("-H", "a:2,b:4", "--npernode", "3");
  ASSERT_EQ(asr_map_build(cfg, "me", &m, err, sizeof err), ASR_ECONFIG);
  ASSERT_STREQ(
      err,
      "host 'a' has 2 slots but --npernode 3 puts 3 ranks on it; give it more slots (HOST:N, slots=N, "
      "--lnc-per-host), or --oversubscribe to share them");
  cfg->oversubscribe = 1;
  ASSERT_OK(asr_map_build(cfg, "me", &m, err, sizeof err));
  ASSERT_EQ(m.nranks, 6);
  ASSERT_EQ(m.nlocal[0], 3);
  ASSERT(m.warnings);
  ASSERT_STREQ(m.warnings, "host a: 3 ranks on 2 slots (--oversubscribe)\n");
  asr_map_free(&m);
  cfg_del(cfg);
  /* on this host alone, --npernode is its slot count as -n is */
  cfg = CFG_ARGS("--npernode", "4");
  ASSERT_OK(asr_map_build(cfg, "me", &m, err, sizeof err));
  ASSERT_EQ(m.nranks, 4);
  ASSERT(m.warnings == NULL);
  asr_map_free(&m);
  cfg_del(cfg);
  /* one count of ranks per host, not two */
  cfg = CFG_ARGS("--npernode", "2", "--map-by", "ppr:1:numa");
  ASSERT_EQ(asr_map_build(cfg, "me", &m, err, sizeof err), ASR_ECONFIG);
  ASSERT_STREQ(err, "--npernode and --map-by ppr:1:numa both set the ranks per host; give one");
  cfg_del(cfg);
  check_no_leaks();
}

/* More ranks than slots without --npernode: refused, or with
 * --oversubscribe the slots filled first and the rest round robin. */
TEST(map_oversubscribe_slots) {
  asr_config_t *cfg = CFG_ARGS("-H", "a:2,b:1", "-n", "5", "--oversubscribe");
  asr_map_t m;
  char err[512];
  ASSERT_OK(asr_map_build(cfg, "me", &m, err, sizeof err));
  expect_ranks(&m, (const char *const[]){"a", "a", "b", "a", "b"}, (const int[]){0, 1, 0, 2, 1}, 5);
  ASSERT_STREQ(m.warnings,
               "host a: 3 ranks on 2 slots (--oversubscribe)\nhost b: 2 ranks on 1 slot (--oversubscribe)\n");
  asr_map_free(&m);
  /* still at most 128 per host: one LNC each */
  cfg->np = 257;
  ASSERT_EQ(asr_map_build(cfg, "me", &m, err, sizeof err), ASR_ECONFIG);
  ASSERT_STREQ(err, "257 ranks requested but 2 hosts run at most 256 (128 each, one per LNC); add hosts");
  cfg_del(cfg);
  check_no_leaks();
}

TEST(map_ppr_numa_package_synthetic) {
  asr_topo_t *t = topo_of(TOPO_2P4N8C);
  ASSERT_EQ(asr_topo_count(t, ASR_BIND_CORE), 8);
  ASSERT_EQ(asr_topo_count(t, ASR_BIND_NUMA), 4);
  ASSERT_EQ(asr_topo_count(t, ASR_BIND_PACKAGE), 2);
  asr_map_t m;
  char err[512];
  /* ppr:2:numa: 2 ranks for each of 4 NUMA nodes, so 8 a host */
  asr_config_t *cfg = CFG_ARGS("-H", "a:8,b:8", "--map-by", "ppr:2:numa", "--bind-to", "core");
  char *b = bindings_of(cfg, t, &m, err, sizeof err);
  ASSERT_MSG(b, "%s", err);
  ASSERT_EQ(m.nranks, 16);
  ASSERT_EQ(m.nlocal[0], 8);
  ASSERT_CONTAINS(b, "(2 packages, 4 NUMA nodes, 8 cores, 8 PUs)");
  ASSERT_CONTAINS(b, "\nrank 2 (host a, lnc 2) bound to core 2: cpus 2\n");
  ASSERT_CONTAINS(b, "\nrank 9 (host b, lnc 1) bound to core 1: cpus 1\n");
  free(b);
  asr_map_free(&m);
  /* without a topology ppr:2:numa cannot be counted */
  ASSERT_EQ(asr_map_build(cfg, "me", &m, err, sizeof err), ASR_ECONFIG);
  ASSERT_STREQ(err, "--map-by ppr:2:numa needs this host's topology, which hwloc could not load");
  cfg_del(cfg);
  /* bound to numa: 8 ranks on 4 NUMA nodes share them, only with --oversubscribe */
  cfg = CFG_ARGS("-H", "a:8", "--map-by", "ppr:2:numa", "--bind-to", "numa");
  ASSERT(bindings_of(cfg, t, &m, err, sizeof err) == NULL);
  ASSERT_STREQ(err,
               "host 'a' runs 8 ranks with --bind-to numa but has 4 NUMA nodes (this host's topology); use "
               "fewer ranks, --bind-to none, or --oversubscribe to share them");
  cfg->oversubscribe = 1;
  b = bindings_of(cfg, t, &m, err, sizeof err);
  ASSERT_MSG(b, "%s", err);
  ASSERT_STREQ(m.warnings, "host a: 8 ranks share 4 NUMA nodes (--bind-to numa, --oversubscribe)\n");
  ASSERT_CONTAINS(b, "\nrank 1 (host a, lnc 1) bound to numa 0: cpus 0-1\n");
  ASSERT_CONTAINS(b, "\nrank 2 (host a, lnc 2) bound to numa 1: cpus 2-3\n");
  ASSERT_CONTAINS(b, "\nrank 7 (host a, lnc 7) bound to numa 3: cpus 6-7\n");
  free(b);
  asr_map_free(&m);
  cfg_del(cfg);
  /* ppr:1:package on this host alone: one rank a package, bound to it */
  cfg = CFG_ARGS("--map-by", "ppr:1:package", "--bind-to", "package");
  b = bindings_of(cfg, t, &m, err, sizeof err);
  ASSERT_MSG(b, "%s", err);
  ASSERT_EQ(m.nranks, 2);
  ASSERT_CONTAINS(b, "\nrank 0 (host me, lnc 0) bound to package 0: cpus 0-3\n");
  ASSERT_CONTAINS(b, "\nrank 1 (host me, lnc 1) bound to package 1: cpus 4-7\n");
  ASSERT(m.warnings == NULL);
  free(b);
  asr_map_free(&m);
  cfg_del(cfg);
  asr_topo_free(t);
  check_no_leaks();
}

/* --map-by core|numa|package spreads a host's ranks over those objects in
 * turn; --bind-to then picks within (or around) the object. */
TEST(map_by_objects_synthetic) {
  asr_topo_t *t = topo_of(TOPO_2P4N8C);
  asr_map_t m;
  char err[512];
  asr_config_t *cfg = CFG_ARGS("-n", "4", "--map-by", "numa", "--bind-to", "core");
  char *b = bindings_of(cfg, t, &m, err, sizeof err);
  ASSERT_MSG(b, "%s", err);
  ASSERT_CONTAINS(b, "\nrank 0 (host me, lnc 0) bound to core 0: cpus 0\n");
  ASSERT_CONTAINS(b, "\nrank 1 (host me, lnc 1) bound to core 2: cpus 2\n");
  ASSERT_CONTAINS(b, "\nrank 3 (host me, lnc 3) bound to core 6: cpus 6\n");
  free(b);
  asr_map_free(&m);
  cfg_del(cfg);
  cfg = CFG_ARGS("-n", "4", "--map-by", "package", "--bind-to", "core");
  b = bindings_of(cfg, t, &m, err, sizeof err);
  ASSERT_MSG(b, "%s", err);
  ASSERT_CONTAINS(b, "\nrank 1 (host me, lnc 1) bound to core 4: cpus 4\n");
  ASSERT_CONTAINS(b, "\nrank 2 (host me, lnc 2) bound to core 1: cpus 1\n");
  ASSERT_CONTAINS(b, "\nrank 3 (host me, lnc 3) bound to core 5: cpus 5\n");
  free(b);
  asr_map_free(&m);
  cfg_del(cfg);
  /* map by core, bind to the package around it */
  cfg = CFG_ARGS("-n", "2", "--map-by", "core", "--bind-to", "package");
  b = bindings_of(cfg, t, &m, err, sizeof err);
  ASSERT_MSG(b, "%s", err);
  ASSERT_CONTAINS(b, "\nrank 0 (host me, lnc 0) bound to package 0: cpus 0-3\n");
  ASSERT_CONTAINS(b, "\nrank 1 (host me, lnc 1) bound to package 0: cpus 0-3\n");
  free(b);
  asr_map_free(&m);
  cfg_del(cfg);
  /* --cpus-per-rank: consecutive cores */
  cfg = CFG_ARGS("-n", "4", "--cpus-per-rank", "2", "--bind-to", "core");
  b = bindings_of(cfg, t, &m, err, sizeof err);
  ASSERT_MSG(b, "%s", err);
  ASSERT_CONTAINS(b, "\nrank 0 (host me, lnc 0) bound to cores 0-1: cpus 0-1\n");
  ASSERT_CONTAINS(b, "\nrank 3 (host me, lnc 3) bound to cores 6-7: cpus 6-7\n");
  free(b);
  asr_map_free(&m);
  cfg->np = 5;
  ASSERT(bindings_of(cfg, t, &m, err, sizeof err) == NULL);
  ASSERT_STREQ(err,
               "host 'me' runs 5 ranks of 2 cores (--cpus-per-rank 2) but has 8 cores (this host's "
               "topology); use fewer ranks, --bind-to none, or --oversubscribe to share them");
  cfg_del(cfg);
  cfg = CFG_ARGS("-n", "2", "--cpus-per-rank", "2", "--bind-to", "numa");
  ASSERT(bindings_of(cfg, t, &m, err, sizeof err) == NULL);
  ASSERT_STREQ(err,
               "--cpus-per-rank 2 binds each rank to 2 cores, which needs --bind-to core or auto (not numa)");
  cfg_del(cfg);
  asr_topo_free(t);
  check_no_leaks();
}

/* On a host of two cores: auto binds to cores while each rank has one, and
 * leaves three unbound; none never counts cores (LNCs are not cores); an
 * explicit --bind-to core counts them. */
TEST(bind_counts_on_two_cores) {
  asr_topo_t *t = topo_of(TOPO_1P2C);
  asr_map_t m;
  char err[512];
  asr_config_t *cfg = CFG_ARGS("-n", "2");
  char *b = bindings_of(cfg, t, &m, err, sizeof err);
  ASSERT_MSG(b, "%s", err);
  ASSERT_CONTAINS(b, "\nrank 1 (host me, lnc 1) bound to core 1: cpus 1\n");
  free(b);
  asr_map_free(&m);
  cfg->np = 3;
  b = bindings_of(cfg, t, &m, err, sizeof err);
  ASSERT_MSG(b, "%s", err);
  ASSERT_CONTAINS(b, "\nrank 0 (host me, lnc 0) not bound\n");
  ASSERT_CONTAINS(b, "\nrank 2 (host me, lnc 2) not bound\n");
  ASSERT(m.warnings == NULL);
  free(b);
  asr_map_free(&m);
  cfg->bind_to = ASR_BIND_NONE;
  cfg->np = 100;
  b = bindings_of(cfg, t, &m, err, sizeof err);
  ASSERT_MSG(b, "%s", err);
  ASSERT(m.warnings == NULL);
  free(b);
  asr_map_free(&m);
  cfg->bind_to = ASR_BIND_CORE;
  cfg->np = 3;
  ASSERT(bindings_of(cfg, t, &m, err, sizeof err) == NULL);
  ASSERT_STREQ(err,
               "host 'me' runs 3 ranks with --bind-to core but has 2 cores (this host's topology); use fewer "
               "ranks, --bind-to none, or --oversubscribe to share them");
  cfg->oversubscribe = 1;
  b = bindings_of(cfg, t, &m, err, sizeof err);
  ASSERT_MSG(b, "%s", err);
  ASSERT_STREQ(m.warnings, "host me: 3 ranks share 2 cores (--bind-to core, --oversubscribe)\n");
  ASSERT_CONTAINS(b, "\nrank 2 (host me, lnc 2) bound to core 0: cpus 0\n");
  free(b);
  asr_map_free(&m);
  cfg_del(cfg);
  asr_topo_free(t);
  check_no_leaks();
}

TEST(map_rankfile) {
  asr_topo_t *t = topo_of(TOPO_2P4N8C);
  const char *rf = write_file("ranks", "rank 0=a slot=1\nrank 1=b slot=0-3\nrank 2=a slot=4,6\n");
  asr_config_t *cfg = CFG_ARGS("--rankfile", rf);
  asr_map_t m;
  char err[1024];
  /* no host list: the rankfile's hosts, in the order they first appear */
  char *b = bindings_of(cfg, t, &m, err, sizeof err);
  ASSERT_MSG(b, "%s", err);
  expect_ranks(&m, (const char *const[]){"a", "b", "a"}, (const int[]){0, 0, 1}, 3);
  ASSERT_EQ(m.nhosts, 2);
  ASSERT_CONTAINS(b, "\nrank 0 (host a, lnc 0) bound to core 1: cpus 1\n");
  ASSERT_CONTAINS(b, "\nrank 1 (host b, lnc 0) bound to cores 0-3: cpus 0-3\n");
  ASSERT_CONTAINS(b, "\nrank 2 (host a, lnc 1) bound to cores 4,6: cpus 4,6\n");
  free(b);
  asr_map_free(&m);
  /* with a host list, every rankfile host must be in it, within its slots */
  char e2[512];
  ASSERT_OK(asr_config_parse_hostlist(cfg, "a:2,c:2", e2, sizeof e2));
  ASSERT(bindings_of(cfg, t, &m, err, sizeof err) == NULL);
  ASSERT_STREQ(err, fmt_rf(rf, ":2: host 'b' is not one of the job's hosts (-H, --hostfile or hosts)"));
  ASSERT_OK(asr_config_parse_hostlist(cfg, "a:1,b:1", e2, sizeof e2));
  ASSERT(bindings_of(cfg, t, &m, err, sizeof err) == NULL);
  ASSERT_STREQ(err, fmt_rf(rf,
                           ": host 'a' has 1 slot but the rankfile puts 2 ranks on it; give it more slots "
                           "(HOST:N, slots=N, --lnc-per-host), or --oversubscribe to share them"));
  cfg->nhosts = 0;
  cfg->np = 4;
  ASSERT(bindings_of(cfg, t, &m, err, sizeof err) == NULL);
  ASSERT_STREQ(err, fmt_rf(rf, ": names 3 ranks but -n is 4; leave out -n or make them agree"));
  cfg->np = 0;
  cfg->npernode = 1;
  ASSERT(bindings_of(cfg, t, &m, err, sizeof err) == NULL);
  ASSERT_STREQ(err, "--rankfile places every rank; leave out --npernode");
  cfg_del(cfg);
  /* two ranks on one core of a host, and a core the topology lacks */
  cfg = CFG_ARGS("--rankfile", write_file("r2", "rank 0=a slot=0-1\nrank 1=a slot=1\n"));
  ASSERT(bindings_of(cfg, t, &m, err, sizeof err) == NULL);
  ASSERT_CONTAINS(err,
                  "r2:2: rank 1 shares core 1 with rank 0 (line 1) on host a; give each rank its own "
                  "cores, or --oversubscribe to share them");
  cfg->oversubscribe = 1;
  b = bindings_of(cfg, t, &m, err, sizeof err);
  ASSERT_MSG(b, "%s", err);
  ASSERT_STREQ(m.warnings, "host a: rank 1 shares core 1 with rank 0 (--oversubscribe)\n");
  free(b);
  asr_map_free(&m);
  cfg_del(cfg);
  cfg = CFG_ARGS("--rankfile", write_file("r3", "rank 0=a slot=0\nrank 1=a slot=7-9\n"));
  ASSERT(bindings_of(cfg, t, &m, err, sizeof err) == NULL);
  ASSERT_CONTAINS(err, "r3:2: rank 1: core 8 is not one of this host's 8 cores (0-7)");
  cfg_del(cfg);
  asr_topo_free(t);
  check_no_leaks();
}
