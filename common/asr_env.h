/*
 * asr_env.h -- every ASR_* and ASRRUN_* environment variable, declared once.
 *
 * The list below (an X-macro, the libuv / libfabric fi_param_define habit) is
 * the one place a variable exists: its name, its type and range, its default,
 * who reads it and a line of help. It generates the asr_env_id_t enum, the
 * table that `asrrun --list-env` prints (and the README's copy of it), and
 * what the one parser (asr_env.c) checks a value against. A new setting is
 * one line here; a reader then calls the getter of its type:
 *
 *     long ms;
 *     char err[256];
 *     if (asr_env_int(ASR_ENV_KV_TIMEOUT_MS, &ms, err, sizeof err) != 0) ... fail with err ...
 *
 * One policy for every variable:
 *   - unset, or set to the empty string, means the default (the shell's
 *     `VAR= prog` turns a setting off); ASR_SYSTEM_CONFIG and ASR_USER_CONFIG
 *     are the exceptions their rows name, read with asr_env_raw();
 *   - a bad value is an error, as a bad flag is: the getter returns
 *     ASR_ECONFIG and a message that names the variable, the value and what
 *     is allowed, and its caller fails with it (asrrun before it starts
 *     anything, asr_init, the libasr call that read it). Only the logger, which
 *     cannot fail, warns once and uses the default;
 *   - an unknown ASRRUN_* name is an error in asrrun (like an unknown flag);
 *     an unknown ASR_* name is a warning, once per process.
 *
 * Foreign variables (PATH, HOME, TMPDIR, FI_*, PMIX_*, SLURM_*, PBS_NODEFILE,
 * HWLOC_*) are not rows: their owners define them. torchrun's names (RANK,
 * MASTER_ADDR, ...) are the exception: asrd sets them for every rank, so
 * they are rows (text, never checked: asr does not read them).
 *
 * Columns: X(ID, NAME, TYPE, MIN, MAX, WORDS, DEFAULT, WHO, DOC)
 *   ID       the enum name is ASR_ENV_<ID>
 *   TYPE     an asr_env_type_t without its ASR_ENV_T_ prefix
 *   MIN, MAX integer types: the range; STR: the least and most bytes (MAX 0:
 *            no limit); SECRET: MIN = MAX = the number of hex digits
 *   WORDS    WORD: ASR_ENV_WORDS("a", "b", ...) in the order of the index the
 *            getter returns; else NULL
 *   DEFAULT  the value used when unset, as text, or NULL for none (DOC then
 *            says what happens)
 *   WHO      asr_env_who_t bits: who reads it, and flags
 *   DOC      one line of help (no '|': it becomes a Markdown table cell)
 * The ASRRUN_* rows are asrrun's settings: each scalar key of its YAML files
 * (launcher/config/config.c, asr__cfg_keys) names its row by id and takes
 * from it the variable, the type, the range, the words and the help, so what
 * --list-env and the man pages say is what asrrun accepts.
 * tests/unit/test_launcher_config.c checks that every ASRRUN_* row is a
 * key's (or ASRRUN_HOSTFILE, ASRRUN_RANKFILE, which asrrun reads as files).
 * A row's default is asrrun's built-in one (asr_config_defaults sets it).
 */
#ifndef ASR_ENV_H
#define ASR_ENV_H

#include <stddef.h>
#include <stdio.h>

/* A WORD row's words, in index order, as a NULL-ended compound literal. */
#define ASR_ENV_WORDS(...) ((const char *const[]){__VA_ARGS__, NULL})

/* The largest asrrun job: 1024 hosts of 128 LNCs (launcher/config/job_config.h;
 * launcher/config/config.c asserts that the two agree). */
#define ASR_ENV_MAX_NP 131072L

