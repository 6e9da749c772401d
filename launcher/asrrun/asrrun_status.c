/*
 * asrrun_status.c -- asrrun --status [JOB] (issue 24): a running job
 * listens on a UNIX socket, /tmp/asrrun-UID/job-PID.sock (PID: asrrun's,
 * the job's id), in a directory of the user's own, mode 0700, which asrrun
 * makes or checks (owned by the user, no access for anyone else, not a
 * link) before it listens there. Another shell of the same user connects,
 * and the job answers with its state report (asrrun_state.c) and closes.
 * Other users are refused twice over: they cannot enter the directory, and
 * the job checks each caller's uid (SO_PEERCRED) and answers a stranger
 * with a refusal only. The client asks nothing: connecting is the request.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "asr_err.h"
#include "asr_log.h"
#include "asrrun.h"

#define ANSWER_SEND_TIMEOUT_S 5 /* a client that stops reading holds asrrun no longer */

struct asrrun_status {
  int lfd;
  asr_loop_io_t io;
  char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
};

static void dir_of(uid_t uid, char *out, size_t len) { snprintf(out, len, "/tmp/asrrun-%u", (unsigned)uid); }

/* Makes (or checks) the user's directory: 0, or ASR_EPERM / errno's with why. */
static int own_dir(char *dir, size_t len, char *why, size_t wl) {
  dir_of(getuid(), dir, len);
  if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
    snprintf(why, wl, "cannot make %s: %s", dir, strerror(errno));
    return asr_err_from_errno(errno);
  }
  struct stat sb;
  if (lstat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode) || sb.st_uid != getuid() || (sb.st_mode & 077)) {
    snprintf(why, wl, "%s is not a directory of this user's alone (mode 0700): not using it", dir);
    return ASR_EPERM;
  }
  return 0;
}

static void answer_cb(asrrun_t *run, const char *text, size_t len, void *arg) {
  (void)run;
  int fd = (int)(intptr_t)arg;
  asrrun_state_write(fd, text, len);
  close(fd);
}

static void on_accept(asr_loop_t *loop, asr_loop_io_t *io, unsigned events) {
  (void)loop, (void)events;
  asrrun_t *run = io->arg;
  for (;;) {
    int fd = accept4(run->status->lfd, NULL, NULL, SOCK_CLOEXEC);
    if (fd < 0) return;
    struct ucred cr;
    socklen_t cl = sizeof cr;
    struct timeval tv = {.tv_sec = ANSWER_SEND_TIMEOUT_S};
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &cl) != 0 || cr.uid != getuid()) {
      char msg[200];
      int n =
          snprintf(msg, sizeof msg, "asrrun: refused: job %ld belongs to uid %u; only that user may ask\n",
                   (long)getpid(), (unsigned)getuid());
      asrrun_state_write(fd, msg, (size_t)n);
      close(fd);
      continue;
    }
    asrrun_state_ask(run, "asrrun --status", answer_cb, (void *)(intptr_t)fd);
  }
}

void asrrun_status_start(asrrun_t *run) {
  char dir[64], why[300];
  if (own_dir(dir, sizeof dir, why, sizeof why) != 0) {
    asr_warn("asrrun", "no asrrun --status for this job: %s", why);
    return;
  }
  struct asrrun_status *s = calloc(1, sizeof *s);
  if (!s) return;
  snprintf(s->path, sizeof s->path, "%s/job-%ld.sock", dir, (long)getpid());
  unlink(s->path); /* an earlier asrrun of this pid that was killed */
  struct sockaddr_un a = {.sun_family = AF_UNIX};
  snprintf(a.sun_path, sizeof a.sun_path, "%s", s->path);
  s->lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (s->lfd < 0 || bind(s->lfd, (struct sockaddr *)&a, sizeof a) != 0 || listen(s->lfd, 16) != 0 ||
      asr_loop_io_start(run->loop, &s->io, s->lfd, ASR_LOOP_READ, on_accept, run) != 0) {
    asr_warn("asrrun", "no asrrun --status for this job: cannot listen on %s: %s", s->path, strerror(errno));
    if (s->lfd >= 0) close(s->lfd);
    unlink(s->path);
    free(s);
    return;
  }
  run->status = s;
}

void asrrun_status_stop(asrrun_t *run) {
  struct asrrun_status *s = run->status;
  if (!s) return;
  asr_loop_io_stop(run->loop, &s->io);
  close(s->lfd);
  unlink(s->path);
  free(s);
  run->status = NULL;
}

