/* test_proc_exit.c -- what the kernel shows of a child's end before it is
 * reaped (proc_exit.h): a live child is live; a zombie gives the status
 * waitpid will give (an exit, a signal); a child whose main thread left by
 * pthread_exit while another runs is live, not dying. */
#include "config.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "asr_test.h"
#include "proc_exit.h"

/* The state letter of pid's stat (field 3), or 0. */
static char state_of(pid_t pid) {
  char path[64], buf[512];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = 0;
  char *p = strrchr(buf, ')');
  return p && p[1] == ' ' ? p[2] : 0;
}

/* Waits until pid is a zombie the kernel would let its parent reap. */
static void wait_reapable(pid_t pid) {
  for (int i = 0; i < 5000; i++) {
    siginfo_t si = {0};
    if (waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid == pid) return;
    usleep(1000);
  }
  ASSERT_MSG(0, "pid %d did not end", (int)pid);
}

/* A child that waits for a signal. */
static pid_t paused_child(void) {
  pid_t pid = fork();
  ASSERT(pid >= 0);
  if (pid == 0) {
    pause();
    _exit(0);
  }
  return pid;
}

static void reap(pid_t pid) {
  int st;
  ASSERT_EQ(waitpid(pid, &st, 0), pid);
}

TEST(live_child_is_live) {
  pid_t pid = paused_child();
  int st = -1;
  ASSERT_EQ(asr_proc_exit_state(pid, &st), ASR_PROC_LIVE);
  ASSERT_EQ(st, -1); /* written only when ended */
  kill(pid, SIGKILL);
  reap(pid);
  ASSERT_EQ(asr_proc_exit_state(pid, &st), ASR_PROC_LIVE); /* gone: nothing to read */
  ASSERT_EQ(asr_proc_exit_state(0, &st), ASR_PROC_LIVE);
}

TEST(zombie_gives_its_exit_status) {
  pid_t pid = fork();
  ASSERT(pid >= 0);
  if (pid == 0) _exit(3);
  wait_reapable(pid);
  int st = -1;
  ASSERT_EQ(asr_proc_exit_state(pid, &st), ASR_PROC_ENDED);
  ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 3);
  ASSERT_EQ(asr_proc_exit_state(pid, &st), ASR_PROC_ENDED); /* not reaped by asking */
  int got;
  ASSERT_EQ(waitpid(pid, &got, 0), pid);
  ASSERT_EQ(got, st);
}

TEST(zombie_gives_its_signal) {
  pid_t pid = paused_child();
  kill(pid, SIGKILL);
  wait_reapable(pid);
  int st = -1;
  ASSERT_EQ(asr_proc_exit_state(pid, &st), ASR_PROC_ENDED);
  ASSERT(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
  int got;
  ASSERT_EQ(waitpid(pid, &got, 0), pid);
  ASSERT_EQ(got, st);
}

static void *sleeper(void *arg) {
  (void)arg;
  for (;;) pause();
  return NULL;
}

TEST(main_thread_gone_process_lives) {
  pid_t pid = fork();
  ASSERT(pid >= 0);
  if (pid == 0) {
    pthread_t t;
    if (pthread_create(&t, NULL, sleeper, NULL) != 0) _exit(1);
    pthread_exit(NULL);
  }
  for (int i = 0; i < 5000 && state_of(pid) != 'Z'; i++) usleep(1000);
  ASSERT_EQ(state_of(pid), 'Z'); /* the leader thread is a zombie, its process lives */
  int st = -1;
  ASSERT_EQ(asr_proc_exit_state(pid, &st), ASR_PROC_LIVE);
  kill(pid, SIGKILL);
  wait_reapable(pid);
  ASSERT_EQ(asr_proc_exit_state(pid, &st), ASR_PROC_ENDED);
  ASSERT(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
  reap(pid);
}
