/*
 * launch_pick.c -- where a daemon runs relative to asrrun (launch.h): is a
 * host this one (fork it) or remote (an agent), and which address remote
 * daemons call back on.
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
