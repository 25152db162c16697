/* A client as a user writes it: <o1/client.h> and -lo1client from
 * pkg-config, one greedy request. Usage: client SOCKET; prints the tokens. */
#include <o1/client.h>
#include <stdio.h>

static int print(void *arg, const struct o1_event *ev)
{
	(void)arg;
	return fputs(ev->text, stdout) < 0;
}

int main(int argc, char **argv)
{
	struct o1_client_opts co = {.sz = sizeof(co), .socket_path = argv[1]};
	struct o1_submit_opts so = {.sz = sizeof(so), .req_id = 1, .text = "Hello",
				    .text_len = 5, .max_tokens = 8, .flags = O1_FLAG_ADD_BOS};
	struct o1_client *c;
	struct o1_event fin;

	if (argc != 2 || o1_client_connect(&co, &c) < 0 ||
	    o1_client_generate(c, &so, print, NULL, &fin) < 0)
		return fprintf(stderr, "client: %s\n", o1_last_error()), 1;
	printf("\ngenerated %u tokens\n", fin.generated_tokens);
	o1_client_close(c);
	return fin.error || !fin.generated_tokens;
}
