/*
 * test_apps.c -- the example programs ring and stress (tests/apps), run the
 * way their headers document: standalone, each forking its own ranks on this
 * host (asr_launch.h), on both providers.
 *
 * The ranks come up, race for the host's KV election and close in any order,
 * so these runs also cover a KV leader that closes while other ranks still
 * connect (kv_host.c). Each program checks every byte it receives; its
 * checker's self-test (-C: one byte spoilt on purpose) must make it fail, so
 * a PASS here means something.
 */
#include "config.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "asr_test.h"

/* asr's own same-host path ("sm": no provider forced), and each libfabric one */
static const char *const providers[] = {"sm", "shm", "tcp;ofi_rxm"};
#define NPROV (sizeof providers / sizeof providers[0])

/* Runs build-relative program rel with args (NULL-terminated) under
 * provider prov, with a free bootstrap port and the case's own lock
 * directory; returns its exit status (128 + signal) and its stdout in *out. */
static int run_app(const char *rel, const char *prov, const char *const *args, int timeout_ms, char **out) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", asr_test_builddir(), rel);
  char *argv[32];
  int n = 0;
  argv[n++] = path;
  for (int i = 0; args[i] && n < 31; i++) argv[n++] = (char *)args[i];
  argv[n] = NULL;
  if (strcmp(prov, "sm") == 0)
    unsetenv("ASR_PROVIDER");
  else
    ASSERT_OK(setenv("ASR_PROVIDER", prov, 1));
  ASSERT_OK(setenv("ASR_KV_LOCK_DIR", asr_test_tmpdir(), 1));
  /* a port below the ephemeral range (the programs' own pick takes one from it) */
  char port[16];
  snprintf(port, sizeof port, "%u", (unsigned)asr_test_free_port());
  ASSERT_OK(setenv("ASR_BOOTSTRAP_PORT", port, 1));
  unsetenv("ASR_KV_SERVER");
  int ofd = -1;
  pid_t pid = asr_test_spawn(argv, &ofd, NULL);
  ASSERT(pid > 0);
  *out = asr_test_read_all(ofd, timeout_ms);
  close(ofd);
  int st = asr_test_wait(pid, 5000);
  if (st == -1) {
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    ASSERT_MSG(0, "%s (%s) did not finish within %d ms; its output:\n%s", rel, prov, timeout_ms, *out);
  }
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

TEST_TIMEOUT(ring_both_providers, 120) {
  for (size_t p = 0; p < NPROV; p++) {
    char *out = NULL;
    const char *args[] = {"-n", "6", "-k", "60", "-q", NULL};
    int rc = run_app("tests/apps/ring", providers[p], args, 60000, &out);
    ASSERT_MSG(rc == 0, "ring (%s) exited %d:\n%s", providers[p], rc, out);
    ASSERT_CONTAINS(out, "6/6 ranks reported");
    ASSERT_CONTAINS(out, " 0 errors");
    ASSERT_CONTAINS(out, ": PASS");
    free(out);
  }
}

TEST_TIMEOUT(ring_checker_fails_on_a_spoilt_byte, 120) {
  char *out = NULL;
  const char *args[] = {"-n", "3", "-k", "10", "-q", "-C", NULL};
  int rc = run_app("tests/apps/ring", "shm", args, 60000, &out);
  ASSERT_MSG(rc != 0, "ring -C exited 0: its checker missed the spoilt byte:\n%s", out);
  ASSERT_CONTAINS(out, "FAIL");
  free(out);
}

/* 3 processes x 2 comms per peer and direction: each LNC has at most 4 x 128
 * receives posted, within shm's 1024 per endpoint (more than that is
 * test_runtime's provider_receive_queue_full), and 3 processes on 2 CPUs. */
TEST_TIMEOUT(stress_both_providers, 240) {
  for (size_t p = 0; p < NPROV; p++) {
    char *out = NULL;
    const char *args[] = {"-P", "3", "-c", "2", "-m", "500", "-S", "262144", "-T", "8388608", NULL};
    int rc = run_app("tests/apps/stress", providers[p], args, 110000, &out);
    ASSERT_MSG(rc == 0, "stress (%s) exited %d:\n%s", providers[p], rc, out);
    ASSERT_CONTAINS(out, "PASS");
    free(out);
  }
}

TEST_TIMEOUT(stress_checker_fails_on_a_spoilt_byte, 120) {
  char *out = NULL;
  const char *args[] = {"-P", "2", "-c", "1", "-m", "200", "-S", "65536", "-T", "4194304", "-C", NULL};
  int rc = run_app("tests/apps/stress", "shm", args, 60000, &out);
  ASSERT_MSG(rc != 0, "stress -C exited 0: its checker missed the spoilt byte:\n%s", out);
  ASSERT_CONTAINS(out, "FAIL");
  free(out);
}
