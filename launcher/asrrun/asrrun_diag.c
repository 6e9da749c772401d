/*
 * asrrun_diag.c -- a stuck job's state report, rendered (issue 24): the
 * diagnosis first, in plain words, from the ranks' tables matched across
 * ranks; then one block per host and rank (process state, the libasr
 * tables, a stack trace when asked); then the keys some comm waits on and
 * no rank has set. asrrun_state.c gathers what it reads.
 *
 * Every comm that waits to connect, and every pair of connected comms
 * whose counts disagree, and every request older than ASRRUN_STALL_MS gets
 * a line, so nothing depends on a list of known patterns; the matching only
 * picks the words of each line:
 *  - a SEND comm of rank a to (ip, lnc) and a RECV comm of rank b from
 *    rank a's address and LNC with the same ordinal (the n-th comm of that
 *    direction between the two: connect.c) are the two halves of one comm;
 *  - small sends complete into the provider's buffers, so the post counts,
 *    not the requests, show a receive that was never posted.
 */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "asrrun.h"
#include "report_fmt.h"

#define NONE (-1) /* no such rank or host: an index, not an error */

typedef struct {
  const asrrun_t *run;
  const asrrun_rank_state_t *st;
  asr_report_t *rep; /* [nranks]; parsed where the rank answered */
  int *ok;           /* [nranks]: rep[r] parsed */
  char (*host_addr)[64];
  asr_buf_t *out;
  int nlines;
} diag_t;

/* "rank 3", "ranks 0-5 and 7" */
static void fmt_ranks(const int *rs, int n, char *out, size_t len) {
  size_t pos = (size_t)snprintf(out, len, "%s ", n == 1 ? "rank" : "ranks");
  int groups = 0, total = 0;
  for (int i = 0; i < n;) {
    int j = i;
    while (j + 1 < n && rs[j + 1] == rs[j] + 1) j++;
    total++;
    i = j + 1;
  }
  for (int i = 0; i < n && pos < len;) {
    int j = i;
    while (j + 1 < n && rs[j + 1] == rs[j] + 1) j++;
    const char *sep = groups == 0 ? "" : groups == total - 1 ? " and " : ", ";
    if (j == i)
      pos += (size_t)snprintf(out + pos, len - pos, "%s%d", sep, rs[i]);
    else
      pos += (size_t)snprintf(out + pos, len - pos, "%s%d-%d", sep, rs[i], rs[j]);
    groups++;
    i = j + 1;
  }
}

static double secs(long long ms) { return ms < 0 ? 0 : (double)ms / 1000.0; }

static const char *host_name(const diag_t *g, int h) { return g->run->map.host_names[h]; }

/* The rank at (ip, lnc), or NONE. */
static int rank_at(const diag_t *g, const char *ip, int lnc) {
  const asr_map_t *m = &g->run->map;
  for (int r = 0; r < m->nranks; r++)
    if (g->ok[r] && g->rep[r].lnc == lnc && strcmp(g->rep[r].addr, ip) == 0) return r;
  for (int r = 0; r < m->nranks; r++) /* a rank that did not answer: its host's address, its LNC */
    if (m->ranks[r].lnc == lnc && strcmp(g->host_addr[m->ranks[r].host], ip) == 0) return r;
  return NONE;
}

/* The host a server "ip:port" is on, or NONE. */
static int host_of_server(const diag_t *g, const char *server, int asker) {
  char ip[64];
  snprintf(ip, sizeof ip, "%s", server);
  char *colon = strrchr(ip, ':');
  if (colon) *colon = '\0';
  if (strcmp(ip, "127.0.0.1") == 0 && asker >= 0) return g->run->map.ranks[asker].host;
  for (int h = 0; h < g->run->map.nhosts; h++)
    if (strcmp(g->host_addr[h], ip) == 0) return h;
  return NONE;
}

static int peer_of(const diag_t *g, const asr_report_comm_t *c) {
  return c->peer_rank >= 0 && c->peer_rank < g->run->map.nranks ? c->peer_rank
                                                                : rank_at(g, c->peer_ip, c->peer_lnc);
}

/* The comm of rank b that is the other half of rank a's comm c, or NULL. */
static const asr_report_comm_t *other_half(const diag_t *g, int a, const asr_report_comm_t *c, int b) {
  if (b < 0 || !g->ok[b]) return NULL;
  const asr_report_t *rb = &g->rep[b];
  for (int i = 0; i < rb->ncomms; i++) {
    const asr_report_comm_t *x = &rb->comms[i];
    if (x->dir == c->dir || x->lnc != c->peer_lnc || x->peer_lnc != c->lnc || x->ordinal != c->ordinal)
      continue;
    if (peer_of(g, x) == a) return x;
  }
  return NULL;
}

