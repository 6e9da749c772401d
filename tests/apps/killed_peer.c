/*
 * killed_peer.c -- a job in which one rank is killed and others learn of
 * it without asrd, and end before its daemon can tell its death
 * (doc/design.md, "Verdicts by cause"):
 *   killed_peer transfer V    rank V streams 1 MiB messages to rank 0
 *                             through libasr (on one host: shm, whose large
 *                             messages the receiver copies out of the
 *                             sender's memory) and dies of SIGKILL with
 *                             sends in flight; rank 0 exits 1 at its first
 *                             failed receive; every other rank waits in a
 *                             barrier and leaves when it fails
 *   killed_peer socket V DIR  rank V listens on TCP and writes its port to
 *                             DIR/port; every other rank connects to it
 *                             and reads until EOF, then leaves (exit 0
 *                             without finalizing); rank V dies of SIGKILL
 *                             once all have connected
 * Every rank prints "rank N: joined"; a survivor says how it learnt.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "asr.h"

#define MSG (1u << 20)
#define WINDOW 8

static int transfer(const asr_job_info_t *info, int victim) {
  asr_tensor_t *t;
  int rc = asr_tensor_alloc((size_t)MSG * WINDOW, &t);
  if (rc) return fprintf(stderr, "killed_peer: asr_tensor_alloc: %s\n", asr_strerror(rc)), 1;
  memset(asr_tensor_va(t), info->rank, (size_t)MSG * WINDOW);
  asr_comm_t *c;
  asr_request_t *q[WINDOW];
  if (info->rank == victim) {
    if ((rc = asr_job_connect(0, &c)) || (rc = asr_comm_wait_connected(c, 20000)))
      return fprintf(stderr, "killed_peer: connect: %s\n", asr_strerror(rc)), 1;
    for (int n = 0;; n++) { /* a window in flight; at the fourth, no waiting for it */
      for (int k = 0; k < WINDOW; k++)
        if ((rc = asr_isend(c, t, (size_t)k * MSG, MSG, &q[k])))
          return fprintf(stderr, "killed_peer: isend: %s\n", asr_strerror(rc)), 1;
      if (n == 3) raise(SIGKILL);
      for (int k = 0; k < WINDOW; k++)
        for (int done = 0; !done;)
          if ((rc = asr_test(q[k], &done, NULL))) return 1;
    }
  }
  if ((rc = asr_job_accept(victim, &c)) || (rc = asr_comm_wait_connected(c, 20000)))
    return fprintf(stderr, "killed_peer: accept: %s\n", asr_strerror(rc)), 1;
  for (;;) {
    for (int k = 0; k < WINDOW; k++)
      if ((rc = asr_irecv(c, t, (size_t)k * MSG, MSG, &q[k])))
        return fprintf(stderr, "killed_peer: irecv: %s\n", asr_strerror(rc)), 1;
    for (int k = 0; k < WINDOW; k++)
      for (int done = 0; !done;)
        if ((rc = asr_test(q[k], &done, NULL))) {
          printf("rank %d: a receive failed (%s); exiting 1\n", info->rank, asr_strerror(rc));
          fflush(stdout);
          _exit(1);
        }
  }
}

static int sock(const asr_job_info_t *info, int victim, const char *dir) {
  char path[4096], tmp[4200];
  snprintf(path, sizeof path, "%s/port", dir);
  if (info->rank == victim) {
    int l = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    socklen_t al = sizeof a;
    if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof a) || listen(l, 64) ||
        getsockname(l, (struct sockaddr *)&a, &al))
      return perror("killed_peer: listen"), 1;
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f) return perror("killed_peer: port file"), 1;
    fprintf(f, "%d\n", ntohs(a.sin_port));
    fclose(f);
    rename(tmp, path);
    for (int n = 1; n < info->size; n++)
      if (accept(l, NULL, NULL) < 0) return perror("killed_peer: accept"), 1;
    raise(SIGKILL);
  }
  char addr[64];
  int lnc, port = 0, rc = asr_job_peer(victim, addr, sizeof addr, &lnc);
  if (rc) return fprintf(stderr, "killed_peer: asr_job_peer: %s\n", asr_strerror(rc)), 1;
  for (int tries = 0; !port && tries < 3000; tries++) {
    FILE *f = fopen(path, "r");
    if (!f || fscanf(f, "%d", &port) != 1) port = 0;
    if (f) fclose(f);
    if (!port) usleep(10000);
  }
  int s = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  if (s < 0 || inet_pton(AF_INET, addr, &a.sin_addr) != 1 || connect(s, (struct sockaddr *)&a, sizeof a))
    return fprintf(stderr, "killed_peer: connect to %s:%d: %s\n", addr, port, strerror(errno)), 1;
  char c;
  while (read(s, &c, 1) > 0) {
  }
  printf("rank %d: rank %d's socket closed; leaving\n", info->rank, victim);
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 3) return 2;
  int victim = atoi(argv[2]);
  asr_job_info_t info;
  int rc = asr_job_init(&info);
  if (rc != ASR_SUCCESS) return fprintf(stderr, "killed_peer: asr_job_init: %s\n", asr_strerror(rc)), 1;
  printf("rank %d: joined\n", info.rank);
  fflush(stdout);
  if (!strcmp(argv[1], "socket") && argc > 3) return sock(&info, victim, argv[3]);
  if (strcmp(argv[1], "transfer")) return 2;
  if (info.rank == 0 || info.rank == victim) return transfer(&info, victim);
  rc = asr_job_barrier();
  printf("rank %d: barrier: %s; leaving\n", info.rank, asr_strerror(rc));
  return 0;
}
