/* o1chat: sends one prompt to o1d through libo1client, streams the answer
 * to stdout as the tokens arrive, and prints the timings on stderr:
 *
 *   o1chat [-c FILE] [--set section.key=value ...] [--socket PATH]
 *          [--max-tokens N] [--temperature T] [--seed S] [--raw]
 *          [--tools FILE [--tool-choice auto|none|required|NAME]] "prompt"
 *
 * The prompt is a user message rendered with the model's chat template
 * (--raw: plain text completion, BOS added). --tools offers the model
 * the tools of FILE (a JSON list in OpenAI's shape, chat_tools.h): the
 * answer is then read back and printed as its content and one
 * "tool_call: NAME ARGUMENTS" line per call. Timings: time to first
 * token (submit to the first TOKEN event), decode rate (tokens after the
 * first over the time after the first) and the total. Exit 0 when the
 * request finished (stop, length or EOS), 1 when it failed or was
 * cancelled (or o1d cannot be reached), 2 on bad arguments. The socket is
 * --socket, else $O1D_SOCKET, else ipc.socket of the configuration (-c,
 * --set), as every o1d program finds it. This is example code: the client
 * calls use only the public API (the configuration is read with the
 * project's config module, for -c and --set). */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "chat_tools.h"
#include "common/version.h"
#include "config/config.h"
#include "o1/client.h"

struct chat_args {
	const char *socket;
	const char *prompt;
	unsigned long max_tokens;
	float temperature;
	unsigned long long seed;
	int raw;
	const char *tools, *tool_choice; /* --tools FILE, --tool-choice */
};

struct chat_stream {
	uint64_t t_submit, t_first, t_last;
	uint32_t tokens;
	/* with tools read back: the answer, printed once read */
	char *text;
	size_t len, cap;
	int nomem;
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: o1chat [-c FILE] [--set section.key=value ...] "
		   "[--socket PATH]\n"
		   "              [--max-tokens N] [--temperature T] [--seed S] "
		   "[--raw]\n"
		   "              [--tools FILE [--tool-choice "
		   "auto|none|required|NAME]] PROMPT\n"
		   "       o1chat --help | --version\n"
		   "Streams the answer to stdout, timings to stderr. "
		   "Defaults: --max-tokens 128,\ngreedy, the model's chat "
		   "template.\n"
		   "--tools FILE: a JSON list of OpenAI tools; the answer's "
		   "calls are printed as\n\"tool_call: NAME ARGUMENTS\" "
		   "lines (--tool-choice: default auto)\n"
		   "socket: --socket, else $O1D_SOCKET, else ipc.socket of the "
		   "configuration\n"
		   "exit codes: 0 finished, 1 failed or cancelled (or o1d not "
		   "reached), 2 bad\narguments\n");
}

static int parse_num(const char *opt, const char *s, double lo, double hi,
		     double *out)
{
	char *end;

	errno = 0;
	*out = strtod(s, &end);
	if (errno || end == s || *end || !(*out >= lo && *out <= hi)) {
		fprintf(stderr,
			"o1chat: %s '%s': expected a number in "
			"[%.15g, %.15g]\n",
			opt, s, lo, hi);
		return -EINVAL;
	}
	return 0;
}

static int parse_option(int opt, struct chat_args *a)
{
	double x;
	int err = 0;

	switch (opt) {
	case 's':
		a->socket = optarg;
		break;
	case 'm':
		err = parse_num("--max-tokens", optarg, 1, 1 << 20, &x);
		a->max_tokens = (unsigned long)x;
		break;
	case 't':
		err = parse_num("--temperature", optarg, 0, 100, &x);
		a->temperature = (float)x;
		break;
	case 'S':
		err = parse_num("--seed", optarg, 0, 1e18, &x);
		a->seed = (unsigned long long)x;
		break;
	case 'r':
		a->raw = 1;
		break;
	case 'T':
		a->tools = optarg;
		break;
	case 'C':
		a->tool_choice = optarg;
		break;
	default:
		err = -EINVAL;
	}
	return err;
}

