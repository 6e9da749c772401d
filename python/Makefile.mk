# python/: the module `asr` over asr.h, a CPython extension in C for the
# interpreter configure was given (PYTHON, default Debian's /usr/bin/python3).
# `make` builds it; the build tree runs it without installing as
#   PYTHONPATH=BUILD/python /usr/bin/python3 app.py
# (python/asr<EXT_SUFFIX> links to libtool's .libs copy, which finds the
# build's libasr by its run path); `make install` puts it in PYTHON's site
# directory under the prefix (configure says where).
EXTRA_DIST += python/asrmodule.c tests/python/run.sh tests/python/test_asr.py tests/python/job.py \
	tests/python/test_rma.py tests/python/rma_job.py tests/python/conftest.py tests/python/test_asrtrace.py \
	examples/pairwise.py examples/torch_slice.py examples/kv_cache_write.py tests/bench/pingpong.py \
	tests/bench/py_bench.sh
if ASR_PYTHON
pyasrdir = $(ASR_PYTHON_SITEDIR)
pyasr_LTLIBRARIES = python/asr.la
python_asr_la_SOURCES = python/asrmodule.c
python_asr_la_CPPFLAGS = -I$(top_srcdir)/runtime/include -isystem $(PYTHON_INCLUDE)
python_asr_la_CFLAGS = $(AM_CFLAGS) -fvisibility=hidden
python_asr_la_LDFLAGS = $(AM_LDFLAGS) -module -avoid-version -shared -shrext $(PYTHON_EXT_SUFFIX) \
	-export-symbols-regex '^PyInit_asr$$'
python_asr_la_LIBADD = runtime/libasr.la

all-local: python/asr$(PYTHON_EXT_SUFFIX)
python/asr$(PYTHON_EXT_SUFFIX): python/asr.la
	$(AM_V_GEN)$(LN_S) -f .libs/asr$(PYTHON_EXT_SUFFIX) $@
CLEANFILES += python/asr$(PYTHON_EXT_SUFFIX)
# libtool's .la is of no use to Python
install-exec-hook:
	rm -f $(DESTDIR)$(pyasrdir)/asr.la
# (libtool's uninstall finds the module through the .la removed above)
uninstall-local:
	rm -f $(DESTDIR)$(pyasrdir)/asr$(PYTHON_EXT_SUFFIX)
endif
