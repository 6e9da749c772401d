# common/: errors, the environment table, logging, the event loop, sockets, time, randomness, file-system helpers (no dependencies).
noinst_LTLIBRARIES += common/libasrcommon.la
common_libasrcommon_la_SOURCES = \
	common/asr_assert.h \
	common/asr_buf.c common/asr_buf.h \
	common/asr_comm_names.h \
	common/asr_err.c common/asr_err.h \
	common/asr_env.c common/asr_env.h common/asr_env_warn.c \
	common/asr_fs.c common/asr_fs.h \
	common/asr_le.h \
	common/asr_log.c common/asr_log.h \
	common/asr_loop.c common/asr_loop.h \
	common/asr_rand.c common/asr_rand.h \
	common/asr_netif.c common/asr_netif.h \
	common/asr_rank_ev.h \
	common/asr_sig.c common/asr_sig.h \
	common/asr_siphash.c common/asr_siphash.h \
	common/asr_sm_name.h \
	common/asr_sock.c common/asr_sock.h \
	common/asr_time.c common/asr_time.h \
	common/asr_trace.c common/asr_trace.h common/asr_trace_fmt.h \
	common/asr_tsan.h
