/*
 * pmix_tool -- a PMIx tool that asks a server for an identifier, the way a
 * debugger or a monitoring tool would connect to a job's PMIx server. asrd
 * serves no tools, so libpmix refuses the connection inside asrd; the case
 * that runs it (test_asrrun: pmix_refused_peer_stays_out_of_output) checks
 * where libpmix's line about the refusal goes.
 *
 *   pmix_tool URI      (URI: a rank's PMIX_SERVER_URI41)
 *
 * Prints "pmix_tool: refused (STATUS)" and exits 0 when PMIx_tool_init
 * fails, as it must; prints "pmix_tool: connected" and exits 1 otherwise; 2
 * for a bad command line.
 */
#include "config.h"

#include <pmix_tool.h>
#include <stdbool.h>
#include <stdio.h>

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: pmix_tool URI\n");
    return 2;
  }
  pmix_proc_t me;
  pmix_info_t info[2];
  bool no = false;
  /* the server at URI only, never one found by searching the tmpdirs */
  PMIX_INFO_LOAD(&info[0], PMIX_SERVER_URI, argv[1], PMIX_STRING);
  PMIX_INFO_LOAD(&info[1], PMIX_TOOL_DO_NOT_CONNECT, &no, PMIX_BOOL);
  pmix_status_t st = PMIx_tool_init(&me, info, 2);
  PMIX_INFO_DESTRUCT(&info[0]);
  PMIX_INFO_DESTRUCT(&info[1]);
  if (st != PMIX_SUCCESS) {
    printf("pmix_tool: refused (%s)\n", PMIx_Error_string(st));
    return 0;
  }
  printf("pmix_tool: connected\n");
  PMIx_tool_finalize();
  return 1;
}
