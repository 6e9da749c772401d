/*
 * test_mpi.c -- third-party MPI programs under asrrun, with no flag: Open
 * MPI (Debian's 4.1, a PMIx client of asrd's PMIx server) and MPICH
 * (Debian's 4.0, a client of asrd's simple PMI-1 wire protocol on PMI_FD).
 *
 * Each case builds tests/apps/mpi/mpi_job.c with that MPI's compiler
 * (mpicc.openmpi, mpicc.mpich) into its private directory -- a missing
 * compiler is a visible SKIP, never a pass -- and runs it as one job of up
 * to 8 ranks on this host: hello with rank and size, a ring, an allreduce
 * whose sum proves every rank is in one job, MPI_Abort's code as asrrun's
 * exit code, a rank that fails while the others wait in a barrier; nothing
 * of the job may be left behind. Then: the user's own setting of a
 * variable asrd sets for Open MPI wins; more ranks than cores make Open
 * MPI's ranks yield while they poll; -v tells a PMIx rank, a PMI rank
 * and a rank that never joined apart; a PMI rank counts as joined for the
 * early-exit rule; and the PMI server survives malformed and oversized
 * commands (a shell script speaking the wire protocol by hand). Last, PMI-2:
 * tests/apps/mpi/pmi2_job.c built against Slurm's PMI-2 client library
 * (a visible SKIP without it) for init, puts and gets across a fence, node
 * and job attributes and abort, and the PMI-2 wire by hand.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "asr_test.h"
#include "job_util.h"

/* --- the MPIs ---------------------------------------------------------------------- */

typedef struct {
  const char *name; /* in messages */
  const char *cc;   /* its compiler wrapper, searched in PATH */
  const char *pkgs; /* the Debian packages that bring it (scripts/deps.sh) */
} mpi_t;

static const mpi_t OMPI = {"Open MPI", "mpicc.openmpi", "openmpi-bin libopenmpi-dev"};
static const mpi_t MPICH = {"MPICH", "mpicc.mpich", "mpich libmpich-dev"};

/* Whether prog is an executable in PATH. */
static int in_path(const char *prog) {
  const char *path = getenv("PATH");
  char *copy = strdup(path ? path : "/usr/bin:/bin"), *p = copy, *dir;
  int found = 0;
  while (!found && (dir = strsep(&p, ":"))) found = access(fmt("%s/%s", *dir ? dir : ".", prog), X_OK) == 0;
  free(copy);
  return found;
}

/* Builds tests/apps/mpi/mpi_job.c with mpi's compiler into the case's
 * directory and returns the program's path; SKIPs when the compiler is not
 * installed. Also keeps the MPIs' own traffic on loopback. */
static const char *build_job(const mpi_t *mpi) {
  if (!in_path(mpi->cc))
    SKIP("%s not found: %s is not installed (scripts/deps.sh installs %s)", mpi->cc, mpi->name, mpi->pkgs);
  const char *out = fmt("%s/mpi_job.%s", W.dir, mpi == &OMPI ? "openmpi" : "mpich");
  const char *src = ASR_TOP_SRCDIR "/tests/apps/mpi/mpi_job.c";
  const char *log = fmt("%s/build.log", W.dir);
  int rc = system(fmt("%s -O1 -o '%s' '%s' >'%s' 2>&1", mpi->cc, out, src, log));
  char *text = read_file(log, NULL);
  ASSERT_MSG(rc == 0, "%s could not build %s: %s", mpi->cc, src, text ? text : "");
  free(text);
  setenv("OMPI_MCA_btl_tcp_if_include", "lo", 1);
  setenv("OMPI_MCA_oob_tcp_if_include", "lo", 1);
  return out;
}

/* Checks that the job's stdout holds exactly one line per rank of n,
 * tagged with its rank, and that each says fmt_line (a format with the
 * rank, then n) -- e.g. "hello %d of %d". */
