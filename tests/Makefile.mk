# tests/: the harness, unit tests (one binary per module) and benchmarks.
noinst_LTLIBRARIES += tests/harness/libasrtest.la
tests_harness_libasrtest_la_SOURCES = tests/harness/asr_test.c tests/harness/asr_test.h

TEST_LIBS = tests/harness/libasrtest.la bootstrap/libasrboot.la

# DISTCHECK_TESTS: what make distcheck's tree runs in the suite
# (scripts/test.sh passes TESTS='$(DISTCHECK_TESTS)'): the unit tests that
# read the shipped files (conf/, README.md, the man pages' sources) and the
# others that assert no bound on time. distcheck runs in the background at
# nice 19 (scripts/test.sh), where such a bound could fail for want of CPU;
# its tree builds every test program all the same, and the suite's three
# builds run every test.
DISTCHECK_TESTS = \
	tests/unit/test_launcher_config \
	tests/unit/test_hostlist \
	tests/unit/test_env \
	tests/unit/test_kv_frame \
	tests/unit/test_job_ranks \
	tests/unit/test_metrics \
	tests/unit/test_docs \
	tests/unit/test_trace
TIMED_UNIT_TESTS = \
	tests/unit/test_common \
	tests/unit/test_ctl \
	tests/unit/test_proc_exit \
	tests/unit/test_loop \
	tests/unit/test_kv_conn \
	tests/unit/test_kv_server \
	tests/unit/test_kv_elect \
	tests/unit/test_asrkv_cli \
	tests/unit/test_paths \
	tests/unit/test_peer_kill
UNIT_TESTS = $(DISTCHECK_TESTS) $(TIMED_UNIT_TESTS) tests/unit/test_runtime tests/unit/test_runtime_mt tests/unit/test_rma

check_PROGRAMS += $(UNIT_TESTS)
TESTS += $(UNIT_TESTS)

tests_unit_test_launcher_config_SOURCES = tests/unit/test_launcher_config.c
tests_unit_test_launcher_config_CPPFLAGS = $(AM_CPPFLAGS) $(LAUNCH_LIB_INCLUDES) $(YAML_CFLAGS) \
	-DASR_TOP_SRCDIR='"$(abs_top_srcdir)"'
tests_unit_test_launcher_config_LDADD = launcher/libasrlaunch.la $(TEST_LIBS) $(YAML_LIBS) $(HWLOC_LIBS)
tests_unit_test_hostlist_SOURCES = tests/unit/test_hostlist.c
tests_unit_test_hostlist_CPPFLAGS = $(AM_CPPFLAGS) $(LAUNCH_LIB_INCLUDES) $(YAML_CFLAGS)
tests_unit_test_hostlist_LDADD = launcher/libasrlaunch.la $(TEST_LIBS) $(YAML_LIBS)

tests_unit_test_metrics_SOURCES = tests/unit/test_metrics.c
tests_unit_test_metrics_CPPFLAGS = $(AM_CPPFLAGS) $(LAUNCH_LIB_INCLUDES)
tests_unit_test_metrics_LDADD = launcher/libasrlaunch.la $(TEST_LIBS) $(YAML_LIBS)

