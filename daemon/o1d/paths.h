/* Start-up checks of the files o1d's configuration names (model.path,
 * refine.review_template), made before the model is loaded, so that a
 * path the installed layout does not have fails at once with one message
 * that names the setting and the path, instead of after minutes of
 * loading or as a bare errno. ipc.socket's folder is checked before these
 * (o1_ipc_socket_check, daemon/ipc/control.c). */
#ifndef O1_PATHS_H
#define O1_PATHS_H

#include <stddef.h>

#include "config/config.h"

/* Returns 0 when every configured file is readable, else -errno (or
 * -O1_E_CONFIG) after logging why; with MSG (MSG_LEN > 0) the first
 * failure's text is also written there ("model.path PATH: ..."). */
int o1_paths_check(const struct o1_config *c, char *msg, size_t msg_len);

#endif