static void expect_per_rank(job_t *j, int n, const char *line_fmt) {
  char *copy = strdup(j->out);
  int nl;
  char **lines = split_lines(copy, &nl);
  int seen[64] = {0}, count = 0;
  for (int i = 0; i < nl; i++) {
    if (!lines[i][0]) continue;
    const char *rest;
    int tag = tag_of(lines[i], &rest);
    if (tag < 0 || tag >= n) JOB_FAIL(j, "line '%s' is not tagged with a rank of %d", lines[i], n);
    char *want = fmt(line_fmt, tag, n);
    if (strcmp(rest, want) != 0) JOB_FAIL(j, "rank %d said '%s', expected '%s'", tag, rest, want);
    free(want);
    if (seen[tag]++) JOB_FAIL(j, "rank %d spoke twice", tag);
    count++;
  }
  if (count != n) JOB_FAIL(j, "%d lines, expected one from each of %d ranks", count, n);
  free(lines);
  free(copy);
}

/* --- one job of each kind, for either MPI ------------------------------------------ */

static void hello(const mpi_t *mpi, int n) {
  setup();
  const char *prog = build_job(mpi);
  job_t j;
  RUN(&j, 60000, "--timeout", "50", "-n", fmt("%d", n), prog, "hello");
  ASSERT_CODE(&j, 0);
  expect_per_rank(&j, n, "hello %d of %d");
  ASSERT_NO_LEFTOVERS(NULL, 2000);
  assert_tmpdir_clean();
  teardown();
}

static void ring(const mpi_t *mpi, int n) {
  setup();
  const char *prog = build_job(mpi);
  job_t j;
  RUN(&j, 60000, "--timeout", "50", "-n", fmt("%d", n), prog, "ring");
  ASSERT_CODE(&j, 0);
  /* 1 + (2 + ... + n): every rank added its share once */
  char *want = fmt("[0] ring %d sum %d\n", n, n * (n + 1) / 2);
  if (strcmp(j.out, want) != 0) JOB_FAIL(&j, "expected exactly '%s'", want);
  ASSERT_NO_LEFTOVERS(NULL, 2000);
  teardown();
}

static void allreduce(const mpi_t *mpi, int n) {
  setup();
  const char *prog = build_job(mpi);
  job_t j;
  RUN(&j, 60000, "--timeout", "50", "-n", fmt("%d", n), prog, "allreduce");
  ASSERT_CODE(&j, 0);
  expect_per_rank(&j, n, fmt("allreduce %%d of %%d sum %d", n * (n + 1) / 2));
  ASSERT_NO_LEFTOVERS(NULL, 2000);
  teardown();
}

/* The last rank of n calls MPI_Abort(code) (abort) or exits code (fail)
 * while the others wait in a barrier: asrrun exits code, names the rank,
 * and kills the rest. */
/* Files in /dev/shm whose names start with prefix. */
static int shm_files(const char *prefix) {
  DIR *d = opendir("/dev/shm");
  int n = 0;
  struct dirent *e;
  while (d && (e = readdir(d)))
    if (!strncmp(e->d_name, prefix, strlen(prefix))) n++;
  if (d) closedir(d);
  return n;
}

static void rank_ends_job(const mpi_t *mpi, int n, const char *mode, int code) {
  setup();
  const char *prog = build_job(mpi);
  int vader0 = shm_files("vader_segment.");
  job_t j;
  RUN(&j, 60000, "--timeout", "50", "-n", fmt("%d", n), prog, mode, fmt("%d", code));
  ASSERT_CODE(&j, code);
  if (count_substr(j.out, "ready ") != n) JOB_FAIL(&j, "not every rank passed the first barrier");
  ASSERT_JOB(&j, strstr(j.err, fmt("rank %d", n - 1)) != NULL);
  if (!strcmp(mode, "abort")) ASSERT_JOB(&j, strstr(j.err, "abort") != NULL);
  ASSERT_NO_LEFTOVERS(NULL, 5000);
  assert_tmpdir_clean();
  /* killed ranks leave Open MPI's shared-memory segments: in asrd's own
   * directory, removed with it, not in /dev/shm (at 30f9a8f they stayed) */
  int vader1 = shm_files("vader_segment.");
  ASSERT_MSG(vader1 <= vader0, "%d vader segment(s) left in /dev/shm", vader1 - vader0);
  teardown();
}

