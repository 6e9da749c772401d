/*
 * test_stall.c -- the state report of a stuck job (issue 24): jobs stuck on
 * purpose (tests/apps/stall), each checked for the exact diagnosis line
 * asrrun prints (a missing accept, a missing receive of small and of large
 * messages, a rank sleeping outside libasr, a barrier one rank never joins,
 * a rank that is no libasr process); the report on demand (SIGQUIT,
 * asrrun --status) while the job goes on and then ends normally; a rank
 * that exits while it is asked, and one that never answers (named, and
 * asrrun is not held); --status refused to another user; stack traces.
 * The stuck jobs are asked with asrrun --status once stuck; the report on
 * --timeout is the non-libasr rank's and the stack traces' case.
 * Every case runs real asrrun jobs on this host (the netns suite runs the
 * multi-host ones).
 */
#include "config.h"

#include <errno.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "job_util.h"
#include "kv_frame.h"
#include "kv_keys.h"

#define STALL "tests/apps/stall"

/* Waits until text is in asrrun's stderr (or stdout), within ms. */
static int wait_err(job_t *j, const char *text, int ms) {
  uint64_t until = now_ms() + (uint64_t)ms;
  while (!strstr(j->err ? j->err : "", text) && !j->exited && now_ms() < until) job_pump(j, 50);
  return j->err && strstr(j->err, text) != NULL;
}
static int wait_out(job_t *j, const char *text, int ms) {
  uint64_t until = now_ms() + (uint64_t)ms;
  while (!strstr(j->out ? j->out : "", text) && !j->exited && now_ms() < until) job_pump(j, 50);
  return j->out && strstr(j->out, text) != NULL;
}

/* The one line of the report in j's stdout or stderr (text) that starts
 * with prefix (after "asrrun:   "), or fails. */
static char *diag_line(job_t *j, const char *text, const char *prefix) {
  char *p = fmt("asrrun:   %s", prefix);
  const char *hit = strstr(text, p);
  if (!hit) JOB_FAIL(j, "no diagnosis line starting '%s'", prefix);
  size_t n = strcspn(hit, "\n");
  free(p);
  return fmt("%.*s", (int)n, hit);
}

/* Asserts the diagnosis line that starts with head, has a number of
 * seconds, then tail (the seconds vary). */
static void assert_line(job_t *j, const char *text, const char *head, const char *tail) {
  char *l = diag_line(j, text, head);
  const char *rest = l + strlen("asrrun:   ") + strlen(head);
  char *end;
  long s = strtol(rest, &end, 10);
  if (end == rest || s < 0) JOB_FAIL(j, "no seconds after '%s' in: %s", head, l);
  if (strcmp(end, tail) != 0) JOB_FAIL(j, "diagnosis line\n  %s\nwanted\n  %s<s>%s", l, head, tail);
  free(l);
}

/* Runs asrrun --status jobarg to the end. */
static void status(job_t *s, const char *jobarg) {
  const char *const args[] = {"--status", jobarg, NULL};
  job_start(s, IN_NULL, args);
  JOB_FINISH(s, 30000);
}

/* A stuck job, reported on --timeout: asrrun exits 124 after the report
 * (in j->err). */
static void stuck_timeout(job_t *j, const char *np, const char *mode, const char *arg) {
  const char *const args[] = {"-n",       np,   "--timeout", "6", "--report-state-on-timeout",
                              bin(STALL), mode, arg,         NULL};
  job_start(j, IN_NULL, args);
  JOB_FINISH(j, 60000);
  ASSERT_CODE(j, 124);
  ASSERT_JOB(j, strstr(j->err, "asrrun: end of state report") != NULL);
  ASSERT_JOB(j, strstr(j->err, "state report (--timeout)") != NULL);
}

/* A stuck job, asked for its report (asrrun --status; the report in
 * r->out) until the report has want: each rank prints "waiting" once it
 * is where it stays, but its service thread gets to the state the report
 * names (a comm's wait for a key, a send in flight) in its own time. Then
 * the job is ended (SIGTERM): it would never end by itself. */
