/* Start-up check of the model o1d's configuration names (model.path),
 * made before anything is loaded, so that a path the installed layout
 * does not have fails at once with one message that names the setting and
 * the path (the model loader, shared with o1model, knows no setting).
 * ipc.socket's folder is checked before it (o1_ipc_socket_check,
 * daemon/ipc/control.c); refine.review_template is read, and named when
 * missing, after the metrics are published (load_review in main.c). */
#ifndef O1_PATHS_H
#define O1_PATHS_H

#include <stddef.h>

#include "config/config.h"

/* Returns 0 when model.path is readable, else -errno (or
 * -O1_E_CONFIG) after logging why; with MSG (MSG_LEN > 0) the first
 * failure's text is also written there ("model.path PATH: ..."). */
int o1_paths_check(const struct o1_config *c, char *msg, size_t msg_len);

#endif
