/*
 * fuzz_yaml.c -- libFuzzer target for asrrun's YAML settings loader
 * (launcher/config/config_yaml.c, through asr_config_load_yaml_buffer, the parser
 * that asr_config_load_yaml runs on a file's text).
 *
 * The input is one settings file. It is applied twice, as two layers (a
 * system file and a job file) would be: onto the defaults, then onto what the
 * first pass left, so that the paths that replace a lower layer's hosts,
 * variables, program and arguments run too. After each pass:
 *  - on success, every setting is inside the bounds the rest of asrrun
 *    relies on (host and variable counts, names, slots, strings that end
 *    inside their fields, the program's arguments);
 *  - on failure, the code is ASR_ECONFIG with a message that names the file
 *    first ("fuzz.yaml:LINE: ..."), or ASR_ENOMEM.
 * Nothing may leak (LeakSanitizer checks at exit and on each new input's
 * -detect_leaks pass) and no input may run long (run.sh passes -timeout).
 *
 * A "hostfile:" key makes the loader read that file, relative to the
 * settings file's name: run.sh runs the target in an empty temporary
 * directory, so relative names find nothing there.
 */
#include "config.h"

#include <ctype.h>
#include <string.h>

#include "asr_err.h"
#include "config_int.h"
#include "fuzz.h"

#define NAME "fuzz.yaml"

/* Checks a fixed-size string field: it ends inside its array. */
#define CHECK_FIELD(f) FUZZ_ASSERT(memchr((f), '\0', sizeof(f)) != NULL, "%s does not end in its field", #f)

static void check_config(const asr_config_t *c) {
  FUZZ_ASSERT(c->nhosts >= 0 && c->nhosts <= ASR_CFG_MAX_HOSTS, "nhosts %d", c->nhosts);
  for (int i = 0; i < c->nhosts; i++) {
    CHECK_FIELD(c->hosts[i].name);
    fuzz_check_host_name(c->hosts[i].name);
    FUZZ_ASSERT(c->hosts[i].slots >= 0 && c->hosts[i].slots <= ASR_CFG_MAX_SLOTS, "slots %d",
                c->hosts[i].slots);
  }
  FUZZ_CHECK_DISTINCT_HOSTS(c->hosts, c->nhosts, "host");
  FUZZ_ASSERT(c->nenv >= 0 && c->nenv <= ASR_CFG_MAX_ENV, "nenv %d", c->nenv);
  for (int i = 0; i < c->nenv; i++) {
    CHECK_FIELD(c->env[i].name);
    CHECK_FIELD(c->env[i].value);
    FUZZ_ASSERT(c->env[i].name[0] && !isdigit((unsigned char)c->env[i].name[0]), "variable '%s'",
                c->env[i].name);
    FUZZ_ASSERT(c->env[i].has_value || !c->env[i].value[0], "%s copies but has a value", c->env[i].name);
  }
  FUZZ_ASSERT(c->nargs >= 0 && c->nargs <= ASR_CFG_MAX_ARGS, "nargs %d", c->nargs);
  for (int i = 0; i < c->nargs; i++) FUZZ_ASSERT(c->args[i], "argument %d is NULL", i);
  FUZZ_ASSERT(c->nargs == 0 || c->program[0], "arguments without a program");
  CHECK_FIELD(c->hostfile);
  CHECK_FIELD(c->output_dir);
  CHECK_FIELD(c->provider);
  CHECK_FIELD(c->launch_agent);
  CHECK_FIELD(c->prefix);
  CHECK_FIELD(c->if_include);
  CHECK_FIELD(c->program);
  FUZZ_ASSERT(c->launch_agent[0], "an empty launch agent");
  FUZZ_ASSERT(c->np >= 0 && c->np <= ASR_CFG_MAX_HOSTS * ASR_CFG_MAX_SLOTS, "np %d", c->np);
  FUZZ_ASSERT(c->lnc_per_host >= 0 && c->lnc_per_host <= ASR_CFG_MAX_SLOTS, "lnc_per_host %d",
              c->lnc_per_host);
  FUZZ_ASSERT((unsigned)c->map_by <= ASR_MAP_PPR_PACKAGE && (unsigned)c->bind_to <= ASR_BIND_AUTO &&
                  (unsigned)c->launcher <= ASR_LAUNCHER_SLURM,
              "an enum setting out of range");
  FUZZ_ASSERT((c->map_by >= ASR_MAP_PPR_NODE) == (c->ppr > 0) && c->ppr <= ASR_CFG_MAX_SLOTS,
              "ppr %d for map_by %d", c->ppr, (int)c->map_by);
  FUZZ_ASSERT(c->cpus_per_rank >= 1, "cpus_per_rank %d", c->cpus_per_rank);
  FUZZ_ASSERT(c->quiet == 0 || c->quiet == 1, "quiet %d", c->quiet);
  FUZZ_ASSERT(c->timestamp_output == 0 || c->timestamp_output == 1, "timestamp_output %d",
              c->timestamp_output);
  FUZZ_ASSERT(c->report_bindings == 0 || c->report_bindings == 1, "report_bindings %d", c->report_bindings);
  FUZZ_ASSERT(c->tag_output == 0 || c->tag_output == 1, "tag_output %d", c->tag_output);
  FUZZ_ASSERT(c->bootstrap_port >= 0 && c->bootstrap_port <= 65535, "port %d", c->bootstrap_port);
  FUZZ_ASSERT(c->heartbeat_timeout_s >= 2 && c->heartbeat_timeout_s <= 3600, "heartbeat %d",
              c->heartbeat_timeout_s);
}

static void check_result(int rc, const char *err, const asr_config_t *cfg) {
  check_config(cfg);
  if (rc == 0) return;
  FUZZ_ASSERT(rc == ASR_ECONFIG || rc == ASR_ENOMEM, "rc %d (%s): %s", rc, asr_err_name(rc), err);
  FUZZ_ASSERT(rc != ASR_ECONFIG || strncmp(err, NAME ":", strlen(NAME ":")) == 0,
              "the message does not name the file first: '%s'", err);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  /* about 450 kB: allocated once, reset for every input */
  static asr_config_t *cfg;
  if (!cfg && !(cfg = malloc(sizeof *cfg))) abort();
  asr_config_defaults(cfg);
  for (int pass = 0; pass < 2; pass++) {
    char err[2048] = "";
    int rc = asr_config_load_yaml_buffer(cfg, NAME, data, size, err, sizeof err);
    check_result(rc, err, cfg);
    if (rc != 0) break;
  }
  asr_config_free(cfg);
  return 0;
}
