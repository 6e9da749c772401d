/*
 * nopsm.c -- a stand-in for libpsm_infinipath.so.1, loaded by libasr (ofi_nopsm.c) before Debian's
 * libfabric on hosts without InfiniPath (ipath) hardware, so that neither the
 * real library nor libinfinipath, which it links, is loaded: libinfinipath's
 * load-time constructor sleeps to calibrate a clock, in every process. It
 * defines every function libfabric 1.17's psm provider imports; each fails,
 * as the real one does on a host without the device.
 */

static const char unavailable[] =
    "libpsm_infinipath.so.1 is not available: no InfiniPath (ipath) device on this host (libasr stand-in)";

#define FAIL 1 /* a failed psm_error_t */

int psm_am_get_parameters(void);
int psm_am_get_parameters(void) { return FAIL; }
int psm_am_register_handlers(void);
int psm_am_register_handlers(void) { return FAIL; }
int psm_am_reply_short(void);
int psm_am_reply_short(void) { return FAIL; }
int psm_am_request_short(void);
int psm_am_request_short(void) { return FAIL; }
int psm_ep_close(void);
int psm_ep_close(void) { return FAIL; }
int psm_ep_connect(void);
int psm_ep_connect(void) { return FAIL; }
int psm_ep_epid_lookup(void);
int psm_ep_epid_lookup(void) { return FAIL; }
int psm_ep_num_devunits(void);
int psm_ep_num_devunits(void) { return FAIL; }
int psm_ep_open(void);
int psm_ep_open(void) { return FAIL; }
int psm_ep_open_opts_get_defaults(void);
int psm_ep_open_opts_get_defaults(void) { return FAIL; }
int psm_epaddr_getctxt(void);
int psm_epaddr_getctxt(void) { return FAIL; }
int psm_epaddr_setctxt(void);
int psm_epaddr_setctxt(void) { return FAIL; }
const char *psm_error_get_string(int err);
const char *psm_error_get_string(int err) {
  (void)err;
  return unavailable;
}
int psm_error_register_handler(void);
int psm_error_register_handler(void) { return FAIL; }
int psm_finalize(void);
int psm_finalize(void) { return FAIL; }
int psm_init(void);
int psm_init(void) { return FAIL; }
int psm_mq_cancel(void);
int psm_mq_cancel(void) { return FAIL; }
int psm_mq_finalize(void);
int psm_mq_finalize(void) { return FAIL; }
int psm_mq_init(void);
int psm_mq_init(void) { return FAIL; }
int psm_mq_ipeek(void);
int psm_mq_ipeek(void) { return FAIL; }
int psm_mq_iprobe(void);
int psm_mq_iprobe(void) { return FAIL; }
int psm_mq_irecv(void);
int psm_mq_irecv(void) { return FAIL; }
int psm_mq_isend(void);
int psm_mq_isend(void) { return FAIL; }
int psm_mq_send(void);
int psm_mq_send(void) { return FAIL; }
int psm_mq_test(void);
int psm_mq_test(void) { return FAIL; }