/* clang-format off */
#define ASR_ENV_ROWS(X)                                                                                      \
  /* asrrun's own settings: the same keys as its YAML files and flags */                                     \
  X(ASRRUN_NP, "ASRRUN_NP", INT, 1, ASR_ENV_MAX_NP, NULL, NULL, ASR_ENV_ASRRUN,                              \
    "number of ranks, as -n (default: one per slot)")                                                        \
  X(ASRRUN_LNC_PER_HOST, "ASRRUN_LNC_PER_HOST", INT, 1, 128, NULL, NULL, ASR_ENV_ASRRUN,                     \
    "slots of a host that has no count, as --lnc-per-host (default: its cores)")                             \
  X(ASRRUN_NPERNODE, "ASRRUN_NPERNODE", INT, 1, 128, NULL, NULL, ASR_ENV_ASRRUN,                            \
    "ranks per host, within its slots, as --npernode / -ppn (default: as the slots allow)")                  \
  X(ASRRUN_MAP_BY, "ASRRUN_MAP_BY", STR, 1, 63, NULL, "slot", ASR_ENV_ASRRUN,                                \
    "slot, node, core, numa, package or ppr:N:node, ppr:N:numa, ppr:N:package, as --map-by")                 \
  X(ASRRUN_BIND_TO, "ASRRUN_BIND_TO", WORD, 0, 0, ASR_ENV_WORDS("none", "core", "numa", "package", "auto"),  \
    "auto", ASR_ENV_ASRRUN, "what each rank is bound to, as --bind-to (auto: a core each while they fit)")   \
  /* more cores than any one machine has is a typo */                                                        \
  X(ASRRUN_CPUS_PER_RANK, "ASRRUN_CPUS_PER_RANK", INT, 1, 4096, NULL, "1", ASR_ENV_ASRRUN,                   \
    "cores each rank is bound to, as --cpus-per-rank")                                                       \
  X(ASRRUN_OVERSUBSCRIBE, "ASRRUN_OVERSUBSCRIBE", BOOL, 0, 1, NULL, "false", ASR_ENV_ASRRUN,                 \
    "allow more ranks than slots or than bound objects (a warning), as --oversubscribe")                     \
  X(ASRRUN_RANKFILE, "ASRRUN_RANKFILE", PATH, 0, 1023, NULL, NULL, ASR_ENV_ASRRUN,                           \
    "place and bind each rank from this file ('rank R=HOST slot=CORES' lines), as --rankfile")               \
  X(ASRRUN_REPORT_BINDINGS, "ASRRUN_REPORT_BINDINGS", BOOL, 0, 1, NULL, "false", ASR_ENV_ASRRUN,             \
    "print each rank's binding, as --report-bindings")                                                       \
  X(ASRRUN_TAG_OUTPUT, "ASRRUN_TAG_OUTPUT", BOOL, 0, 1, NULL, "true", ASR_ENV_ASRRUN,                        \
    "prefix output lines with the rank, as --tag-output / --no-tag-output")                                  \
  X(ASRRUN_TIMESTAMP_OUTPUT, "ASRRUN_TIMESTAMP_OUTPUT", BOOL, 0, 1, NULL, "false", ASR_ENV_ASRRUN,           \
    "prefix each output line with the time asrrun got it, as --timestamp-output")                            \
  X(ASRRUN_OUTPUT_DIR, "ASRRUN_OUTPUT_DIR", PATH, 0, 1023, NULL, NULL, ASR_ENV_ASRRUN,                       \
    "also write each rank's output under this directory, as --output-dir")                                   \
  X(ASRRUN_TRACE, "ASRRUN_TRACE", PATH, 0, 1023, NULL, NULL, ASR_ENV_ASRRUN,                                 \
    "write the job's merged trace (Chrome trace-event JSON, for Perfetto and asrtrace) to this file, as "    \
    "--trace")                                                                                                 \
  X(ASRRUN_WDIR, "ASRRUN_WDIR", PATH, 0, 1023, NULL, NULL, ASR_ENV_ASRRUN,                                   \
    "the ranks' working directory, as --wdir (default: asrrun's)")                                           \
  X(ASRRUN_STDIN, "ASRRUN_STDIN", STR, 0, 15, NULL, "0", ASR_ENV_ASRRUN,                                     \
    "which ranks read asrrun's stdin: a rank, all or none, as --stdin")                                      \
  /* at most a year: a longer one is surely a unit slip (milliseconds typed as */                            \
  /* seconds), and seconds * 1000 stays far inside an int */                                                 \
  X(ASRRUN_TIMEOUT, "ASRRUN_TIMEOUT", SECONDS, 0, 31536000, NULL, "0", ASR_ENV_ASRRUN,                       \
    "abort the job after this long (0: never), as --timeout")                                                \
  X(ASRRUN_BOOTSTRAP_PORT, "ASRRUN_BOOTSTRAP_PORT", PORT, 0, 65535, NULL, "0", ASR_ENV_ASRRUN,               \
    "the job's KV server port (0: a free one), as --bootstrap-port")                                         \
  X(ASRRUN_PROVIDER, "ASRRUN_PROVIDER", STR, 0, 63, NULL, NULL, ASR_ENV_ASRRUN,                              \
    "libfabric provider for every peer, as --provider (default: none; libasr's own sm path within a host, "   \
    "tcp;ofi_rxm across hosts)")                                                                               \
  X(ASRRUN_LAUNCHER, "ASRRUN_LAUNCHER", WORD, 0, 0, ASR_ENV_WORDS("auto", "local", "rsh", "slurm"),          \
    "auto", ASR_ENV_ASRRUN, "how the host daemons are started, as --launcher")                               \
  /* not empty: the rsh backend puts the agent in front of every remote command, */                          \
  /* so an empty one is refused here rather than fail obscurely at launch */                                 \
  X(ASRRUN_LAUNCH_AGENT, "ASRRUN_LAUNCH_AGENT", CMD, 1, 1023, NULL, "ssh", ASR_ENV_ASRRUN,                   \
    "the rsh agent that starts asrd on other hosts, as --launch-agent")                                      \
  X(ASRRUN_PREFIX, "ASRRUN_PREFIX", PATH, 0, 1023, NULL, NULL, ASR_ENV_ASRRUN,                               \
    "asr's install prefix on the other hosts, as --prefix (default: asrd's path here)")                      \
  X(ASRRUN_IF_INCLUDE, "ASRRUN_IF_INCLUDE", STR, 0, 255, NULL, NULL, ASR_ENV_ASRRUN,                         \
    "interface, subnet or address for rank traffic, as --if-include")                                        \
  X(ASRRUN_HEARTBEAT_TIMEOUT, "ASRRUN_HEARTBEAT_TIMEOUT", SECONDS, 2, 3600, NULL, "10", ASR_ENV_ASRRUN,      \
    "end the job when a host is silent this long, as --heartbeat-timeout")                                   \
  /* 16 by default (tree.h): wide enough that 16 + 256 = 272 hosts are at most two hops */                   \
  /* from asrrun and 4,368 three (each level costs one agent start and one HELLO/JOB round */                \
  /* trip, its agents started in parallel by every parent), narrow enough that a parent's */                 \
  /* loop forwards for a handful of connections and starts 16 agents (ssh) at once */                        \
  X(ASRRUN_TREE_RADIX, "ASRRUN_TREE_RADIX", INT, 0, 1024, NULL, "16", ASR_ENV_ASRRUN,                        \
    "daemons each asrd starts and relays for, as --tree-radix (0: asrrun starts every one)")                 \
  X(ASRRUN_ALLOW_EARLY_EXIT, "ASRRUN_ALLOW_EARLY_EXIT", BOOL, 0, 1, NULL, "false", ASR_ENV_ASRRUN,           \
    "let a rank exit before joining or finalizing while others run, as --allow-early-exit")                  \
  X(ASRRUN_ON_FAILURE, "ASRRUN_ON_FAILURE", WORD, 0, 0, ASR_ENV_WORDS("abort", "continue", "restart"),       \
    "abort", ASR_ENV_ASRRUN,                                                                                   \
    "what a rank's death does (end the job, let it go on, restart the rank in place), as --on-failure")    \
  X(ASRRUN_MAX_RESTARTS, "ASRRUN_MAX_RESTARTS", INT, 0, 1000000, NULL, "3", ASR_ENV_ASRRUN,                   \
    "restarts the whole job may spend under --on-failure restart, as --max-restarts")                        \
  X(ASRRUN_REPORT_STATE_ON_TIMEOUT, "ASRRUN_REPORT_STATE_ON_TIMEOUT", BOOL, 0, 1, NULL, "false",             \
    ASR_ENV_ASRRUN, "print the job's state report and diagnosis before --timeout ends it, as "               \
    "--report-state-on-timeout")                                                                             \
  X(ASRRUN_GET_STACK_TRACES, "ASRRUN_GET_STACK_TRACES", BOOL, 0, 1, NULL, "false", ASR_ENV_ASRRUN,           \
    "state reports carry each running rank's stack trace (eu-stack, else gdb), as --get-stack-traces")       \
  X(ASRRUN_METRICS_PORT, "ASRRUN_METRICS_PORT", STR, 1, 63, NULL, NULL, ASR_ENV_ASRRUN,                     \
    "serve the job's counters and histograms for Prometheus on [ADDR:]PORT (0: a free port, told on "       \
    "stderr; ADDR default 127.0.0.1), as --metrics-port")                                                    \
  X(ASRRUN_QUIET, "ASRRUN_QUIET", BOOL, 0, 1, NULL, "false", ASR_ENV_ASRRUN,                                 \
    "silence asrrun's own notices (not its errors), as --quiet")                                            \
  X(ASRRUN_HOSTFILE, "ASRRUN_HOSTFILE", PATH, 0, 1023, NULL, NULL, ASR_ENV_ASRRUN,                           \
    "read the hosts from this file (one 'HOST [slots=N]' a line), as --hostfile")                            \
  /* where asrrun finds its files and programs */                                                            \
  X(SYSTEM_CONFIG, "ASR_SYSTEM_CONFIG", PATH, 0, 0, NULL, NULL, ASR_ENV_ASRRUN,                              \
    "the system settings file (default: $(sysconfdir)/asr/asrrun.yaml); set but empty: none")                \
  X(USER_CONFIG, "ASR_USER_CONFIG", PATH, 0, 0, NULL, NULL, ASR_ENV_ASRRUN,                                  \
    "the user's settings file (default: ~/.config/asr/asrrun.yaml); set but empty: none")                    \
  X(ASRD_PATH, "ASR_ASRD", PATH, 0, 4095, NULL, NULL, ASR_ENV_ASRRUN,                                        \
    "the asrd program this host runs (default: the asrd beside asrrun)")                                     \
  X(SRUN, "ASR_SRUN", CMD, 0, 0, NULL, "srun", ASR_ENV_ASRRUN,                                               \
    "the srun program that starts asrd inside a Slurm allocation")                                           \
  /* logging, in every program */                                                                            \
  X(LOG_LEVEL, "ASR_LOG_LEVEL", WORD, 0, 0, ASR_ENV_WORDS("error", "warn", "info", "debug", "trace"),        \
    "warn", ASR_ENV_ASRRUN | ASR_ENV_ASRD | ASR_ENV_LIBASR | ASR_ENV_ASRKV,                                  \
    "what is logged; a bad value makes the logger warn once and use warn (asrrun and asr_init refuse it)")   \
  X(LOG_SUBSYS, "ASR_LOG_SUBSYS", STR, 0, 0, NULL, NULL, ASR_ENV_ASRRUN | ASR_ENV_ASRD | ASR_ENV_LIBASR |    \
    ASR_ENV_ASRKV, "comma list of subsystems (kvs, svc, fab, job, env ...) whose debug and trace lines "     \
    "print (default: all)")                                                                                  \
  /* what the launcher gives every rank (asrd sets these; an application may read them) */                   \
  X(RANK, "ASR_RANK", INT, 0, ASR_ENV_MAX_NP - 1, NULL, NULL, ASR_ENV_APP | ASR_ENV_SET,                     \
    "this rank's number in the job")                                                                         \
  X(SIZE, "ASR_SIZE", INT, 1, ASR_ENV_MAX_NP, NULL, NULL, ASR_ENV_APP | ASR_ENV_SET,                         \
    "the number of ranks in the job")                                                                        \
  X(LNC, "ASR_LNC", INT, 0, 127, NULL, NULL, ASR_ENV_LIBASR | ASR_ENV_APP | ASR_ENV_SET,                     \
    "this rank's LNC on its host, for asr_job_init (default: the local rank)")                               \
  X(LOCAL_RANK, "ASR_LOCAL_RANK", INT, 0, 127, NULL, NULL, ASR_ENV_APP | ASR_ENV_SET,                        \
    "this rank's number among the ranks of its host")                                                        \
  X(LOCAL_SIZE, "ASR_LOCAL_SIZE", INT, 1, 128, NULL, NULL, ASR_ENV_LIBASR | ASR_ENV_APP | ASR_ENV_SET,       \
    "the number of ranks on this host, for asr_job_init (default: from PMIx)")                               \
  X(NUM_HOSTS, "ASR_NUM_HOSTS", INT, 1, 1024, NULL, NULL, ASR_ENV_APP | ASR_ENV_SET,                         \
    "the number of hosts in the job")                                                                        \
  X(HOST_INDEX, "ASR_HOST_INDEX", INT, 0, 1023, NULL, NULL, ASR_ENV_APP | ASR_ENV_SET,                       \
    "this host's index in the job's host list")                                                              \
  X(INCARNATION, "ASR_INCARNATION", INT, 0, 1000000, NULL, "0", ASR_ENV_LIBASR | ASR_ENV_APP | ASR_ENV_SET,  \
    "how many times the launcher restarted this rank (asrrun --on-failure restart; 0 at its first start): "  \
    "asr_job_init joins a restarted rank without the fence the others are past")                            \
  /* torchrun's names for the same (torch.distributed's env:// rendezvous); text, since asr only sets them */ \
  X(TORCH_RANK, "RANK", STR, 0, 0, NULL, NULL, ASR_ENV_APP | ASR_ENV_SET,                                    \
    "torchrun's name: ASR_RANK (asrd replaces an inherited value; -x wins)")                                 \
  X(TORCH_LOCAL_RANK, "LOCAL_RANK", STR, 0, 0, NULL, NULL, ASR_ENV_APP | ASR_ENV_SET,                        \
    "torchrun's name: ASR_LOCAL_RANK (asrd replaces an inherited value; -x wins)")                           \
  X(TORCH_WORLD_SIZE, "WORLD_SIZE", STR, 0, 0, NULL, NULL, ASR_ENV_APP | ASR_ENV_SET,                        \
    "torchrun's name: ASR_SIZE (asrd replaces an inherited value; -x wins)")                                 \
  X(TORCH_LOCAL_WORLD_SIZE, "LOCAL_WORLD_SIZE", STR, 0, 0, NULL, NULL, ASR_ENV_APP | ASR_ENV_SET,            \
    "torchrun's name: ASR_LOCAL_SIZE (asrd replaces an inherited value; -x wins)")                           \
  X(TORCH_MASTER_ADDR, "MASTER_ADDR", STR, 0, 0, NULL, NULL, ASR_ENV_APP | ASR_ENV_SET,                      \
    "rank 0's host: the ranks' address on one host, else the address or name other hosts reach it at (-x "  \
    "wins)")                                                                                                 \
  X(TORCH_MASTER_PORT, "MASTER_PORT", STR, 0, 0, NULL, NULL, ASR_ENV_APP | ASR_ENV_SET,                      \
    "a port asrrun found free for torch.distributed's store on rank 0 (not the bootstrap port; -x wins)")    \
  X(TORCH_GLOO_IFNAME, "GLOO_SOCKET_IFNAME", STR, 0, 0, NULL, NULL, ASR_ENV_APP | ASR_ENV_SET,               \
    "jobs over several hosts with --if-include: the interface of the host's address for gloo (-x wins)")     \
  X(BOOTSTRAP_PORT, "ASR_BOOTSTRAP_PORT", PORT, 1, 65535, NULL, NULL, ASR_ENV_LIBASR | ASR_ENV_SET,          \
    "the port of every host's KV server; asr_init fails without it (direct launch under srun: derived "      \
    "from the job and step ids)")                                                                            \
  X(JOB_SECRET, "ASR_JOB_SECRET", SECRET, 64, 64, NULL, NULL, ASR_ENV_LIBASR | ASR_ENV_ASRKV | ASR_ENV_SET,  \
    "the job's KV secret, which every frame carries (default: none; `asrkv secret` makes one)")              \
  X(HOSTNAME, "ASR_HOSTNAME", STR, 1, 127, NULL, NULL, ASR_ENV_LIBASR | ASR_ENV_APP | ASR_ENV_SET,           \
    "this host's name in rendezvous keys (default: PMIx's host name, else gethostname())")                   \
  X(KV_SERVER, "ASR_KV_SERVER", WORD, 0, 0, ASR_ENV_WORDS("auto", "external"), "auto",                       \
    ASR_ENV_LIBASR | ASR_ENV_SET, "auto: the processes of a host elect its KV server among themselves; "     \
    "external: asrd serves it")                                                                              \
  X(PROVIDER, "ASR_PROVIDER", STR, 0, 63, NULL, NULL, ASR_ENV_LIBASR | ASR_ENV_SET,                          \
    "one libfabric provider for every peer, shm or tcp;ofi_rxm (default: FI_PROVIDER, else a path per "     \
    "peer: libasr's own sm to the same host, tcp;ofi_rxm to others)")                                        \
  X(IF_ADDR, "ASR_IF_ADDR", IPV4, 0, 0, NULL, "127.0.0.1", ASR_ENV_LIBASR | ASR_ENV_SET,                     \
    "the local address a network provider listens on and peers reach this rank at")                          \
  X(REPORT_FD, "ASR_REPORT_FD", INT, 0, 1048575, NULL, NULL, ASR_ENV_LIBASR | ASR_ENV_SET,                   \
    "the socket asrd gives each rank for its state reports (asrrun --status, SIGQUIT, "                     \
    "--report-state-on-timeout)")                                                                            \
  /* libasr's own knobs */                                                                                   \
  X(IF_INCLUDE, "ASR_IF_INCLUDE", IFSPEC, 0, 0, NULL, NULL, ASR_ENV_LIBASR,                                  \
    "direct launch on several nodes: the interface, subnet or address ASR_IF_ADDR is taken from")            \
  X(KV_BIND, "ASR_KV_BIND", IPV4, 0, 0, NULL, NULL, ASR_ENV_LIBASR,                                          \
    "the address an elected KV server listens on (default: every address)")                                  \
  X(KV_LOCK_DIR, "ASR_KV_LOCK_DIR", PATH, 1, 400, NULL, "/tmp", ASR_ENV_LIBASR | ASR_ENV_ASRKV,              \
    "the directory of the KV election's lock files")                                                         \
  X(KV_TIMEOUT_MS, "ASR_KV_TIMEOUT_MS", MS, 1, 86399999, NULL, "120000", ASR_ENV_LIBASR | ASR_ENV_ASRKV,     \
    "deadline of a KV request and of a comm's rendezvous")                                                   \
  X(KV_IDLE_MS, "ASR_KV_IDLE_MS", MS, 1, 86399999, NULL, "2000", ASR_ENV_LIBASR,                             \
    "how long a service thread keeps a KV connection with nothing in flight before it closes it")            \
  X(DRAIN_TIMEOUT_MS, "ASR_DRAIN_TIMEOUT_MS", MS, 0, 86399999, NULL, "10000", ASR_ENV_LIBASR,                 \
    "how long closing a SEND comm or an LNC waits for the peers to take what was sent, and "                 \
    "asr_mem_deregister for them to confirm (0: no wait)")                                                   \
  X(INJECT_MAX, "ASR_INJECT_MAX", BYTES, 0, 2147483647, NULL, NULL, ASR_ENV_LIBASR,                          \
    "largest send that goes out with fi_tinject, capped at the provider's inject size (0: none; "            \
    "default: the inject size on shm, none on other providers)")                                             \
  X(SM_REGION, "ASR_SM_REGION", BYTES, 4096, 67108864, NULL, "16384", ASR_ENV_LIBASR,                      \
    "shared memory per comm on asr's own same-host path (sm), its 256-byte header and its ring, with as "  \
    "much again (at most 64 KiB) for the ring of one-sided transfers; a multiple of 64: the bound of a "      \
    "host's sm memory is about this times its comms")                                          \
  X(SM_INLINE_MAX, "ASR_SM_INLINE_MAX", BYTES, 0, 67108864, NULL, "4096", ASR_ENV_LIBASR,                     \
    "largest message the sm path copies through its ring whole; larger ones are copied once from the "       \
    "sender's memory, or pipelined through the ring (capped at half the ring)")                                 \
  X(SM_CMA, "ASR_SM_CMA", BOOL, 0, 1, NULL, "true", ASR_ENV_LIBASR,                                          \
    "false: the sm path never copies from another process's memory (process_vm_readv); large messages are "  \
    "pipelined through the ring")                                                                              \
  X(SEQ_BITS, "ASR_SEQ_BITS", INT, 8, 40, NULL, "40", ASR_ENV_LIBASR,                                        \
    "bits of the per-comm sequence number in a message's tag (tests use 8 to wrap it soon)")                 \
  X(TRACE, "ASR_TRACE", STR, 1, 4000, NULL, NULL, ASR_ENV_LIBASR | ASR_ENV_ASRD | ASR_ENV_SET,                 \
    "a directory: libasr (and asrd) write this process's trace records to a file there, for asrtrace "       \
    "merge; asrd sets it for every rank of an asrrun --trace job (unset: no trace, one branch per point)")   \
  X(TRACE_BUF, "ASR_TRACE_BUF", INT, 64, 16777216, NULL, "65536", ASR_ENV_LIBASR | ASR_ENV_ASRD,              \
    "trace records (64 bytes each) each thread keeps for its transfers and KV requests; beyond it the "       \
    "oldest go first, counted; connect spans, launch phases and failures are kept apart, never overwritten") \
  X(TRACE_KEEP, "ASR_TRACE_KEEP", INT, 64, 16777216, NULL, "65536", ASR_ENV_LIBASR | ASR_ENV_ASRD,            \
    "trace records a process keeps for connect spans, launch phases, closes and failures (beyond it they "  \
    "are dropped and counted)")                                                                                \
  X(METRICS, "ASR_METRICS", BOOL, 0, 1, NULL, "false", ASR_ENV_LIBASR | ASR_ENV_SET,                       \
    "libasr keeps the transfer-latency and connect-time histograms that asrrun --metrics-port serves; "    \
    "asrd sets it for every rank of such a job")                                                              \
  X(OFI_PSM, "ASR_OFI_PSM", BOOL, 0, 1, NULL, "false", ASR_ENV_LIBASR,                                       \
    "load the real libpsm2 and libpsm_infinipath even on a host without their adapters")                     \
  X(OFI_KALLSYMS, "ASR_OFI_KALLSYMS", BOOL, 0, 1, NULL, "false", ASR_ENV_LIBASR,                             \
    "let libfabric's verbs provider read /proc/kallsyms (about 100 ms of CPU per process)")                  \
  /* the test suite's own */                                                                                 \
  X(BUILDDIR, "ASR_BUILDDIR", PATH, 0, 0, NULL, NULL, ASR_ENV_TESTS,                                         \
    "the build tree the tests and kv_bench use (default: found from the program's path)")                    \
  X(TEST_VERBOSE, "ASR_TEST_VERBOSE", STR, 0, 0, NULL, NULL, ASR_ENV_TESTS,                                  \
    "set: test_runtime prints what the provider did where a case observes it; test_peer_kill, each kill")    \
  X(TEST_REPORT, "ASR_TEST_REPORT", WORD, 0, 0, ASR_ENV_WORDS("answer", "exit", "mute"), "answer",          \
    ASR_ENV_TESTS, "what libasr's report thread does when asked: answer; exit (the process, status 3); "   \
    "mute (never answers)")                                                                                  \
  X(TEST_ONLY_PROVIDER, "ASR_TEST_ONLY_PROVIDER", STR, 0, 0, NULL, NULL, ASR_ENV_TESTS,                      \
    "run the runtime tests on this provider only")                                                           \
  X(LONG, "ASR_LONG", BOOL, 0, 1, NULL, "false", ASR_ENV_TESTS,                                             \
    "run the test suite's long tier too: soaks, long stalls, large emulations (scripts/test.sh)")          \
  X(TEST_KILLS, "ASR_TEST_KILLS", INT, 1, 8001, NULL, NULL, ASR_ENV_TESTS,                                  \
    "test_peer_kill's default-tier cases kill this many peers per path instead of 50 "                       \
    "(tests/bench/kill_bench.sh)")                                                                           \
  X(TEST_SEED, "ASR_TEST_SEED", STR, 0, 0, NULL, NULL, ASR_ENV_TESTS,                                        \
    "test_peer_kill: the seed of its random sizes, delays and directions, to replay a run (default: "        \
    "from the clock; each case prints the one it used)")                                                     \
  X(TEST_OFI_FAIL, "ASR_TEST_OFI_FAIL", STR, 0, 0, NULL, NULL, ASR_ENV_TESTS,                                \
    "debug builds: this step of opening an LNC's endpoint fails (test_runtime ofi_open_unwinds)")            \
  X(SLURM_TEST, "ASR_SLURM_", STR, 0, 0, NULL, NULL, ASR_ENV_TESTS | ASR_ENV_FAMILY,                         \
    "the Slurm test cluster's settings and client environment (tests/slurm/cluster.sh)")
