/*
 * asrd_report.c -- the ranks' state reports (issue 24): each rank gets one
 * end of a socket pair at fork (ASR_REPORT_FD, asrd_spawn.c); libasr's
 * report thread says HELLO on it (bootstrap/report_chan.c) and answers each
 * ASK. asrrun's REPORT_REQ asks every local rank still running; when each
 * has answered, exited, or the request's timeout passed, one REPORT goes up
 * per local rank with what it said (or why it said nothing: it exited
 * before or while asked, never started libasr, did not answer in time) and
 * its process state from /proc, and, asked for, a stack trace (eu-stack,
 * else gdb; bounded in total by STACK_TOTAL_MS).
 *
 * Nothing here waits on a rank: the channel is read on the loop, and a
 * rank that never answers only costs the request its timeout.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "asr_err.h"
#include "asr_log.h"
#include "asr_time.h"
#include "asrd.h"
#include "report_fmt.h"

/* The traces run on asrd's loop, one after the other, each REPORT flushed
 * up as it is made: asrrun hears from this host at least every
 * STACK_RANK_MS, well inside the shortest --heartbeat-timeout but one (2 s:
 * don't ask for stacks with that), and the whole lot is bounded. */
#define STACK_RANK_MS 3000  /* one rank's trace */
#define STACK_TOTAL_MS 8000 /* every trace of one request, on this host */

static void finish(asrd_t *d);

static void chan_close(asrd_rank_t *r) {
  if (r->rep_fd < 0) return;
  asr_loop_io_stop(r->d->loop, &r->rep_io);
  close(r->rep_fd);
  r->rep_fd = -1;
  asr_buf_free(&r->rep_in);
}

/* Takes the whole frames rep_in holds; *answered is set when one was the
 * answer the open request waits for. Returns 0, or ASR_EPROTO (closed). */
static int take_frames(asrd_rank_t *r, int *answered) {
  asrd_t *d = r->d;
  while (asr_buf_pending(&r->rep_in) >= ASR_REPORT_HDR) {
    const uint8_t *p = r->rep_in.data + r->rep_in.off;
    uint32_t type, len;
    char why[160];
    int rc = asr_report_header_parse(p, &type, &len, why, sizeof why);
    if (rc != 0 || type == ASR_REPORT_ASK || type == ASR_REPORT_MASK) {
      asr_warn("asrd", "rank %d's report channel: %s; closing it", r->rank,
               rc == 0 ? "an ASK from the rank" : why);
      return ASR_EPROTO;
    }
    if (asr_buf_pending(&r->rep_in) < ASR_REPORT_HDR + len) return 0;
    const uint8_t *b = p + ASR_REPORT_HDR;
    uint32_t v = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
    if (type == ASR_REPORT_HELLO) {
      r->rep_hello = 1;
    } else if (type == ASR_REPORT_METRICS) {
      if (d->cb.on_metrics) d->cb.on_metrics(r, v, b + 4, len - 4); /* a scrape's (asrd_metrics.c) */
    } else if (r->rep_waiting && d->rep.active && v == d->rep.id) { /* else a late answer: dropped */
      free(r->rep_text);
      r->rep_len = len - 4;
      r->rep_text = malloc(r->rep_len ? r->rep_len : 1);
      if (r->rep_text) memcpy(r->rep_text, b + 4, r->rep_len);
      r->rep_waiting = 0;
      r->rep_flags |= ASR_CTL_REP_ANSWERED;
      *answered = 1;
    }
    r->rep_in.off += ASR_REPORT_HDR + len;
  }
  return 0;
}

static int anyone_waits(const asrd_t *d) {
  for (int i = 0; i < d->nlocal; i++)
    if (d->ranks[i].rep_waiting) return 1;
  return 0;
}

static void on_chan(asr_loop_t *loop, asr_loop_io_t *io, unsigned events) {
  (void)loop, (void)events;
  asrd_rank_t *r = io->arg;
  uint8_t buf[16384];
  int answered = 0;
  for (;;) {
    ssize_t n = read(r->rep_fd, buf, sizeof buf);
    if (n > 0) {
      if (asr_buf_put(&r->rep_in, buf, (size_t)n) != 0 || take_frames(r, &answered) != 0) goto closed;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      /* the last answer: the REPORTs go up now, not at the timeout. Only
       * on an answer: asrd_report_ask reads a HELLO here before it has
       * marked every rank waiting. */
      if (answered && r->d->rep.active && !anyone_waits(r->d)) finish(r->d);
      return;
    }
    goto closed; /* EOF: the rank (and whatever it shared the socket with) is gone */
  }
closed:
  chan_close(r);
  asrd_ends_sight(r, "its state-report channel closed");
  if (r->d->cb.on_chan_gone) r->d->cb.on_chan_gone(r);
  if (r->rep_waiting) {
    r->rep_waiting = 0;
    r->rep_flags |= ASR_CTL_REP_GONE;
  }
  if (r->d->rep.active && !anyone_waits(r->d)) finish(r->d);
}