static void stuck(job_t *j, job_t *r, int np, const char *mode, const char *arg, const char *want) {
  char *n = fmt("%d", np);
  const char *const args[] = {"-n", n, bin(STALL), mode, arg, NULL};
  job_start(j, IN_NULL, args);
  for (int k = 0; k < np; k++) {
    char *w = fmt("[%d] rank %d: waiting", k, k);
    if (!wait_out(j, w, 60000)) JOB_FAIL(j, "no '%s' within 60 s", w);
    free(w);
  }
  char *pid = fmt("%d", (int)j->pid);
  uint64_t until = now_ms() + 30000;
  for (;;) {
    status(r, pid);
    ASSERT_CODE(r, 0);
    ASSERT_JOB(r, strstr(r->out, "asrrun: end of state report") != NULL);
    if (strstr(r->out, want) || now_ms() > until) break;
    sleep_ms(200);
  }
  ASSERT_CONTAINS(r->out, "state report (asrrun --status)");
  ASSERT_JOB(j, !j->exited);
  kill(j->pid, SIGTERM);
  JOB_FINISH(j, 30000);
  free(n), free(pid);
}

/* Rank 0 connects to rank 1, which never accepts: its SEND comm waits for
 * the handle key, rendered as `asrkv dump` renders it, on rank 1's host;
 * the key is listed among those no rank has set. */
TEST_TIMEOUT(missing_accept, 90) {
  setup();
  job_t j, r;
  stuck(&j, &r, 2, "accept", NULL, " s in WAIT_FOR_NET_HANDLE_GET for ");
  uint8_t key[ASR_KV_HANDLE_KEY_LEN];
  char text[ASR_KV_KEY_TEXT_MAX];
  ASSERT(asr_kv_handle_key(key, 0, 1, my_hostname()) > 0);
  asr_kv_key_render(key, sizeof key, text, sizeof text);
  char *tail = fmt(" s in WAIT_FOR_NET_HANDLE_GET for %s on %s: rank 1 never called asr_accept for rank 0",
                   text, my_hostname());
  assert_line(&r, r.out, "rank 0 lnc 0 SEND comm to rank 1 lnc 1 waits ", tail);
  char *keyline = fmt("asrrun: keys waited on that no rank has set:\nasrrun:   %s on %s (127.0.0.1:", text,
                      my_hostname());
  ASSERT_CONTAINS(r.out, keyline);
  ASSERT_CONTAINS(r.out, "rank 1 is outside libasr: S (sleeping)");
  ASSERT_NO_LEFTOVERS(NULL, 5000);
  free(tail), free(keyline);
  teardown();
}

/* Small sends complete into the provider's buffers: the counts show the
 * receive that was never posted. */
TEST_TIMEOUT(missing_receive_small, 90) {
  setup();
  job_t j, r;
  stuck(&j, &r, 2, "recv", "64", "rank 0 has 4 sends to rank 1 posted for ");
  assert_line(&r, r.out, "rank 0 has 4 sends to rank 1 posted for ",
              " s; rank 1 posted 0 receives on that comm");
  ASSERT_NO_LEFTOVERS(NULL, 5000);
  teardown();
}

/* Large sends wait for their receives: the requests are in flight too. */
TEST_TIMEOUT(missing_receive_large, 90) {
  setup();
  job_t j, r;
  stuck(&j, &r, 2, "recv", "4194304", "has 4 requests in flight");
  assert_line(&r, r.out, "rank 0 has 4 sends to rank 1 posted for ",
              " s; rank 1 posted 0 receives on that comm");
  char *l = diag_line(&r, r.out,
                      "rank 0 lnc 0 SEND comm to rank 1 lnc 1 has 4 requests in flight (0 STASHED, 4 "
                      "OFI_POSTED), the oldest for ");
  free(l);
  ASSERT_NO_LEFTOVERS(NULL, 5000);
  teardown();
}