/* --- the client ------------------------------------------------------------------- */

/* Asks the job at path; 0 when it answered. */
static int ask(const char *path, int quiet_missing) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_un a = {.sun_family = AF_UNIX};
  snprintf(a.sun_path, sizeof a.sun_path, "%s", path);
  if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
    int e = errno;
    if (fd >= 0) close(fd);
    if (e == ECONNREFUSED && !quiet_missing) {
      fprintf(stderr, "asrrun: %s: that job is gone\n", path);
    } else if (e == EACCES || e == EPERM) {
      fprintf(stderr, "asrrun: refused: %s belongs to another user\n", path);
      return 3;
    } else if (!quiet_missing || e != ECONNREFUSED) {
      fprintf(stderr, "asrrun: cannot reach %s: %s\n", path, strerror(e));
    }
    return 1;
  }
  char buf[65536];
  ssize_t n;
  int refused = 0, any = 0;
  while ((n = read(fd, buf, sizeof buf)) > 0) {
    if (!any && n >= 16 && memcmp(buf, "asrrun: refused:", 16) == 0) refused = 1;
    any = 1;
    fwrite(buf, 1, (size_t)n, refused ? stderr : stdout);
  }
  close(fd);
  fflush(stdout);
  if (refused) return 3;
  if (!any) {
    fprintf(stderr, "asrrun: %s closed without a report\n", path);
    return 1;
  }
  return 0;
}

/* The owner of process pid, when it is an asrrun: 0 with *uid, else ASR_ENOENT. */
static int asrrun_owner(long pid, uid_t *uid) {
  char p[64], comm[64] = "";
  snprintf(p, sizeof p, "/proc/%ld/comm", pid);
  FILE *f = fopen(p, "r");
  if (!f) return ASR_ENOENT;
  if (!fgets(comm, sizeof comm, f)) comm[0] = '\0';
  fclose(f);
  comm[strcspn(comm, "\n")] = '\0';
  struct stat sb;
  snprintf(p, sizeof p, "/proc/%ld", pid);
  if (strcmp(comm, "asrrun") != 0 || stat(p, &sb) != 0) return ASR_ENOENT;
  *uid = sb.st_uid;
  return 0;
}

int asrrun_status_client(const char *job) {
  char dir[64], path[384];
  dir_of(getuid(), dir, sizeof dir);
  if (job && strchr(job, '/')) return ask(job, 0); /* a socket path */
  if (job) {
    char *end;
    long pid = strtol(job, &end, 10);
    if (!*job || *end || pid <= 0) {
      fprintf(stderr, "asrrun: --status %s: give a job (asrrun's pid)\n", job);
      return ASRRUN_EXIT_USAGE;
    }
    snprintf(path, sizeof path, "%s/job-%ld.sock", dir, pid);
    if (access(path, F_OK) == 0) return ask(path, 0);
    uid_t owner;
    if (asrrun_owner(pid, &owner) == 0 && owner != getuid()) {
      struct passwd *pw = getpwuid(owner);
      fprintf(stderr, "asrrun: refused: job %ld belongs to user %s (uid %u); only that user may ask\n", pid,
              pw ? pw->pw_name : "?", (unsigned)owner);
      return 3;
    }
    fprintf(stderr, "asrrun: no running job %ld of this user (looked in %s)\n", pid, dir);
    return 1;
  }
  DIR *d = opendir(dir);
  int found = 0, rc = 0;
  for (struct dirent *e; d && (e = readdir(d));) {
    long pid;
    char tail[8];
    if (strlen(e->d_name) > 64) continue;
    if (sscanf(e->d_name, "job-%ld.%7s", &pid, tail) != 2 || strcmp(tail, "sock") != 0) continue;
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    if (kill((pid_t)pid, 0) != 0 && errno == ESRCH) { /* its asrrun was killed: a stale socket of ours */
      unlink(path);
      continue;
    }
    if (found++) printf("\n");
    printf("asrrun: job %ld:\n", pid);
    fflush(stdout);
    if (ask(path, 1) != 0) rc = 1;
  }
  if (d) closedir(d);
  if (!found) {
    fprintf(stderr, "asrrun: no running job of this user (looked in %s)\n", dir);
    return 1;
  }
  return rc;
}
