# doc/: the man pages, and the design notes (design.md, tree.md) that ship
# in the tarball. Each page is written by hand as doc/PAGE.in (roff,
# man(7) macros); make builds doc/PAGE from it with doc/man-env, which fills
# in the install paths and the version, and each page's ENVIRONMENT from the
# settings table (common/asr_env.h), the one source of every variable's
# type, default and help. tests/unit/test_docs.c checks the built pages
# (asrrun(1)'s OPTIONS against asrrun --help and the table; groff -ww).
noinst_PROGRAMS += doc/man-env
doc_man_env_SOURCES = doc/man_env.c
doc_man_env_LDADD = common/libasrcommon.la

ASR_MANS = doc/asrrun.1 doc/asrd.8 doc/asrkv.1 doc/libasr.3 doc/asrtrace.1
nodist_man_MANS = $(ASR_MANS)
EXTRA_DIST += doc/asrrun.1.in doc/asrd.8.in doc/asrkv.1.in doc/libasr.3.in doc/asrtrace.1.in doc/design.md doc/pairwise-timeline.png \
	doc/tree.md
CLEANFILES += $(ASR_MANS)

# The example job file of asrrun(1) (asrrun -f), and the trace file's format
# (asrtrace(1) points there), installed beside the docs.
dist_doc_DATA = conf/job-example.yaml doc/trace.md

MAN_ENV = $(AM_V_GEN)$(MKDIR_P) doc && doc/man-env$(EXEEXT) -D version='$(PACKAGE_VERSION)' \
	-D sysconfdir='$(sysconfdir)' -D docdir='$(docdir)' -D pkglibexecdir='$(pkglibexecdir)'
doc/asrrun.1: $(srcdir)/doc/asrrun.1.in doc/man-env$(EXEEXT)
	$(MAN_ENV) $(srcdir)/doc/asrrun.1.in $@
doc/asrd.8: $(srcdir)/doc/asrd.8.in doc/man-env$(EXEEXT)
	$(MAN_ENV) $(srcdir)/doc/asrd.8.in $@
doc/asrkv.1: $(srcdir)/doc/asrkv.1.in doc/man-env$(EXEEXT)
	$(MAN_ENV) $(srcdir)/doc/asrkv.1.in $@
doc/libasr.3: $(srcdir)/doc/libasr.3.in doc/man-env$(EXEEXT)
	$(MAN_ENV) $(srcdir)/doc/libasr.3.in $@
doc/asrtrace.1: $(srcdir)/doc/asrtrace.1.in doc/man-env$(EXEEXT)
	$(MAN_ENV) $(srcdir)/doc/asrtrace.1.in $@

# make installcheck (distcheck runs it): the pages, the job file and the
# trace format are where man, asrrun(1) and asrtrace(1) say, the installed
# asrrun reads that job file, and the installed asrtrace runs.
installcheck-local: installcheck-docs
installcheck-docs:
	@for f in $(DESTDIR)$(man1dir)/asrrun.1 $(DESTDIR)$(man1dir)/asrkv.1 $(DESTDIR)$(man8dir)/asrd.8 \
	    $(DESTDIR)$(man3dir)/libasr.3 $(DESTDIR)$(man1dir)/asrtrace.1 $(DESTDIR)$(docdir)/job-example.yaml \
	    $(DESTDIR)$(docdir)/trace.md; do \
	  test -f "$$f" || { echo "installcheck: $$f is not installed" >&2; exit 1; }; \
	done
	$(AM_V_at)$(DESTDIR)$(bindir)/asrrun -f $(DESTDIR)$(docdir)/job-example.yaml --dry-run >/dev/null
	$(AM_V_at)$(DESTDIR)$(bindir)/asrtrace --version >/dev/null
.PHONY: installcheck-docs
