# launcher/metrics/: the job's live metrics (issue 52, asrrun --metrics-port):
# the ranks' answers rendered in Prometheus' text format, and the one HTTP
# request the server reads. The server and the gathering are asrrun's
# (launcher/asrrun/asrrun_metrics.c).
launcher_libasrlaunch_la_SOURCES += \
	launcher/metrics/metrics_prom.c launcher/metrics/metrics_prom.h \
	launcher/metrics/metrics_http.c launcher/metrics/metrics_http.h
