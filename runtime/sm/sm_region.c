/*
 * sm_region.c -- an sm comm's region (sm_layout.h): made by the RECV side in
 * LISTEN, mapped by the SEND side in NET_CONNECT, which unlinks its name at
 * once (both ends have it then, and nothing is left in /dev/shm however
 * either ends later). A RECV comm closed before its sender came unlinks it
 * itself; a process that exits meanwhile, through the exit handler below;
 * one killed meanwhile leaves it to asrd (launcher/asrd/asrd_shm.c, which
 * knows the name's form: asr_sm_name.h).
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "asr_env.h"
#include "asr_err.h"
#include "asr_le.h"
#include "asr_log.h"
#include "asr_sm_name.h"
#include "sm.h"

int asr__sm_cfg_read(asr__sm_cfg_t *cfg, char *err, size_t errlen) {
  long region, inl;
  int cma;
  if (asr_env_int(ASR_ENV_SM_REGION, &region, err, errlen) != 0 ||
      asr_env_int(ASR_ENV_SM_INLINE_MAX, &inl, err, errlen) != 0 ||
      asr_env_bool(ASR_ENV_SM_CMA, &cma, err, errlen) != 0)
    return ASR_ECONFIG;
  if (region % ASR_SM_LINE)
    return asr_errf(err, errlen, ASR_ECONFIG, "ASR_SM_REGION: %ld is not a multiple of 64: use, say, %ld",
                    region, region / ASR_SM_LINE * ASR_SM_LINE);
  uint64_t ring = ASR_SM_RING_BYTES((uint64_t)region), cap = ring / 2 - ASR_SM_REC_HDR;
  cfg->region = (uint32_t)region;
  cfg->inline_max = (uint32_t)((uint64_t)inl < cap ? (uint64_t)inl : cap);
  cfg->cma = cma;
  return 0;
}

/* --- the names made and not yet unlinked, for the exit handler ----------- */

#define NAMES_MAX 4096 /* beyond it a name is not kept: only an exit before its sender came leaves it */
static char (*names)[ASR_SM_NAME_MAX];
static int nnames;
static pid_t names_owner;
static pthread_mutex_t names_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t names_once = PTHREAD_ONCE_INIT;

void asr__sm_names_exit(void) {
  if (pthread_mutex_trylock(&names_lock) != 0) return; /* a fork while another thread held it */
  if (names_owner == getpid())                         /* not a forked child's copy of its parent's */
    for (int i = 0; i < nnames; i++) shm_unlink(names[i]);
  nnames = 0;
  pthread_mutex_unlock(&names_lock);
}

static void names_register(void) { atexit(asr__sm_names_exit); }

static void name_keep(const char *name) {
  pthread_once(&names_once, names_register);
  pthread_mutex_lock(&names_lock);
  if (names_owner != getpid()) {
    nnames = 0;
    names_owner = getpid();
  }
  if (!names) names = calloc(NAMES_MAX, sizeof *names);
  if (names && nnames < NAMES_MAX) snprintf(names[nnames++], ASR_SM_NAME_MAX, "%s", name);
  pthread_mutex_unlock(&names_lock);
}

static void name_drop(const char *name) {
  pthread_mutex_lock(&names_lock);
  if (names_owner == getpid())
    for (int i = 0; i < nnames; i++)
      if (strcmp(names[i], name) == 0) {
        memcpy(names[i], names[--nnames], ASR_SM_NAME_MAX);
        break;
      }
  pthread_mutex_unlock(&names_lock);
}

/* --- the region ------------------------------------------------------------ */

static uint32_t *u32_at(asr__sm_t *s, size_t off) { return (uint32_t *)(void *)(s->base + off); }
static uint64_t *u64_at(asr__sm_t *s, size_t off) { return (uint64_t *)(void *)(s->base + off); }

static asr__sm_t *sm_new(const asr__sm_cfg_t *cfg) {
  asr__sm_t *s = calloc(1, sizeof *s);
  if (s) s->cfg = *cfg;
  return s;
}

static _Atomic unsigned long name_seq;

