/*
 * ofi_probe.h -- the libfabric query libasr opens an LNC with (ofi.c), and
 * the same query asked ahead of a job (asr-ofi-probe, which asrd runs on
 * each host before starting ranks when --provider was given). Part of
 * libasrofi, the libfabric loader (runtime/Makefile.mk).
 */
#ifndef ASR_OFI_PROBE_H
#define ASR_OFI_PROBE_H

#include <stddef.h>

struct fi_info;

/* The hints an LNC's fi_getinfo uses for provider prov (RDM, tagged, the
 * memory-registration and threading modes libasr needs); NULL when out of
 * memory. Free with fi_freeinfo. */
struct fi_info *asr__ofi_hints(const char *prov);

/* 0 if libfabric here offers prov for what libasr needs; else ASR_ENOSYS
 * (or ASR_ENOMEM) with err naming what it does offer. Loads libfabric
 * (ofi_dl.c) on first use. */
int asr__ofi_probe(const char *prov, char *err, size_t errlen);

#endif /* ASR_OFI_PROBE_H */
