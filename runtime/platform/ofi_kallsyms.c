/*
 * ofi_kallsyms.c -- keeps libfabric's verbs provider from reading
 * /proc/kallsyms when libasr loads libfabric (ofi_dl.c).
 *
 * libfabric 1.17 initialises every built-in provider at its first
 * fi_getinfo, whatever provider is asked for, and the verbs provider's init
 * (vrb_os_mem_support: vrb_set_peer_mem_support, vrb_set_dmabuf_support)
 * reads the whole of /proc/kallsyms twice, line by line, looking for two
 * kernel symbols that say whether GPU memory can be registered. That file
 * has a line per kernel symbol, so the two reads are most of what the first
 * fi_getinfo costs, in every process that opens its first LNC, and a job
 * pays them once per rank on the same CPUs. libasr moves host memory only,
 * over shm or tcp;ofi_rxm, so the answer is of no use to it.
 *
 * So once libfabric is loaded, and before its first fi_getinfo, the entry of
 * libfabric's global offset table through which it calls fopen is pointed at
 * hidden_fopen below: "/proc/kallsyms" fails with EACCES (as it would for an
 * unprivileged reader whose kernel restricts it) and every other path goes
 * to the C library's fopen. Only libfabric's own calls are redirected, never
 * the application's. ASR_OFI_KALLSYMS=1 leaves libfabric as it is (for a
 * program that also uses libfabric's verbs provider with GPU memory, in the
 * same process, after libasr loaded libfabric).
 */
#include "config.h"

#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <link.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "asr_env.h"
#include "asr_err.h"
#include "asr_log.h"
#include "ofi_kallsyms.h"

/* 64-bit x86 and Arm (the relocation macros below are the ELF64 ones) */
#if defined(__x86_64__) && defined(__LP64__)
#define SLOT_RELOC(t) ((t) == R_X86_64_JUMP_SLOT || (t) == R_X86_64_GLOB_DAT)
#elif defined(__aarch64__) && defined(__LP64__)
#define SLOT_RELOC(t) ((t) == R_AARCH64_JUMP_SLOT || (t) == R_AARCH64_GLOB_DAT)
#endif

#ifdef SLOT_RELOC

static const char *const KALLSYMS = "/proc/kallsyms";

static FILE *hidden_fopen(const char *path, const char *mode) {
  if (path && strcmp(path, KALLSYMS) == 0) {
    errno = EACCES;
    return NULL;
  }
  return fopen(path, mode);
}

/* The pages of the object at base that the loader made read-only after
 * relocating it: its PT_GNU_RELRO segment with both ends rounded down to a
 * page, as glibc's _dl_protect_relro does (a last partial page stays
 * writable, and must stay so). */
typedef struct {
  ElfW(Addr) base;
  uintptr_t ro_lo, ro_hi;
  int found;
} relro_t;

static int find_relro(struct dl_phdr_info *info, size_t size, void *arg) {
  (void)size;
  relro_t *r = arg;
  if (info->dlpi_addr != r->base) return 0;
  r->found = 1;
  uintptr_t mask = ~(uintptr_t)(sysconf(_SC_PAGESIZE) - 1);
  for (int i = 0; i < info->dlpi_phnum; i++)
    if (info->dlpi_phdr[i].p_type == PT_GNU_RELRO) {
      uintptr_t lo = info->dlpi_addr + info->dlpi_phdr[i].p_vaddr;
      r->ro_lo = lo & mask;
      r->ro_hi = (lo + info->dlpi_phdr[i].p_memsz) & mask;
    }
  return 1;
}

/* Points one global offset table entry at hidden_fopen. An entry on a
 * read-only RELRO page is made writable for the store and read-only again;
 * any other is writable already. Returns 0, or the ASR_E* of mprotect's
 * errno (the entry is left as it was). */
