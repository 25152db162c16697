/* o1-sidecar-bench: the latency the sidecar adds over the direct client
 * path, in one run. Each round sends the same prompt three ways, in
 * turn: through libo1client directly, as a streaming POST
 * /v1/completions to the sidecar, and as a non-streaming one (one
 * keep-alive HTTP connection, raw sockets, so no HTTP client library is
 * timed). Prints the median and p90 of time to first token and of the
 * whole request for each way.
 *
 *   o1-sidecar-bench --daemon SOCKET --port PORT [--requests N]
 *                    [--max-tokens M] [--prompt TEXT] */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <o1/client.h>

#define MAX_REQ 10000

struct args {
	const char *sock, *prompt;
	int port, n, max_tokens;
};

struct timing {
	double ttft_us[MAX_REQ], total_us[MAX_REQ];
};

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

struct first {
	double t0, ttft;
};

static int on_token(void *arg, const struct o1_event *ev)
{
	struct first *f = arg;

	(void)ev;
	if (!f->ttft)
		f->ttft = now_us() - f->t0;
	return 0;
}

static int direct(struct o1_client *c, const struct args *a, struct timing *t,
		  int i)
{
	struct o1_submit_opts o = {.sz = sizeof(o),
				   .req_id = (uint64_t)i + 1,
				   .text = a->prompt,
				   .text_len = strlen(a->prompt),
				   .max_tokens = (uint32_t)a->max_tokens,
				   .flags =
				       O1_FLAG_ADD_BOS | O1_FLAG_IGNORE_EOS};
	struct first f = {.t0 = now_us()};
	struct o1_event fin;
	int ret = o1_client_generate(c, &o, on_token, &f, &fin);

	t->total_us[i] = now_us() - f.t0;
	t->ttft_us[i] = f.ttft;
	return ret ? ret : fin.error;
}

/* Reads until the response is whole: [DONE] when streaming, else the
 * Content-Length body. Sets *ttft at the first "data: {". */
static int read_answer(int fd, bool stream, double t0, double *ttft)
{
	static char buf[1 << 20];
	size_t len = 0;
	char *body;

	*ttft = 0;
	for (;;) {
		ssize_t n = recv(fd, buf + len, sizeof(buf) - 1 - len, 0);

		if (n <= 0)
			return -EIO;
		len += (size_t)n;
		buf[len] = 0;
		if (!*ttft && strstr(buf, "data: {"))
			*ttft = now_us() - t0;
		if (stream && strstr(buf, "data: [DONE]") &&
		    strstr(buf, "\r\n0\r\n\r\n")) /* the last chunk */
			return 0;
		body = strstr(buf, "\r\n\r\n");
		if (!stream && body) {
			char *cl = strcasestr(buf, "Content-Length:");

			if (cl && (size_t)(body + 4 - buf) +
					  strtoul(cl + 15, NULL, 10) <=
				      len)
				return strncmp(buf, "HTTP/1.1 200", 12) ? -EIO
									: 0;
		}
	}
}

static int over_http(int fd, const struct args *a, bool stream,
		     struct timing *t, int i)
{
	char body[1024], req[2048];
	double t0, ttft;
	int n, ret;

	snprintf(body, sizeof(body),
		 "{\"model\":\"default\",\"prompt\":\"%s\",\"max_tokens\":%d,"
		 "\"temperature\":0,\"ignore_eos\":true,\"stream\":%s}",
		 a->prompt, a->max_tokens, stream ? "true" : "false");
	n = snprintf(req, sizeof(req),
		     "POST /v1/completions HTTP/1.1\r\nHost: localhost\r\n"
		     "Content-Type: application/json\r\nContent-Length: "
		     "%zu\r\n\r\n%s",
		     strlen(body), body);
	t0 = now_us();
	if (send(fd, req, (size_t)n, MSG_NOSIGNAL) != n)
		return -EIO;
	ret = read_answer(fd, stream, t0, &ttft);
	t->total_us[i] = now_us() - t0;
	t->ttft_us[i] = stream ? ttft : t->total_us[i];
	return ret;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static void report(const char *name, double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp);
	printf(" %s p50=%.1f p90=%.1f", name, v[n / 2], v[n * 9 / 10]);
}

static int parse(int argc, char **argv, struct args *a)
{
	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--daemon"))
			a->sock = argv[i + 1];
		else if (!strcmp(argv[i], "--port"))
			a->port = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--requests"))
			a->n = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--max-tokens"))
			a->max_tokens = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--prompt"))
			a->prompt = argv[i + 1];
		else
			return -1;
	}
	return a->sock && a->port > 0 && a->n > 0 && a->n <= MAX_REQ &&
		       a->max_tokens > 0 && !strpbrk(a->prompt, "\"\\")
		   ? 0
		   : -1;
}

static int connect_port(int port)
{
	struct sockaddr_in sa = {.sin_family = AF_INET,
				 .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;

	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
		perror("o1-sidecar-bench: connect");
		if (fd >= 0)
			close(fd);
		return -1;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;
}

int main(int argc, char **argv)
{
	static const char *const names[3] = {"direct", "http_stream",
					     "http_whole"};
	static struct timing t[3];
	struct args a = {.n = 200, .max_tokens = 16, .prompt = "The daemon"};
	struct o1_client_opts co = {.sz = sizeof(co)};
	struct o1_client *c;
	int fd, err = 0;

	if (parse(argc, argv, &a)) {
		fprintf(stderr,
			"usage: o1-sidecar-bench --daemon SOCKET --port "
			"PORT [--requests N<=10000] [--max-tokens M] "
			"[--prompt TEXT (no quotes)]\n");
		return 2;
	}
	co.socket_path = a.sock;
	if (o1_client_connect(&co, &c)) {
		fprintf(stderr, "o1-sidecar-bench: %s\n", o1_last_error());
		return 1;
	}
	fd = connect_port(a.port);
	for (int i = 0; i < a.n && fd >= 0 && !err; i++) {
		err = direct(c, &a, &t[0], i);
		if (!err)
			err = over_http(fd, &a, true, &t[1], i);
		if (!err)
			err = over_http(fd, &a, false, &t[2], i);
	}
	o1_client_close(c);
	if (fd < 0 || err) {
		fprintf(stderr, "o1-sidecar-bench: a request failed (%d)\n",
			err);
		return 1;
	}
	close(fd);
	printf("requests=%d max_tokens=%d prompt='%s' (us)\n", a.n,
	       a.max_tokens, a.prompt);
	for (int k = 0; k < 3; k++) {
		printf("%-12s", names[k]);
		report("ttft", t[k].ttft_us, a.n);
		report("total", t[k].total_us, a.n);
		printf("\n");
	}
	return 0;
}
