/*
 * asrkv -- admin CLI for the rendezvous KV store.
 *
 *   asrkv serve [--port P] [--bind IP] [--elect] [--hostname NAME] [limits]
 *   asrkv set  HOST:PORT KEY VALUE [--hex] [--timeout MS]
 *   asrkv get  HOST:PORT KEY [--wait] [--timeout MS]
 *   asrkv dump HOST:PORT [--timeout MS]
 *   asrkv secret
 *
 * The job secret comes from ASR_JOB_SECRET (64 hex digits) for every command.
 * KEY is text with \xNN escapes, or handle:SEND:RECV:HOST for a handle key.
 *
 * main and the cmd_* functions return the process's exit status (below),
 * the helpers 0 or a negative ASR_E* code.
 */
#include "config.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "asr_err.h"
#include "asr_log.h"
#include "asr_loop.h"
#include "asr_time.h"
#include "kv_conn.h"
#include "kv_elect.h"
#include "kv_frame.h"
#include "kv_keys.h"
#include "kv_secret.h"
#include "kv_server.h"

/* Exit statuses (test_asrkv_cli.c checks them). */
#define EXIT_USAGE 2     /* a bad command line */
#define EXIT_NOT_FOUND 3 /* get: the key is not in the store */

static void usage(FILE *f) {
  fprintf(f,
          "usage: asrkv serve [--port P] [--bind IP] [--elect] [--hostname NAME]\n"
          "                   [--max-keys N] [--max-bytes N] [--max-clients N]\n"
          "                   [--stall-timeout MS] [--idle-timeout MS]\n"
          "       asrkv set  HOST:PORT KEY VALUE [--hex] [--timeout MS]\n"
          "       asrkv get  HOST:PORT KEY [--wait] [--timeout MS]\n"
          "       asrkv dump HOST:PORT [--timeout MS]\n"
          "       asrkv secret\n"
          "\n"
          "KEY is text (\\xNN escapes allowed) or handle:SEND_LNC:RECV_LNC:HOST.\n"
          "The job secret is read from ASR_JOB_SECRET (64 hex digits); unset means none.\n"
          "serve prints 'READY port=P pid=N' once it accepts clients; with --elect it\n"
          "first waits for the uid+port leader lock so that exactly one server runs.\n");
}

static int die_usage(const char *fmt, const char *arg) {
  fprintf(stderr, "asrkv: ");
  fprintf(stderr, fmt, arg);
  fprintf(stderr, "\nRun 'asrkv --help' for usage.\n");
  return EXIT_USAGE;
}

/* Parses a decimal option value in 0..max into *out: 0, or ASR_EINVAL
 * (*out untouched) for anything else. */
static int parse_num(const char *s, long max, long *out) {
  if (!s || !*s) return ASR_EINVAL;
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno || *end || v < 0 || v > max) return ASR_EINVAL;
  *out = v;
  return 0;
}

static int parse_hostport(const char *s, char *ip, size_t iplen, uint16_t *port) {
  const char *colon = s ? strrchr(s, ':') : NULL;
  if (!colon || colon == s || (size_t)(colon - s) >= iplen) return ASR_EINVAL;
  long p;
  if (parse_num(colon + 1, 65535, &p) != 0 || p == 0) return ASR_EINVAL;
  memcpy(ip, s, (size_t)(colon - s));
  ip[colon - s] = '\0';
  if (strcmp(ip, "localhost") == 0) snprintf(ip, iplen, "127.0.0.1");
  struct in_addr a;
  if (inet_pton(AF_INET, ip, &a) != 1) return ASR_EINVAL; /* names other than localhost are not resolved */
  *port = (uint16_t)p;
  return 0;
}

/* The job secret from ASR_JOB_SECRET (kv_secret.h); says why on stderr. */
static int load_secret(uint8_t secret[ASR_KV_SECRET_LEN]) {
  char err[256];
  int rc = asr_kv_secret_from_env(secret, err, sizeof err);
  if (rc) fprintf(stderr, "asrkv: %s\n", err);
  return rc;
}