TEST_TIMEOUT(openmpi_hello_4, 90) { hello(&OMPI, 4); }
TEST_TIMEOUT(openmpi_ring_8, 90) { ring(&OMPI, 8); }
TEST_TIMEOUT(openmpi_allreduce_8, 90) { allreduce(&OMPI, 8); }
TEST_TIMEOUT(openmpi_abort_code, 90) { rank_ends_job(&OMPI, 4, "abort", 7); }
TEST_TIMEOUT(openmpi_failing_rank, 90) { rank_ends_job(&OMPI, 4, "fail", 5); }
TEST_TIMEOUT(mpich_hello_4, 90) { hello(&MPICH, 4); }
TEST_TIMEOUT(mpich_ring_8, 90) { ring(&MPICH, 8); }
TEST_TIMEOUT(mpich_allreduce_8, 90) { allreduce(&MPICH, 8); }
TEST_TIMEOUT(mpich_abort_code, 90) { rank_ends_job(&MPICH, 4, "abort", 7); }
TEST_TIMEOUT(mpich_failing_rank, 90) { rank_ends_job(&MPICH, 4, "fail", 5); }

/* A user who sets a variable that asrd sets for Open MPI gets theirs: with
 * the orte schizo forced back on, every rank is a singleton again. */
TEST_TIMEOUT(openmpi_user_setting_wins, 90) {
  setup();
  const char *prog = build_job(&OMPI);
  job_t j;
  RUN(&j, 60000, "--timeout", "50", "-n", "2", "-x", "OMPI_MCA_schizo=orte", prog, "hello");
  ASSERT_CODE(&j, 0);
  ASSERT_EQ(count_substr(j.out, "hello 0 of 1"), 2);
  ASSERT_NO_LEFTOVERS(NULL, 2000);
  teardown();
}

/* More ranks than cores: Open MPI's ranks yield the processor while they
 * poll, as under its own mpirun (which sets mpi_oversubscribe then); with
 * a core each they spin; and the user's own mpi_yield_when_idle decides
 * over asrd's setting. The value is the one the rank's Open MPI holds (its
 * MPI_T control variable). */
TEST_TIMEOUT(openmpi_yields_when_oversubscribed, 120) {
  setup();
  const char *prog = build_job(&OMPI);
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  if (cpus < 1 || cpus > 31)
    SKIP("%ld CPUs: oversubscribing them takes more ranks than this case runs", cpus);
  int over = (int)cpus + 1;
  job_t j;
  RUN(&j, 60000, "--timeout", "50", "-n", "1", prog, "cvar", "mpi_yield_when_idle");
  ASSERT_CODE(&j, 0);
  expect_per_rank(&j, 1, "cvar mpi_yield_when_idle %d of %d = 0");
  free(j.out), free(j.err);
  RUN(&j, 60000, "--timeout", "50", "-n", fmt("%d", over), prog, "cvar", "mpi_yield_when_idle");
  ASSERT_CODE(&j, 0);
  expect_per_rank(&j, over, "cvar mpi_yield_when_idle %d of %d = 1");
  free(j.out), free(j.err);
  RUN(&j, 60000, "--timeout", "50", "-n", fmt("%d", over), "-x", "OMPI_MCA_mpi_yield_when_idle=0", prog,
      "cvar", "mpi_yield_when_idle");
  ASSERT_CODE(&j, 0);
  expect_per_rank(&j, over, "cvar mpi_yield_when_idle %d of %d = 0");
  ASSERT_NO_LEFTOVERS(NULL, 2000);
  teardown();
}

/* -v says, for each rank, how it joined the job: through PMIx, through
 * PMI-1, or not at all (a singleton to its MPI, or no MPI program). */
