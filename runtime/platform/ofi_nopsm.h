/*
 * ofi_nopsm.h -- see ofi_nopsm.c.
 */
#ifndef ASR_OFI_NOPSM_H
#define ASR_OFI_NOPSM_H

/* Loads the stand-ins for libpsm2 / libpsm_infinipath where the real ones
 * have nothing to drive (unless ASR_OFI_PSM is true); call before
 * dlopen(libfabric). Returns how many, or ASR_ECONFIG (logged) for a bad
 * ASR_OFI_PSM. */
int asr__ofi_nopsm_load(void);

/* Unloads them again (libfabric would not load on top of them). */
void asr__ofi_nopsm_unload(void);

#endif /* ASR_OFI_NOPSM_H */