/* asrkv serve's loop: the server, the two signals that end it, and the
 * timer that retries the leader lock while another process holds it. */
typedef struct {
  asr_loop_t *loop;
  asr_loop_signal_t sigint, sigterm;
  asr_loop_timer_t retry;
  int signalled;
  int lock_fd;
  uint16_t port;
  int elect_rc;
} serve_state_t;

static void on_stop_signal(asr_loop_t *loop, asr_loop_signal_t *s, int signo, pid_t from) {
  (void)signo, (void)from;
  ((serve_state_t *)s->arg)->signalled = 1;
  asr_loop_stop(loop);
}

static void on_elect_retry(asr_loop_t *loop, asr_loop_timer_t *t) {
  serve_state_t *st = t->arg;
  char err[256];
  st->elect_rc = asr_kv_elect_try(st->port, NULL, &st->lock_fd, err, sizeof err);
  if (st->elect_rc == ASR_EBUSY)
    asr_loop_timer_start(loop, t, 200, on_elect_retry, st);
  else
    asr_loop_stop(loop);
}

/* Undoes what cmd_serve set up, in reverse. */
static void serve_end(serve_state_t *st) {
  asr_kv_elect_release(st->lock_fd);
  asr_loop_signal_stop(st->loop, &st->sigterm);
  asr_loop_signal_stop(st->loop, &st->sigint);
  asr_loop_free(st->loop);
}

