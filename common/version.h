/* The version every o1d program prints for --version, in one shape:
 *
 *   PROG 0.1.0 (wire protocol 6, libo1client.so.3, metrics layout 2)
 *
 * The release comes from the CMake project, the wire protocol from
 * shm/wire.h, the SOVERSION from the o1client target and the metrics
 * layout from metrics/metrics.h, so programs that must agree can be
 * compared at a glance. */
#ifndef O1_VERSION_H
#define O1_VERSION_H

#include <stdio.h>

/* Prints the line above for PROG (its name; a path is cut) to F. */
void o1_version_print(FILE *f, const char *prog);

#endif
