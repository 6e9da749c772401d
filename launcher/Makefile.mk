# launcher/: asrrun (the front end) and asrd (the host daemon), and the parts
# both use, built once into the internal library libasrlaunch. Each folder
# lists its own sources in its Makefile.mk, included below; the launcher
# never links libasr's data path (doc/design.md, "Parts and layers").
noinst_LTLIBRARIES += launcher/libasrlaunch.la
launcher_libasrlaunch_la_SOURCES =
# The internal library's headers: what asrrun, asrd and the tests of its
# modules may include from launcher/.
LAUNCH_LIB_INCLUDES = -I$(top_srcdir)/launcher/config -I$(top_srcdir)/launcher/ctl -I$(top_srcdir)/launcher/place \
	-I$(top_srcdir)/launcher/launch -I$(top_srcdir)/launcher/tree -I$(top_srcdir)/launcher/trace \
	-I$(top_srcdir)/launcher/metrics
launcher_libasrlaunch_la_CPPFLAGS = $(AM_CPPFLAGS) $(LAUNCH_LIB_INCLUDES) $(YAML_CFLAGS) $(HWLOC_CFLAGS) \
	-DASR_SYSCONFDIR='"$(sysconfdir)"'
launcher_libasrlaunch_la_LIBADD = bootstrap/libasrboot.la $(YAML_LIBS) $(HWLOC_LIBS)

include launcher/config/Makefile.mk
include launcher/ctl/Makefile.mk
include launcher/place/Makefile.mk
include launcher/launch/Makefile.mk
include launcher/tree/Makefile.mk
include launcher/trace/Makefile.mk
include launcher/metrics/Makefile.mk

# The programs are built in bin/ of the build tree (asrrun finds asrd beside
# itself there, as it does where make install puts them). Each includes the
# internal library's headers and its own folder's, never the other's.
include launcher/asrrun/Makefile.mk
include launcher/asrd/Makefile.mk