static int patch_slot(void **slot, const relro_t *r) {
  long pg = sysconf(_SC_PAGESIZE);
  uintptr_t page = (uintptr_t)slot & ~(uintptr_t)(pg - 1);
  int ro = page >= r->ro_lo && page < r->ro_hi;
  if (ro && mprotect((void *)page, (size_t)pg, PROT_READ | PROT_WRITE) != 0) return asr_err_from_errno(errno);
  __atomic_store_n(slot, (void *)hidden_fopen, __ATOMIC_RELEASE);
  if (ro) mprotect((void *)page, (size_t)pg, PROT_READ);
  return 0;
}

/* Patches every relocation of table (n entries) that binds fopen. */
static int patch_table(ElfW(Addr) base, const ElfW(Rela) * rel, size_t n, const ElfW(Sym) * sym,
                       const char *str, const relro_t *r) {
  int patched = 0;
  for (size_t i = 0; i < n; i++) {
    if (!SLOT_RELOC(ELF64_R_TYPE(rel[i].r_info))) continue;
    const char *name = str + sym[ELF64_R_SYM(rel[i].r_info)].st_name;
    if (strcmp(name, "fopen") != 0 && strcmp(name, "fopen64") != 0) continue;
    if (patch_slot((void **)(base + rel[i].r_offset), r) == 0) patched++;
  }
  return patched;
}

int asr__ofi_hide_kallsyms(void *lib) {
  int keep;
  char err[256];
  if (asr_env_bool(ASR_ENV_OFI_KALLSYMS, &keep, err, sizeof err) != 0) {
    asr_error("fab", "%s", err);
    return ASR_ECONFIG;
  }
  if (keep) return 0;
  struct link_map *lm = NULL;
  if (dlinfo(lib, RTLD_DI_LINKMAP, &lm) != 0 || !lm) return ASR_EINVAL; /* not a handle dlopen gave */
  ElfW(Addr) base = lm->l_addr;
  const ElfW(Sym) *sym = NULL;
  const char *str = NULL;
  const ElfW(Rela) *jmprel = NULL, *rela = NULL;
  size_t jmprel_sz = 0, rela_sz = 0;
  /* The loader has made most of these addresses absolute; an address below
   * the base is still relative to it. */
#define DYN_PTR(v) ((v) < base ? (v) + base : (v))
  for (const ElfW(Dyn) *d = lm->l_ld; d->d_tag != DT_NULL; d++) {
    switch (d->d_tag) {
      case DT_SYMTAB: sym = (const ElfW(Sym) *)DYN_PTR(d->d_un.d_ptr); break;
      case DT_STRTAB: str = (const char *)DYN_PTR(d->d_un.d_ptr); break;
      case DT_JMPREL: jmprel = (const ElfW(Rela) *)DYN_PTR(d->d_un.d_ptr); break;
      case DT_PLTRELSZ: jmprel_sz = d->d_un.d_val; break;
      case DT_RELA: rela = (const ElfW(Rela) *)DYN_PTR(d->d_un.d_ptr); break;
      case DT_RELASZ: rela_sz = d->d_un.d_val; break;
      default: break;
    }
  }
#undef DYN_PTR
  if (!sym || !str) return ASR_EPROTO; /* no dynamic symbol table: not an object we can read */
  relro_t r = {.base = base};
  dl_iterate_phdr(find_relro, &r);
  if (!r.found) return ASR_ENOTFOUND; /* the loader does not list it */
  int n = 0;
  if (jmprel) n += patch_table(base, jmprel, jmprel_sz / sizeof *jmprel, sym, str, &r);
  if (rela) n += patch_table(base, rela, rela_sz / sizeof *rela, sym, str, &r);
  asr_debug("fab", "libfabric's fopen redirected (%d entr%s): its verbs provider will not read %s", n,
            n == 1 ? "y" : "ies", KALLSYMS);
  return n;
}

#else /* no relocation types known for this architecture: leave libfabric alone */

int asr__ofi_hide_kallsyms(void *lib) {
  (void)lib;
  return 0;
}

#endif