int asr__sm_listen(asr__sm_t **out, const asr__sm_cfg_t *cfg, int lnc, const uint8_t who[ASR_OFI_WHO_LEN],
                   uint8_t handle[ASR_OFI_HANDLE_LEN], char *err, size_t errlen) {
  asr__sm_t *s = sm_new(cfg);
  if (!s) return asr_errf(err, errlen, ASR_ENOMEM, "no memory for an sm comm");
  int fd = -1;
  for (int tries = 0; fd < 0 && tries < 8; tries++) {
    asr_sm_name(s->name, sizeof s->name, getpid(), geteuid(), lnc, atomic_fetch_add(&name_seq, 1));
    fd = shm_open(s->name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0 && errno != EEXIST) break; /* EEXIST: one left by an earlier process of our pid */
  }
  if (fd < 0) {
    int e = errno;
    int rc = asr_errf(err, errlen, asr_err_from_errno(e), "cannot create the sm region %s in /dev/shm: %s",
                      s->name, strerror(e));
    free(s);
    return rc;
  }
  s->named = 1;
  name_keep(s->name);
  s->len = ASR_SM_MAP_BYTES(cfg->region);
  if (ftruncate(fd, (off_t)s->len) != 0) {
    int e = errno;
    close(fd);
    asr__sm_free(s);
    return asr_errf(err, errlen, asr_err_from_errno(e),
                    "cannot size the sm region to %zu bytes: %s (is /dev/shm full? ASR_SM_REGION sets it)",
                    (size_t)cfg->region, strerror(e));
  }
  void *m = mmap(NULL, s->len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  int e = errno;
  close(fd);
  if (m == MAP_FAILED) {
    s->base = NULL;
    asr__sm_free(s);
    return asr_errf(err, errlen, asr_err_from_errno(e), "cannot map the sm region: %s", strerror(e));
  }
  s->base = m;
  s->ring = s->base + ASR_SM_RING_OFF;
  s->ring_bytes = ASR_SM_RING_BYTES(cfg->region);
  s->osr = s->base + cfg->region;
  s->osr_bytes = ASR_SM_OSR_BYTES(cfg->region);
  /* a fresh file is zeros: only line 0 is written */
  *u32_at(s, ASR_SM_OFF_VERSION) = ASR_SM_VERSION;
  *u32_at(s, ASR_SM_OFF_REGION) = cfg->region;
  *u32_at(s, ASR_SM_OFF_RING) = (uint32_t)s->ring_bytes;
  memcpy(s->base + ASR_SM_OFF_RECV_WHO, who, ASR_OFI_WHO_LEN);
  __atomic_store_n(u32_at(s, ASR_SM_OFF_MAGIC), ASR_SM_MAGIC, __ATOMIC_RELEASE);
  memset(handle, 0, ASR_OFI_HANDLE_LEN);
  asr_le_put32(handle, ASR_OFI_HANDLE_MAGIC);
  size_t n = strlen(s->name);
  asr_le_put16(handle + ASR_SM_H_NAMELEN, (uint16_t)n);
  memcpy(handle + ASR_SM_H_NAME, s->name, n);
  memcpy(handle + ASR_SM_H_WHO, who, ASR_OFI_WHO_LEN);
  asr_le_put32(handle + ASR_SM_H_REGION, cfg->region);
  *out = s;
  return 0;
}

/* The word the receiver reads with process_vm_readv to learn whether the
 * kernel lets it copy from us (sm_layout.h: the probe). */
static volatile uint64_t probe_word = 0x61737220736d2121ull; /* "asr sm!!" */

int asr__sm_connect(asr__sm_t **out, const asr__sm_cfg_t *cfg, const uint8_t handle[ASR_OFI_HANDLE_LEN],
                    const uint8_t who[ASR_OFI_WHO_LEN], uint8_t peer_who[ASR_OFI_WHO_LEN], char *err,
                    size_t errlen) {
  char name[ASR_SM_NAME_MAX];
  uint32_t region = 0;
  const char *why;
  if (asr__sm_handle_read(handle, geteuid(), name, &region, &why) != 0)
    return asr_errf(err, errlen, ASR_EPROTO, "the peer's sm handle is malformed: %s", why);
  int fd = shm_open(name, O_RDWR | O_CLOEXEC, 0);
  if (fd < 0) {
    int e = errno;
    return asr_errf(err, errlen, asr_err_from_errno(e),
                    "cannot open the peer's sm region %s: %s (the peer is on another machine given the same "
                    "host name, or it closed its comm)",
                    name, strerror(e));
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || st.st_size != (off_t)ASR_SM_MAP_BYTES(region) || st.st_uid != geteuid()) {
    close(fd);
    return asr_errf(err, errlen, ASR_EPROTO,
                    "the peer's sm region %s is not what its handle says (%u bytes, ours)", name, region);
  }
  size_t map = ASR_SM_MAP_BYTES(region);
  void *m = mmap(NULL, map, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  int e = errno;
  close(fd);
  if (m == MAP_FAILED)
    return asr_errf(err, errlen, asr_err_from_errno(e), "cannot map the sm region %s: %s", name, strerror(e));
  asr__sm_t *s = sm_new(cfg);
  if (!s) {
    munmap(m, map);
    return asr_errf(err, errlen, ASR_ENOMEM, "no memory for an sm comm");
  }
  s->base = m;
  s->len = map;
  s->is_send = 1;
  snprintf(s->name, sizeof s->name, "%s", name);
  /* Both ends have the region now: its name goes (no one else may map it,
   * and nothing is left in /dev/shm however either end ends). */
  shm_unlink(name);
  uint32_t magic = __atomic_load_n(u32_at(s, ASR_SM_OFF_MAGIC), __ATOMIC_ACQUIRE);
  uint32_t ring = *u32_at(s, ASR_SM_OFF_RING);
  if (magic != ASR_SM_MAGIC || *u32_at(s, ASR_SM_OFF_VERSION) != ASR_SM_VERSION ||
      *u32_at(s, ASR_SM_OFF_REGION) != region || ring != ASR_SM_RING_BYTES(region) ||
      memcmp(s->base + ASR_SM_OFF_RECV_WHO, handle + ASR_SM_H_WHO, ASR_OFI_WHO_LEN) != 0 ||
      __atomic_load_n(u32_at(s, ASR_SM_OFF_ATTACHED), __ATOMIC_ACQUIRE) != 0) {
    asr__sm_free(s);
    return asr_errf(
        err, errlen, ASR_EPROTO,
        "the peer's sm region %s does not hold what its handle says (another version of libasr, or "
        "a region taken by another sender)",
        name);
  }
  s->ring = s->base + ASR_SM_RING_OFF;
  s->ring_bytes = ring;
  s->osr = s->base + region;
  s->osr_bytes = ASR_SM_OSR_BYTES(region);
  memcpy(peer_who, handle + ASR_SM_H_WHO, ASR_OFI_WHO_LEN);
  s->peer_pid = asr_le_get32(peer_who);
  memcpy(s->base + ASR_SM_OFF_SEND_WHO, who, ASR_OFI_WHO_LEN);
  *u64_at(s, ASR_SM_OFF_PROBE_ADDR) = (uint64_t)(uintptr_t)&probe_word;
  *u64_at(s, ASR_SM_OFF_PROBE_VAL) = probe_word;
  __atomic_store_n(u32_at(s, ASR_SM_OFF_ATTACHED), 1, __ATOMIC_RELEASE);
  *out = s;
  return 0;
}

/* Whether we may copy from process pid: read its probe word. 0 yes, else
 * the errno that refused it (or EPROTO: the word is not what it said). */
static int probe(uint32_t pid, uint64_t addr, uint64_t want) {
  uint64_t got = 0;
  struct iovec l = {&got, sizeof got}, r = {(void *)(uintptr_t)addr, sizeof got};
  ssize_t n = process_vm_readv((pid_t)pid, &l, 1, &r, 1, 0);
  if (n < 0) return errno;
  return n == (ssize_t)sizeof got && got == want ? 0 : EPROTO;
}

int asr__sm_accept(asr__sm_t *s, int lnc, uint8_t who[ASR_OFI_WHO_LEN]) {
  if (__atomic_load_n(u32_at(s, ASR_SM_OFF_ATTACHED), __ATOMIC_ACQUIRE) != 1) return 0;
  memcpy(who, s->base + ASR_SM_OFF_SEND_WHO, ASR_OFI_WHO_LEN);
  s->peer_pid = asr_le_get32(who);
  if (s->named) { /* the sender unlinked it; this only forgets it */
    name_drop(s->name);
    s->named = 0;
  }
  int cma = ASR_SM_CMA_NO, e = 0;
  if (s->cfg.cma && s->peer_pid) {
    e = probe(s->peer_pid, *u64_at(s, ASR_SM_OFF_PROBE_ADDR), *u64_at(s, ASR_SM_OFF_PROBE_VAL));
    if (!e) cma = ASR_SM_CMA_YES;
  }
  __atomic_store_n(u32_at(s, ASR_SM_OFF_CMA), (uint32_t)cma, __ATOMIC_RELEASE);
  if (cma == ASR_SM_CMA_YES)
    asr_info("fab",
             "lnc %d: sm comm from process %u: messages over %u bytes are copied once, from the sender's "
             "memory (process_vm_readv)",
             lnc, s->peer_pid, s->cfg.inline_max);
  else
    asr_info("fab",
             "lnc %d: sm comm from process %u: messages over %u bytes are pipelined through the ring: %s",
             lnc, s->peer_pid, s->cfg.inline_max,
             !s->cfg.cma  ? "ASR_SM_CMA=false"
             : e == EPERM ? "the kernel refuses cross-process copies (process_vm_readv: EPERM; ptrace rules)"
                          : strerror(e));
  return 1;
}

void asr__sm_free(asr__sm_t *s) {
  if (!s) return;
  asr__sm_unlist(s); /* no progress of another thread walks onto it any more */
  if (s->named) {
    shm_unlink(s->name);
    name_drop(s->name);
  }
  if (s->base) munmap(s->base, s->len);
  free(s);
}