/* clang-format on */

/* Other names of a row's variable, read when the row's own name is unset or
 * empty: X(ID, ALIAS, DOC). */
#define ASR_ENV_ALIASES(X) \
  X(BOOTSTRAP_PORT, "NEURON_RT_ASYNC_SENDRECV_BOOTSTRAP_PORT", "the seed's name for the bootstrap port")

typedef enum {
#define ASR__ENV_ENUM(id, ...) ASR_ENV_##id,
  ASR_ENV_ROWS(ASR__ENV_ENUM)
#undef ASR__ENV_ENUM
      ASR_ENV__COUNT
} asr_env_id_t;

/* How a value is read. The integer types differ only in how --list-env
 * names them; STR, PATH and CMD only in that too. */
typedef enum {
  ASR_ENV_T_INT,     /* a plain decimal number in [min, max] */
  ASR_ENV_T_PORT,    /* a TCP port number in [min, max] */
  ASR_ENV_T_MS,      /* milliseconds in [min, max] */
  ASR_ENV_T_SECONDS, /* seconds in [min, max] */
  ASR_ENV_T_BYTES,   /* a byte count in [min, max] */
  ASR_ENV_T_BOOL,    /* 1/0, true/false, yes/no, on/off (any case) */
  ASR_ENV_T_WORD,    /* one of words[] (exactly), read as its index */
  ASR_ENV_T_STR,     /* text of min..max bytes (max 0: any length) */
  ASR_ENV_T_PATH,    /* a file or directory, as STR */
  ASR_ENV_T_CMD,     /* a program (a name looked up in PATH, or a path), as STR */
  ASR_ENV_T_IPV4,    /* a dotted-quad IPv4 address */
  ASR_ENV_T_IFSPEC,  /* an interface name, A.B.C.D/N or A.B.C.D (asr_netif.h) */
  ASR_ENV_T_SECRET,  /* exactly min hex digits */
} asr_env_type_t;

