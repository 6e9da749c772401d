/*
 * ofi_env.h -- see ofi_env.c.
 */
#ifndef ASR_OFI_ENV_H
#define ASR_OFI_ENV_H

/* Sets the provider variables libasr chooses (FI_OFI_RXM_MSG_RX_SIZE) where
 * the environment does not set them. Call before libfabric's first
 * fi_getinfo in the process. */
void asr__ofi_env_defaults(void);

#endif /* ASR_OFI_ENV_H */
