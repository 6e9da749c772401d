/* asr_fs.c -- see asr_fs.h. */
#include "config.h"

#include <ftw.h>
#include <stdio.h>

#include "asr_fs.h"

static int remove_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
  (void)sb, (void)flag, (void)ftw;
  remove(path);
  return 0;
}

void asr_rm_tree(const char *dir) { nftw(dir, remove_one, 16, FTW_DEPTH | FTW_PHYS); }