/* Who reads a variable (the WHO column), and two flags. */
typedef enum {
  ASR_ENV_ASRRUN = 1 << 0, /* the launcher's front end */
  ASR_ENV_ASRD = 1 << 1,   /* the host daemon */
  ASR_ENV_LIBASR = 1 << 2, /* the runtime library, in every rank */
  ASR_ENV_ASRKV = 1 << 3,  /* the KV admin CLI */
  ASR_ENV_APP = 1 << 4,    /* the ranks' own code: an application may read it */
  ASR_ENV_TESTS = 1 << 5,  /* the test suite only */
  ASR_ENV_SET = 1 << 6,    /* flag: asrd sets it in every rank's environment */
  ASR_ENV_FAMILY = 1 << 7, /* flag: NAME is a prefix; every variable that starts with it is this row */
} asr_env_who_t;

typedef struct {
  asr_env_id_t id;
  const char *name;
  asr_env_type_t type;
  long min, max;
  const char *const *words; /* WORD: NULL-ended; else NULL */
  const char *dflt;         /* NULL: no default */
  unsigned who;             /* asr_env_who_t bits */
  const char *doc;
} asr_env_row_t;

/* The row of id (never NULL for an id of the enum). */
const asr_env_row_t *asr_env_row(asr_env_id_t id);