tests_unit_test_common_SOURCES = tests/unit/test_common.c
tests_unit_test_common_LDADD = $(TEST_LIBS)
tests_unit_test_loop_SOURCES = tests/unit/test_loop.c
tests_unit_test_loop_LDADD = $(TEST_LIBS)
tests_unit_test_trace_SOURCES = tests/unit/test_trace.c
tests_unit_test_trace_CPPFLAGS = $(AM_CPPFLAGS) $(LAUNCH_LIB_INCLUDES)
tests_unit_test_trace_LDADD = launcher/libasrlaunch.la $(TEST_LIBS) $(YAML_LIBS)
tests_unit_test_ctl_SOURCES = tests/unit/test_ctl.c
tests_unit_test_ctl_CPPFLAGS = $(AM_CPPFLAGS) $(LAUNCH_LIB_INCLUDES)
tests_unit_test_ctl_LDADD = launcher/libasrlaunch.la $(TEST_LIBS) $(YAML_LIBS)
tests_unit_test_proc_exit_SOURCES = tests/unit/test_proc_exit.c launcher/asrd/proc_exit.c launcher/asrd/proc_exit.h
tests_unit_test_proc_exit_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/launcher/asrd
tests_unit_test_proc_exit_LDADD = launcher/libasrlaunch.la $(TEST_LIBS) $(YAML_LIBS)
tests_unit_test_env_SOURCES = tests/unit/test_env.c
tests_unit_test_env_CPPFLAGS = $(AM_CPPFLAGS) -DASR_TOP_SRCDIR='"$(abs_top_srcdir)"'
tests_unit_test_env_LDADD = $(TEST_LIBS)
# The man pages against asrrun --help and the settings table (doc/).
tests_unit_test_docs_SOURCES = tests/unit/test_docs.c
tests_unit_test_docs_CPPFLAGS = $(AM_CPPFLAGS) $(LAUNCH_LIB_INCLUDES) -I$(top_srcdir)/launcher/asrrun -DASR_TOP_SRCDIR='"$(abs_top_srcdir)"'
tests_unit_test_docs_LDADD = $(TEST_LIBS)
tests_unit_test_job_ranks_SOURCES = tests/unit/test_job_ranks.c
tests_unit_test_job_ranks_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/runtime/include
tests_unit_test_job_ranks_LDADD = bootstrap/libasrjob.la $(TEST_LIBS) $(PMIX_LIBS)
tests_unit_test_kv_frame_SOURCES = tests/unit/test_kv_frame.c
tests_unit_test_kv_frame_LDADD = $(TEST_LIBS)
tests_unit_test_kv_conn_SOURCES = tests/unit/test_kv_conn.c tests/unit/kv_raw.h
tests_unit_test_kv_conn_LDADD = $(TEST_LIBS)
tests_unit_test_kv_server_SOURCES = tests/unit/test_kv_server.c tests/unit/kv_raw.h
tests_unit_test_kv_server_LDADD = $(TEST_LIBS)
tests_unit_test_kv_elect_SOURCES = tests/unit/test_kv_elect.c
tests_unit_test_kv_elect_LDADD = $(TEST_LIBS)
tests_unit_test_asrkv_cli_SOURCES = tests/unit/test_asrkv_cli.c
tests_unit_test_asrkv_cli_LDADD = $(TEST_LIBS)
tests_unit_test_runtime_SOURCES = tests/unit/test_runtime.c tests/unit/rt_util.h
tests_unit_test_runtime_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/runtime/include $(FABRIC_CFLAGS)
tests_unit_test_runtime_LDADD = runtime/libasr.la $(TEST_LIBS)
tests_unit_test_rma_SOURCES = tests/unit/test_rma.c tests/unit/rt_util.h
tests_unit_test_rma_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/runtime/include $(FABRIC_CFLAGS)
tests_unit_test_rma_LDADD = runtime/libasr.la $(TEST_LIBS)
tests_unit_test_runtime_mt_SOURCES = tests/unit/test_runtime_mt.c tests/unit/rt_util.h
tests_unit_test_runtime_mt_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/runtime/include $(FABRIC_CFLAGS)
tests_unit_test_runtime_mt_LDADD = runtime/libasr.la $(TEST_LIBS)
tests_unit_test_paths_SOURCES = tests/unit/test_paths.c tests/unit/rt_util.h
tests_unit_test_paths_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/runtime/include $(FABRIC_CFLAGS)
tests_unit_test_paths_LDADD = runtime/libasr.la $(TEST_LIBS)
tests_unit_test_peer_kill_SOURCES = tests/unit/test_peer_kill.c tests/unit/rt_util.h
tests_unit_test_peer_kill_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/runtime/include $(FABRIC_CFLAGS)
tests_unit_test_peer_kill_LDADD = runtime/libasr.la $(TEST_LIBS)