TEST_TIMEOUT(verbose_tells_how_ranks_joined, 120) {
  setup();
  const char *ompi = build_job(&OMPI);
  job_t j;
  RUN(&j, 60000, "--timeout", "50", "-v", "-n", "2", ompi, "hello");
  ASSERT_CODE(&j, 0);
  ASSERT_EQ(count_substr(j.err, "joined the job through PMIx and finalized"), 2);
  RUN(&j, 60000, "--timeout", "50", "-v", "-n", "2", "-x", "OMPI_MCA_schizo=orte", ompi, "hello");
  ASSERT_CODE(&j, 0);
  ASSERT_EQ(count_substr(j.err, "never joined the job"), 2);
  const char *mpich = build_job(&MPICH);
  RUN(&j, 60000, "--timeout", "50", "-v", "-n", "2", mpich, "hello");
  ASSERT_CODE(&j, 0);
  ASSERT_EQ(count_substr(j.err, "joined the job through PMI-1 and finalized"), 2);
  RUN(&j, 60000, "--timeout", "50", "-v", "-n", "2", "true");
  ASSERT_CODE(&j, 0);
  ASSERT_EQ(count_substr(j.err, "never joined the job"), 2);
  ASSERT_NO_LEFTOVERS(NULL, 2000);
  teardown();
}

/* --- the PMI-1 wire protocol by hand ------------------------------------------------ */

/* A bash script that speaks PMI-1 on PMI_FD; say LINE sends a command and
 * prints the reply. */
static const char *pmi_script(const char *body) {
  const char *path = fmt("%s/pmi.sh", W.dir);
  write_file(path,
             fmt("#!/bin/bash\n"
                 "say() { printf '%%s\\n' \"$1\" >&\"$PMI_FD\"; IFS= read -r reply <&\"$PMI_FD\" || "
                 "reply=EOF; echo \"$reply\"; }\n%s",
                 body),
             0755);
  return path;
}

/* Malformed, unknown and oversized commands get an error reply and the
 * connection goes on; then a whole PMI-1 life: init, maxes, kvsname, put,
 * barrier, get (the rank's own key and its peer's), finalize. */
TEST_TIMEOUT(pmi_wire_by_hand, 60) {
  setup();
  const char *script = pmi_script(
      "[ -n \"$PMI_FD\" ] && [ -n \"$PMI_RANK\" ] && [ -n \"$PMI_SIZE\" ] || { echo no PMI env; exit 3; }\n"
      "if [ \"$PMI_RANK\" = 0 ]; then\n"
      "  say 'garbage without equals'\n"
      "  say 'cmd=no_such_command a=b'\n"
      "  say '=oops'\n"
      "  say \"cmd=put key=$(head -c 100000 /dev/zero | tr '\\0' k) value=v\"\n"
      "fi\n"
      "say 'cmd=init pmi_version=1 pmi_subversion=1'\n"
      "say 'cmd=get_maxes'\n"
      "say 'cmd=get_appnum'\n"
      "say 'cmd=get_universe_size'\n"
      "say 'cmd=get_my_kvsname'\n"
      "kvs=${reply#*kvsname=}\n"
      "say \"cmd=put kvsname=$kvs key=k$PMI_RANK value=v$PMI_RANK\"\n"
      "say 'cmd=barrier_in'\n"
      "say \"cmd=get kvsname=$kvs key=k$(( (PMI_RANK + 1) % PMI_SIZE ))\"\n"
      "say \"cmd=get kvsname=$kvs key=missing\"\n"
      "say \"cmd=get kvsname=$kvs key=PMI_process_mapping\"\n"
      "say 'cmd=finalize'\n");
  job_t j;
  RUN(&j, 30000, "--timeout", "25", "-n", "2", script);
  ASSERT_CODE(&j, 0);
  const char *o = j.out;
  /* the bad ones: an error each, and the connection goes on */
  ASSERT_EQ(count_substr(o, "[0] cmd=error rc=-1"), 3);
  ASSERT_JOB(&j, strstr(o, "[0] cmd=put_result rc=-1") != NULL); /* the 100 kB line */
  for (int r = 0; r < 2; r++) {
    ASSERT_JOB(&j, strstr(o, fmt("[%d] cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0", r)));
    ASSERT_JOB(&j, strstr(o, fmt("[%d] cmd=maxes kvsname_max=", r)));
    ASSERT_JOB(&j, strstr(o, fmt("[%d] cmd=appnum appnum=0", r)));
    ASSERT_JOB(&j, strstr(o, fmt("[%d] cmd=universe_size size=2", r)));
    ASSERT_JOB(&j, strstr(o, fmt("[%d] cmd=my_kvsname kvsname=", r)));
    ASSERT_JOB(&j, strstr(o, fmt("[%d] cmd=put_result rc=0", r)));
    ASSERT_JOB(&j, strstr(o, fmt("[%d] cmd=barrier_out", r)));
    ASSERT_JOB(&j, strstr(o, fmt("[%d] cmd=get_result rc=0 msg=success value=v%d", r, (r + 1) % 2)));
    ASSERT_JOB(&j, strstr(o, fmt("[%d] cmd=get_result rc=-1", r)));
    ASSERT_JOB(&j, strstr(o, fmt("[%d] cmd=get_result rc=0 msg=success value=(vector,(0,1,2))", r)));
    ASSERT_JOB(&j, strstr(o, fmt("[%d] cmd=finalize_ack", r)));
  }
  ASSERT_NO_LEFTOVERS(NULL, 2000);
  teardown();
}