/* The row's alias (ASR_ENV_ALIASES), or NULL. */
const char *asr_env_alias(asr_env_id_t id);

/* The row whose name (or alias, or family prefix) is name, or NULL. name may
 * be "NAME=value" (an environ entry): the part before '=' counts. */
const asr_env_row_t *asr_env_find(const char *name);

/* The variable's value as the environment holds it: the row's name, else
 * its alias; NULL when neither is set. Empty strings are returned as they
 * are: only ASR_SYSTEM_CONFIG and ASR_USER_CONFIG give them a meaning. */
const char *asr_env_raw(asr_env_id_t id);

/* Whether the variable is set to a non-empty value (under its name or alias). */
int asr_env_is_set(asr_env_id_t id);

/*
 * The typed getters. Each returns 0 with *out set to the value, or to the
 * row's default when the variable is unset or empty (0, or NULL for text,
 * when the row has no default); or ASR_ECONFIG with errbuf saying
 * "NAME: 'VALUE' is not ... : use ...", and *out untouched. Calling a getter
 * of the wrong type for the row is a bug: ASR_EINVAL and a message.
 *   asr_env_int   INT, PORT, MS, SECONDS, BYTES
 *   asr_env_bool  BOOL (0 or 1)
 *   asr_env_word  WORD (the index of the word in WORDS)
 *   asr_env_str   STR, PATH, CMD, IPV4, IFSPEC, SECRET: a checked string
 *                 owned by the environment (valid until it changes)
 * Thread-safe as far as getenv() is: the caller must not change the
 * environment meanwhile.
 */