# Benchmarks are built and run by `make bench` (BENCH_ARGS=-q for a smoke run).
EXTRA_PROGRAMS = tests/bench/kv_bench
tests_bench_kv_bench_SOURCES = tests/bench/kv_bench.c
tests_bench_kv_bench_LDADD = bootstrap/libasrboot.la
bench: tests/bench/kv_bench$(EXEEXT) bootstrap/asrkv$(EXEEXT)
	$(top_builddir)/tests/bench/kv_bench$(EXEEXT) $(BENCH_ARGS)
.PHONY: bench
CLEANFILES += $(EXTRA_PROGRAMS)
EXTRA_DIST += tests/run-suite.sh tests/sanitized-cases.txt
# The module graph check (tests/check-layering.sh BUILD_DIR, a step of
# scripts/test.sh) and its own test, which plants each kind of violation.
EXTRA_DIST += tests/check-layering.sh tests/check-layering-planted.sh
# README.md's tour of the source, checked against the tree (a step of scripts/test.sh).
EXTRA_DIST += tests/check-tour.py

# Example programs (the quick start runs kv_demo).
noinst_PROGRAMS += tests/apps/kv_demo
tests_apps_kv_demo_SOURCES = tests/apps/kv_demo.c
tests_apps_kv_demo_LDADD = bootstrap/libasrboot.la
noinst_PROGRAMS += tests/apps/pingpong
tests_apps_pingpong_SOURCES = tests/apps/pingpong.c tests/apps/bench_util.h
tests_apps_pingpong_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/runtime/include
tests_apps_pingpong_LDADD = runtime/libasr.la common/libasrcommon.la
noinst_PROGRAMS += tests/apps/ring
tests_apps_ring_SOURCES = tests/apps/ring.c tests/apps/asr_launch.h tests/apps/bench_util.h
tests_apps_ring_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/runtime/include
tests_apps_ring_LDADD = runtime/libasr.la
noinst_PROGRAMS += tests/apps/stress
tests_apps_stress_SOURCES = tests/apps/stress.c tests/apps/asr_launch.h tests/apps/bench_util.h
tests_apps_stress_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/runtime/include
tests_apps_stress_LDADD = runtime/libasr.la
# Helpers of tests/bench/ofi_bench.sh: the raw libfabric baselines (two-rank
# patterns; mesh connect), the asr mesh-connect / 128-in-flight
# message-rate / per-call breakdown side, and the physical floor (one cache
# line between two CPUs). mpich_pingpong.c is compiled by the script itself
# with mpicc.mpich, when that is installed.
noinst_PROGRAMS += tests/bench/ofi_raw
tests_bench_ofi_raw_SOURCES = tests/bench/ofi_raw.c tests/bench/raw_ofi.h tests/apps/bench_util.h
tests_bench_ofi_raw_CPPFLAGS = $(AM_CPPFLAGS) $(FABRIC_CFLAGS) -I$(top_srcdir)/tests/apps
tests_bench_ofi_raw_LDADD = $(FABRIC_LIBS)
noinst_PROGRAMS += tests/bench/ofi_raw_mesh
tests_bench_ofi_raw_mesh_SOURCES = tests/bench/ofi_raw_mesh.c tests/bench/raw_ofi.h tests/apps/asr_launch.h tests/apps/bench_util.h
tests_bench_ofi_raw_mesh_CPPFLAGS = $(AM_CPPFLAGS) $(FABRIC_CFLAGS) -I$(top_srcdir)/tests/apps
tests_bench_ofi_raw_mesh_LDADD = $(FABRIC_LIBS)
noinst_PROGRAMS += tests/bench/asr_bench
tests_bench_asr_bench_SOURCES = tests/bench/asr_bench.c tests/apps/asr_launch.h tests/apps/bench_util.h
tests_bench_asr_bench_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/runtime/include -I$(top_srcdir)/tests/apps
tests_bench_asr_bench_LDADD = runtime/libasr.la
noinst_PROGRAMS += tests/bench/cacheline_floor
tests_bench_cacheline_floor_SOURCES = tests/bench/cacheline_floor.c tests/apps/bench_util.h
tests_bench_cacheline_floor_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/tests/apps
EXTRA_DIST += tests/bench/ofi_bench.sh tests/bench/mpich_pingpong.c
# Helpers of tests/bench/rma_bench.sh (one-sided transfers, issue 51): the
# raw libfabric baseline and libasr's side.
noinst_PROGRAMS += tests/bench/ofi_rma_raw
tests_bench_ofi_rma_raw_SOURCES = tests/bench/ofi_rma_raw.c tests/bench/raw_ofi.h tests/bench/rma_util.h \
	tests/apps/bench_util.h