static int cmd_serve(int argc, char **argv) {
  asr_kv_server_opts_t o = {0};
  long port = 0;
  int elect = 0;
  const char *hostname = NULL;
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    long n = 0;
    if (strcmp(a, "--elect") == 0) {
      elect = 1;
      continue;
    }
    static const char *const with_value[] = {"--port",          "--bind",        "--hostname",
                                             "--max-keys",      "--max-bytes",   "--max-clients",
                                             "--stall-timeout", "--idle-timeout"};
    int known = 0;
    for (size_t k = 0; k < sizeof with_value / sizeof with_value[0]; k++)
      known |= strcmp(a, with_value[k]) == 0;
    if (!known) return die_usage("unknown serve option '%s'", a);
    if (!v) return die_usage("option '%s' needs a value", a);
    i++;
    if (strcmp(a, "--port") == 0) {
      if (parse_num(v, 65535, &port) != 0) return die_usage("--port wants 0..65535, not '%s'", v);
    } else if (strcmp(a, "--bind") == 0) {
      o.bind_ip = v;
    } else if (strcmp(a, "--hostname") == 0) {
      if (strlen(v) == 0 || strlen(v) >= ASR_KV_HOSTNAME_LEN)
        return die_usage("--hostname wants 1..127 bytes, not '%s'", v);
      hostname = v;
    } else if (strcmp(a, "--max-keys") == 0) {
      if (parse_num(v, 1L << 30, &n) != 0 || n == 0)
        return die_usage("--max-keys wants a positive number, not '%s'", v);
      o.max_keys = (size_t)n;
    } else if (strcmp(a, "--max-bytes") == 0) {
      if (parse_num(v, 1L << 40, &n) != 0 || n == 0)
        return die_usage("--max-bytes wants a positive number, not '%s'", v);
      o.max_bytes = (size_t)n;
    } else if (strcmp(a, "--max-clients") == 0) {
      if (parse_num(v, 1 << 20, &n) != 0 || n == 0)
        return die_usage("--max-clients wants a positive number, not '%s'", v);
      o.max_clients = (int)n;
    } else if (strcmp(a, "--stall-timeout") == 0) {
      if (parse_num(v, 86400000, &n) != 0 || n == 0)
        return die_usage("--stall-timeout wants milliseconds > 0, not '%s'", v);
      o.stall_timeout_ms = (int)n;
    } else if (strcmp(a, "--idle-timeout") == 0) {
      if (parse_num(v, 86400000, &n) != 0 || n == 0)
        return die_usage("--idle-timeout wants milliseconds > 0, not '%s'", v);
      o.idle_timeout_ms = (int)n;
    } else {
      return die_usage("unknown serve option '%s'", a);
    }
  }
  if (elect && port == 0) return die_usage("%s", "--elect needs an explicit --port");
  uint8_t secret[ASR_KV_SECRET_LEN];
  if (load_secret(secret)) return EXIT_FAILURE;
  o.secret = secret;
  o.port = (uint16_t)port;

  /* SIGINT/SIGTERM end the server cleanly: they stop the loop. */
  serve_state_t st = {0};
  int rc = asr_loop_new(&st.loop);
  if (rc) {
    fprintf(stderr, "asrkv: cannot make an event loop: %s\n", asr_strerror(rc));
    return EXIT_FAILURE;
  }
  asr_loop_signal_start(st.loop, &st.sigint, SIGINT, on_stop_signal, &st);
  asr_loop_signal_start(st.loop, &st.sigterm, SIGTERM, on_stop_signal, &st);

  char err[256];
  st.lock_fd = -1;
  st.port = (uint16_t)port;
  if (elect) {
    rc = asr_kv_elect_try(st.port, NULL, &st.lock_fd, err, sizeof err);
    if (rc == ASR_EBUSY) {
      printf("WAITING leader lock for port %ld is held by another process\n", port);
      fflush(stdout);
      /* Try the lock twice a second; a signal still ends us meanwhile. */
      asr_loop_timer_start(st.loop, &st.retry, 200, on_elect_retry, &st);
      asr_loop_run(st.loop);
      asr_loop_timer_stop(st.loop, &st.retry);
      rc = st.elect_rc;
    }
    if (st.signalled) {
      serve_end(&st);
      return 0;
    }
    if (rc) {
      fprintf(stderr, "asrkv: leader election failed: %s\n", err);
      serve_end(&st);
      return EXIT_FAILURE;
    }
  }
  asr_kv_server_t *s = NULL;
  o.loop = st.loop;
  /* A new leader may race the old one's socket teardown: retry the bind briefly. */
  uint64_t until = asr_time_ms() + 3000;
  while ((rc = asr_kv_server_new(&o, &s, err, sizeof err)) == ASR_EADDRINUSE && elect &&
         asr_time_ms() < until)
    asr_sleep_ms(20);
  if (rc) {
    fprintf(stderr, "asrkv: cannot start the KV server: %s\n", err);
    serve_end(&st);
    return EXIT_FAILURE;
  }
  if (hostname) {
    uint8_t val[ASR_KV_HOSTNAME_LEN] = {0};
    memcpy(val, hostname, strlen(hostname));
    asr_kv_server_put(s, ASR_KV_HOSTNAME_KEY, ASR_KV_HOSTNAME_KEY_LEN, val, sizeof val, ASR_KV_VTYPE_TEXT);
  }
  printf("READY port=%u pid=%ld\n", asr_kv_server_port(s), (long)getpid());
  fflush(stdout);
  rc = asr_loop_run(st.loop);
  if (rc) fprintf(stderr, "asrkv: server loop failed: %s\n", asr_strerror(rc));
  asr_kv_server_stats_t kst;
  asr_kv_server_stats(s, &kst);
  printf("STOPPED accepted=%lu frames=%lu errors=%lu dropped=%lu keys=%zu bytes=%zu\n", kst.accepted,
         kst.frames, kst.errors, kst.stalled, kst.keys, kst.bytes);
  asr_kv_server_free(s);
  serve_end(&st);
  return rc ? EXIT_FAILURE : 0;
}

/* Common parsing for set/get/dump: HOST:PORT first, then positional args and
 * --timeout / --hex / --wait. The requests speak the seed's form (kv_conn.h:
 * seed_form), one at a time on a connection of their own: a value may take
 * all 964 bytes of the frame's field, as asrkv(1) promises, where a frame
 * with a request id holds 960 (kv_frame.h). */
