# launcher/asrd/pmi/: the process-management servers asrd runs for its
# ranks: PMIx (libpmix's server), and PMI-1 and PMI-2 over the socket that
# PMI_FD names, with their wire codecs (fuzzed: tests/fuzz/).
bin_asrd_SOURCES += launcher/asrd/pmi/asrd_pmix.c launcher/asrd/pmi/asrd_pmix_log.c \
	launcher/asrd/pmi/asrd_pmix_log.h launcher/asrd/pmi/asrd_pmi.c \
	launcher/asrd/pmi/pmi_wire.c launcher/asrd/pmi/pmi_wire.h launcher/asrd/pmi/pmi2_wire.c launcher/asrd/pmi/pmi2_wire.h