tests_bench_ofi_rma_raw_CPPFLAGS = $(AM_CPPFLAGS) $(FABRIC_CFLAGS) -I$(top_srcdir)/tests/apps
tests_bench_ofi_rma_raw_LDADD = $(FABRIC_LIBS)
noinst_PROGRAMS += tests/bench/asr_rma_bench
tests_bench_asr_rma_bench_SOURCES = tests/bench/asr_rma_bench.c tests/bench/rma_util.h tests/apps/asr_launch.h \
	tests/apps/bench_util.h
tests_bench_asr_rma_bench_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/runtime/include -I$(top_srcdir)/tests/apps
tests_bench_asr_rma_bench_LDADD = runtime/libasr.la
EXTRA_DIST += tests/bench/rma_bench.sh
# The launch benchmark's app (tests/bench/launch_bench.sh): init, barrier, finalize.
noinst_PROGRAMS += tests/apps/init_barrier
tests_apps_init_barrier_SOURCES = tests/apps/init_barrier.c
tests_apps_init_barrier_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/runtime/include
tests_apps_init_barrier_LDADD = runtime/libasr.la
# -no-install: a real executable, not libtool's wrapper script (which would add
# a shell and several seds to every rank's start-up and skew the timings).
tests_apps_init_barrier_LDFLAGS = -no-install
EXTRA_DIST += tests/bench/launch_bench.sh tests/bench/mpi_init_barrier.c
# The detection time of a peer's death (tests/unit/test_peer_kill's cases, many kills).
EXTRA_DIST += tests/bench/kill_bench.sh tests/bench/fail_bench.sh
# The job-control tests' programs (tests/integration/test_jobctl.c).
noinst_PROGRAMS += tests/apps/outgen tests/apps/early_exit
tests_apps_outgen_SOURCES = tests/apps/outgen.c
tests_apps_early_exit_SOURCES = tests/apps/early_exit.c
tests_apps_early_exit_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/runtime/include
tests_apps_early_exit_LDADD = runtime/libasr.la
tests_apps_early_exit_LDFLAGS = -no-install
noinst_PROGRAMS += tests/apps/killed_peer
tests_apps_killed_peer_SOURCES = tests/apps/killed_peer.c
tests_apps_killed_peer_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/runtime/include
tests_apps_killed_peer_LDADD = runtime/libasr.la
tests_apps_killed_peer_LDFLAGS = -no-install
# The state report's stuck jobs (tests/integration/test_stall.c, tests/netns/netns.sh).
noinst_PROGRAMS += tests/apps/stall
tests_apps_stall_SOURCES = tests/apps/stall.c
tests_apps_stall_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/runtime/include
tests_apps_stall_LDADD = runtime/libasr.la
tests_apps_stall_LDFLAGS = -no-install
# An application with a race on a receive buffer (test_runtime_mt's
# tsan_sees_the_providers_write).
noinst_PROGRAMS += tests/apps/tsan_racy_recv
tests_apps_tsan_racy_recv_SOURCES = tests/apps/tsan_racy_recv.c
tests_apps_tsan_racy_recv_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/runtime/include
tests_apps_tsan_racy_recv_LDADD = runtime/libasr.la
tests_apps_tsan_racy_recv_LDFLAGS = -no-install
# Multi-host tests on network-namespace hosts (scripts/test.sh runs netns.sh, verdict.sh, failure.sh, tree.sh).
EXTRA_DIST += tests/netns/lib.sh tests/netns/netns.sh tests/bench/netns_bench.sh \
	tests/netns/tree.sh tests/netns/agent.sh tests/netns/verdict.sh tests/netns/failure.sh \
	tests/bench/tree_bench.sh