/* Rank 0 waits for a message rank 1 never sends: rank 1 sleeps outside libasr. */
TEST_TIMEOUT(rank_sleeping_outside_libasr, 90) {
  setup();
  job_t j, r;
  stuck(&j, &r, 2, "sleep", NULL, "rank 0 has 1 receive from rank 1 posted for ");
  assert_line(&r, r.out, "rank 0 has 1 receive from rank 1 posted for ",
              " s; rank 1 posted 0 sends on that comm");
  char *l = diag_line(&r, r.out, "rank 1 is outside libasr: S (sleeping)");
  free(l);
  ASSERT_NO_LEFTOVERS(NULL, 5000);
  teardown();
}

/* A barrier the last rank never joins. */
TEST_TIMEOUT(barrier_one_rank_never_joins, 90) {
  setup();
  job_t j, r;
  stuck(&j, &r, 3, "barrier", NULL, "ranks 0-1 are in asr_job_barrier; ");
  char *l =
      diag_line(&r, r.out, "ranks 0-1 are in asr_job_barrier; rank 2 never joined it: it is S (sleeping)");
  ASSERT_JOB(&r, strstr(l, "outside libasr") != NULL);
  free(l);
  ASSERT_NO_LEFTOVERS(NULL, 5000);
  teardown();
}

/* A rank that is not a libasr process (it exec'd sleep): no report, named. */
TEST_TIMEOUT(rank_not_libasr, 90) {
  setup();
  job_t j;
  stuck_timeout(&j, "3", "nolib", NULL);
  char *l = diag_line(&j, j.err, "rank 1 is not a libasr process (no report); it is S (sleeping)");
  free(l);
  ASSERT_CONTAINS(j.err,
                  "asrrun:   ranks 0 and 2 are in asr_job_init's fence; rank 1 never joined it: rank 1 is "
                  "not a libasr process (no report)\n");
  ASSERT_NO_LEFTOVERS(NULL, 5000);
  teardown();
}

/* SIGQUIT while the job runs: the report, then the job goes on and ends 0
 * with every message verified (the app checks each byte). */
TEST_TIMEOUT(report_on_demand_job_goes_on, 90) {
  setup();
  job_t j;
  char *stop = fmt("%s/stop", W.dir);
  const char *const args[] = {"-n", "2", bin(STALL), "run", "60", stop, NULL};
  job_start(&j, IN_NULL, args);
  ASSERT_JOB(&j, wait_out(&j, "[1] rank 1: running", 30000) && wait_out(&j, "[0] rank 0: running", 10000));
  kill(j.pid, SIGQUIT);
  ASSERT_JOB(&j, wait_err(&j, "asrrun: end of state report", 15000));
  ASSERT_CONTAINS(j.err, "state report (SIGQUIT)");
  ASSERT_CONTAINS(j.err, "comm lnc 0 SEND #0 to rank 1 (127.0.0.1 lnc 1): CONNECTED");
  ASSERT_CONTAINS(j.err, "comm lnc 1 RECV #0 from rank 0 (127.0.0.1 lnc 0): CONNECTED");
  ASSERT_JOB(&j, !j.exited);
  write_file(stop, "", 0644); /* the app's rank 0 ends the exchange */
  JOB_FINISH(&j, 60000);
  ASSERT_CODE(&j, 0);
  free(stop);
  ASSERT_CONTAINS(j.out, "[0] rank 0: done");
  ASSERT_CONTAINS(j.out, "[1] rank 1: done");
  ASSERT_NO_LEFTOVERS(NULL, 5000);
  teardown();
}

/* A rank that exits while it is asked (its report thread exits the process
 * at the question): the report is still whole and names it. */
