/*
 * ofi_env.c -- provider settings libasr picks when the user has not.
 *
 * ofi_rxm over tcp preposts FI_OFI_RXM_MSG_RX_SIZE bounce buffers of
 * FI_OFI_RXM_BUFFER_SIZE (16 KiB) on each endpoint's shared receive context,
 * and libfabric 1.17 asks for 4096 of them when the variable is unset: 64 MiB
 * that fi_enable allocates and touches for every LNC, so memory and
 * asr_init's time grow with it for every LNC of a host, and a mesh's set-up
 * with them. libasr asks for 1024 (16 MiB); fewer does not lower the
 * resident size further, since the provider's other allocations then
 * dominate it.
 * Those are the buffers posted ahead: an eager message (up to 16 KiB) that
 * arrives before its receive keeps one, and rxm posts a new one in its place,
 * so more early messages than that still get in (test_runtime
 * unexpected_messages_fill_provider sends 1088 on one comm, and the message
 * of another comm behind them arrives first).
 *
 * rxm reads the variable once, when libfabric initialises all its providers
 * (the process's first fi_getinfo, whichever provider it asks for), so it is
 * set when libasr loads libfabric (ofi_dl.c), whatever the provider, and only
 * where nobody set it: the user's value, or a libfabric the application
 * initialised itself, wins. It stays in the environment, so the processes the
 * application starts inherit it.
 */
#include "config.h"

#include <stdlib.h>

#include "asr_log.h"
#include "ofi_env.h"

#define RXM_MSG_RX_SIZE "1024"

void asr__ofi_env_defaults(void) {
  const char *v = getenv("FI_OFI_RXM_MSG_RX_SIZE");
  if (v && *v) return;
  setenv("FI_OFI_RXM_MSG_RX_SIZE", RXM_MSG_RX_SIZE, 1);
  asr_debug("fab", "FI_OFI_RXM_MSG_RX_SIZE=%s (libasr's default; set it to override)", RXM_MSG_RX_SIZE);
}
