/*
 * ofi_kallsyms.h -- see ofi_kallsyms.c.
 */
#ifndef ASR_OFI_KALLSYMS_H
#define ASR_OFI_KALLSYMS_H

/* Redirects the freshly loaded libfabric's own fopen calls so that
 * /proc/kallsyms cannot be opened (unless ASR_OFI_KALLSYMS is true). Call
 * before its first fi_getinfo (ofi_dl.c). Returns how many table entries it
 * redirected (0: none, or left alone), or a negative ASR_E* code: the library
 * could not be inspected (then nothing was changed), or ASR_ECONFIG (logged)
 * for a bad ASR_OFI_KALLSYMS. */
int asr__ofi_hide_kallsyms(void *lib);

#endif /* ASR_OFI_KALLSYMS_H */
