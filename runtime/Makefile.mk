# runtime/: libasr (public header runtime/include/asr.h).
lib_LTLIBRARIES = runtime/libasr.la
include_HEADERS = runtime/include/asr.h
runtime_libasr_la_SOURCES = \
	runtime/rt.h \
	runtime/context.c \
	runtime/paths.c \
	runtime/handle.c runtime/handle.h \
	runtime/comm.c \
	runtime/close.c \
	runtime/drain.c \
	runtime/connect.c \
	runtime/connect_sched.c \
	runtime/peer_watch.c \
	runtime/rank_fail.c \
	runtime/handle_inc.h \
	runtime/request.c \
	runtime/poll_idle.c \
	runtime/tensor.c \
	runtime/kv_host.c \
	runtime/job_connect.c \
	runtime/ofi.c runtime/ofi.h \
	runtime/ofi_av.c \
	runtime/shm_names.c \
	runtime/state_registry.c \
	runtime/state_report.c \
	runtime/obs/obs.h runtime/obs/obs.c runtime/obs/metrics.c \
	runtime/sm/sm.h runtime/sm/sm_layout.h \
	runtime/sm/sm_region.c \
	runtime/sm/sm_record.c \
	runtime/sm/sm_data.c \
	runtime/sm/sm_rma.c \
	runtime/rma/rma.h runtime/rma/rma_types.h \
	runtime/rma/mem_desc.c runtime/rma/mem_desc.h \
	runtime/rma/mem.c \
	runtime/rma/rma_ops.c \
	runtime/rma/rma_api.c \
	runtime/rma/notif.c
runtime_libasr_la_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/runtime/include $(FABRIC_CFLAGS) $(PMIX_CFLAGS)
runtime_libasr_la_CFLAGS = $(AM_CFLAGS) -fvisibility=hidden
# libfabric is dlopened on first use (ofi_dl.c), not linked.
runtime_libasr_la_LIBADD = runtime/libasrofi.la bootstrap/libasrjob.la bootstrap/libasrboot.la $(PMIX_LIBS) -ldl

# libasrofi: loading libfabric (with the platform workarounds) and asking it
# what libasr needs; libasr's, and asr-ofi-probe's, which asrd runs to check
# --provider on its host before ranks start.
noinst_LTLIBRARIES += runtime/libasrofi.la
runtime_libasrofi_la_SOURCES = \
	runtime/ofi_dl.c \
	runtime/ofi_probe.c runtime/ofi_probe.h \
	runtime/platform/ofi_kallsyms.c runtime/platform/ofi_kallsyms.h \
	runtime/ofi_env.c runtime/ofi_env.h \
	runtime/platform/ofi_nopsm.c runtime/platform/ofi_nopsm.h
runtime_libasrofi_la_CPPFLAGS = $(AM_CPPFLAGS) $(FABRIC_CFLAGS) -DASR_PKGLIBDIR='"$(pkglibdir)"'
runtime_libasrofi_la_CFLAGS = $(AM_CFLAGS) -fvisibility=hidden
runtime_libasrofi_la_LIBADD = -ldl
# asrd runs it to check --provider before a job's ranks start (asr_ofi_probe.c).
pkglibexec_PROGRAMS = runtime/asr-ofi-probe
runtime_asr_ofi_probe_SOURCES = runtime/asr_ofi_probe.c
runtime_asr_ofi_probe_CPPFLAGS = $(AM_CPPFLAGS) $(FABRIC_CFLAGS)
runtime_asr_ofi_probe_LDADD = runtime/libasrofi.la common/libasrcommon.la

# Stand-ins for libpsm2 and libpsm_infinipath (runtime/platform/ofi_nopsm.c), found
# beside libasr (runtime/.libs here) or in its asr/ subdirectory once
# installed ($(pkglibdir)). They carry the SONAMEs of the libraries they
# stand in for, which libtool would replace with its own: plain rules.
nopsmdir = $(pkglibdir)
nopsm_DATA = runtime/.libs/asr-nopsm2.so runtime/.libs/asr-nopsm.so
CLEANFILES += $(nopsm_DATA)
EXTRA_DIST += runtime/platform/nopsm/nopsm2.c runtime/platform/nopsm/nopsm2.map runtime/platform/nopsm/nopsm.c
runtime/.libs/asr-nopsm2.so: $(srcdir)/runtime/platform/nopsm/nopsm2.c $(srcdir)/runtime/platform/nopsm/nopsm2.map
	@$(MKDIR_P) runtime/.libs
	$(AM_V_CC)$(CC) $(CFLAGS) -Wall -Wextra -Werror -fPIC -shared -o $@ $(srcdir)/runtime/platform/nopsm/nopsm2.c \
	  -Wl,-soname,libpsm2.so.2 -Wl,--version-script=$(srcdir)/runtime/platform/nopsm/nopsm2.map
runtime/.libs/asr-nopsm.so: $(srcdir)/runtime/platform/nopsm/nopsm.c
	@$(MKDIR_P) runtime/.libs
	$(AM_V_CC)$(CC) $(CFLAGS) -Wall -Wextra -Werror -fPIC -shared -o $@ $(srcdir)/runtime/platform/nopsm/nopsm.c \
	  -Wl,-soname,libpsm_infinipath.so.1
# Export the API of asr.h only (common/ and bootstrap/ are linked in privately).
runtime_libasr_la_LDFLAGS = $(AM_LDFLAGS) -version-info 0:0:0 -export-symbols $(srcdir)/runtime/libasr.sym
EXTRA_DIST += runtime/libasr.sym

pkgconfigdir = $(libdir)/pkgconfig
pkgconfig_DATA = conf/asr.pc
