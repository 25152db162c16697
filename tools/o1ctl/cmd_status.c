/* o1ctl status: the daemon's model, its weight bytes by type, backend, KV
 * pages, queue, clients and, with CUDA graphs, their replays and fallbacks
 * (admin op "status"). */
#include <stdio.h>

#include "o1ctl.h"
#include "o1ctl_admin.h"

static double num(const cJSON *o, const char *k)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);

	return cJSON_IsNumber(v) ? v->valuedouble : -1;
}

static const char *str(const cJSON *o, const char *k)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);

	return cJSON_IsString(v) ? v->valuestring : "?";
}

/* Replays (hits), steps of a bucket without a graph (misses) and failed
 * replays run eagerly (fallbacks), when graphs are configured. */
static void print_graphs(const cJSON *r)
{
	const cJSON *g = cJSON_GetObjectItemCaseSensitive(r, "graphs");

	if (num(r, "graphs_total") <= 0 || !cJSON_IsObject(g))
		return;
	printf("graphs:     %.0f hits, %.0f misses, %.0f fallbacks, %.0f "
	       "oversize\n",
	       num(g, "hits"), num(g, "misses"), num(g, "fallbacks"),
	       num(g, "oversize"));
}

static void print(const cJSON *r)
{
	const cJSON *kv = cJSON_GetObjectItemCaseSensitive(r, "kv");

	printf("model:      %s\n", str(r, "model"));
	if (*str(r, "weights") && *str(r, "weights") != '?')
		printf("weights:    %s\n", str(r, "weights"));
	printf("backend:    %s\nuptime:     %.0f s%s\n", str(r, "backend"),
	       num(r, "uptime_s"),
	       cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r, "draining"))
		   ? " (draining)"
		   : "");
	printf("ready:      %s (warm-up %.1f ms, graphs %.0f of %.0f "
	       "captured)\n",
	       cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r, "ready"))
		   ? "yes"
		   : "no",
	       num(r, "warmup_ms"), num(r, "graphs_captured"),
	       num(r, "graphs_total"));
	print_graphs(r);
	printf("requests:   %.0f running, %.0f waiting, %.0f held\n",
	       num(r, "running"), num(r, "waiting"), num(r, "active"));
	printf("clients:    %.0f\n", num(r, "clients"));
	printf("kv pages:   %.0f total, %.0f used, %.0f cached, %.0f free\n",
	       num(kv, "pages_total"), num(kv, "pages_used"),
	       num(kv, "pages_cached"), num(kv, "pages_free"));
	printf("steps:      %.0f, preemptions %.0f, prefix hits %.0f / "
	       "misses %.0f\n",
	       num(r, "steps"), num(r, "preemptions"), num(r, "prefix_hits"),
	       num(r, "prefix_misses"));
}

int cmd_status(const struct o1ctl_ctx *ctx, int argc, char **argv)
{
	cJSON *r = NULL;
	int json = 0;
	int ret = o1ctl_admin(ctx, argc, argv,
			      "usage: o1ctl status [--socket PATH] [--json]\n",
			      "{\"op\":\"status\"}", &r, &json);

	if (ret || !r)
		return ret;
	if (json) {
		o1ctl_admin_print_json(r);
	} else {
		print(r);
	}
	cJSON_Delete(r);
	return 0;
}
