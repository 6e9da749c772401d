# launcher/config/: asrrun's settings, the bottom of the launcher: the model
# and its key table, the command line, the YAML files, the precedence stack
# that reads them in order; the site file it installs.
launcher_libasrlaunch_la_SOURCES += \
	launcher/config/config.c launcher/config/config_cli.c launcher/config/config_load.c \
	launcher/config/config_yaml.c launcher/config/config_int.h launcher/config/job_config.h

sysconf_asrdir = $(sysconfdir)/asr
dist_sysconf_asr_DATA = conf/asrrun.yaml
