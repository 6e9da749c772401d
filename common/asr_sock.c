/* asr_sock.c -- see asr_sock.h. */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "asr_err.h"
#include "asr_rand.h"
#include "asr_sock.h"
#include "asr_time.h"

int asr_sock_parse_ipv4(const char *ip, uint16_t port, struct sockaddr_in *addr) {
  if (!ip || !addr) return ASR_EINVAL;
  memset(addr, 0, sizeof *addr);
  addr->sin_family = AF_INET;
  addr->sin_port = htons(port);
  if (inet_pton(AF_INET, ip, &addr->sin_addr) != 1) return ASR_EINVAL;
  return 0;
}

int asr_sock_set_nonblock(int fd) {
  int fl = fcntl(fd, F_GETFL);
  if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0) return asr_err_from_errno(errno);
  int fdfl = fcntl(fd, F_GETFD);
  if (fdfl < 0 || fcntl(fd, F_SETFD, fdfl | FD_CLOEXEC) < 0) return asr_err_from_errno(errno);
  return 0;
}

void asr_sock_nodelay(int fd) {
  int one = 1;
  (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

void asr_sock_close(int fd) {
  if (fd < 0) return;
  int saved = errno;
  close(fd);
  errno = saved;
}

int asr_sock_listen(const char *ip, uint16_t port, int backlog, uint16_t *bound_port, char *errbuf,
                    size_t errlen) {
  struct sockaddr_in addr;
  const char *host = ip ? ip : "127.0.0.1";
  if (asr_sock_parse_ipv4(host, port, &addr) != 0) {
    if (errbuf) snprintf(errbuf, errlen, "'%s' is not an IPv4 address", host);
    return ASR_EINVAL;
  }
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    int rc = asr_err_from_errno(errno);
    if (errbuf) snprintf(errbuf, errlen, "socket(): %s", strerror(errno));
    return rc;
  }
  int one = 1;
  (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(fd, (struct sockaddr *)&addr, sizeof addr) != 0) {
    int e = errno;
    if (errbuf)
      snprintf(errbuf, errlen, "cannot bind %s:%u: %s%s", host, (unsigned)port, strerror(e),
               e == EADDRINUSE ? " (choose another port, or stop what holds it)" : "");
    close(fd);
    return asr_err_from_errno(e);
  }
  if (listen(fd, backlog) != 0) {
    int e = errno;
    if (errbuf) snprintf(errbuf, errlen, "listen on %s:%u: %s", host, (unsigned)port, strerror(e));
    close(fd);
    return asr_err_from_errno(e);
  }
  if (bound_port) {
    socklen_t len = sizeof addr;
    getsockname(fd, (struct sockaddr *)&addr, &len);
    *bound_port = ntohs(addr.sin_port);
  }
  return fd;
}

#define FREE_PORT_LOW 10000 /* below: well-known and registered services */

int asr_sock_free_port(const char *ip) {
  unsigned lo = 32768, hi = 60999;
  FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
  if (f) {
    if (fscanf(f, "%u %u", &lo, &hi) != 2) lo = 32768;
    fclose(f);
  }
  uint16_t port = 0;
  /* Random tries below the ephemeral range; when it starts too low for that,
   * the kernel's own pick. */
  for (int i = 0; i < 64 && lo > FREE_PORT_LOW + 1000 && lo <= 65536; i++) {
    uint16_t p = (uint16_t)(FREE_PORT_LOW + asr_rand_u64() % (lo - FREE_PORT_LOW));
    int fd = asr_sock_listen(ip, p, 1, &port, NULL, 0);
    if (fd >= 0) {
      close(fd);
      return port;
    }
  }
  int fd = asr_sock_listen(ip, 0, 1, &port, NULL, 0);
  if (fd < 0) return 0;
  close(fd);
  return port;
}

/* Whether connected fd reaches itself: TCP's simultaneous open connects a
 * socket to its own address when the kernel picked, as the local port of a
 * connect to this host, the very port connected to while nothing listened
 * there (a port in the ephemeral range, a server not up yet). Nobody is
 * there: the caller is told "refused", and tries again as it would. */
static int self_connected(int fd) {
  struct sockaddr_in me, peer;
  socklen_t ml = sizeof me, pl = sizeof peer;
  if (getsockname(fd, (struct sockaddr *)&me, &ml) != 0 ||
      getpeername(fd, (struct sockaddr *)&peer, &pl) != 0)
    return 0;
  return me.sin_family == AF_INET && peer.sin_family == AF_INET && me.sin_port == peer.sin_port &&
         me.sin_addr.s_addr == peer.sin_addr.s_addr;
}

int asr_sock_connect_start(const struct sockaddr_in *addr, int *in_progress) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return asr_err_from_errno(errno);
  asr_sock_nodelay(fd);
  *in_progress = 0;
  if (connect(fd, (const struct sockaddr *)addr, sizeof *addr) == 0) {
    if (!self_connected(fd)) return fd;
    close(fd);
    return ASR_ECONNREFUSED;
  }
  if (errno == EINPROGRESS || errno == EINTR) {
    *in_progress = 1;
    return fd;
  }
  int rc = asr_err_from_errno(errno);
  close(fd);
  return rc;
}

int asr_sock_connect_result(int fd) {
  int err = 0;
  socklen_t len = sizeof err;
  if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) return asr_err_from_errno(errno);
  if (err) return asr_err_from_errno(err);
  return self_connected(fd) ? ASR_ECONNREFUSED : 0;
}

/* Waits until fd is ready for events or the deadline passes. */
static int wait_fd(int fd, short events, uint64_t deadline_ms) {
  for (;;) {
    uint64_t now = asr_time_ms();
    if (now >= deadline_ms) return ASR_ETIMEDOUT;
    struct pollfd p = {.fd = fd, .events = events};
    int n = poll(&p, 1, (int)(deadline_ms - now > 1000 ? 1000 : deadline_ms - now));
    if (n > 0) return 0;
    if (n < 0 && errno != EINTR) return asr_err_from_errno(errno);
  }
}

int asr_sock_write_all(int fd, const void *buf, size_t len, uint64_t deadline_ms) {
  const char *p = buf;
  while (len > 0) {
    ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
    if (n > 0) {
      p += n;
      len -= (size_t)n;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      int rc = wait_fd(fd, POLLOUT, deadline_ms);
      if (rc) return rc;
      continue;
    }
    return asr_err_from_errno(errno);
  }
  return 0;
}

int asr_sock_read_all(int fd, void *buf, size_t len, uint64_t deadline_ms) {
  char *p = buf;
  while (len > 0) {
    ssize_t n = recv(fd, p, len, 0);
    if (n > 0) {
      p += n;
      len -= (size_t)n;
      continue;
    }
    if (n == 0) return ASR_ECONNRESET;
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      int rc = wait_fd(fd, POLLIN, deadline_ms);
      if (rc) return rc;
      continue;
    }
    return asr_err_from_errno(errno);
  }
  return 0;
}