TEST_TIMEOUT(rank_exits_while_asked, 90) {
  setup();
  job_t j;
  const char *const args[] = {"-n", "2", "--timeout", "60", bin(STALL), "sleep", "exit", NULL};
  job_start(&j, IN_NULL, args);
  ASSERT_JOB(&j, wait_out(&j, "[0] rank 0: waiting", 30000));
  sleep_ms(500);
  kill(j.pid, SIGQUIT);
  ASSERT_JOB(&j, wait_err(&j, "asrrun: end of state report", 15000));
  ASSERT_CONTAINS(j.err, "asrrun:   rank 1 exited while it was asked\n");
  JOB_FINISH(&j, 30000);
  ASSERT_CODE(&j, 3); /* the rank's own status (the test hook's) */
  ASSERT_NO_LEFTOVERS(NULL, 5000);
  teardown();
}

/* A rank that never answers does not hold the report: it is named, and the
 * report (asrrun --status's run) comes within its bound: the daemon's
 * ASRRUN_REPORT_ASK_MS, with room for a slow machine. */
TEST_TIMEOUT(rank_never_answers, 90) {
  setup();
  job_t j, r;
  stuck(&j, &r, 2, "sleep", "mute", "rank 1 did not answer");
  ASSERT_JOB(&r, r.ms < 2000 + 8000);
  char *l = diag_line(&r, r.out, "rank 1 did not answer; it is S (sleeping)");
  free(l);
  ASSERT_NO_LEFTOVERS(NULL, 5000);
  teardown();
}

/* Runs asrrun --status jobarg as uid (setpriv), its stdout and stderr into
 * *out; returns its exit status (or -1). */
