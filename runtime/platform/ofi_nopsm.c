/*
 * ofi_nopsm.c -- keeps Debian's libfabric from sleeping at load.
 *
 * libfabric.so.1 (1.17, Debian) links libpsm2 and libpsm_infinipath (through
 * it libinfinipath), for Omni-Path and InfiniPath adapters. libpsm2's and
 * libinfinipath's load-time constructors each calibrate a clock by sleeping
 * (opa-psm2 issue #73: there is no way to turn it off; libpsm2's pins the
 * thread to CPU 0 meanwhile), so every process's first asr_init would sleep
 * in dlopen(libfabric) -- longer than the rest of a small job's connect.
 *
 * On a host without those adapters (no /dev/hfi1* or /dev/ipath*) neither
 * library can do anything, so libasr first loads stand-ins with the same
 * SONAMEs (runtime/platform/nopsm/: every function libfabric imports from them, each
 * failing); the dynamic linker then takes them for libfabric's dependencies
 * and the real ones are never loaded. Not when the adapter's device file
 * exists, when the process has already loaded the real library, or when
 * ASR_OFI_PSM=1; and if libfabric will not load on top of the stand-ins
 * (another libfabric that imports more), they are unloaded again and
 * libfabric is loaded as it is (ofi_dl.c).
 */
#include "config.h"

#include <dlfcn.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "asr_env.h"
#include "asr_err.h"
#include "asr_log.h"
#include "ofi_nopsm.h"

static const struct {
  const char *soname, *devices, *file;
} stand_ins[] = {
    {"libpsm2.so.2", "/dev/hfi1*", "asr-nopsm2.so"},
    {"libpsm_infinipath.so.1", "/dev/ipath*", "asr-nopsm.so"},
};
#define NSTAND (sizeof stand_ins / sizeof stand_ins[0])

static void *loaded[NSTAND];

static int any_file(const char *pattern) {
  glob_t g;
  int n = glob(pattern, 0, NULL, &g) == 0 ? (int)g.gl_pathc : 0;
  if (n) globfree(&g);
  return n > 0;
}

/* dlopens file from the directory of the object this code is in (libasr,
 * or asr-ofi-probe, which links the same loader), or from its asr/
 * subdirectory (where make install puts it: $(pkglibdir)); for the probe
 * in the build tree, from runtime/.libs; then from $(pkglibdir) itself. */
static void *open_beside_libasr(const char *file) {
  Dl_info di;
  if (!dladdr((void *)asr__ofi_nopsm_load, &di) || !di.dli_fname) return NULL;
  const char *slash = strrchr(di.dli_fname, '/');
  int dirlen = slash ? (int)(slash - di.dli_fname) : 1;
  const char *dir = slash ? di.dli_fname : ".";
  char path[4096];
  static const char *const sub[] = {"", "/asr", "/.libs"};
  for (int i = 0; i < 3; i++) {
    if (snprintf(path, sizeof path, "%.*s%s/%s", dirlen, dir, sub[i], file) >= (int)sizeof path) continue;
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (h) return h;
  }
#ifdef ASR_PKGLIBDIR
  if (snprintf(path, sizeof path, "%s/%s", ASR_PKGLIBDIR, file) < (int)sizeof path) {
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (h) return h;
  }
#endif
  return NULL;
}

int asr__ofi_nopsm_load(void) {
  int keep;
  char err[256];
  if (asr_env_bool(ASR_ENV_OFI_PSM, &keep, err, sizeof err) != 0) {
    asr_error("fab", "%s", err);
    return ASR_ECONFIG;
  }
  if (keep) return 0;
  int n = 0;
  for (size_t i = 0; i < NSTAND; i++) {
    if (any_file(stand_ins[i].devices)) continue;
    void *real = dlopen(stand_ins[i].soname, RTLD_NOW | RTLD_NOLOAD);
    if (real) { /* already there: its constructor has run */
      dlclose(real);
      continue;
    }
    loaded[i] = open_beside_libasr(stand_ins[i].file);
    if (loaded[i]) {
      n++;
      asr_debug("fab", "%s: libasr's stand-in %s (no %s)", stand_ins[i].soname, stand_ins[i].file,
                stand_ins[i].devices);
    } else {
      asr_debug("fab", "%s: stand-in %s not found beside libasr; the real one will be loaded",
                stand_ins[i].soname, stand_ins[i].file);
    }
  }
  return n;
}

void asr__ofi_nopsm_unload(void) {
  for (size_t i = 0; i < NSTAND; i++)
    if (loaded[i]) {
      dlclose(loaded[i]);
      loaded[i] = NULL;
    }
}
