/*
 * ofi_dl.c -- libfabric, loaded when the first LNC is opened rather than when
 * the program starts.
 *
 * Debian's libfabric.so.1 links libpsm2 and libpsm_infinipath, whose load-time
 * constructors calibrate a clock by sleeping, in every process that merely
 * links it, before main. A rank that
 * only uses the job view (asr_job_init, barrier, finalize) never needs the
 * transport, so libasr does not link libfabric: the few functions it calls
 * that are not inline wrappers over the provider's ops tables are defined
 * here, resolve the real ones with dlopen/dlvsym on first use, and stay
 * private to libasr (libasr.sym exports only asr_*). The symbol versions are
 * the ones the linker binds for the 1.x headers we compile against, so the
 * structures passed have the layout these headers describe. Loading it here
 * would still run those constructors in every process's first asr_init:
 * platform/ofi_nopsm.c keeps them from running where they have nothing to drive.
 */
#include "config.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <rdma/fabric.h>
#include <rdma/fi_errno.h>

#include "asr_err.h"
#include "asr_log.h"
#include "ofi_env.h"
#include "platform/ofi_kallsyms.h"
#include "platform/ofi_nopsm.h"

#define LIBFABRIC "libfabric.so.1"

static pthread_once_t once = PTHREAD_ONCE_INIT;
static const char *load_error;
static int (*p_getinfo)(uint32_t, const char *, const char *, uint64_t, const struct fi_info *,
                        struct fi_info **);
static void (*p_freeinfo)(struct fi_info *);
static struct fi_info *(*p_dupinfo)(const struct fi_info *);
static int (*p_fabric)(struct fi_fabric_attr *, struct fid_fabric **, void *);
static const char *(*p_strerror)(int);

static void *sym(void *lib, const char *name, const char *version) {
  void *f = dlvsym(lib, name, version);
  return f ? f : dlsym(lib, name);
}

static void load(void) {
  void *lib = NULL;
  int nopsm = asr__ofi_nopsm_load();
  if (nopsm == ASR_ECONFIG) { /* a bad ASR_OFI_PSM (logged): fail as a bad setting fails */
    load_error = "bad ASR_OFI_PSM";
    return;
  }
  if (nopsm > 0) { /* before libfabric, whose dependencies they stand in for */
    lib = dlopen(LIBFABRIC, RTLD_NOW | RTLD_GLOBAL);
    if (!lib) {
      asr_debug("fab", "%s does not load with libasr's psm stand-ins (%s); loading it as it is", LIBFABRIC,
                dlerror());
      asr__ofi_nopsm_unload();
    }
  }
  if (!lib) lib = dlopen(LIBFABRIC, RTLD_NOW | RTLD_GLOBAL);
  if (!lib) {
    load_error = dlerror();
    asr_error("fab", "cannot load %s: %s (install libfabric1)", LIBFABRIC, load_error ? load_error : "?");
    return;
  }
  /* before the first fi_getinfo, which initialises every provider (platform/ofi_kallsyms.c,
   * ofi_env.c) */
  if (asr__ofi_hide_kallsyms(lib) == ASR_ECONFIG) { /* a bad ASR_OFI_KALLSYMS (logged) */
    load_error = "bad ASR_OFI_KALLSYMS";
    return;
  }
  asr__ofi_env_defaults();
  p_getinfo = sym(lib, "fi_getinfo", "FABRIC_1.3");
  p_freeinfo = sym(lib, "fi_freeinfo", "FABRIC_1.3");
  p_dupinfo = sym(lib, "fi_dupinfo", "FABRIC_1.3");
  p_fabric = sym(lib, "fi_fabric", "FABRIC_1.1");
  p_strerror = sym(lib, "fi_strerror", "FABRIC_1.0");
  if (!p_getinfo || !p_freeinfo || !p_dupinfo || !p_fabric || !p_strerror) {
    load_error = "a function is missing";
    asr_error("fab", "%s lacks fi_getinfo, fi_freeinfo, fi_dupinfo, fi_fabric or fi_strerror", LIBFABRIC);
    p_getinfo = NULL;
  }
  /* never dlclose: providers keep threads and atexit handlers */
}

static int loaded(void) {
  pthread_once(&once, load);
  return p_getinfo != NULL;
}

int fi_getinfo(uint32_t version, const char *node, const char *service, uint64_t flags,
               const struct fi_info *hints, struct fi_info **info) {
  if (!loaded()) return -FI_ENOSYS;
  return p_getinfo(version, node, service, flags, hints, info);
}

void fi_freeinfo(struct fi_info *info) {
  if (info && loaded()) p_freeinfo(info);
}

struct fi_info *fi_dupinfo(const struct fi_info *info) {
  return loaded() ? p_dupinfo(info) : NULL;
}

int fi_fabric(struct fi_fabric_attr *attr, struct fid_fabric **fabric, void *context) {
  if (!loaded()) return -FI_ENOSYS;
  return p_fabric(attr, fabric, context);
}

const char *fi_strerror(int errnum) {
  if (!loaded()) return "libfabric could not be loaded";
  return p_strerror(errnum);
}
