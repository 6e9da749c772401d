# launcher/tree/: the tree of daemons that asrrun heads: its shape (which
# daemon starts, supervises and relays for which) and each daemon's
# private directory, removed by whoever reaps it.
launcher_libasrlaunch_la_SOURCES += \
	launcher/tree/tree.h launcher/tree/asrd_dir.c launcher/tree/asrd_dir.h \
	launcher/tree/tree_node.c launcher/tree/tree_node.h