int asrd_report_open(asrd_t *d, asrd_rank_t *r) {
  int sv[2];
  r->rep_fd = -1;
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return asr_err_from_errno(errno);
  fcntl(sv[0], F_SETFL, O_NONBLOCK);
  int rc = asr_loop_io_start(d->loop, &r->rep_io, sv[0], ASR_LOOP_READ, on_chan, r);
  if (rc) {
    close(sv[0]);
    close(sv[1]);
    return rc;
  }
  r->rep_fd = sv[0];
  return sv[1];
}

void asrd_report_poll(asrd_rank_t *r) {
  if (r->rep_fd >= 0 && r->rep_in.len == 0) on_chan(r->d->loop, &r->rep_io, ASR_LOOP_READ);
}

int asrd_report_send_ask(asrd_rank_t *r, int type, uint32_t id, uint32_t *flags) {
  *flags = 0;
  if (r->exited || r->pid <= 0) {
    *flags = ASR_CTL_REP_EXITED;
    return 0;
  }
  asrd_report_poll(r); /* a HELLO just sent */
  if (r->rep_fd < 0 || !r->rep_hello) {
    *flags = r->rep_fd < 0 && r->rep_hello ? ASR_CTL_REP_GONE : ASR_CTL_REP_NO_LIBASR;
    return 0;
  }
  uint8_t ask[ASR_REPORT_HDR + 4];
  asr_report_header_put(ask, type, 4);
  for (int i = 0; i < 4; i++) ask[ASR_REPORT_HDR + i] = (uint8_t)(id >> (8 * i));
  /* 16 bytes into an empty socket buffer: a blocking write could not
   * wait, and a full one means the rank stopped reading its channel */
  ssize_t w = send(r->rep_fd, ask, sizeof ask, MSG_DONTWAIT | MSG_NOSIGNAL);
  if (w != (ssize_t)sizeof ask) {
    *flags = ASR_CTL_REP_TIMEOUT;
    return 0;
  }
  return 1;
}

void asrd_report_rank_exited(asrd_rank_t *r) {
  if (r->rep_fd >= 0) on_chan(r->d->loop, &r->rep_io, ASR_LOOP_READ); /* its last words, then EOF */
  if (r->d->cb.on_chan_gone) r->d->cb.on_chan_gone(r);
  if (r->rep_waiting) {
    r->rep_waiting = 0;
    r->rep_flags |= ASR_CTL_REP_GONE;
    if (r->d->rep.active && !anyone_waits(r->d)) finish(r->d);
  }
}

void asrd_report_rank_close(asrd_rank_t *r) { chan_close(r); }

/* The kernel's word for pid's state, and where it sleeps: "S (sleeping) in
 * hrtimer_nanosleep". */
static void proc_state(pid_t pid, char *out, size_t len) {
  char path[64], buf[1024];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  FILE *f = fopen(path, "r");
  size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
  if (f) fclose(f);
  buf[n] = '\0';
  char *p = strrchr(buf, ')');
  if (!p || p[1] != ' ' || !p[2]) {
    snprintf(out, len, "unknown");
    return;
  }
  char st = p[2];
  const char *word = st == 'R'   ? "running"
                     : st == 'S' ? "sleeping"
                     : st == 'D' ? "in an uninterruptible wait"
                     : st == 'T' ? "stopped"
                     : st == 't' ? "traced"
                     : st == 'Z' ? "exited (not reaped yet)"
                                 : "?";
  char wchan[128] = "";
  snprintf(path, sizeof path, "/proc/%d/wchan", (int)pid);
  f = fopen(path, "r");
  n = f ? fread(wchan, 1, sizeof wchan - 1, f) : 0;
  if (f) fclose(f);
  wchan[n] = '\0';
  if (st == 'S' && wchan[0] && strcmp(wchan, "0") != 0)
    snprintf(out, len, "%c (%s) in %s", st, word, wchan);
  else
    snprintf(out, len, "%c (%s)", st, word);
}

/* Which tool traces stacks here: "eu-stack", "gdb", or NULL. */
static const char *stack_tool(char *path, size_t len) {
  const char *tools[] = {"eu-stack", "gdb"};
  const char *env = getenv("PATH");
  for (int t = 0; t < 2; t++) {
    char copy[4096];
    snprintf(copy, sizeof copy, "%s", env ? env : "/usr/bin:/bin");
    char *save = NULL;
    for (char *dir = strtok_r(copy, ":", &save); dir; dir = strtok_r(NULL, ":", &save)) {
      snprintf(path, len, "%s/%s", dir, tools[t]);
      if (access(path, X_OK) == 0) return tools[t];
    }
  }
  return NULL;
}

/* pid's stack trace into *out (malloc'd, at most ASR_CTL_MAX_STACK), by
 * the tool, within until_ms (it is killed then). */
