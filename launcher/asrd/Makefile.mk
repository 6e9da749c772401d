# launcher/asrd/: asrd, the daemon of one host: its life and its links up
# (to asrrun or a parent daemon) and down (to the daemons it starts), the
# job's ranks on this host (start, binding, output, ends, state reports,
# shm regions), and in pmi/ the PMIx, PMI-1 and PMI-2 servers the ranks
# talk to. Built into bin/asrd.
bin_PROGRAMS += bin/asrd
bin_asrd_SOURCES = launcher/asrd/asrd.c launcher/asrd/asrd.h launcher/asrd/asrd_up.c launcher/asrd/asrd_down.c \
	launcher/asrd/asrd_job.c launcher/asrd/asrd_ranks.c launcher/asrd/asrd_ends.c launcher/asrd/proc_exit.c \
	launcher/asrd/proc_exit.h launcher/asrd/asrd_spawn.c launcher/asrd/asrd_topo.c launcher/asrd/asrd_stdio.c \
	launcher/asrd/asrd_report.c launcher/asrd/asrd_metrics.c launcher/asrd/asrd_shm.c launcher/asrd/asrd_shm.h launcher/asrd/asrd_trace.c
# asrd's own headers: no other program's folder is on its path.
ASRD_INCLUDES = -I$(top_srcdir)/launcher/asrd -I$(top_srcdir)/launcher/asrd/pmi
bin_asrd_CPPFLAGS = $(AM_CPPFLAGS) $(LAUNCH_LIB_INCLUDES) $(ASRD_INCLUDES) $(PMIX_CFLAGS) $(HWLOC_CFLAGS) \
	-DASR_PKGLIBEXECDIR='"$(pkglibexecdir)"'
bin_asrd_LDADD = launcher/libasrlaunch.la $(PMIX_LIBS) $(HWLOC_LIBS)

include launcher/asrd/pmi/Makefile.mk