static int parse(int argc, char **argv, struct chat_args *a)
{
	static const struct option longopts[] = {
	    {"socket", required_argument, NULL, 's'},
	    {"max-tokens", required_argument, NULL, 'm'},
	    {"temperature", required_argument, NULL, 't'},
	    {"seed", required_argument, NULL, 'S'},
	    {"raw", no_argument, NULL, 'r'},
	    {"tools", required_argument, NULL, 'T'},
	    {"tool-choice", required_argument, NULL, 'C'},
	    {"help", no_argument, NULL, 'h'},
	    {"version", no_argument, NULL, 'V'},
	    {0},
	};
	int opt;

	while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		if (opt == 'h') {
			usage(stdout);
			exit(0);
		}
		if (opt == 'V') {
			o1_version_print(stdout, "o1chat");
			exit(0);
		}
		if (parse_option(opt, a))
			return -EINVAL;
	}
	if (optind + 1 != argc || !argv[optind][0]) {
		fprintf(stderr, "o1chat: expected one non-empty PROMPT\n");
		return -EINVAL;
	}
	a->prompt = argv[optind];
	if ((a->tool_choice && !a->tools) || (a->tools && a->raw)) {
		fprintf(stderr, "o1chat: %s\n",
			a->raw ? "--tools is for chat, not --raw"
			       : "--tool-choice needs --tools");
		return -EINVAL;
	}
	return 0;
}

static int on_token(void *arg, const struct o1_event *ev)
{
	struct chat_stream *s = arg;

	s->t_last = now_ns();
	if (!s->tokens)
		s->t_first = s->t_last;
	s->tokens += ev->n_ids;
	if (s->cap) { /* kept for the read-back */
		if (!ev->text_len)
			return 0;
		if (s->len + ev->text_len >= s->cap) {
			char *t = realloc(s->text, 2 * s->cap + ev->text_len);

			if (!t) {
				s->nomem = 1;
				return 0;
			}
			s->text = t;
			s->cap = 2 * s->cap + ev->text_len;
		}
		memcpy(s->text + s->len, ev->text, ev->text_len);
		s->len += ev->text_len;
		return 0;
	}
	fwrite(ev->text, 1, ev->text_len, stdout);
	fflush(stdout);
	return 0;
}

static const char *finish_name(enum o1_finish f)
{
	static const char *const names[] = {"stop", "length", "eos",
					    "cancelled", "error"};

	return (unsigned)f < 5 ? names[f] : "?";
}

/* CALLS: the calls read back and printed, -1 when the answer streamed. */
static void print_timings(const struct chat_stream *s,
			  const struct o1_event *fin, uint64_t t_end, int calls)
{
	double ttft = s->tokens ? (s->t_first - s->t_submit) / 1e6 : 0;
	double decode_s = (s->t_last - s->t_first) / 1e9;
	char tool_calls[32] = "";

	if (calls < 0)
		printf("\n");
	else
		snprintf(tool_calls, sizeof(tool_calls), " tool_calls=%d",
			 calls);
	fflush(stdout);
	fprintf(stderr,
		"o1chat: finish=%s prompt_tokens=%u tokens=%u ttft_ms=%.2f "
		"decode_tok_s=%.1f total_ms=%.2f%s\n",
		finish_name(fin->finish), fin->prompt_tokens,
		fin->generated_tokens, ttft,
		s->tokens > 1 && decode_s > 0 ? (s->tokens - 1) / decode_s : 0,
		(t_end - s->t_submit) / 1e6, tool_calls);
}

/* The answer kept in S read back as T's calls and printed; the number of
 * calls, or -1 (said on stderr). */
static int read_back(struct o1_client *c, const struct chat_tools *t,
		     const struct chat_stream *s)
{
	struct o1_client_limits l = {.sz = sizeof(l)};
	int n;

	if (s->nomem) {
		fprintf(stderr, "o1chat: out of memory\n");
		return -1;
	}
	if (o1_client_limits(c, &l) || l.tool_format == O1_TOOLS_NONE)
		fprintf(stderr, "o1chat: the model's template has no tool-call "
				"format: the answer is text\n");
	n = chat_tools_print(t, l.tool_format, s->text ? s->text : "", s->len,
			     stdout);
	if (n < 0)
		fprintf(stderr, "o1chat: out of memory\n");
	return n;
}

