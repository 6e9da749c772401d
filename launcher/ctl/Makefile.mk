# launcher/ctl/: the control protocol between asrrun and the daemons, the
# bottom of the launcher: its messages (encoder beside decoder) and the
# framed, flow-controlled connection that carries them.
launcher_libasrlaunch_la_SOURCES += \
	launcher/ctl/ctl.c launcher/ctl/ctl.h launcher/ctl/ctl_msg.c launcher/ctl/ctl_msg.h