/* A PMI rank that joined and exits 0 without finalizing while another still
 * runs ends the job (the early-exit rule, as for PMIx ranks); one that
 * finalized first does not. PMI's abort carries its code to asrrun. */
TEST_TIMEOUT(pmi_rank_joins_and_aborts, 60) {
  setup();
  const char *script = pmi_script(
      "say 'cmd=init pmi_version=1 pmi_subversion=1'\n"
      "if [ \"$PMI_RANK\" = 0 ]; then exit 0; fi\n"
      "sleep 20\n");
  job_t j;
  RUN(&j, 30000, "--timeout", "25", "-n", "2", script);
  if (j.ms > 15000) JOB_FAIL(&j, "the job ran on for %llu ms", (unsigned long long)j.ms);
  ASSERT_JOB(&j, j.code != 0);
  ASSERT_CONTAINS(j.err, "without finalizing");
  ASSERT_NO_LEFTOVERS(NULL, 5000);
  script = pmi_script(
      "say 'cmd=init pmi_version=1 pmi_subversion=1'\n"
      "if [ \"$PMI_RANK\" = 0 ]; then say 'cmd=finalize'; exit 0; fi\n"
      "sleep 1\n"
      "printf 'cmd=abort exitcode=9 message=it is over\\n' >&\"$PMI_FD\"\n"
      "sleep 20\n");
  RUN(&j, 30000, "--timeout", "25", "-n", "2", script);
  ASSERT_CODE(&j, 9);
  ASSERT_CONTAINS(j.err, "it is over");
  ASSERT_NO_LEFTOVERS(NULL, 5000);
  teardown();
}

/* --- PMI-2: Slurm's client library, and the wire by hand --------------------------- */

/* Builds tests/apps/mpi/pmi2_job.c against Slurm's PMI-2 client library
 * (<slurm/pmi2.h>, -lpmi2) into the case's directory; SKIPs when it is not
 * installed. */
static const char *build_pmi2_job(void) {
  if (access("/usr/include/slurm/pmi2.h", R_OK) != 0)
    SKIP(
        "<slurm/pmi2.h> not found: Slurm's PMI-2 client library is not installed (scripts/deps.sh --test "
        "installs libpmi2-0-dev)");
  const char *out = fmt("%s/pmi2_job", W.dir);
  const char *src = ASR_TOP_SRCDIR "/tests/apps/mpi/pmi2_job.c";
  const char *log = fmt("%s/build.log", W.dir);
  int rc = system(fmt("cc -O1 -o '%s' '%s' -lpmi2 >'%s' 2>&1", out, src, log));
  char *text = read_file(log, NULL);
  ASSERT_MSG(rc == 0, "cc could not build %s against libpmi2: %s", src, text ? text : "");
  free(text);
  return out;
}

static void pmi2_case(int n, const char *mode, const char *line_fmt) {
  setup();
  const char *prog = build_pmi2_job();
  job_t j;
  RUN(&j, 60000, "--timeout", "50", "-n", fmt("%d", n), prog, mode);
  ASSERT_CODE(&j, 0);
  expect_per_rank(&j, n, line_fmt);
  ASSERT_NO_LEFTOVERS(NULL, 2000);
  assert_tmpdir_clean();
  teardown();
}

/* PMI2_Init's rank, size and appnum; puts with ';' in their values, a
 * fence and every rank's key got back; a node attribute that all but one
 * rank wait for; a key nobody put is a failed get. */
