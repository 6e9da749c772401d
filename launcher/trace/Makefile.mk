# launcher/trace/: the job's trace (issue 52, doc/trace.md): reading the
# processes' trace files and merging them into one Chrome trace-event JSON
# file, for asrrun --trace and asr-trace-merge; and asrtrace, the reader of
# the merged file: `merge` (runs asr-trace-merge, from pkglibexecdir or the
# build tree), `summary` and `plot` (matplotlib). asrtrace is a Python 3
# program for Debian's /usr/bin/python3; make builds bin/asrtrace from
# asrtrace.in with the install paths and the version filled in (here, not
# by configure, so that pkglibexecdir is expanded), and installs it beside
# asrrun. tests/python/test_asrtrace.py tests it on synthetic traces.
launcher_libasrlaunch_la_SOURCES += \
	launcher/trace/trace_read.c launcher/trace/trace_read.h \
	launcher/trace/trace_merge.c launcher/trace/trace_merge.h
pkglibexec_PROGRAMS += launcher/trace/asr-trace-merge
launcher_trace_asr_trace_merge_SOURCES = launcher/trace/asr_trace_merge.c
launcher_trace_asr_trace_merge_CPPFLAGS = $(AM_CPPFLAGS) $(LAUNCH_LIB_INCLUDES)
launcher_trace_asr_trace_merge_LDADD = launcher/libasrlaunch.la common/libasrcommon.la
bin_SCRIPTS += bin/asrtrace
EXTRA_DIST += launcher/trace/asrtrace.in
CLEANFILES += bin/asrtrace
bin/asrtrace: $(srcdir)/launcher/trace/asrtrace.in Makefile
	$(AM_V_GEN)$(MKDIR_P) bin && rm -f $@ $@.tmp && \
	sed -e 's|@pkglibexecdir[@]|$(pkglibexecdir)|g' -e 's|@version[@]|$(PACKAGE_VERSION)|g' \
	  $(srcdir)/launcher/trace/asrtrace.in >$@.tmp && chmod +x $@.tmp && mv $@.tmp $@