static int status_as(uid_t uid, const char *jobarg, char **out) {
  int p[2];
  ASSERT(pipe(p) == 0);
  char *ids = fmt("%u", (unsigned)uid);
  char *reuid = fmt("--reuid=%s", ids), *regid = fmt("--regid=%s", ids);
  pid_t c = fork();
  ASSERT(c >= 0);
  if (c == 0) {
    dup2(p[1], 1);
    dup2(p[1], 2);
    execlp("setpriv", "setpriv", reuid, regid, "--clear-groups", bin("bin/asrrun"), "--status", jobarg,
           (char *)NULL);
    _exit(126);
  }
  close(p[1]);
  size_t len = 0, cap = 4096;
  char *buf = malloc(cap);
  ssize_t n;
  while ((n = read(p[0], buf + len, cap - len - 1)) > 0) {
    len += (size_t)n;
    if (cap - len < 2) buf = realloc(buf, cap *= 2);
  }
  buf[len] = '\0';
  close(p[0]);
  int st;
  waitpid(c, &st, 0);
  free(ids), free(reuid), free(regid);
  *out = buf;
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* asrrun --status from another process of the same user: the report of the
 * running job, which goes on and ends normally. */
TEST_TIMEOUT(status_same_user, 90) {
  setup();
  job_t j, s;
  char *stop = fmt("%s/stop", W.dir);
  const char *const args[] = {"-n", "2", bin(STALL), "run", "60", stop, NULL};
  job_start(&j, IN_NULL, args);
  ASSERT_JOB(&j, wait_out(&j, "[1] rank 1: running", 30000) && wait_out(&j, "[0] rank 0: running", 10000));
  char *pid = fmt("%d", (int)j.pid);
  status(&s, pid);
  ASSERT_CODE(&s, 0);
  ASSERT_CONTAINS(s.out, "state report (asrrun --status)");
  ASSERT_CONTAINS(s.out, "comm lnc 0 SEND #0 to rank 1 (127.0.0.1 lnc 1): CONNECTED");
  ASSERT_CONTAINS(s.out, "comm lnc 1 RECV #0 from rank 0 (127.0.0.1 lnc 0): CONNECTED");
  /* both ranks answered at once: the report does not wait out the 2000 ms
   * the daemon gives a rank that might never answer (ASRRUN_REPORT_ASK_MS) */
  ASSERT_MSG(s.ms < 1500, "asrrun --status took %llu ms although every rank answered",
             (unsigned long long)s.ms);
  ASSERT_JOB(&j, !j.exited);
  write_file(stop, "", 0644); /* the app's rank 0 ends the exchange */
  JOB_FINISH(&j, 60000);
  ASSERT_CODE(&j, 0);
  free(stop);
  ASSERT_CONTAINS(j.out, "[1] rank 1: done");
  /* gone: its socket went with it */
  status(&s, pid);
  ASSERT_CODE(&s, 1);
  ASSERT_CONTAINS(s.err, "no running job");
  free(pid);
  ASSERT_NO_LEFTOVERS(NULL, 5000);
  teardown();
}

/* Another user is refused: by job (asrrun's pid) and by the socket's path
 * (the directory is the job's user's alone); the job never answers them,
 * goes on and ends normally. Needs root (to run as nobody) and setpriv. */
TEST_TIMEOUT(status_refused_to_another_user, 90) {
  if (geteuid() != 0) SKIP("needs root to run asrrun --status as another user");
  if (system("command -v setpriv >/dev/null 2>&1") != 0) SKIP("setpriv is not installed");
  struct passwd *pw = getpwnam("nobody");
  if (!pw) SKIP("no user nobody");
  setup();
  job_t j;
  char *stop = fmt("%s/stop", W.dir);
  const char *const args[] = {"-n", "2", bin(STALL), "run", "60", stop, NULL};
  job_start(&j, IN_NULL, args);
  ASSERT_JOB(&j, wait_out(&j, "[1] rank 1: running", 30000) && wait_out(&j, "[0] rank 0: running", 10000));
  char *pid = fmt("%d", (int)j.pid),
       *path = fmt("/tmp/asrrun-%u/job-%d.sock", (unsigned)getuid(), (int)j.pid);
  ASSERT_JOB(&j, exists(path));
  char *out = NULL;
  int rc = status_as(pw->pw_uid, pid, &out);
  ASSERT_MSG(rc == 3, "asrrun --status %s as nobody exited %d: %s", pid, rc, out);
  ASSERT_CONTAINS(out, "refused: job ");
  ASSERT_MSG(!strstr(out, "state report"), "nobody got a report: %s", out);
  free(out);
  rc = status_as(pw->pw_uid, path, &out);
  ASSERT_MSG(rc == 3, "asrrun --status %s as nobody exited %d: %s", path, rc, out);
  ASSERT_CONTAINS(out, "refused: ");
  ASSERT_MSG(!strstr(out, "state report"), "nobody got a report: %s", out);
  free(out);
  write_file(stop, "", 0644); /* the app's rank 0 ends the exchange */
  JOB_FINISH(&j, 60000);
  ASSERT_CODE(&j, 0);
  free(stop);
  ASSERT_JOB(&j, !strstr(j.err, "state report"));
  free(pid), free(path);
  ASSERT_NO_LEFTOVERS(NULL, 5000);
  teardown();
}

/* --get-stack-traces: the stuck ranks' stacks (gdb here, eu-stack where
 * installed), or a line saying neither is installed. */
TEST_TIMEOUT(stack_traces, 120) {
  setup();
  job_t j;
  const char *const args[] = {
      "-n",       "2",      "--timeout", "6", "--report-state-on-timeout", "--get-stack-traces",
      bin(STALL), "accept", NULL};
  job_start(&j, IN_NULL, args);
  JOB_FINISH(&j, 90000);
  ASSERT_CODE(&j, 124);
  int tool = system("command -v eu-stack >/dev/null 2>&1 || command -v gdb >/dev/null 2>&1") == 0;
  if (tool) {
    ASSERT_CONTAINS(j.err, "asrrun:     stack:\n");
    ASSERT_CONTAINS(j.err, "asrrun:       | ");
    ASSERT_CONTAINS(j.err, "main");
  } else {
    ASSERT_CONTAINS(j.err, "stack: neither eu-stack nor gdb is installed on ");
  }
  ASSERT_NO_LEFTOVERS(NULL, 5000);
  teardown();
}
