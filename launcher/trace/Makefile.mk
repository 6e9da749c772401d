# launcher/trace/: the job's trace (issue 52, doc/trace.md): reading the
# processes' trace files and merging them into one Chrome trace-event JSON
# file, for asrrun --trace and asr-trace-merge (asrtrace merge).
launcher_libasrlaunch_la_SOURCES += \
	launcher/trace/trace_read.c launcher/trace/trace_read.h \
	launcher/trace/trace_merge.c launcher/trace/trace_merge.h
pkglibexec_PROGRAMS += launcher/asr-trace-merge
launcher_asr_trace_merge_SOURCES = launcher/trace/asr_trace_merge.c
launcher_asr_trace_merge_CPPFLAGS = $(AM_CPPFLAGS) $(LAUNCH_LIB_INCLUDES)
launcher_asr_trace_merge_LDADD = launcher/libasrlaunch.la common/libasrcommon.la