int asr_env_int(asr_env_id_t id, long *out, char *errbuf, size_t errlen);
int asr_env_bool(asr_env_id_t id, int *out, char *errbuf, size_t errlen);
int asr_env_word(asr_env_id_t id, int *out, char *errbuf, size_t errlen);
int asr_env_str(asr_env_id_t id, const char **out, char *errbuf, size_t errlen);

/* Checks the variable's value, when it is set, against its row: 0 or
 * ASR_ECONFIG with errbuf, as the getters. */
int asr_env_check(asr_env_id_t id, char *errbuf, size_t errlen);

/* Checks val (non-empty) as a value of id would be checked, naming it what
 * in the message: 0 or ASR_ECONFIG with errbuf. asrrun checks the values it
 * exports to the ranks with it (-x ASR_SEQ_BITS=8). */
int asr_env_check_value(asr_env_id_t id, const char *what, const char *val, char *errbuf, size_t errlen);

/* Checks every row read by one of who's readers that is set (0 for every
 * row). Returns 0, or the first row's ASR_ECONFIG and message. asrrun checks
 * all of them, since ranks and daemons inherit its environment; asr_init and
 * asr_job_init check libasr's. */
int asr_env_check_all(unsigned who, char *errbuf, size_t errlen);

/* Calls fn for every variable of envp named ASR_* or ASRRUN_* that is no
 * row, alias or family, with its name and, when one row is close to it (the
 * same name under the other prefix, the one row whose name starts with it,
 * or the one row one or two letters off), that row's name as near (else
 * NULL). Returns how many there were. */
