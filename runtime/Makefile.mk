# runtime/: libasr (public header runtime/include/asr.h).
lib_LTLIBRARIES = runtime/libasr.la
include_HEADERS = runtime/include/asr.h
runtime_libasr_la_SOURCES = \
	runtime/rt.h \
	runtime/context.c \
	runtime/comm.c \
	runtime/connect.c \
	runtime/peer_watch.c \
	runtime/request.c \
	runtime/tensor.c \
	runtime/kv_host.c \
	runtime/job_connect.c \
	runtime/ofi.c runtime/ofi.h \
	runtime/ofi_dl.c \
	runtime/ofi_kallsyms.c runtime/ofi_kallsyms.h \
	runtime/ofi_env.c runtime/ofi_env.h \
	runtime/shm_names.c
runtime_libasr_la_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/runtime/include $(FABRIC_CFLAGS) $(PMIX_CFLAGS)
runtime_libasr_la_CFLAGS = $(AM_CFLAGS) -fvisibility=hidden
# libfabric is dlopened on first use (ofi_dl.c), not linked.
runtime_libasr_la_LIBADD = bootstrap/libasrjob.la bootstrap/libasrboot.la $(PMIX_LIBS) -ldl
# Export the API of asr.h only (common/ and bootstrap/ are linked in privately).
runtime_libasr_la_LDFLAGS = $(AM_LDFLAGS) -version-info 0:0:0 -export-symbols $(srcdir)/runtime/libasr.sym
EXTRA_DIST += runtime/libasr.sym

pkgconfigdir = $(libdir)/pkgconfig
pkgconfig_DATA = conf/asr.pc
