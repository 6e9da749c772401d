# bootstrap/: the rendezvous KV store (codec, client, server, election, keys).
noinst_LTLIBRARIES += bootstrap/libasrboot.la
bootstrap_libasrboot_la_SOURCES = \
	bootstrap/kv_frame.c bootstrap/kv_frame.h \
	bootstrap/kv_conn.c bootstrap/kv_conn.h \
	bootstrap/kv_table.c bootstrap/kv_table.h \
	bootstrap/kv_server.c bootstrap/kv_server.h \
	bootstrap/kv_elect.c bootstrap/kv_elect.h \
	bootstrap/kv_keys.c bootstrap/kv_keys.h \
	bootstrap/kv_secret.c bootstrap/kv_secret.h \
	bootstrap/report_fmt.c bootstrap/report_fmt.h
bootstrap_libasrboot_la_LIBADD = common/libasrcommon.la

bin_PROGRAMS += bootstrap/asrkv
bootstrap_asrkv_SOURCES = bootstrap/asrkv.c
bootstrap_asrkv_LDADD = bootstrap/libasrboot.la

# The PMIx-client job view, linked only into libasr (it needs libpmix).
noinst_LTLIBRARIES += bootstrap/libasrjob.la
bootstrap_libasrjob_la_SOURCES = bootstrap/job.c bootstrap/job.h bootstrap/job_direct.c bootstrap/job_ranks.c \
	bootstrap/report_chan.c bootstrap/report_chan.h
bootstrap_libasrjob_la_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/runtime/include $(PMIX_CFLAGS)