# Slurm tests on a private cluster (scripts/test.sh runs slurm.sh).
EXTRA_DIST += tests/slurm/cluster.sh tests/slurm/slurm.sh tests/slurm/README
# Fuzz targets, their runner and seed corpora (scripts/test.sh runs run.sh);
# built by run.sh with clang and libFuzzer, not by make.
EXTRA_DIST += tests/fuzz
# Integration tests: real asrrun jobs (tests/integration/test_asrrun.c), and
# the programs ring and stress standalone on both providers (test_apps). make
# distcheck configures --disable-integration-tests: its tree runs the unit
# tests only (scripts/test.sh runs these from the default build).
INTEGRATION_TESTS = tests/integration/test_asrrun tests/integration/test_jobctl tests/integration/test_apps \
	tests/integration/test_late_recv tests/integration/test_mpi tests/integration/test_stall \
	tests/integration/test_policy tests/integration/test_rank_fail
if ASR_INTEGRATION_TESTS
check_PROGRAMS += $(INTEGRATION_TESTS)
TESTS += $(INTEGRATION_TESTS)
else
EXTRA_PROGRAMS += $(INTEGRATION_TESTS)
endif
tests_integration_test_asrrun_SOURCES = tests/integration/test_asrrun.c tests/integration/job_util.c \
	tests/integration/job_util.h
tests_integration_test_asrrun_LDADD = $(TEST_LIBS)
tests_integration_test_jobctl_SOURCES = tests/integration/test_jobctl.c tests/integration/job_util.c \
	tests/integration/job_util.h
tests_integration_test_jobctl_LDADD = $(TEST_LIBS) -lutil
tests_integration_test_stall_SOURCES = tests/integration/test_stall.c tests/integration/job_util.c \
	tests/integration/job_util.h
tests_integration_test_stall_LDADD = $(TEST_LIBS)
tests_integration_test_apps_SOURCES = tests/integration/test_apps.c
# Open MPI and MPICH programs under asrrun (tests/integration/test_mpi.c): the
# test builds tests/apps/mpi/*.c with mpicc.openmpi / mpicc.mpich itself.
tests_integration_test_mpi_SOURCES = tests/integration/test_mpi.c tests/integration/job_util.c \
	tests/integration/job_util.h
tests_integration_test_mpi_CPPFLAGS = $(AM_CPPFLAGS) -DASR_TOP_SRCDIR='"$(abs_top_srcdir)"'
tests_integration_test_mpi_LDADD = $(TEST_LIBS)
EXTRA_DIST += tests/apps/mpi
tests_integration_test_late_recv_SOURCES = tests/integration/test_late_recv.c tests/integration/job_util.c \
	tests/integration/job_util.h
tests_integration_test_late_recv_LDADD = $(TEST_LIBS)
# asrrun's failure policy on one host (tests/integration/test_policy.c).
tests_integration_test_policy_SOURCES = tests/integration/test_policy.c tests/integration/job_util.c \
	tests/integration/job_util.h