static void trace(pid_t pid, const char *tool, const char *path, uint64_t until_ms, uint8_t **out,
                  size_t *len) {
  *out = NULL;
  *len = 0;
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) return;
  char pidtext[16];
  snprintf(pidtext, sizeof pidtext, "%d", (int)pid);
  pid_t c = fork();
  if (c == 0) {
    dup2(p[1], 1);
    dup2(p[1], 2);
    int devnull = open("/dev/null", O_RDONLY);
    if (devnull >= 0) dup2(devnull, 0);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    if (strcmp(tool, "eu-stack") == 0)
      execl(path, "eu-stack", "-p", pidtext, (char *)NULL);
    else
      execl(path, "gdb", "-p", pidtext, "-batch", "-nx", "-q", "-ex", "thread apply all bt", (char *)NULL);
    _exit(127);
  }
  close(p[1]);
  if (c < 0) {
    close(p[0]);
    return;
  }
  uint8_t *buf = malloc(ASR_CTL_MAX_STACK);
  size_t n = 0;
  for (;;) {
    uint64_t now = asr_time_ms();
    if (now >= until_ms) break;
    struct pollfd pf = {.fd = p[0], .events = POLLIN};
    int k = poll(&pf, 1, (int)(until_ms - now));
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) break;
    char tmp[4096];
    ssize_t r = read(p[0], tmp, sizeof tmp);
    if (r <= 0) break;
    size_t take = buf && n + (size_t)r <= ASR_CTL_MAX_STACK ? (size_t)r : (buf ? ASR_CTL_MAX_STACK - n : 0);
    if (take) memcpy(buf + n, tmp, take);
    n += take;
  }
  close(p[0]);
  kill(c, SIGKILL); /* done or over its time: either way it ends now */
  while (waitpid(c, NULL, 0) < 0 && errno == EINTR) {
  }
  *out = buf;
  *len = buf ? n : 0;
}

static void finish(asrd_t *d) {
  if (!d->rep.active) return;
  d->rep.active = 0;
  asr_loop_timer_stop(d->loop, &d->rep.timer);
  char tpath[4096];
  const char *tool = (d->rep.req_flags & ASR_CTL_REPORT_STACKS) ? stack_tool(tpath, sizeof tpath) : NULL;
  uint64_t stacks_until = asr_time_ms() + STACK_TOTAL_MS;
  for (int i = 0; i < d->nlocal; i++) {
    asrd_rank_t *r = &d->ranks[i];
    if (r->rep_waiting) {
      r->rep_waiting = 0;
      r->rep_flags |= ASR_CTL_REP_TIMEOUT;
    }
    char pstate[256];
    if (r->exited || r->pid <= 0)
      snprintf(pstate, sizeof pstate, "exited");
    else
      proc_state(r->pid, pstate, sizeof pstate);
    uint8_t *stack = NULL;
    size_t stack_len = 0;
    uint32_t flags = r->rep_flags | (i == d->nlocal - 1 ? ASR_CTL_REP_LAST : 0);
    if ((d->rep.req_flags & ASR_CTL_REPORT_STACKS) && !r->exited && r->pid > 0) {
      uint64_t now = asr_time_ms();
      if (!tool)
        flags |= ASR_CTL_REP_NO_STACK_TOOL;
      else if (now < stacks_until)
        trace(r->pid, tool, tpath, now + STACK_RANK_MS < stacks_until ? now + STACK_RANK_MS : stacks_until,
              &stack, &stack_len);
    }
    size_t tl = r->rep_text && r->rep_len <= ASR_CTL_MAX_REPORT_TEXT ? r->rep_len : 0;
    asr_ctl_msg_t m = {.type = ASR_CTL_REPORT,
                       .u.report = {.id = d->rep.id,
                                    .rank = (uint32_t)r->rank,
                                    .pid = r->pid > 0 ? (uint32_t)r->pid : 0,
                                    .flags = flags,
                                    .pstate = pstate,
                                    .text = r->rep_text,
                                    .text_len = tl,
                                    .stack = stack,
                                    .stack_len = stack_len}};
    asrd_up_send(d, &m);
    if (d->up.open) asr_ctl_flush(&d->up.conn); /* now, not after the next trace */
    free(stack);
    free(r->rep_text);
    r->rep_text = NULL;
    r->rep_len = 0;
  }
}

static void on_timeout(asr_loop_t *loop, asr_loop_timer_t *t) {
  (void)loop;
  finish(t->arg);
}

void asrd_report_ask(asrd_t *d, uint32_t id, uint32_t timeout_ms, uint32_t flags) {
  finish(d); /* an earlier request still open is answered as it stands */
  if (d->nlocal == 0) return;
  d->rep.active = 1;
  d->rep.id = id;
  d->rep.req_flags = flags;
  for (int i = 0; i < d->nlocal; i++) {
    asrd_rank_t *r = &d->ranks[i];
    r->rep_waiting = asrd_report_send_ask(r, ASR_REPORT_ASK, id, &r->rep_flags);
  }
  if (!anyone_waits(d)) {
    finish(d);
    return;
  }
  asr_loop_timer_start(d->loop, &d->rep.timer, timeout_ms, on_timeout, d);
}

void asrd_report_stop(asrd_t *d) {
  asr_loop_timer_stop(d->loop, &d->rep.timer);
  d->rep.active = 0;
  for (int i = 0; i < d->nlocal; i++) {
    chan_close(&d->ranks[i]);
    free(d->ranks[i].rep_text);
    d->ranks[i].rep_text = NULL;
  }
}
