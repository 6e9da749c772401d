# launcher/: asrrun (the front end) and asrd (the host daemon), and the parts
# both use, built once into the internal library libasrlaunch. Each folder
# lists its own sources in its Makefile.mk, included below; the launcher
# never links libasr's data path (doc/design.md, "Parts and layers").
noinst_LTLIBRARIES += launcher/libasrlaunch.la
launcher_libasrlaunch_la_SOURCES =
# The internal library's headers: what asrrun, asrd and the tests of its
# modules may include from launcher/.
LAUNCH_LIB_INCLUDES = -I$(top_srcdir)/launcher/config -I$(top_srcdir)/launcher/ctl -I$(top_srcdir)/launcher/place \
	-I$(top_srcdir)/launcher/launch -I$(top_srcdir)/launcher/tree -I$(top_srcdir)/launcher
launcher_libasrlaunch_la_CPPFLAGS = $(AM_CPPFLAGS) $(LAUNCH_LIB_INCLUDES) $(YAML_CFLAGS) $(HWLOC_CFLAGS) \
	-DASR_SYSCONFDIR='"$(sysconfdir)"'
launcher_libasrlaunch_la_LIBADD = bootstrap/libasrboot.la $(YAML_LIBS) $(HWLOC_LIBS)

include launcher/config/Makefile.mk
include launcher/ctl/Makefile.mk
include launcher/place/Makefile.mk
include launcher/launch/Makefile.mk
include launcher/tree/Makefile.mk

# The programs are built in bin/ of the build tree (asrrun finds asrd beside
# itself there, as it does where make install puts them).
bin_PROGRAMS += bin/asrrun
bin_asrrun_SOURCES = launcher/asrrun.c launcher/asrrun.h launcher/asrrun_daemons.c launcher/asrrun_verdict.c \
	launcher/asrrun_output.c launcher/asrrun_stdin.c launcher/asrrun_early.c launcher/asrrun_report.c \
	launcher/asrrun_state.c launcher/asrrun_diag.c launcher/asrrun_status.c
bin_asrrun_CPPFLAGS = $(AM_CPPFLAGS) $(LAUNCH_LIB_INCLUDES)
bin_asrrun_LDADD = launcher/libasrlaunch.la

include launcher/asrd/Makefile.mk
