/*
 * asr_netif.h -- which local IPv4 address a host's traffic should use.
 *
 * asrrun needs the address its remote daemons call back to; each asrd needs
 * the address its ranks publish for their peers (--if-include). A spec is
 * one of:
 *   NAME          an interface name ("eth0"): its first IPv4 address
 *   A.B.C.D/N     a subnet: the first local address inside it (one spec that
 *                 means "this host's address on that network" on every host)
 *   A.B.C.D       an address, which must be one of this host's
 * Only interfaces that are up count. IPv4 only, like the rest of asr.
 */
#ifndef ASR_NETIF_H
#define ASR_NETIF_H

#include <stddef.h>

#define ASR_NETIF_ADDRLEN 16 /* "255.255.255.255" + NUL */

/* Checks that spec has one of the forms above, without looking at this
 * host's interfaces (another host may have them). Returns 0, or ASR_EINVAL
 * with errbuf saying what is wrong. */
int asr_netif_check_spec(const char *spec, char *errbuf, size_t errlen);

/* Resolves spec on this host into ip. Returns 0, ASR_EINVAL for a spec that
 * is not one of the forms above, or ASR_ENOTFOUND when nothing here matches;
 * errbuf then lists the addresses this host has. */
int asr_netif_resolve(const char *spec, char ip[ASR_NETIF_ADDRLEN], char *errbuf, size_t errlen);

/* The local address the kernel would send from to reach host (a name or an
 * address; nothing is sent). Returns 0 or ASR_EUNREACH / ASR_ENOTFOUND. */
int asr_netif_route_src(const char *host, char ip[ASR_NETIF_ADDRLEN]);

/* The first up, non-loopback IPv4 address, or ASR_ENOTFOUND. */
int asr_netif_first_external(char ip[ASR_NETIF_ADDRLEN]);

/* The name of the up interface that has address ip ("eth0"). Returns 0,
 * ASR_EINVAL (not an IPv4 address), ASR_ENOTFOUND or ASR_ETOOBIG. */
int asr_netif_name_of(const char *ip, char *name, size_t len);

/* Writes "lo 127.0.0.1, eth0 10.0.0.2" (up interfaces) into buf. */
void asr_netif_list(char *buf, size_t len);

#endif /* ASR_NETIF_H */
