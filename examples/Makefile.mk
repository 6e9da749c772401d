# examples/: the programs a user starts from (examples/README.md). They use
# only the public header, asr.h, as a program built against an installed asr
# does.
noinst_PROGRAMS += examples/sendrecv examples/pairwise
examples_sendrecv_SOURCES = examples/sendrecv.c
examples_sendrecv_CPPFLAGS = -I$(top_srcdir)/runtime/include
examples_sendrecv_LDADD = runtime/libasr.la
examples_pairwise_SOURCES = examples/pairwise.c
examples_pairwise_CPPFLAGS = -I$(top_srcdir)/runtime/include
examples_pairwise_LDADD = runtime/libasr.la
EXTRA_DIST += examples/README.md
