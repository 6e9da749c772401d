/* asrd_dir.c -- asrd's private PMIx directory (asrd_dir.h). */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "asr_err.h"
#include "asr_fs.h"
#include "asrd_dir.h"

int asrd_dir_make(char *out, size_t outlen) {
  /* PMIx's shared-memory segments (its dstore) belong on tmpfs: on a disk
   * file system removing them at the end of a job costs milliseconds (10-15
   * ms on an ext4 /tmp mounted with discard). */
  const char *base = getenv("TMPDIR");
  if (!base || !*base) base = access("/dev/shm", W_OK | X_OK) == 0 ? "/dev/shm" : "/tmp";
  snprintf(out, outlen, "%s/asrd.%ld.XXXXXX", base, (long)getpid());
  if (mkdtemp(out)) return 0;
  if (strcmp(base, "/dev/shm") == 0) {
    snprintf(out, outlen, "/tmp/asrd.%ld.XXXXXX", (long)getpid());
    if (mkdtemp(out)) return 0;
  }
  int e = errno;
  out[0] = '\0';
  return asr_err_from_errno(e);
}

void asrd_dir_remove(const char *dir) { asr_rm_tree(dir); }

void asrd_dir_remove_of(pid_t pid) {
  const char *bases[] = {getenv("TMPDIR"), "/dev/shm", "/tmp"};
  char prefix[32];
  int plen = snprintf(prefix, sizeof prefix, "asrd.%ld.", (long)pid);
  for (size_t b = 0; b < sizeof bases / sizeof bases[0]; b++) {
    if (!bases[b] || !*bases[b] || (b > 0 && bases[0] && !strcmp(bases[0], bases[b]))) continue;
    DIR *d = opendir(bases[b]);
    if (!d) continue;
    struct dirent *e;
    while ((e = readdir(d))) {
      /* exactly asrd.PID. and mkdtemp's six characters */
      if (strncmp(e->d_name, prefix, (size_t)plen) != 0 || strlen(e->d_name) != (size_t)plen + 6) continue;
      char path[4096];
      struct stat st;
      snprintf(path, sizeof path, "%s/%s", bases[b], e->d_name);
      if (lstat(path, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid()) continue;
      asrd_dir_remove(path);
    }
    closedir(d);
  }
}
