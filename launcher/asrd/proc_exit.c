/*
 * proc_exit.c -- what the kernel shows of a child process's end (proc_exit.h).
 *
 * A process's exit (do_exit in the kernel) first sets the PF_EXITING flag
 * of each of its threads and, for an exit of the whole process (exit_group
 * or a fatal signal), each thread's exit_code to the coming wait status;
 * then it releases its memory, then its files, and at last becomes a zombie
 * that wakes its parent. proc(5)'s /proc/PID/stat shows the leader
 * thread's flags (field 9) and exit_code (field 52, to its parent), so a
 * process can be seen in its exit before any other process could see its
 * memory or its files gone.
 */
#include "config.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "proc_exit.h"

/* The kernel's PF_EXITING task flag (include/linux/sched.h). */
#define PF_EXITING_FLAG 0x4u

/* The fields of a stat file read here: 3 state, 9 flags, 20 num_threads,
 * 52 exit_code. */
typedef struct {
  char state;
  unsigned long flags;
  long threads, code;
} proc_stat_t;

/* 1 with *st read from path, or 0 (gone, unreadable, or not that format). */
static int read_stat(const char *path, proc_stat_t *st) {
  char buf[2048];
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return 0;
  buf[n] = 0;
  char *p = strrchr(buf, ')'); /* the name may hold spaces and parentheses */
  if (!p) return 0;
  memset(st, 0, sizeof *st);
  int field = 2;
  char *save = NULL;
  for (char *tok = strtok_r(p + 1, " ", &save); tok; tok = strtok_r(NULL, " ", &save)) {
    field++;
    if (field == 3) st->state = tok[0];
    if (field == 9) st->flags = strtoul(tok, NULL, 10);
    if (field == 20) st->threads = strtol(tok, NULL, 10);
    if (field == 52) st->code = strtol(tok, NULL, 10);
  }
  return field >= 20;
}

/* Whether every thread of process pid is in its exit. */
static int all_threads_exiting(pid_t pid) {
  char path[300];
  snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
  DIR *dir = opendir(path);
  if (!dir) return 0;
  int all = 1;
  for (struct dirent *e; all && (e = readdir(dir));) {
    if (e->d_name[0] == '.') continue;
    proc_stat_t st;
    snprintf(path, sizeof path, "/proc/%d/task/%.20s/stat", (int)pid, e->d_name);
    if (read_stat(path, &st) && !(st.flags & PF_EXITING_FLAG)) all = 0;
  }
  closedir(dir);
  return all;
}

int asr_proc_exit_state(pid_t pid, int *status) {
  if (pid <= 0) return ASR_PROC_LIVE;
  /* a zombie: its status, without reaping it */
  siginfo_t si;
  memset(&si, 0, sizeof si);
  if (waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid == pid) {
    if (si.si_code == CLD_EXITED)
      *status = (si.si_status & 0xff) << 8;
    else
      *status = (si.si_status & 0x7f) | (si.si_code == CLD_DUMPED ? 0x80 : 0);
    return ASR_PROC_ENDED;
  }
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  proc_stat_t st;
  if (!read_stat(path, &st) || !(st.flags & PF_EXITING_FLAG)) return ASR_PROC_LIVE;
  /* A non-zero code is an exit of the whole process under way. A zombie
   * leader with threads left and code 0 may have left by pthread_exit, the
   * process living on: it is in its exit only if every thread is. */
  if (st.code != 0) {
    *status = (int)st.code;
    return ASR_PROC_ENDED;
  }
  if (st.state == 'Z' && st.threads > 1 && !all_threads_exiting(pid)) return ASR_PROC_LIVE;
  return ASR_PROC_DYING;
}