int asr_env_each_unknown(char *const *envp, void (*fn)(void *arg, const char *name, const char *near),
                         void *arg);

/* Logs a warning for every unknown ASR_* variable of this process's
 * environment, the first time it is called in the process (libasr calls it
 * in asr_init and asr_job_init). */
void asr_env_warn_unknown_once(void);

/* Prints the table: one entry per row and alias, as text (--list-env) or as
 * a Markdown table (--list-env=markdown, the README's copy). */
void asr_env_print(FILE *f, int markdown);

/* Prints, as man(7) text (a .TP entry each, with its aliases), the rows that
 * one of who's readers reads: the man pages' ENVIRONMENT sections
 * (doc/man_env.c fills them in at build time). */
void asr_env_print_man(FILE *f, unsigned who);

/*
 * The value parsers, one per kind of value: the getters use them, and so do
 * asrrun's YAML and command-line layers (launcher/config/config.c), so a setting
 * fails with the same words wherever it was written. what names where the
 * value came from ("ASRRUN_NP", "-n", "job.yaml:3: np") and starts the
 * message. Each returns 0 with *out, or ASR_ECONFIG with errbuf.
 */
int asr_env_parse_long(const char *what, const char *val, long min, long max, long *out, char *errbuf,
                       size_t errlen);
int asr_env_parse_bool(const char *what, const char *val, int *out, char *errbuf, size_t errlen);
int asr_env_parse_word(const char *what, const char *val, const char *const *words, int *out, char *errbuf,
                       size_t errlen);
/* Text of min..max bytes (max 0: any). */
int asr_env_parse_text(const char *what, const char *val, long min, long max, char *errbuf, size_t errlen);

/* Joins words into "a, b, c" (for messages and the table). */
void asr_env_join_words(const char *const *words, char *buf, size_t len);

#endif /* ASR_ENV_H */
