/* See version.h. */
#include "version.h"

#include <string.h>

#include "metrics/metrics.h"
#include "shm/wire.h"

void o1_version_print(FILE *f, const char *prog)
{
	const char *slash = strrchr(prog, '/');

	fprintf(f,
		"%s %s (wire protocol %d, libo1client.so.%d, metrics layout "
		"%d)\n",
		slash ? slash + 1 : prog, O1_RELEASE, O1_WIRE_VERSION,
		O1_CLIENT_SOVERSION, O1_METRICS_VERSION);
}
