/*
 * launch_pick.c -- which backend starts a job's daemons and where a daemon
 * runs relative to asrrun (launch.h): the backend a launcher setting picks,
 * the one an id names, whether a host's daemon is forked here or started by
 * the backend, and which address remote daemons call back on.
 */
#include "config.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "asr_err.h"
#include "asr_netif.h"
#include "launch.h"

/* Those with a resource manager first, in the order asr_alloc_detect asks
 * them (the first whose allocation is here gives an auto job its hosts). */
const asr_launch_ops_t *const asr_launch_backends[] = {&asr_launch_slurm, &asr_launch_rsh, &asr_launch_local,
                                                       NULL};

const char *asr_launch_env_get(const asr_launch_env_t *env, const char *name) {
  const char *v = env->fn(name, env->arg);
  return v && *v ? v : NULL;
}

const asr_launch_ops_t *asr_launch_pick(asr_launcher_t launcher) {
  for (const asr_launch_ops_t *const *b = asr_launch_backends; *b; b++)
    if ((*b)->launcher == launcher) return *b;
  return &asr_launch_rsh; /* auto: no manager's allocation gave the hosts */
}

const asr_launch_ops_t *asr_launch_by_id(uint32_t id) {
  for (const asr_launch_ops_t *const *b = asr_launch_backends; *b; b++)
    if ((uint32_t)(*b)->id == id) return *b;
  return NULL;
}

const asr_launch_ops_t *asr_launch_for_children(const asr_launch_ops_t *ops) {
  return ops == &asr_launch_local ? &asr_launch_rsh : ops;
}

int asr_launch_forks_here(const asr_launch_ops_t *ops, const char *host, const char *local_hostname) {
  if (ops == &asr_launch_local) return 1;
  return !ops->starts_every_daemon && asr_launch_host_is_local(host, local_hostname);
}

/* Is a an address of one of this host's interfaces (or loopback)? */
static int addr_is_mine(struct in_addr a) {
  if ((ntohl(a.s_addr) >> 24) == 127) return 1;
  struct ifaddrs *ifs = NULL;
  if (getifaddrs(&ifs) != 0) return 0;
  int mine = 0;
  for (struct ifaddrs *i = ifs; i && !mine; i = i->ifa_next)
    if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET &&
        ((struct sockaddr_in *)i->ifa_addr)->sin_addr.s_addr == a.s_addr)
      mine = 1;
  freeifaddrs(ifs);
  return mine;
}

int asr_launch_host_is_local(const char *host, const char *local_hostname) {
  if (!strcmp(host, "localhost") || (local_hostname && !strcmp(host, local_hostname))) return 1;
  /* "node1" for "node1.cluster.example" and the reverse */
  size_t n = strcspn(host, "."), m = local_hostname ? strcspn(local_hostname, ".") : 0;
  if (local_hostname && n == m && !strncmp(host, local_hostname, n)) return 1;
  struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *res = NULL;
  if (getaddrinfo(host, NULL, &hints, &res) != 0 || !res) return 0;
  int local = addr_is_mine(((struct sockaddr_in *)res->ai_addr)->sin_addr);
  freeaddrinfo(res);
  return local;
}

int asr_launch_callback_ip(const char *if_include, const char *remote_host, char ip[16], char *errbuf,
                           size_t errlen) {
  char err[512];
  /* --if-include names the job's network; asrrun may run outside it (a login
   * node), so a spec that matches nothing here falls through to routing. */
  if (if_include && *if_include && asr_netif_resolve(if_include, ip, err, sizeof err) == 0) return 0;
  if (asr_netif_route_src(remote_host, ip) == 0 && strncmp(ip, "127.", 4) != 0) return 0;
  if (asr_netif_first_external(ip) == 0) return 0;
  snprintf(errbuf, errlen,
           "this host has no non-loopback IPv4 address that host %s could call back to; "
           "give one with --if-include",
           remote_host);
  return ASR_ENOTFOUND;
}

int asr_launch_host_resolves(const char *host) {
  struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *res = NULL;
  if (getaddrinfo(host, NULL, &hints, &res) != 0 || !res) return 0;
  freeaddrinfo(res);
  return 1;
}
