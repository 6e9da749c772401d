/*
 * asrrun_report.c -- what asrrun tells about the job as it goes (asrrun.h):
 * with -v the map (each rank with -vv), the provider, each daemon as it
 * comes up (and a progress line each second of a launch that takes longer),
 * each host's ranks as they start; asrrun's own notices (a signal it got),
 * which --quiet silences. Errors are never silenced: they come through
 * run->cb.fail.
 */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "asrrun.h"

void asrrun_notice(const asrrun_t *run, const char *fmt, ...) {
  if (run->cfg.quiet) return;
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  fprintf(stderr, "asrrun: %s\n", msg);
}

#define VERBOSE(run, level, ...)                                          \
  do {                                                                    \
    if ((run)->cfg.verbose >= (level)) asrrun_notice((run), __VA_ARGS__); \
  } while (0)

void asrrun_report_map(const asrrun_t *run, const char *provider, const char *why) {
  const asr_map_t *m = &run->map;
  VERBOSE(run, 1, "%d rank%s of '%s' on %d host%s; provider %s (%s)", m->nranks, m->nranks == 1 ? "" : "s",
          run->cfg.program, m->nhosts, m->nhosts == 1 ? "" : "s", provider, why);
  for (int h = 0; h < m->nhosts && run->cfg.verbose >= 1; h++) {
    int first = -1, last = -1, n = 0;
    for (int r = 0; r < m->nranks; r++)
      if (m->ranks[r].host == h) {
        if (first < 0) first = r;
        last = r;
        n++;
      }
    if (n == 0)
      VERBOSE(run, 1, "host %s: no ranks", m->host_names[h]);
    else if (n == last - first + 1)
      VERBOSE(run, 1, "host %s: %d rank%s (%d..%d)", m->host_names[h], n, n == 1 ? "" : "s", first, last);
    else
      VERBOSE(run, 1, "host %s: %d ranks (from %d to %d, not contiguous)", m->host_names[h], n, first, last);
  }
  for (int r = 0; r < m->nranks && run->cfg.verbose >= 2; r++)
    VERBOSE(run, 2, "rank %d -> host %s lnc %d", r, m->host_names[m->ranks[r].host], m->ranks[r].lnc);
}

void asrrun_report_daemon_up(const asrrun_t *run, const daemon_t *d, int up, uint64_t ms) {
  VERBOSE(run, 1, "asrd on host %s is up (%d of %d, %llu ms)", run->map.host_names[d->index], up,
          run->map.nhosts, (unsigned long long)ms);
}

void asrrun_report_progress(const asrrun_t *run, int up, uint64_t ms) {
  if (run->cfg.verbose < 1) return;
  char waiting[256] = "";
  size_t k = 0;
  int shown = 0, more = 0;
  for (int h = 0; h < run->map.nhosts; h++) {
    if (run->daemons[h].state != DAEMON_LAUNCHING) continue;
    if (shown < 4 && k < sizeof waiting)
      k += (size_t)snprintf(waiting + k, sizeof waiting - k, "%s%s", shown ? ", " : "",
                            run->map.host_names[h]);
    else
      more++;
    shown++;
  }
  if (more && k < sizeof waiting) snprintf(waiting + k, sizeof waiting - k, " and %d more", more);
  asrrun_notice(run, "%d of %d daemons up after %llu.%llu s; waiting for %s", up, run->map.nhosts,
                (unsigned long long)(ms / 1000), (unsigned long long)(ms % 1000 / 100), waiting);
}

void asrrun_report_ctl(const asrrun_t *run) {
  if (run->cfg.verbose < 1) return;
  fprintf(stderr,
          "asrrun: control: %d connection%s, %llu messages in; %llu fence%s: %llu fence messages in, %llu "
          "out, %llu "
          "bytes gathered\n",
          run->tree.node.links_up, run->tree.node.links_up == 1 ? "" : "s",
          (unsigned long long)run->tree.node.msgs_in, (unsigned long long)run->tree.fences,
          run->tree.fences == 1 ? "" : "s", (unsigned long long)run->tree.node.fence_msgs_in,
          (unsigned long long)run->tree.fence_out, (unsigned long long)run->tree.fence_bytes);
}

void asrrun_report_started(const asrrun_t *run, const daemon_t *d) {
  if (run->cfg.verbose < 1 || d->npgids == 0) return;
  const asr_map_t *m = &run->map;
  int first = -1, k = 0;
  for (int r = 0; r < m->nranks; r++)
    if (m->ranks[r].host == d->index) {
      if (first < 0) first = r;
      if (run->cfg.verbose >= 2 && k < d->npgids)
        VERBOSE(run, 2, "rank %d started on host %s (pid %d)", r, m->host_names[d->index], (int)d->pgids[k]);
      k++;
    }
  VERBOSE(run, 1, "host %s started %d rank%s (pids %d..%d)", m->host_names[d->index], d->npgids,
          d->npgids == 1 ? "" : "s", (int)d->pgids[0], (int)d->pgids[d->npgids - 1]);
}
