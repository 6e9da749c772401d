/*
 * asr_sock.h -- small non-blocking TCP helpers (the Redis anet habit).
 *
 * Every fd made here is O_NONBLOCK|O_CLOEXEC. Functions return a fd or 0 on
 * success and a negative ASR_E* code on failure; errbuf, when given, receives
 * a one-line reason that names the address.
 */
#ifndef ASR_SOCK_H
#define ASR_SOCK_H

#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Parses a dotted IPv4 address ("127.0.0.1") into addr. */
int asr_sock_parse_ipv4(const char *ip, uint16_t port, struct sockaddr_in *addr);

/* Creates a listening socket on ip:port (ip NULL = 127.0.0.1, port 0 = pick a
 * free one) with SO_REUSEADDR and the given backlog. *bound_port gets the port. */
int asr_sock_listen(const char *ip, uint16_t port, int backlog, uint16_t *bound_port, char *errbuf,
                    size_t errlen);

/* A TCP port that nothing listens on at ip (NULL = 127.0.0.1) now, for a
 * listener another process opens later: one below the kernel's ephemeral
 * range (net.ipv4.ip_local_port_range) when there is room, since a port from
 * that range can meanwhile become the local port of any process's outgoing
 * connection. Returns the port, or 0 when none was found. */
int asr_sock_free_port(const char *ip);

/* Starts a non-blocking connect. Returns the fd; *in_progress is 1 when the
 * connect is still running (poll for POLLOUT, then asr_sock_connect_result). */
int asr_sock_connect_start(const struct sockaddr_in *addr, int *in_progress);

/* Returns 0 when the pending connect on fd succeeded, else the ASR_E* code of
 * SO_ERROR (ASR_ECONNREFUSED when nobody listens, and when the socket
 * reached itself: see asr_sock.c). */
int asr_sock_connect_result(int fd);

/* Sets O_NONBLOCK and FD_CLOEXEC on an existing fd. */
int asr_sock_set_nonblock(int fd);

/* Disables Nagle: request/response frames go out at once. */
void asr_sock_nodelay(int fd);

/* Blocking-style helpers for tools and tests: loop over poll until all bytes
 * moved, the peer closed, or deadline_ms (monotonic) passed. */
int asr_sock_write_all(int fd, const void *buf, size_t len, uint64_t deadline_ms);
int asr_sock_read_all(int fd, void *buf, size_t len, uint64_t deadline_ms);

/* Closes fd if >= 0, keeping errno. */
void asr_sock_close(int fd);

#endif /* ASR_SOCK_H */
