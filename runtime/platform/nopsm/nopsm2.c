/*
 * nopsm2.c -- a stand-in for libpsm2.so.2, loaded by libasr (ofi_nopsm.c) before Debian's
 * libfabric on hosts without Omni-Path (hfi1) hardware, so that the real library's
 * load-time constructor -- a sleep to calibrate a clock, in every process --
 * never runs. It defines every function libfabric 1.17's
 * psm2 provider imports; each fails, as the real one does on a host
 * without the device.
 */

static const char unavailable[] =
    "libpsm2.so.2 is not available: no Omni-Path (hfi1) device on this host (libasr stand-in)";

#define FAIL 1 /* a failed psm2_error_t */

int psm2_am_get_parameters(void);
int psm2_am_get_parameters(void) { return FAIL; }
int psm2_am_get_source(void);
int psm2_am_get_source(void) { return FAIL; }
int psm2_am_register_handlers_2(void);
int psm2_am_register_handlers_2(void) { return FAIL; }
int psm2_am_reply_short(void);
int psm2_am_reply_short(void) { return FAIL; }
int psm2_am_request_short(void);
int psm2_am_request_short(void) { return FAIL; }
int psm2_ep_close(void);
int psm2_ep_close(void) { return FAIL; }
int psm2_ep_connect(void);
int psm2_ep_connect(void) { return FAIL; }
int psm2_ep_disconnect2(void);
int psm2_ep_disconnect2(void) { return FAIL; }
int psm2_ep_epid_lookup2(void);
int psm2_ep_epid_lookup2(void) { return FAIL; }
int psm2_ep_open(void);
int psm2_ep_open(void) { return FAIL; }
int psm2_ep_open_opts_get_defaults(void);
int psm2_ep_open_opts_get_defaults(void) { return FAIL; }
int psm2_epaddr_getctxt(void);
int psm2_epaddr_getctxt(void) { return FAIL; }
int psm2_epaddr_setctxt(void);
int psm2_epaddr_setctxt(void) { return FAIL; }
int psm2_epaddr_to_epid(void);
int psm2_epaddr_to_epid(void) { return FAIL; }
const char *psm2_error_get_string(int err);
const char *psm2_error_get_string(int err) {
  (void)err;
  return unavailable;
}
int psm2_error_register_handler(void);
int psm2_error_register_handler(void) { return FAIL; }
int psm2_finalize(void);
int psm2_finalize(void) { return FAIL; }
int psm2_get_capability_mask(void);
int psm2_get_capability_mask(void) { return FAIL; }
int psm2_info_query(void);
int psm2_info_query(void) { return FAIL; }
int psm2_init(void);
int psm2_init(void) { return FAIL; }
int psm2_mq_cancel(void);
int psm2_mq_cancel(void) { return FAIL; }
int psm2_mq_improbe2(void);
int psm2_mq_improbe2(void) { return FAIL; }
int psm2_mq_imrecv(void);
int psm2_mq_imrecv(void) { return FAIL; }
int psm2_mq_init(void);
int psm2_mq_init(void) { return FAIL; }
int psm2_mq_ipeek(void);
int psm2_mq_ipeek(void) { return FAIL; }
int psm2_mq_iprobe2(void);
int psm2_mq_iprobe2(void) { return FAIL; }
int psm2_mq_irecv2(void);
int psm2_mq_irecv2(void) { return FAIL; }
int psm2_mq_isend2(void);
int psm2_mq_isend2(void) { return FAIL; }
int psm2_mq_send2(void);
int psm2_mq_send2(void) { return FAIL; }
int psm2_mq_test2(void);
int psm2_mq_test2(void) { return FAIL; }
int psm2_mq_wait2(void);
int psm2_mq_wait2(void) { return FAIL; }
int psm2_poll(void);
int psm2_poll(void) { return FAIL; }
