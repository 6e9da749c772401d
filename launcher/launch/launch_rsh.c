/*
 * launch_rsh.c -- start asrd on a remote host through an agent (launch.h):
 *
 *   AGENT-WORDS... HOST ASRD --ctl IP:PORT --index I --hostname HOST --port P
 *
 * The agent is ssh by default; anything that takes a host and a command works
 * ("rsh", "ssh -p 2222", "ip netns exec" in the tests). ssh hands the remote
 * command to a shell while "ip netns exec" runs it directly, so every word
 * after the host must mean the same to both: words with shell metacharacters
 * are refused with a message instead of being quoted for one of them.
 *
 * The agent is started by asr_launch_spawn_agent (launch_agent.c): own
 * process group, dies with asrrun, the secret on its stdin.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "asr_err.h"
#include "launch.h"

#define MAX_AGENT_WORDS 32

int asr_launch_split(const char *cmd, char **words, int max, char *errbuf, size_t errlen) {
  int n = 0, rc;
  const char *p = cmd;
  size_t cap = strlen(cmd) + 1;
  for (;;) {
    while (*p == ' ' || *p == '\t') p++;
    if (!*p) break;
    if (n == max) {
      snprintf(errbuf, errlen, "the launch agent '%s' has more than %d words", cmd, max);
      rc = ASR_ETOOBIG;
      goto fail;
    }
    char *w = malloc(cap), quote = 0;
    if (!w) {
      snprintf(errbuf, errlen, "cannot split the launch agent '%s': out of memory", cmd);
      rc = ASR_ENOMEM;
      goto fail;
    }
    size_t k = 0;
    for (; *p && (quote || (*p != ' ' && *p != '\t')); p++) {
      if (quote && *p == quote)
        quote = 0;
      else if (!quote && (*p == '\'' || *p == '"'))
        quote = *p;
      else
        w[k++] = *p;
    }
    w[k] = '\0';
    words[n++] = w;
    if (quote) {
      snprintf(errbuf, errlen, "the launch agent '%s' has an unbalanced %c quote", cmd, quote);
      rc = ASR_EINVAL;
      goto fail;
    }
  }
  if (n == 0) {
    snprintf(errbuf, errlen, "the launch agent is empty; give a command such as ssh with --launch-agent");
    return ASR_EINVAL;
  }
  return n;
fail:
  while (n > 0) free(words[--n]);
  return rc;
}

/* Characters that mean the same on a command line and to a remote shell. */
static int shell_safe(const char *w) {
  if (!*w) return 0;
  for (; *w; w++)
    if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-:=,@+%", *w)) return 0;
  return 1;
}

static pid_t rsh_start(const asr_launch_args_t *a, char *errbuf, size_t errlen) {
  char *words[MAX_AGENT_WORDS];
  int n = asr_launch_split(a->agent ? a->agent : "ssh", words, MAX_AGENT_WORDS, errbuf, errlen);
  if (n < 0) return n;
  char index[16], port[16];
  snprintf(index, sizeof index, "%d", a->index);
  snprintf(port, sizeof port, "%d", a->port);
  const char *tail[] = {a->host, a->asrd_path, "--ctl", a->ctl_addr, "--index",
                        index,   "--hostname", a->host, "--port",    port};
  const int ntail = (int)(sizeof tail / sizeof tail[0]);
  pid_t pid = ASR_EINVAL;
  for (int i = 0; i < ntail; i++)
    if (!shell_safe(tail[i])) {
      snprintf(errbuf, errlen,
               "'%s' would be split or changed by the remote shell; use plain characters in host names "
               "and in the install path (--prefix)",
               tail[i]);
      goto out;
    }
  const char **argv = calloc((size_t)(n + ntail + 1), sizeof *argv);
  if (!argv) {
    snprintf(errbuf, errlen, "cannot start the launch agent: out of memory");
    pid = ASR_ENOMEM;
    goto out;
  }
  for (int i = 0; i < n; i++) argv[i] = words[i];
  for (int i = 0; i < ntail; i++) argv[n + i] = tail[i];
  pid = asr_launch_spawn_agent((char *const *)argv, a->secret_hex, errbuf, errlen);
  free(argv);
out:
  for (int i = 0; i < n; i++) free(words[i]);
  return pid;
}

static void rsh_ended(const char *host, const char *agent, int st, char *msg, size_t len) {
  int sig = WIFSIGNALED(st), code = sig ? WTERMSIG(st) : WEXITSTATUS(st);
  snprintf(msg, len,
           "the launch agent for host %s (%s) ended with %s %d before asrd called back; check that '%s %s "
           "true' works and that asrd is installed there (--prefix)",
           host, agent, sig ? "signal" : "status", code, agent, host);
}

/* No resource manager: the hosts are the user's (or a PBS node file's:
 * alloc.h), and it is the backend of an auto job no manager claimed. */
const asr_launch_ops_t asr_launch_rsh = {
    .name = "rsh",
    .id = ASR_LAUNCH_RSH,
    .launcher = ASR_LAUNCHER_RSH,
    .start = rsh_start,
    .ended = rsh_ended,
};
