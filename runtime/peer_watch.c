/*
 * peer_watch.c -- fails the comms of a peer process that died (beyond the
 * seed, which has no liveness check after the rendezvous).
 *
 * Why: a receive is posted for any source with a tag, not on a connection,
 * so no provider can tell that its sender is gone; and neither shm nor
 * tcp;ofi_rxm fails a large send to a dead receiver (libfabric 1.17). Without
 * a watch, the survivor of a SIGKILL polls those requests forever.
 *
 * How: each end of a comm tells the other who it is (ofi.h: the 20-byte
 * "who" in the listen handle and in the connect message): its pid, its start
 * time since boot, and a node id naming the kernel boot and pid namespace it
 * runs in. A peer in our node is watched through a pid source on the service
 * thread's loop (a pidfd, readable when the process exits), so its death is
 * seen at once, asleep or busy. The start time guards against pid reuse
 * between the handshake and the watch. A peer on another node (another host) is not
 * watched here: there the launcher ends the whole job when a rank dies, or,
 * in a job that outlives a failure, reports the death (rank_fail.c).
 *
 * On a death every connected comm to that process turns CONNECTION_ERROR
 * with a message naming it; its posted receives are cancelled, its stashed
 * requests fail when the stash is drained, and asr_test fails any request
 * still in flight once a poll finds it not done (data that arrived before the
 * death still completes normally).
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "asr_err.h"
#include "asr_le.h"
#include "asr_log.h"
#include "asr_time.h"
#include "rt.h"

/* Field 22 of /proc/PID/stat (starttime, clock ticks since boot); 0 if unreadable. */
static uint64_t proc_start_time(uint32_t pid) {
  char path[64], buf[1024];
  snprintf(path, sizeof path, "/proc/%u/stat", pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return 0;
  buf[n] = '\0';
  char *p = strrchr(buf, ')'); /* the command name may hold spaces and ')' */
  if (!p) return 0;
  /* after ") " come fields 3 (state) .. ; starttime is field 22 */
  int field = 2;
  for (; *p && field < 22; p++)
    if (*p == ' ') field++;
  return field == 22 ? strtoull(p, NULL, 10) : 0;
}

static uint64_t fnv1a(uint64_t h, const void *data, size_t len) {
  const unsigned char *p = data;
  for (size_t i = 0; i < len; i++) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

/* The kernel boot and pid namespace we run in: pids mean the same thing to
 * every process with the same node id. 0 when it cannot be told. */
static uint64_t node_id(void) {
  char boot[64] = {0};
  int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  ssize_t n = read(fd, boot, sizeof boot - 1);
  close(fd);
  struct stat st;
  if (n <= 0 || stat("/proc/self/ns/pid", &st) != 0) return 0;
  uint64_t h = fnv1a(0xcbf29ce484222325ull, boot, (size_t)n);
  h = fnv1a(h, &st.st_dev, sizeof st.st_dev);
  h = fnv1a(h, &st.st_ino, sizeof st.st_ino);
  return h ? h : 1;
}

void asr__watch_self(uint8_t who[ASR_OFI_WHO_LEN]) {
  memset(who, 0, ASR_OFI_WHO_LEN);
  uint32_t pid = (uint32_t)getpid();
  uint64_t start = proc_start_time(pid), node = node_id();
  if (!start || !node) return; /* all zero: "do not watch me" */
  asr_le_put32(who, pid);
  asr_le_put64(who + 4, start);
  asr_le_put64(who + 12, node);
}

void asr__watch_fail_comm(asr_ctx_t *ctx, struct asr_comm *c, uint32_t pid) {
  const char *rank_why = atomic_load_explicit(&c->why, memory_order_acquire); /* rank_fail.c */
  if (rank_why)
    snprintf(c->err, sizeof c->err, "%s", rank_why);
  else
    snprintf(c->err, sizeof c->err, "the peer process %u (%s, lnc %d) exited", pid, c->peer_ip, c->peer_lnc);
  c->died = 1;
  asr__comm_set_status(c, ASR_COMM_CONNECTION_ERROR);
  /* A peer that is done and exits before we close our end is normal at
   * the end of a job: say so only where requests are lost. */
  int open = atomic_load(&c->stash_head) != atomic_load(&c->stash_tail);
  asr_comm_pool_t *pool = asr__comm_pool_of(c);
  for (int i = 0; pool && i < ASR_RING && !open; i++) open = asr__ofi_op_owned(&pool->ops[i]);
  ASR_LOG(open ? ASR_LOG_WARN : ASR_LOG_DEBUG, "svc", "lnc %d %s comm to %s/lnc %d: %s", ctx->lnc,
          c->type == ASR_SEND_COMM ? "SEND" : "RECV", c->peer_ip, c->peer_lnc, c->err);
  /* Receives can be cancelled (their completions then say ECANCELED);
   * sends cannot on these providers: asr_test fails them (request.c). */
  if (c->type == ASR_RECV_COMM && !asr__comm_sm(c)) /* an sm receive: nothing holds it (asr_test fails it) */
    for (int i = 0; pool && i < ASR_RING; i++)
      if (asr__ofi_op_owned(&pool->ops[i])) (void)asr__ofi_cancel(asr__comm_ofi(c), &pool->ops[i], 0);
}

/* Fails every connected SEND comm watched through entry w. Its RECV comms
 * are only marked (peer_exited) for the close handshake's next look
 * (drain.c), which reads the mailbox first: a sender that announced, just
 * before it exited, messages not taken yet leaves them to be taken, and
 * its comm lingers, CONNECTED, until they are; any other fails there, at
 * once. Service thread. */
static void fail_peer(asr_ctx_t *ctx, int w) {
  asr_watch_t *e = ctx->watch.peers[w];
  pthread_mutex_lock(&ctx->comms.mutex);
  for (struct asr_comm *c = ctx->comms.connected; c; c = c->next) {
    if (c->watch != w || atomic_load(&c->status) != ASR_COMM_CONNECTED) continue;
    if (c->type == ASR_RECV_COMM) {
      c->peer_exited = 1;
      ctx->drain.peer_exits++;
      continue;
    }
    asr__watch_fail_comm(ctx, c, e->pid);
  }
  pthread_mutex_unlock(&ctx->comms.mutex);
}

static void mark_dead(asr_ctx_t *ctx, int w) {
  asr_watch_t *e = ctx->watch.peers[w];
  if (e->dead) return;
  asr_loop_pid_stop(ctx->svc.loop, &e->exit_watch);
  e->dead = 1;
  ctx->watch.live--;
  asr_debug("svc", "lnc %d: peer process %u exited", ctx->lnc, e->pid);
  fail_peer(ctx, w);
}

static void on_peer_exit(asr_loop_t *loop, asr_loop_pid_t *p, int have_status, int status) {
  (void)loop, (void)have_status, (void)status;
  asr_watch_t *e = p->arg;
  mark_dead(e->ctx, e->index);
}

int asr__watch_comm(asr_ctx_t *ctx, struct asr_comm *c, const uint8_t who[ASR_OFI_WHO_LEN]) {
  c->watch = -1;
  uint32_t pid = asr_le_get32(who);
  uint64_t start = asr_le_get64(who + 4), node = asr_le_get64(who + 12);
  if (!pid || !node || node != ctx->watch.self_node || pid == (uint32_t)getpid()) return 0;
  for (int i = 0; i < ctx->watch.n; i++)
    if (ctx->watch.peers[i]->pid == pid && ctx->watch.peers[i]->start == start) {
      c->watch = i;
      return ctx->watch.peers[i]->dead;
    }
  if (ctx->watch.n == ctx->watch.cap) {
    int ncap = ctx->watch.cap ? ctx->watch.cap * 2 : 8;
    asr_watch_t **n = realloc(ctx->watch.peers, (size_t)ncap * sizeof *n);
    if (!n) return 0; /* unwatched: no worse than before */
    ctx->watch.peers = n;
    ctx->watch.cap = ncap;
  }
  asr_watch_t *e = calloc(1, sizeof *e);
  if (!e) return 0;
  *e = (asr_watch_t){.ctx = ctx, .index = ctx->watch.n, .pid = pid, .start = start};
  int rc = asr_loop_pid_start(ctx->svc.loop, &e->exit_watch, (pid_t)pid, 0, on_peer_exit, e);
  if (rc) {
    asr_debug("svc", "lnc %d: cannot watch peer process %u: %s", ctx->lnc, pid, asr_strerror(rc));
    free(e);
    return 0;
  }
  ctx->watch.peers[ctx->watch.n++] = e;
  ctx->watch.live++;
  c->watch = e->index;
  /* The pid may already name another process, or none (the peer died and
   * its pid was reused before the watch): the start time tells. */
  if (proc_start_time(pid) != start) mark_dead(ctx, e->index);
  return e->dead;
}

void asr__watch_free(asr_ctx_t *ctx) {
  for (int i = 0; i < ctx->watch.n; i++) {
    asr_loop_pid_stop(ctx->svc.loop, &ctx->watch.peers[i]->exit_watch);
    free(ctx->watch.peers[i]);
  }
  free(ctx->watch.peers);
  ctx->watch.peers = NULL;
  ctx->watch.n = ctx->watch.cap = ctx->watch.live = 0;
}
