# launcher/launch/: how daemons are started on the job's hosts: the launch
# backends behind one ops table (local, rsh agent, Slurm: each answers for
# its resource manager) and the host lists of batch systems (Slurm host
# lists, PBS node files, the hosts of an allocation).
launcher_libasrlaunch_la_SOURCES += \
	launcher/launch/launch.h launcher/launch/launch_local.c launcher/launch/launch_rsh.c \
	launcher/launch/launch_slurm.c launcher/launch/launch_slurm.h launcher/launch/launch_slurm_nodes.c \
	launcher/launch/launch_agent.c launcher/launch/launch_pick.c \
	launcher/launch/hostlist.c launcher/launch/hostlist.h launcher/launch/alloc.c launcher/launch/alloc.h
