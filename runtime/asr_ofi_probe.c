/*
 * asr_ofi_probe.c -- asr-ofi-probe PROVIDER: exits 0 if this host's
 * libfabric offers PROVIDER for what libasr needs (ofi_probe.h), else prints
 * why (naming what it does offer) and exits 1; 2 on a bad command line.
 * asrd runs it before starting a job's ranks when --provider was given:
 * a program of its own, so that the launcher never links the runtime (the
 * layers of doc/design.md, "Parts and layers"), and libfabric is loaded
 * only where it is asked for.
 */
#include "config.h"

#include <stdio.h>

#include "ofi_probe.h"

int main(int argc, char **argv) {
  if (argc != 2 || !argv[1][0]) {
    fprintf(stderr, "usage: asr-ofi-probe PROVIDER (asrd runs it to check --provider)\n");
    return 2;
  }
  char why[700];
  if (asr__ofi_probe(argv[1], why, sizeof why) == 0) return 0;
  printf("%s\n", why);
  return 1;
}