typedef struct {
  char ip[64];
  uint16_t port;
  const char *pos[2];
  int npos;
  int hex, wait;
  asr_kv_pool_opts_t opts;
  uint8_t secret[ASR_KV_SECRET_LEN];
} client_args_t;

static int parse_client(int argc, char **argv, int want_pos, client_args_t *a, const char *cmd) {
  memset(a, 0, sizeof *a);
  if (argc < 1 || parse_hostport(argv[0], a->ip, sizeof a->ip, &a->port) != 0)
    return die_usage("expected HOST:PORT (an IPv4 address and port), got '%s'", argc ? argv[0] : "");
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--hex") == 0)
      a->hex = 1;
    else if (strcmp(argv[i], "--wait") == 0)
      a->wait = 1;
    else if (strcmp(argv[i], "--timeout") == 0) {
      long v = 0;
      if (i + 1 >= argc || parse_num(argv[i + 1], 86400000, &v) != 0 || v == 0)
        return die_usage("--timeout wants milliseconds > 0, not '%s'", i + 1 < argc ? argv[i + 1] : "");
      a->opts.timeout_ms = (int)v;
      i++;
    } else if (argv[i][0] == '-' && argv[i][1] == '-') {
      return die_usage("unknown option '%s'", argv[i]);
    } else if (a->npos < want_pos) {
      a->pos[a->npos++] = argv[i];
    } else {
      return die_usage("unexpected argument '%s'", argv[i]);
    }
  }
  if (a->npos != want_pos) return die_usage("'%s' is missing arguments", cmd);
  if (load_secret(a->secret)) return EXIT_FAILURE;
  a->opts.secret = a->secret;
  a->opts.seed_form = 1;
  if (!a->opts.timeout_ms) a->opts.timeout_ms = a->wait ? 0 : 5000;
  return 0;
}

static int parse_key(const char *text, uint8_t *key) {
  int n = asr_kv_key_parse(text, key, ASR_KV_KEY_MAX);
  if (n < 0)
    fprintf(stderr,
            "asrkv: bad key '%s': %s (keys are 1..143 bytes; handle:SEND:RECV:HOST wants LNCs 0..127)\n",
            text, asr_strerror(n));
  return n;
}

/* Decodes the hex digits of s into out (at most cap bytes) and their count
 * into *len: 0, or ASR_EINVAL (an odd count or a non-digit), ASR_ETOOBIG. */
static int hexdecode(const char *s, uint8_t *out, size_t cap, size_t *len) {
  size_t n = strlen(s);
  if (n % 2) return ASR_EINVAL;
  if (n / 2 > cap) return ASR_ETOOBIG;
  for (size_t i = 0; i < n / 2; i++) {
    unsigned v;
    /* sscanf alone would take signs, blanks and "0x" as digits */
    if (!isxdigit((unsigned char)s[2 * i]) || !isxdigit((unsigned char)s[2 * i + 1])) return ASR_EINVAL;
    if (sscanf(s + 2 * i, "%2x", &v) != 1) return ASR_EINVAL;
    out[i] = (uint8_t)v;
  }
  *len = n / 2;
  return 0;
}

static int cmd_set(int argc, char **argv) {
  client_args_t a;
  int rc = parse_client(argc, argv, 2, &a, "set");
  if (rc) return rc;
  uint8_t key[ASR_KV_KEY_MAX], val[ASR_KV_VAL_MAX];
  int klen = parse_key(a.pos[0], key);
  if (klen < 0) return EXIT_USAGE;
  size_t vlen = 0;
  if (a.hex) {
    if (hexdecode(a.pos[1], val, sizeof val, &vlen) != 0)
      return die_usage("--hex VALUE must be an even number of hex digits, at most 964 bytes: '%s'", a.pos[1]);
  } else {
    if (strlen(a.pos[1]) > ASR_KV_VAL_MAX)
      return die_usage("value longer than 964 bytes: '%.40s...'", a.pos[1]);
    vlen = strlen(a.pos[1]);
    memcpy(val, a.pos[1], vlen);
  }
  char err[400];
  rc = asr_kv_set(a.ip, a.port, key, (size_t)klen, val, vlen, a.hex ? ASR_KV_VTYPE_BINARY : ASR_KV_VTYPE_TEXT,
                  &a.opts, err, sizeof err);
  if (rc) {
    fprintf(stderr, "asrkv: %s\n", err);
    return EXIT_FAILURE;
  }
  return 0;
}

