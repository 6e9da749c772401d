# tests/: the harness, unit tests (one binary per module) and benchmarks.
noinst_LTLIBRARIES += tests/harness/libasrtest.la
tests_harness_libasrtest_la_SOURCES = tests/harness/asr_test.c tests/harness/asr_test.h

TEST_LIBS = tests/harness/libasrtest.la bootstrap/libasrboot.la

UNIT_TESTS = \
	tests/unit/test_common \
	tests/unit/test_kv_frame \
	tests/unit/test_kv_client \
	tests/unit/test_kv_server \
	tests/unit/test_kv_elect \
	tests/unit/test_asrkv_cli

check_PROGRAMS += $(UNIT_TESTS)
TESTS += $(UNIT_TESTS)

tests_unit_test_common_SOURCES = tests/unit/test_common.c
tests_unit_test_common_LDADD = $(TEST_LIBS)
tests_unit_test_kv_frame_SOURCES = tests/unit/test_kv_frame.c
tests_unit_test_kv_frame_LDADD = $(TEST_LIBS)
tests_unit_test_kv_client_SOURCES = tests/unit/test_kv_client.c
tests_unit_test_kv_client_LDADD = $(TEST_LIBS)
tests_unit_test_kv_server_SOURCES = tests/unit/test_kv_server.c tests/unit/kv_raw.h
tests_unit_test_kv_server_LDADD = $(TEST_LIBS)
tests_unit_test_kv_elect_SOURCES = tests/unit/test_kv_elect.c
tests_unit_test_kv_elect_LDADD = $(TEST_LIBS)
tests_unit_test_asrkv_cli_SOURCES = tests/unit/test_asrkv_cli.c
tests_unit_test_asrkv_cli_LDADD = $(TEST_LIBS)

# Benchmarks are built by `make bench` and run by tests/bench/run-kv-bench.sh.
EXTRA_PROGRAMS = tests/bench/kv_bench
tests_bench_kv_bench_SOURCES = tests/bench/kv_bench.c
tests_bench_kv_bench_LDADD = bootstrap/libasrboot.la
bench: tests/bench/kv_bench$(EXEEXT) bootstrap/asrkv$(EXEEXT)
	$(top_builddir)/tests/bench/kv_bench$(EXEEXT) $(BENCH_ARGS)
.PHONY: bench
CLEANFILES = $(EXTRA_PROGRAMS)
EXTRA_DIST += tests/run-suite.sh

# Example programs (the quick start runs kv_demo).
noinst_PROGRAMS += tests/apps/kv_demo
tests_apps_kv_demo_SOURCES = tests/apps/kv_demo.c
tests_apps_kv_demo_LDADD = bootstrap/libasrboot.la
noinst_PROGRAMS += tests/apps/pingpong
tests_apps_pingpong_SOURCES = tests/apps/pingpong.c
tests_apps_pingpong_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/runtime/include
tests_apps_pingpong_LDADD = runtime/libasr.la common/libasrcommon.la
