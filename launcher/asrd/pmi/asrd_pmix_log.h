/*
 * asrd_pmix_log.h -- libpmix's own output lines, into asrd's log.
 *
 * libpmix writes lines of its own to the server's stderr with write(2),
 * from its threads: "PMIX ERROR: ..." when it refuses a peer or loses one,
 * and whatever PMIX_MCA_*_verbose asks for. asrd's stderr is the job's
 * (asrrun's terminal, or its pipe), and any local user can make the library
 * refuse them, since the server listens on loopback TCP: such a line would
 * appear in the job's output as if the job had written it. So the library
 * writes into a pipe instead (PMIX_OUTPUT_STDERR_FD, which it reads once,
 * in PMIx_server_init), and asrd logs each line it reads there at info
 * under "pmix" (ASR_LOG_LEVEL=info ASR_LOG_SUBSYS=pmix shows them). What
 * matters to the job reaches asrd as a status the library returns, which
 * asrd reports itself (doc/design.md, "The launcher": asrd as PMIx server).
 *
 * The calls, in order: asrd's main calls asrd_pmix_log_open while it is
 * one thread; asrd_pmix_init calls asrd_pmix_log_start before
 * PMIx_server_init; asrd_pmix_stop calls asrd_pmix_log_stop. All on asrd's
 * loop thread.
 */
#ifndef ASRD_PMIX_LOG_H
#define ASRD_PMIX_LOG_H

#include "asr_loop.h"

/* Makes the pipe and names its write end in PMIX_OUTPUT_STDERR_FD. asrd's
 * main calls it before any thread starts: setenv beside another thread's
 * getenv is not safe. Returns 0 or a negative ASR_E*; on a failure libpmix
 * keeps writing to stderr, as before. */
int asrd_pmix_log_open(void);

/* Starts reading the pipe on loop (a no-op when it is read already, or
 * when asrd_pmix_log_open failed). Returns 0 or a negative ASR_E*. */
int asrd_pmix_log_start(asr_loop_t *loop);

/* Logs what the pipe holds now (a line the library wrote before a peer saw
 * it refused is logged before asrd exits) and stops reading it. What the
 * library writes later, from its threads that outlive the server (see
 * asrd_pmix_stop), is lost. */
void asrd_pmix_log_stop(asr_loop_t *loop);

#endif /* ASRD_PMIX_LOG_H */
