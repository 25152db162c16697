/* The o1d admin protocol, spoken on admin connections of the control
 * socket (struct o1_wire_hello with O1_HELLO_ADMIN; admin uids only): each
 * message is one JSON object, answered by one JSON object.
 *
 * Every reply carries "admin_version": O1_ADMIN_VERSION (bumped when a
 * field changes meaning or goes away; clients refuse another number).
 * Requests ("op" picks one):
 *   {"op":"status"}
 *     -> {"ok":true, "model":S, "model_loaded":B, "backend":S,
 *         "uptime_s":N, "draining":B,
 *         "running":N, "waiting":N, "active":N (slots in use), "clients":N,
 *         "kv":{"pages_total":N, "pages_free":N, "pages_used":N,
 *               "pages_cached":N},
 *         "steps":N, "preemptions":N, "prefix_hits":N, "prefix_misses":N,
 *         "ready":B (model loaded, graphs captured, warm-up generation
 *         done, not draining), "warmup_ok":B, "warmup_ms":N,
 *         "graphs_total":N, "graphs_captured":N, "max_context_tokens":N,
 *         "vocab_size":N, "tokenizer":B (false: token-id prompts only),
 *         and with [faults] enabled "faults":{"on":{NAME:
 *         PARAM...}, "delayed_steps":N, "failed_steps":N,
 *         "stalled_polls":N, "kv_pages_held":N}}
 *   {"op":"requests"}
 *     -> {"ok":true, "requests":[{"client":N, "req_id":N, "pid":N,
 *         "uid":N, "phase":"queued|waiting|running|finished",
 *         "prompt_tokens":N, "generated":N, "age_ms":N}, ...],
 *         "truncated":B}
 *   {"op":"metrics"}
 *     -> {"ok":true, "pid":N (o1d's), "metrics":{"backend":
 *         "bpf|shm|anon|off", "path":S (the pin directory, with v3/, or
 *         the file; "" when off)}}: where readers find this daemon's
 *         metrics (anon and off: nowhere)
 *   {"op":"cancel", "client":N, "req_id":N}  -> {"ok":true}
 *   {"op":"drain"}   new submissions refused (FINAL -O1_E_DRAINING)
 *   {"op":"resume"}  accepted again (not after SIGTERM)
 *   {"op":"reload"}  what SIGHUP does
 *     -> {"ok":true, "reloaded":[S...] (keys applied),
 *         "not_reloaded":[S...] (changed sections that need a restart)};
 *         a configuration that does not load: ok false, nothing applied
 *   {"op":"config"}
 *     -> {"ok":true, "config":S} (o1_config_dump of the effective
 *         configuration: start-up values plus what reloads applied)
 *   {"op":"inject", "fault":S, "on":B, "param":N (optional)}
 *     fault injection (daemon/o1d/faults.h); refused unless [faults]
 *     enabled
 * Any failure: {"ok":false, "error":S}.
 *
 * The client side (o1ctl, tests): connect, then call. */
#ifndef O1_ADMIN_H
#define O1_ADMIN_H

#include <stddef.h>

#define O1_ADMIN_VERSION 1

/* Connects to the control socket PATH as an admin; *fd is the
 * connection. Returns 0, -errno or the welcome's negative status. */
int o1_admin_connect(const char *path, int *fd);
/* Sends the JSON text REQ and receives the reply into REPLY (CAP bytes,
 * NUL-terminated). Returns the reply length or -errno. */
int o1_admin_call(int fd, const char *req, char *reply, size_t cap);

#endif
