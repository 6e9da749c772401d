/*
 * hostlist.h -- the host lists that batch systems hand to a job: Slurm's
 * compressed host lists ("node[01-04,07]") and tasks-per-node strings
 * ("4(x2),1"), and PBS/Torque's $PBS_NODEFILE. Pure parsing: nothing here
 * reads the environment (alloc.h does) or touches asrrun's configuration.
 *
 * Every function returns 0 or a negative ASR_E* code (common/asr_err.h) with
 * errbuf (which may be NULL/0) saying what was wrong and naming the input:
 *   ASR_EINVAL   malformed input
 *   ASR_ETOOBIG  more than ASR_HOSTLIST_MAX hosts or counts, a number too
 *                large, or a host name longer than ASR_HOSTLIST_NAME_MAX
 *   ASR_ENOMEM   out of memory
 *   ASR_ENOENT, ASR_EPERM, ASR_EIO  the node file cannot be opened or read
 *   (ASR_ETOOBIG also: a node file over ASR_HOSTLIST_FILE_MAX bytes)
 * On failure the output is left empty (nothing to free).
 */
#ifndef ASR_LAUNCHER_HOSTLIST_H
#define ASR_LAUNCHER_HOSTLIST_H

#include <stddef.h>

/* The most hosts one list may expand to, and the most counts a tasks string
 * may give (Slurm's own limit on one range is 64k). */
#define ASR_HOSTLIST_MAX 65536

/* The longest host name an expansion may produce (a DNS name is at most 253). */
#define ASR_HOSTLIST_NAME_MAX 255

/* The largest node file read. A node file has a line per slot: 1024 hosts
 * (asrrun's most) of 256 slots with 64-byte names take 16 MiB, so this only
 * keeps a wrong path (/dev/zero) from taking all memory. */
#define ASR_HOSTLIST_FILE_MAX (64 << 20)

/* A list of hosts with a count each. */
typedef struct {
  char **name; /* n malloc'd names, in order */
  int *slots;  /* n counts: PBS slots (lines naming the host); 0 from a Slurm host list */
  int n;
  int cap; /* allocated entries */
} asr_nodelist_t;

/* Frees nl's names and arrays and empties it (safe on an emptied or zeroed one). */
void asr_nodelist_free(asr_nodelist_t *nl);

/* Expands a Slurm host list into out (which must be zeroed or freed), in
 * Slurm's order. Items are separated by commas outside brackets; an item is
 * literal text and bracket groups of comma-separated numbers and LO-HI
 * ranges: "n[1-3]" -> n1 n2 n3, "node[01-04,07]" -> node01 .. node04 node07
 * (numbers are zero-padded to the width of the range's first number), and
 * "r[1-2]-n[1-2]" -> r1-n1 r1-n2 r2-n1 r2-n2 (the cartesian product, the
 * last group varying fastest). Names are not otherwise checked here.
 * what names the input in messages ("SLURM_JOB_NODELIST"); NULL means
 * "Slurm host list". */
int asr_slurm_hostlist_expand(const char *list, const char *what, asr_nodelist_t *out, char *errbuf,
                              size_t errlen);

/* Expands a Slurm tasks-per-node string ($SLURM_TASKS_PER_NODE, and the same
 * form of $SLURM_JOB_CPUS_PER_NODE): comma-separated COUNT or COUNT(xREPEAT),
 * so "2(x3)" -> 2 2 2 and "4(x2),1" -> 4 4 1. Counts and repeats are 1 to
 * ASR_HOSTLIST_MAX, and there are at most ASR_HOSTLIST_MAX counts in all.
 * *counts gets a malloc'd array of *ncounts entries (the caller frees it).
 * what names the input in messages; NULL means "Slurm tasks per node". */
int asr_slurm_tasks_expand(const char *spec, const char *what, int **counts, int *ncounts, char *errbuf,
                           size_t errlen);

/* Checks that a tasks-per-node string gave one count per node: returns 0, or
 * ASR_EINVAL with a message naming both inputs (tasks_what, nodes_what). */
int asr_slurm_tasks_check(const char *tasks_what, int ncounts, const char *nodes_what, int nnodes,
                          char *errbuf, size_t errlen);

/* Reads a PBS/Torque node file into out (which must be zeroed or freed): one
 * host name a line, a host on N lines having N slots; hosts in the order of
 * their first line; blank lines and the white space around a name ignored.
 * A line with two words or a NUL byte, or a file with no host, is an error
 * naming the path (and the line). */
int asr_pbs_nodefile_read(const char *path, asr_nodelist_t *out, char *errbuf, size_t errlen);

/* The parser behind asr_pbs_nodefile_read: the node file's text is
 * buf[0..len) (no NUL needed) and name stands for its path in messages. */
int asr_pbs_nodefile_parse(const char *name, const void *buf, size_t len, asr_nodelist_t *out, char *errbuf,
                           size_t errlen);

#endif /* ASR_LAUNCHER_HOSTLIST_H */