TEST_TIMEOUT(pmi2_hello_4, 90) { pmi2_case(4, "hello", "hello %d of %d appnum 0 spawned 0"); }
TEST_TIMEOUT(pmi2_exchange_8, 90) { pmi2_case(8, "exchange", "exchange %d of %d ok"); }
TEST_TIMEOUT(pmi2_missing_key, 90) { pmi2_case(3, "missing", "missing %d of %d: get failed"); }

TEST_TIMEOUT(pmi2_node_and_job_attributes, 90) {
  setup();
  const char *prog = build_pmi2_job();
  job_t j;
  RUN(&j, 60000, "--timeout", "50", "-n", "4", prog, "nodeattr");
  ASSERT_CODE(&j, 0);
  for (int r = 0; r < 4; r++) ASSERT_JOB(&j, strstr(j.out, fmt("[%d] nodeattr %d got hi-from-0\n", r, r)));
  free(j.out), free(j.err);
  RUN(&j, 60000, "--timeout", "50", "-n", "4", prog, "jobattr");
  ASSERT_CODE(&j, 0);
  ASSERT_CONTAINS(j.out, "[0] jobattr PMI_process_mapping=(vector,(0,1,4))\n");
  ASSERT_NO_LEFTOVERS(NULL, 2000);
  teardown();
}

/* PMI2_Abort ends the job (PMI-2 carries no code: the client exits 1), its
 * message on asrrun's stderr; -v says the ranks joined through PMI-2. */
TEST_TIMEOUT(pmi2_abort_and_verbose, 90) {
  setup();
  const char *prog = build_pmi2_job();
  job_t j;
  RUN(&j, 60000, "--timeout", "50", "-n", "3", prog, "abort");
  ASSERT_CODE(&j, 1);
  ASSERT_CONTAINS(j.err, "rank 2 on host");
  ASSERT_CONTAINS(j.err, "pmi2_job aborts the job");
  ASSERT_NO_LEFTOVERS(NULL, 5000);
  assert_tmpdir_clean();
  free(j.out), free(j.err);
  RUN(&j, 60000, "--timeout", "50", "-v", "-n", "2", prog, "hello");
  ASSERT_CODE(&j, 0);
  ASSERT_EQ(count_substr(j.err, "joined the job through PMI-2 and finalized"), 2);
  ASSERT_NO_LEFTOVERS(NULL, 2000);
  teardown();
}

/* The PMI-2 wire by hand: a PMI-1 init asking for version 2, then frames.
 * Commands before fullinit, a fullinit for another rank, garbage, unknown
 * commands, an oversized key and an oversized frame each get a failure
 * and the connection goes on; then a whole PMI-2 life; then a length field
 * that is not a number gets "cmd=error" and the connection is closed. */
