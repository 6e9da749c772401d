/*
 * launcher/config.h -- a shim. A source file in launcher/ that writes
 * #include "config.h" finds this file before autoconf's (quotes search the
 * file's own folder first), so this file includes autoconf's config.h (the
 * angle brackets skip this folder) and the job configuration it shadows.
 */
#include <config.h>

#include "job_config.h"
