# launcher/place/: where ranks run: the mapping of ranks to hosts and LNCs
# with its over-count checks, and each rank's binding on a host's topology
# (asrd and asrrun --dry-run both).
launcher_libasrlaunch_la_SOURCES += \
	launcher/place/map.c launcher/place/map.h launcher/place/bind.c launcher/place/bind.h