TEST_TIMEOUT(pmi2_wire_by_hand, 60) {
  setup();
  const char *script = pmi_script(
      "export LC_ALL=C\n"
      "say2() { printf '%-6d%s' \"${#1}\" \"$1\" >&\"$PMI_FD\"\n"
      "  if IFS= read -r -N 6 len <&\"$PMI_FD\"; then IFS= read -r -N \"$len\" reply <&\"$PMI_FD\";"
      " else reply=EOF; fi; echo \"$reply\"; }\n"
      "say 'cmd=init pmi_version=2 pmi_subversion=0'\n"
      "if [ \"$PMI_RANK\" = 0 ]; then\n"
      "  say2 'cmd=kvs-get;key=x;'\n"
      "  say2 'cmd=fullinit;pmirank=7;threaded=FALSE;'\n"
      "fi\n"
      "say2 \"cmd=fullinit;pmirank=$PMI_RANK;threaded=FALSE;\"\n"
      "if [ \"$PMI_RANK\" = 0 ]; then\n"
      "  say2 'garbage'\n"
      "  say2 'cmd=no-such-command;'\n"
      "  say2 \"cmd=kvs-put;key=$(head -c 100 /dev/zero | tr '\\0' k);value=v;\"\n"
      "  say2 \"cmd=kvs-put;key=big;value=$(head -c 9000 /dev/zero | tr '\\0' v);\"\n"
      "fi\n"
      "say2 'cmd=job-getid;'\n"
      "job=${reply#*jobid=}; job=${job%;}\n"
      "say2 \"cmd=kvs-put;key=k$PMI_RANK;value=v;;$PMI_RANK;\"\n"
      "say2 'cmd=kvs-fence;'\n"
      "say2 \"cmd=kvs-get;jobid=$job;srcid=0;key=k$(( (PMI_RANK + 1) % PMI_SIZE ));\"\n"
      "say2 \"cmd=kvs-get;jobid=$job;srcid=0;key=missing;\"\n"
      "say2 'cmd=info-getjobattr;key=universeSize;'\n"
      "say2 'cmd=name-publish;name=a;port=b;infokeycount=0;'\n"
      "say2 'cmd=finalize;'\n"
      "if [ \"$PMI_RANK\" = 0 ]; then\n"
      "  printf 'abcdef' >&\"$PMI_FD\"\n"
      "  if IFS= read -r -N 6 len <&\"$PMI_FD\"; then IFS= read -r -N \"$len\" reply <&\"$PMI_FD\"; echo "
      "\"$reply\"; fi\n"
      "  IFS= read -r -N 1 more <&\"$PMI_FD\" || echo EOF\n"
      "fi\n");
  job_t j;
  RUN(&j, 30000, "--timeout", "25", "-n", "2", script);
  ASSERT_CODE(&j, 0);
  const char *o = j.out;
  ASSERT_CONTAINS(o, "[0] cmd=kvs-get-response;rc=-1;errmsg=fullinit must come first;\n");
  ASSERT_CONTAINS(o, "[0] cmd=fullinit-response;rc=-1;errmsg=this connection is rank 0's, not rank 7's;\n");
  ASSERT_CONTAINS(o, "[0] cmd=error;rc=-1;errmsg=a pair without '=';\n");
  ASSERT_CONTAINS(o, "[0] cmd=error;rc=-1;errmsg=unknown command;\n");
  ASSERT_CONTAINS(o, "[0] cmd=kvs-put-response;rc=-1;errmsg=a key longer than 64 bytes;\n");
  ASSERT_CONTAINS(o, "[0] cmd=kvs-put-response;rc=-1;errmsg=the command is longer than 8192 bytes;\n");
  for (int r = 0; r < 2; r++) {
    ASSERT_JOB(&j, strstr(o, fmt("[%d] cmd=response_to_init pmi_version=2 pmi_subversion=0 rc=0\n", r)));
    ASSERT_JOB(&j,
               strstr(o, fmt("[%d] cmd=fullinit-response;rc=0;pmi-version=2;pmi-subversion=0;rank=%d;size=2;"
                             "appnum=0;debugged=FALSE;pmiverbose=FALSE;\n",
                             r, r)));
    ASSERT_JOB(&j, strstr(o, fmt("[%d] cmd=job-getid-response;rc=0;jobid=", r)));
    ASSERT_JOB(&j, strstr(o, fmt("[%d] cmd=kvs-put-response;rc=0;\n", r)));
    ASSERT_JOB(&j, strstr(o, fmt("[%d] cmd=kvs-fence-response;rc=0;\n", r)));
    ASSERT_JOB(&j,
               strstr(o, fmt("[%d] cmd=kvs-get-response;rc=0;found=TRUE;value=v;;%d;\n", r, (r + 1) % 2)));
    ASSERT_JOB(&j, strstr(o, fmt("[%d] cmd=kvs-get-response;rc=0;found=FALSE;\n", r)));
    ASSERT_JOB(&j, strstr(o, fmt("[%d] cmd=info-getjobattr-response;rc=0;found=TRUE;value=2;\n", r)));
    ASSERT_JOB(&j, strstr(o, fmt("[%d] cmd=name-publish-response;rc=-1;errmsg=", r)));
    ASSERT_JOB(&j, strstr(o, fmt("[%d] cmd=finalize-response;rc=0;\n", r)));
  }
  ASSERT_CONTAINS(o, "[0] cmd=error;rc=-1;errmsg=a frame's length is not a number;\n");
  ASSERT_CONTAINS(o, "[0] EOF\n"); /* the connection was closed */
  ASSERT_NO_LEFTOVERS(NULL, 2000);
  teardown();
}
