# launcher/asrrun/: asrrun, the front end and root of the tree of daemons:
# its life, the daemons it starts and supervises, the job's verdict, the
# output and stdin it forwards, state reports and hang diagnosis, the
# failure policy (--on-failure), and
# asrrun --status. Built into bin/asrrun.
bin_PROGRAMS += bin/asrrun
bin_asrrun_SOURCES = launcher/asrrun/asrrun.c launcher/asrrun/asrrun.h launcher/asrrun/asrrun_daemons.c \
	launcher/asrrun/asrrun_verdict.c launcher/asrrun/asrrun_output.c launcher/asrrun/asrrun_stdin.c \
	launcher/asrrun/asrrun_early.c launcher/asrrun/asrrun_report.c launcher/asrrun/asrrun_state.c \
	launcher/asrrun/asrrun_diag.c launcher/asrrun/asrrun_status.c launcher/asrrun/asrrun_policy.c \
	launcher/asrrun/asrrun_trace.c launcher/asrrun/asrrun_metrics.c
bin_asrrun_CPPFLAGS = $(AM_CPPFLAGS) $(LAUNCH_LIB_INCLUDES) -I$(top_srcdir)/launcher/asrrun
bin_asrrun_LDADD = launcher/libasrlaunch.la