/* Sends A's prompt (as T's chat request when T is not NULL). */
static int chat(struct o1_client *c, const struct chat_args *a,
		const struct chat_tools *t)
{
	struct o1_sampling sp = {
	    .sz = sizeof(sp), .temperature = a->temperature, .seed = a->seed};
	struct o1_submit_opts o = {
	    .sz = sizeof(o),
	    .req_id = 1,
	    .text = a->prompt,
	    .text_len = strlen(a->prompt),
	    .sampling = &sp,
	    .max_tokens = (uint32_t)a->max_tokens,
	    .flags = a->raw ? O1_FLAG_ADD_BOS : O1_FLAG_CHAT,
	};
	struct chat_stream s = {0};
	struct o1_event fin;
	int err, calls = -1;

	if (t) {
		o.text = t->request;
		o.text_len = strlen(t->request);
		o.flags |= O1_FLAG_CHAT_JSON;
		if (t->grammar) {
			o.grammar_type = O1_GRAMMAR_TYPE_TOOL_CALL;
			o.grammar = t->grammar;
			o.grammar_len = strlen(t->grammar);
		}
		s.cap = t->read_back ? 1 : 0; /* grows from the first token */
	}
	s.t_submit = now_ns();
	err = o1_client_generate(c, &o, on_token, &s, &fin);
	if (err) {
		fprintf(stderr, "o1chat: %s (%s)\n", o1_client_strerror(err),
			o1_last_error());
		free(s.text);
		return 1;
	}
	if (s.cap)
		calls = read_back(c, t, &s);
	free(s.text);
	print_timings(&s, &fin, now_ns(), calls);
	if (s.cap && calls < 0)
		return 1;
	if (fin.finish == O1_FINISH_REASON_ERROR) {
		/* the daemon's ERROR event said why (a refused grammar) */
		fprintf(stderr, "o1chat: the request failed: %s%s%s\n",
			o1_client_strerror(fin.error),
			*o1_last_error() ? ": " : "", o1_last_error());
		return 1;
	}
	if (fin.finish == O1_FINISH_REASON_CANCELLED) {
		fprintf(stderr, "o1chat: the request was cancelled (by an "
				"admin, or o1d is stopping)\n");
		return 1;
	}
	return 0;
}

/* -c FILE and --set (removed from argv); the socket as every o1d program
 * finds it when --socket is not given. */
static int read_config(int *argc, char **argv, const char **socket)
{
	static struct o1_config cfg;
	const char *env = getenv("O1D_SOCKET");
	char err[512];

	if (o1_config_init_defaults(&cfg) ||
	    o1_config_parse_args(&cfg, argc, argv, err, sizeof(err))) {
		fprintf(stderr, "o1chat: %s\n", err);
		return -EINVAL;
	}
	*socket = env && *env ? env : cfg.ipc.socket;
	return 0;
}

int main(int argc, char **argv)
{
	struct chat_args a = {.max_tokens = 128};
	struct o1_client_opts co = {.sz = sizeof(co), .name = "o1chat"};
	const char *socket;
	struct chat_tools t = {0};
	struct o1_client *c;
	int err;

	if (read_config(&argc, argv, &socket))
		return 2;
	if (parse(argc, argv, &a)) {
		usage(stderr);
		return 2;
	}
	if (a.tools && chat_tools_make(a.tools, a.tool_choice, a.prompt, &t))
		return 2;
	co.socket_path = a.socket ? a.socket : socket;
	err = o1_client_connect(&co, &c);
	if (err) {
		fprintf(stderr, "o1chat: connect %s: %s (%s)\n",
			co.socket_path,
			o1_client_strerror(err), o1_last_error());
		chat_tools_fini(&t);
		return 1;
	}
	err = chat(c, &a, a.tools ? &t : NULL);
	o1_client_close(c);
	chat_tools_fini(&t);
	return err;
}