static int cmd_get(int argc, char **argv) {
  client_args_t a;
  int rc = parse_client(argc, argv, 1, &a, "get");
  if (rc) return rc;
  uint8_t key[ASR_KV_KEY_MAX], val[ASR_KV_VAL_MAX];
  int klen = parse_key(a.pos[0], key);
  if (klen < 0) return EXIT_USAGE;
  size_t vlen = 0;
  char err[400];
  rc = asr_kv_get(a.ip, a.port, key, (size_t)klen, a.wait, val, sizeof val, &vlen, &a.opts, err, sizeof err);
  if (rc == ASR_ENOTFOUND) {
    fprintf(stderr, "asrkv: key '%s' not found on %s:%u (use --wait to wait for it)\n", a.pos[0], a.ip,
            a.port);
    return EXIT_NOT_FOUND;
  }
  if (rc) {
    fprintf(stderr, "asrkv: %s\n", err);
    return EXIT_FAILURE;
  }
  char out[4 * ASR_KV_VAL_MAX];
  printf("%s\n", asr_kv_value_render(val, vlen, out, sizeof out));
  return 0;
}

static void dump_one(void *arg, uint32_t index, uint32_t total, const uint8_t *key, size_t klen,
                     const uint8_t *val, size_t vlen, int vtype) {
  char k[600], v[4 * ASR_KV_VAL_MAX];
  (*(unsigned long *)arg)++;
  (void)vtype;
  if (index == 0) printf("# %u keys\n", total);
  printf("%s = %s\n", asr_kv_key_render(key, klen, k, sizeof k), asr_kv_value_render(val, vlen, v, sizeof v));
}

static int cmd_dump(int argc, char **argv) {
  client_args_t a;
  int rc = parse_client(argc, argv, 0, &a, "dump");
  if (rc) return rc;
  char err[400];
  unsigned long seen = 0;
  rc = asr_kv_list(a.ip, a.port, dump_one, &seen, &a.opts, err, sizeof err);
  if (rc) {
    fprintf(stderr, "asrkv: %s\n", err);
    return EXIT_FAILURE;
  }
  if (seen == 0) printf("# 0 keys\n"); /* dump_one never ran: keep the header promise */
  return 0;
}

int main(int argc, char **argv) {
  asr_log_set_role("asrkv", -1);
  if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
    usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? EXIT_USAGE : 0;
  }
  if (strcmp(argv[1], "--version") == 0) {
    printf("asrkv (asr) %s\n", PACKAGE_VERSION);
    return 0;
  }
  if (strcmp(argv[1], "serve") == 0) return cmd_serve(argc - 2, argv + 2);
  if (strcmp(argv[1], "set") == 0) return cmd_set(argc - 2, argv + 2);
  if (strcmp(argv[1], "get") == 0) return cmd_get(argc - 2, argv + 2);
  if (strcmp(argv[1], "dump") == 0) return cmd_dump(argc - 2, argv + 2);
  if (strcmp(argv[1], "secret") == 0) {
    uint8_t s[ASR_KV_SECRET_LEN];
    char hex[ASR_KV_SECRET_HEX_LEN + 1];
    if (asr_kv_secret_generate(s) != 0) return EXIT_FAILURE;
    asr_kv_secret_to_hex(s, hex);
    printf("%s\n", hex);
    return 0;
  }
  return die_usage("unknown command '%s'", argv[1]);
}
