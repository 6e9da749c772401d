/*
 * shm_names.c -- the shm provider's region of each open LNC, unlinked when
 * the process exits without asr_close.
 *
 * libfabric's shm provider backs each endpoint with a 16 MiB region in
 * /dev/shm, named by its address (fi_getname: "fi_shm://<pid>:<uid>:<index>",
 * the region being "<pid>:<uid>:<index>"), and unlinks it when the endpoint is closed; a process that exits
 * with an LNC still open (no asr_close, as when main returns after
 * asr_init) leaves it there for good. So each LNC's region name is kept here
 * from asr_init to asr_close, and an exit handler unlinks those still
 * listed. Unlinking only removes the name: the process's own mapping, and
 * any peer's, stay valid until they are unmapped. A rank that is killed
 * runs no exit handler; asrd removes what it left (launcher/asrd/asrd_shm.c).
 */
#include "config.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "asr.h"
#include "rt.h"

#define NAME_MAX_LEN 64

static char names[ASR_MAX_LNC][NAME_MAX_LEN]; /* "" when the LNC has none */
static pid_t owner;                           /* the process that opened them */
static pthread_mutex_t names_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t registered = PTHREAD_ONCE_INIT;

static void unlink_all(void) {
  /* Best effort: a child forked while another thread held the lock would
   * wait for it forever. */
  if (pthread_mutex_trylock(&names_lock) != 0) return;
  /* A child forked by the program inherits this handler and the table: its
   * exit must not take the names of its parent's open LNCs. */
  if (owner == getpid())
    for (int i = 0; i < ASR_MAX_LNC; i++)
      if (names[i][0]) {
        shm_unlink(names[i]);
        names[i][0] = '\0';
      }
  pthread_mutex_unlock(&names_lock);
}

static void register_exit(void) { atexit(unlink_all); }

/* The region name in a shm address ("fi_shm://<pid>:<uid>:<index>",
 * NUL-ended), or NULL when the address is not of that form. */
static const char *region_name(const uint8_t *addr, size_t len) {
  static const char prefix[] = "fi_shm://";
  if (len < 2 || len > NAME_MAX_LEN || addr[len - 1] != '\0') return NULL;
  const char *name = (const char *)addr;
  if (strncmp(name, prefix, sizeof prefix - 1) == 0) name += sizeof prefix - 1;
  int colons = 0;
  for (const char *p = name; *p; p++) {
    if (*p == ':')
      colons++;
    else if (*p < '0' || *p > '9')
      return NULL;
  }
  return colons == 2 && *name != ':' ? name : NULL;
}

void asr__shm_name_keep(int lnc, const asr__ofi_t *o) {
  const char *name = strcmp(o->provider, "shm") == 0 ? region_name(o->addr, o->addrlen) : NULL;
  if (!name) return;
  pthread_once(&registered, register_exit);
  pthread_mutex_lock(&names_lock);
  if (owner != getpid()) { /* the first LNC of this process (a forked child's table is its parent's) */
    memset(names, 0, sizeof names);
    owner = getpid();
  }
  memcpy(names[lnc], name, strlen(name) + 1); /* fits: the address did (region_name) */
  pthread_mutex_unlock(&names_lock);
}

void asr__shm_name_drop(int lnc) {
  pthread_mutex_lock(&names_lock);
  names[lnc][0] = '\0';
  pthread_mutex_unlock(&names_lock);
}
