/* asr_netif.c -- local IPv4 address selection (asr_netif.h). */
#include "config.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "asr_err.h"
#include "asr_netif.h"

typedef int (*match_fn)(const char *ifname, struct in_addr a, const void *arg);

/* Calls match on every up IPv4 address; copies the first match into ip. */
static int find_addr(match_fn match, const void *arg, char ip[ASR_NETIF_ADDRLEN]) {
  struct ifaddrs *ifs = NULL;
  if (getifaddrs(&ifs) != 0) return ASR_EIO;
  int rc = ASR_ENOTFOUND;
  for (struct ifaddrs *i = ifs; i; i = i->ifa_next) {
    if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || !(i->ifa_flags & IFF_UP)) continue;
    struct in_addr a = ((struct sockaddr_in *)i->ifa_addr)->sin_addr;
    if (match(i->ifa_name, a, arg)) {
      inet_ntop(AF_INET, &a, ip, ASR_NETIF_ADDRLEN);
      rc = 0;
      break;
    }
  }
  freeifaddrs(ifs);
  return rc;
}

static int match_name(const char *ifname, struct in_addr a, const void *arg) {
  (void)a;
  return strcmp(ifname, arg) == 0;
}

typedef struct {
  uint32_t net, mask; /* host byte order */
} subnet_t;

static int match_subnet(const char *ifname, struct in_addr a, const void *arg) {
  const subnet_t *s = arg;
  (void)ifname;
  return (ntohl(a.s_addr) & s->mask) == s->net;
}

static int match_external(const char *ifname, struct in_addr a, const void *arg) {
  (void)ifname;
  (void)arg;
  return (ntohl(a.s_addr) >> 24) != 127;
}

void asr_netif_list(char *buf, size_t len) {
  struct ifaddrs *ifs = NULL;
  size_t k = 0;
  buf[0] = '\0';
  if (getifaddrs(&ifs) != 0) return;
  for (struct ifaddrs *i = ifs; i && k + 1 < len; i = i->ifa_next) {
    if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || !(i->ifa_flags & IFF_UP)) continue;
    char ip[ASR_NETIF_ADDRLEN];
    inet_ntop(AF_INET, &((struct sockaddr_in *)i->ifa_addr)->sin_addr, ip, sizeof ip);
    int n = snprintf(buf + k, len - k, "%s%s %s", k ? ", " : "", i->ifa_name, ip);
    if (n < 0 || (size_t)n >= len - k) break;
    k += (size_t)n;
  }
  freeifaddrs(ifs);
}

static int not_found(const char *spec, const char *what, char *errbuf, size_t errlen) {
  char have[512];
  asr_netif_list(have, sizeof have);
  snprintf(errbuf, errlen, "'%s' %s on this host (its up IPv4 interfaces: %s)", spec, what,
           have[0] ? have : "none");
  return ASR_ENOTFOUND;
}

int asr_netif_check_spec(const char *spec, char *errbuf, size_t errlen) {
  if (!spec || !*spec || strlen(spec) >= 64) {
    snprintf(errbuf, errlen, "an interface spec is an interface name, A.B.C.D/N or A.B.C.D, not '%.64s'",
             spec ? spec : "");
    return ASR_EINVAL;
  }
  char copy[64];
  snprintf(copy, sizeof copy, "%s", spec);
  char *slash = strchr(copy, '/');
  if (slash) *slash = '\0';
  struct in_addr a;
  if (inet_pton(AF_INET, copy, &a) == 1) {
    if (slash) {
      char *end;
      long b = strtol(slash + 1, &end, 10);
      if (!isdigit((unsigned char)slash[1]) || *end || b < 0 || b > 32) {
        snprintf(errbuf, errlen, "'%s': the prefix length after '/' must be 0..32", spec);
        return ASR_EINVAL;
      }
    }
    return 0;
  }
  if (slash || strlen(spec) >= IF_NAMESIZE) {
    snprintf(errbuf, errlen, "'%s' is neither an interface name, A.B.C.D/N nor A.B.C.D", spec);
    return ASR_EINVAL;
  }
  return 0;
}

int asr_netif_resolve(const char *spec, char ip[ASR_NETIF_ADDRLEN], char *errbuf, size_t errlen) {
  int rc = asr_netif_check_spec(spec, errbuf, errlen);
  if (rc) return rc;
  char copy[64];
  snprintf(copy, sizeof copy, "%s", spec);
  char *slash = strchr(copy, '/');
  if (slash) *slash = '\0';
  struct in_addr a;
  if (inet_pton(AF_INET, copy, &a) == 1) {
    int bits = slash ? atoi(slash + 1) : 32; /* checked above */
    subnet_t s = {.mask = bits ? 0xffffffffu << (32 - bits) : 0};
    s.net = ntohl(a.s_addr) & s.mask;
    if (find_addr(match_subnet, &s, ip) == 0) return 0;
    return not_found(spec, slash ? "matches no address" : "is not an address", errbuf, errlen);
  }
  if (find_addr(match_name, spec, ip) == 0) return 0;
  return not_found(spec, "is not an up interface with an IPv4 address", errbuf, errlen);
}

int asr_netif_route_src(const char *host, char ip[ASR_NETIF_ADDRLEN]) {
  struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_DGRAM}, *res = NULL;
  if (getaddrinfo(host, "9", &hints, &res) != 0 || !res) return ASR_ENOTFOUND;
  int rc = ASR_EUNREACH;
  int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  /* connect() on a UDP socket only asks the routing table; nothing is sent */
  if (fd >= 0 && connect(fd, res->ai_addr, res->ai_addrlen) == 0) {
    struct sockaddr_in me;
    socklen_t sl = sizeof me;
    if (getsockname(fd, (struct sockaddr *)&me, &sl) == 0 &&
        inet_ntop(AF_INET, &me.sin_addr, ip, ASR_NETIF_ADDRLEN))
      rc = 0;
  }
  if (fd >= 0) close(fd);
  freeaddrinfo(res);
  return rc;
}

int asr_netif_first_external(char ip[ASR_NETIF_ADDRLEN]) { return find_addr(match_external, NULL, ip); }

int asr_netif_name_of(const char *ip, char *name, size_t len) {
  struct in_addr want;
  if (inet_pton(AF_INET, ip, &want) != 1) return ASR_EINVAL;
  struct ifaddrs *ifs = NULL;
  if (getifaddrs(&ifs) != 0) return ASR_EIO;
  int rc = ASR_ENOTFOUND;
  for (struct ifaddrs *i = ifs; i && rc; i = i->ifa_next) {
    if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || !(i->ifa_flags & IFF_UP)) continue;
    if (((struct sockaddr_in *)i->ifa_addr)->sin_addr.s_addr != want.s_addr) continue;
    rc = snprintf(name, len, "%s", i->ifa_name) < (int)len ? 0 : ASR_ETOOBIG;
  }
  freeifaddrs(ifs);
  return rc;
}