static int waiting(const asr_report_comm_t *c) {
  return strcmp(c->state, "CONNECTED") != 0 && strcmp(c->state, "CONNECTION_ERROR") != 0;
}

/* Why rank b has no part in the comm: a phrase after "rank b". */
static const char *absent(const diag_t *g, int b) {
  const asrrun_rank_state_t *s = &g->st[b];
  if (g->run->ranks[b].exited || (s->flags & (ASRRUN_REP_EXITED | ASRRUN_REP_GONE))) return "exited";
  if (!s->have) return "gave no report (its host did not answer)";
  if (s->flags & ASRRUN_REP_NO_LIBASR) return "is not a libasr process (no report)";
  if (s->flags & ASRRUN_REP_TIMEOUT) return "did not answer";
  if (!g->ok[b]) return "sent a report that does not parse";
  return NULL;
}

static void line(diag_t *g, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void line(diag_t *g, const char *fmt, ...) {
  char text[1800];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(text, sizeof text, fmt, ap);
  va_end(ap);
  asr_buf_printf(g->out, "asrrun:   %s\n", text);
  g->nlines++;
}

static void diag_comm(diag_t *g, int a, const asr_report_comm_t *c) {
  int b = peer_of(g, c);
  char peer[96];
  if (b >= 0)
    snprintf(peer, sizeof peer, "rank %d lnc %d", b, c->peer_lnc);
  else
    snprintf(peer, sizeof peer, "%s lnc %d", c->peer_ip, c->peer_lnc);
  const char *send = c->dir == 0 ? "SEND" : "RECV";
  const char *to = c->dir == 0 ? "to" : "from";
  const asr_report_comm_t *o = other_half(g, a, c, b);
  if (waiting(c)) {
    char where[900] = "";
    int h = c->server[0] ? host_of_server(g, c->server, a) : -1;
    int own = c->dir == 1 && strncmp(c->server, "127.0.0.1:", 10) == 0; /* what it published */
    if (c->key[0] && !own)
      snprintf(where, sizeof where, " for %s on %s", c->key, h >= 0 ? host_name(g, h) : c->server);
    char why[400];
    const char *ab = b >= 0 ? absent(g, b) : NULL;
    if (b < 0)
      snprintf(why, sizeof why, "no rank of the job is at %s lnc %d", c->peer_ip, c->peer_lnc);
    else if (ab)
      snprintf(why, sizeof why, "rank %d %s", b, ab);
    else if (!o)
      snprintf(why, sizeof why, "rank %d never called %s for rank %d", b,
               c->dir == 0 ? "asr_accept" : "asr_connect", a);
    else
      snprintf(why, sizeof why, "rank %d's %s comm %s rank %d is in %s", b, c->dir == 0 ? "RECV" : "SEND",
               c->dir == 0 ? "from" : "to", a, o->state);
    line(g, "rank %d lnc %d %s comm %s %s waits %.0f s in %s%s: %s", a, c->lnc, send, to, peer,
         secs(c->state_ms), c->state, where, why);
    return;
  }
  if (strcmp(c->state, "CONNECTION_ERROR") == 0) {
    line(g, "rank %d lnc %d %s comm %s %s failed (CONNECTION_ERROR) %.0f s ago", a, c->lnc, send, to, peer,
         secs(c->state_ms));
    return;
  }
  /* connected: the counts of the two halves (each pair once, from its SEND half) */
  if (o && c->dir == 0 && c->posted != o->posted && c->posted + o->posted > 0) {
    const asr_report_comm_t *more = c->posted > o->posted ? c : o;
    int who = more == c ? a : b, other = more == c ? b : a;
    long long quiet = more->last_post_ms;
    if (quiet >= ASRRUN_STALL_MS) {
      unsigned long long less = more == c ? o->posted : c->posted;
      const char *mine = more->dir == 0      ? (more->posted == 1 ? "send" : "sends")
                         : more->posted == 1 ? "receive"
                                             : "receives";
      const char *theirs = more->dir == 0 ? (less == 1 ? "receive" : "receives")
                           : less == 1    ? "send"
                                          : "sends";
      line(g, "rank %d has %llu %s %s rank %d posted for %.0f s; rank %d posted %llu %s on that comm", who,
           more->posted, mine, more->dir == 0 ? "to" : "from", other, secs(quiet), other, less, theirs);
    }
  }
  if (c->stashed + c->ofi_posted > 0 && c->oldest_ms >= ASRRUN_STALL_MS)
    line(g,
         "rank %d lnc %d %s comm %s %s has %d request%s in flight (%d STASHED, %d OFI_POSTED), the oldest "
         "for %.0f s",
         a, c->lnc, send, to, peer, c->stashed + c->ofi_posted, c->stashed + c->ofi_posted == 1 ? "" : "s",
         c->stashed, c->ofi_posted, secs(c->oldest_ms));
}

static const char *fence_words(int f) {
  return f == ASR_REPORT_FENCE_BARRIER ? "asr_job_barrier"
         : f == ASR_REPORT_FENCE_INIT  ? "asr_job_init's fence"
                                       : "asr_job_finalize's fence";
}

/* Whether rank r waits on something inside libasr (a fence, a comm, an old request). */
static int busy_inside(const diag_t *g, int r) {
  if (!g->ok[r]) return 0;
  const asr_report_t *p = &g->rep[r];
  if (p->fence != ASR_REPORT_FENCE_NONE) return 1;
  for (int i = 0; i < p->ncomms; i++)
    if (waiting(&p->comms[i]) || p->comms[i].stashed + p->comms[i].ofi_posted > 0) return 1;
  return 0;
}

static void diag_fences(diag_t *g) {
  int n = g->run->map.nranks;
  int *in = calloc((size_t)n, sizeof *in), *out = calloc((size_t)n, sizeof *out),
      *gone = calloc((size_t)n, sizeof *gone);
  if (!in || !out || !gone) goto done;
  for (int f = ASR_REPORT_FENCE_INIT; f <= ASR_REPORT_FENCE_FINALIZE; f++) {
    int nin = 0, nout = 0, ngone = 0;
    for (int r = 0; r < n; r++) {
      if (g->ok[r] && g->rep[r].fence == f)
        in[nin++] = r;
      else if (absent(g, r) && strcmp(absent(g, r), "exited") == 0)
        gone[ngone++] = r;
      else
        out[nout++] = r;
    }
    if (!nin) continue;
    char a[256], b[256] = "", c[600] = "";
    fmt_ranks(in, nin, a, sizeof a);
    if (ngone) {
      fmt_ranks(gone, ngone, b, sizeof b);
      snprintf(b + strlen(b), sizeof b - strlen(b), " exited");
    }
    if (nout) {
      fmt_ranks(out, nout, c, sizeof c);
      snprintf(c + strlen(c), sizeof c - strlen(c), " never joined it");
      if (nout == 1) {
        int r = out[0];
        const char *ab = absent(g, r);
        if (ab)
          snprintf(c + strlen(c), sizeof c - strlen(c), ": rank %d %s", r, ab);
        else if (!busy_inside(g, r))
          snprintf(c + strlen(c), sizeof c - strlen(c), ": it is %s outside libasr", g->st[r].pstate);
      }
    }
    line(g, "%s %s in %s%s%s%s%s", a, nin == 1 ? "is" : "are", fence_words(f), b[0] || c[0] ? "; " : "", c,
         c[0] && b[0] ? "; " : "", b);
  }
done:
  free(in), free(out), free(gone);
}

static void diagnose(diag_t *g) {
  const asr_map_t *m = &g->run->map;
  asr_buf_printf(g->out, "asrrun: diagnosis:\n");
  /* ranks without a report */
  int *gone = calloc((size_t)m->nranks, sizeof *gone), ngone = 0;
  for (int r = 0; r < m->nranks; r++) {
    const char *ab = absent(g, r);
    if (!ab) continue;
    if (strcmp(ab, "exited") == 0) {
      if (gone) gone[ngone++] = r;
      if (g->st[r].flags & ASRRUN_REP_GONE) line(g, "rank %d exited while it was asked", r);
    } else if (g->st[r].flags & ASRRUN_REP_NO_LIBASR) {
      line(g, "rank %d is not a libasr process (no report); it is %s", r, g->st[r].pstate);
    } else {
      line(g, "rank %d %s%s%s", r, ab, g->st[r].have ? "; it is " : "", g->st[r].have ? g->st[r].pstate : "");
    }
  }
  diag_fences(g);
  for (int r = 0; r < m->nranks; r++)
    if (g->ok[r])
      for (int i = 0; i < g->rep[r].ncomms; i++) diag_comm(g, r, &g->rep[r].comms[i]);
  /* ranks that answered, are in no fence and wait on nothing in libasr,
   * while something else waits: the likely holders-up */
  if (g->nlines > 0)
    for (int r = 0; r < m->nranks; r++)
      if (g->ok[r] && !busy_inside(g, r) && !g->rep[r].finalized && g->st[r].pstate[0] != 'R')
        line(g, "rank %d is outside libasr: %s", r, g->st[r].pstate);
  if (g->nlines == 0) {
    if (ngone == m->nranks)
      line(g, "every rank exited");
    else
      line(g, "no rank waits on another: nothing looks stuck");
  }
  free(gone);
}

static void block(diag_t *g) {
  const asr_map_t *m = &g->run->map;
  for (int h = 0; h < m->nhosts; h++) {
    asr_buf_printf(g->out, "asrrun: host %s:\n", host_name(g, h));
    for (int r = 0; r < m->nranks; r++) {
      if (m->ranks[r].host != h) continue;
      const asrrun_rank_state_t *s = &g->st[r];
      const char *ab = absent(g, r);
      char state[400];
      if (ab && strcmp(ab, "exited") == 0) {
        int st = g->run->ranks[r].status;
        if (g->run->ranks[r].exited && WIFEXITED(st))
          snprintf(state, sizeof state, "exited with status %d", WEXITSTATUS(st));
        else if (g->run->ranks[r].exited && WIFSIGNALED(st))
          snprintf(state, sizeof state, "killed by signal %d", WTERMSIG(st));
        else
          snprintf(state, sizeof state, "exited");
      } else if (!s->have) {
        snprintf(state, sizeof state, "unknown (its host did not answer)");
      } else {
        snprintf(state, sizeof state, "%s%s%s", s->pstate, ab ? "; " : "", ab ? ab : "");
      }
      /* the failure policy's word (asrrun_policy.c): failed, restarting, or
       * which incarnation runs */
      const rank_t *rk = &g->run->ranks[r];
      char pol[64] = "";
      if (rk->state == ASR_CTL_RANK_FAILED)
        snprintf(pol, sizeof pol, "; FAILED (incarnation %d)", rk->incarnation);
      else if (rk->state == ASR_CTL_RANK_RESTARTING)
        snprintf(pol, sizeof pol, "; RESTARTING as incarnation %d", rk->incarnation);
      else if (rk->incarnation > 0)
        snprintf(pol, sizeof pol, "; incarnation %d (restarted %d time%s)", rk->incarnation, rk->incarnation,
                 rk->incarnation == 1 ? "" : "s");
      const asr_report_t *p = g->ok[r] ? &g->rep[r] : NULL;
      asr_buf_printf(g->out, "asrrun:   rank %d (pid %u, lnc %d): %s%s%s%s%s\n", r, s->pid, m->ranks[r].lnc,
                     state, pol, p && p->fence ? "; in " : "", p && p->fence ? fence_words(p->fence) : "",
                     p && p->finalized ? "; finalized" : "");
      for (int i = 0; p && i < p->nlnc; i++)
        asr_buf_printf(g->out, "asrrun:     lnc %d on %s, provider %s, KV port %d\n", p->lncs[i].lnc,
                       p->lncs[i].host, p->lncs[i].provider, p->lncs[i].port);
      for (int i = 0; p && i < p->ncomms; i++) {
        const asr_report_comm_t *c = &p->comms[i];
        int b = peer_of(g, c);
        char peer[96];
        if (b >= 0)
          snprintf(peer, sizeof peer, "rank %d (%s lnc %d)", b, c->peer_ip, c->peer_lnc);
        else
          snprintf(peer, sizeof peer, "%s lnc %d", c->peer_ip, c->peer_lnc);
        char oldest[48] = "";
        if (c->oldest_ms >= 0) snprintf(oldest, sizeof oldest, ", oldest %.1f s", secs(c->oldest_ms));
        asr_buf_printf(
            g->out,
            "asrrun:     comm lnc %d %s #%d %s %s: %s for %.1f s; %s %llu posted, %llu done (%llu bytes), "
            "%llu failed; requests %d STASHED, %d "
            "OFI_POSTED%s%s%s%s%s\n",
            c->lnc, c->dir == 0 ? "SEND" : "RECV", c->ordinal, c->dir == 0 ? "to" : "from", peer, c->state,
            secs(c->state_ms), c->dir == 0 ? "sends" : "receives", c->posted, c->done, c->bytes, c->failed,
            c->stashed, c->ofi_posted, oldest, c->key[0] ? "; key " : "", c->key, c->key[0] ? " on " : "",
            c->server);
      }
      if (p && p->truncated) asr_buf_printf(g->out, "asrrun:     (the rank cut its report short)\n");
      if (s->stack_len) {
        asr_buf_printf(g->out, "asrrun:     stack:\n");
        const char *t = s->stack, *e = s->stack + s->stack_len;
        while (t < e) {
          const char *nl = memchr(t, '\n', (size_t)(e - t));
          size_t n = nl ? (size_t)(nl - t) : (size_t)(e - t);
          asr_buf_printf(g->out, "asrrun:       | %.*s\n", (int)n, t);
          t += n + 1;
        }
      } else if (s->flags & ASRRUN_REP_NO_STACK_TOOL) {
        asr_buf_printf(g->out, "asrrun:     stack: neither eu-stack nor gdb is installed on %s\n",
                       host_name(g, h));
      }
    }
  }
}

/* The keys a SEND comm waits on that no RECV comm has published (a RECV
 * comm publishes its handle key on its own host's server as it leaves
 * WAIT_FOR_NET_HANDLE_SET: connect.c). */
static void missing_keys(diag_t *g) {
  const asr_map_t *m = &g->run->map;
  int any = 0;
  for (int a = 0; a < m->nranks; a++) {
    if (!g->ok[a]) continue;
    for (int i = 0; i < g->rep[a].ncomms; i++) {
      const asr_report_comm_t *c = &g->rep[a].comms[i];
      if (c->dir != 0 || !c->key[0] || !waiting(c)) continue;
      int h = host_of_server(g, c->server, a);
      int set = 0;
      for (int b = 0; b < m->nranks && !set; b++) {
        if (!g->ok[b] || (h >= 0 && m->ranks[b].host != h)) continue;
        for (int j = 0; j < g->rep[b].ncomms && !set; j++) {
          const asr_report_comm_t *x = &g->rep[b].comms[j];
          set = x->dir == 1 && strcmp(x->key, c->key) == 0 &&
                (strcmp(x->state, "NET_CONNECT") == 0 || strcmp(x->state, "CONNECTED") == 0);
        }
      }
      if (set) continue;
      if (!any) asr_buf_printf(g->out, "asrrun: keys waited on that no rank has set:\n");
      any = 1;
      asr_buf_printf(g->out, "asrrun:   %s on %s (%s): rank %d lnc %d SEND comm waits for it\n", c->key,
                     h >= 0 ? host_name(g, h) : "?", c->server, a, c->lnc);
    }
  }
  if (!any) asr_buf_printf(g->out, "asrrun: keys waited on that no rank has set: none\n");
}

void asrrun_diag_render(const asrrun_t *run, const asrrun_rank_state_t *st, const char *why, uint64_t at_ms,
                        asr_buf_t *out) {
  const asr_map_t *m = &run->map;
  diag_t g = {.run = run, .st = st, .out = out};
  g.rep = calloc((size_t)m->nranks, sizeof *g.rep);
  g.ok = calloc((size_t)m->nranks, sizeof *g.ok);
  g.host_addr = calloc((size_t)m->nhosts, sizeof *g.host_addr);
  if (!g.rep || !g.ok || !g.host_addr) {
    asr_buf_printf(out, "asrrun: state report: out of memory\n");
    goto done;
  }
  asr_buf_printf(out, "asrrun: state report (%s) at %.1f s: %d rank%s on %d host%s\n", why,
                 (double)at_ms / 1000.0, m->nranks, m->nranks == 1 ? "" : "s", m->nhosts,
                 m->nhosts == 1 ? "" : "s");
  for (int r = 0; r < m->nranks; r++) {
    char whyp[200];
    if (!st[r].have || !(st[r].flags & ASRRUN_REP_ANSWERED)) continue;
    if (asr_report_parse(st[r].text, st[r].text_len, &g.rep[r], whyp, sizeof whyp) == 0) {
      g.ok[r] = 1;
      if (g.rep[r].addr[0])
        snprintf(g.host_addr[m->ranks[r].host], sizeof g.host_addr[0], "%s", g.rep[r].addr);
    } else {
      asr_buf_printf(out, "asrrun: rank %d's report does not parse: %s\n", r, whyp);
    }
  }
  diagnose(&g);
  block(&g);
  missing_keys(&g);
  asr_buf_printf(out, "asrrun: end of state report\n");
done:
  for (int r = 0; g.rep && r < m->nranks; r++) asr_report_free(&g.rep[r]);
  free(g.rep);
  free(g.ok);
  free(g.host_addr);
}