tests_integration_test_policy_LDADD = $(TEST_LIBS)
# Two ranks exchanging messages for a while (tests/python/test_metrics.py).
noinst_PROGRAMS += tests/apps/traffic
tests_apps_traffic_SOURCES = tests/apps/traffic.c
tests_apps_traffic_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/runtime/include
tests_apps_traffic_LDADD = runtime/libasr.la
# The late receiver's job (tests/integration/test_late_recv.c).
noinst_PROGRAMS += tests/apps/late_recv
tests_apps_late_recv_SOURCES = tests/apps/late_recv.c
tests_apps_late_recv_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/runtime/include
tests_apps_late_recv_LDADD = runtime/libasr.la
tests_integration_test_apps_LDADD = $(TEST_LIBS)
# A rank restarted in place meets its peers afresh (test_policy, failure.sh).
# One-sided transfers between ranks (issue 51): tests/netns/netns.sh, test_apps.
noinst_PROGRAMS += tests/apps/rma_job
tests_apps_rma_job_SOURCES = tests/apps/rma_job.c
tests_apps_rma_job_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/runtime/include
tests_apps_rma_job_LDADD = runtime/libasr.la
noinst_PROGRAMS += tests/apps/restart_peer
tests_apps_restart_peer_SOURCES = tests/apps/restart_peer.c tests/apps/ft_util.h
tests_apps_restart_peer_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/runtime/include
tests_apps_restart_peer_LDADD = runtime/libasr.la
# The failure benchmark's job (tests/bench/fail_bench.sh).
noinst_PROGRAMS += tests/apps/ft_bench
tests_apps_ft_bench_SOURCES = tests/apps/ft_bench.c tests/apps/ft_util.h
tests_apps_ft_bench_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/runtime/include
tests_apps_ft_bench_LDADD = runtime/libasr.la
# Jobs that outlive a failure (issue 50): the job and its test.
tests_integration_test_rank_fail_SOURCES = tests/integration/test_rank_fail.c tests/integration/job_util.c \
	tests/integration/job_util.h
tests_integration_test_rank_fail_LDADD = $(TEST_LIBS)
noinst_PROGRAMS += tests/apps/rank_fail
tests_apps_rank_fail_SOURCES = tests/apps/rank_fail.c
tests_apps_rank_fail_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/runtime/include $(PMIX_CFLAGS)
tests_apps_rank_fail_LDADD = runtime/libasr.la $(PMIX_LIBS)
tests_apps_rank_fail_LDFLAGS = -no-install
# A job that uses only libpmix's client API (checks asrd's PMIx server).
noinst_PROGRAMS += tests/apps/pmix_client
tests_apps_pmix_client_SOURCES = tests/apps/pmix_client.c
tests_apps_pmix_client_CPPFLAGS = $(AM_CPPFLAGS) $(PMIX_CFLAGS)
tests_apps_pmix_client_LDADD = $(PMIX_LIBS)
# A libpmix client that lives through a rank's death (asrrun --on-failure).
noinst_PROGRAMS += tests/apps/pmix_ft
tests_apps_pmix_ft_SOURCES = tests/apps/pmix_ft.c
tests_apps_pmix_ft_CPPFLAGS = $(AM_CPPFLAGS) $(PMIX_CFLAGS) -I$(top_srcdir)/common
tests_apps_pmix_ft_LDADD = $(PMIX_LIBS) -lpthread
# A PMIx tool that asks a job's server for an identifier (asrd refuses it).
noinst_PROGRAMS += tests/apps/pmix_tool
tests_apps_pmix_tool_SOURCES = tests/apps/pmix_tool.c
tests_apps_pmix_tool_CPPFLAGS = $(AM_CPPFLAGS) $(PMIX_CFLAGS)
tests_apps_pmix_tool_LDADD = $(PMIX_LIBS)
# The trace's tests' job (tests/python/test_trace.py, issue 52).
noinst_PROGRAMS += tests/apps/trace_job
tests_apps_trace_job_SOURCES = tests/apps/trace_job.c
tests_apps_trace_job_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/runtime/include
tests_apps_trace_job_LDADD = runtime/libasr.la
