/* o1d end to end on the CPU backend with a tiny model made by o1model:
 * real daemon and client processes. Every token sequence is checked
 * against `o1model run` with the same parameters, every request must get
 * exactly one FINAL, and at idle every KV page must be free (or held by
 * the prefix cache alone).
 * argv: o1d o1model */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "o1/client.h"

static const char *o1d_bin, *o1model_bin;

#define N_SPECS 20

static struct result refs[N_SPECS];
static struct spec specs[N_SPECS];

static int setup(void **state)
{
	static struct daemon_proc d;

	if (harness_init(&d, o1model_bin))
		return -1;
	for (unsigned i = 0; i < N_SPECS; i++) {
		spec_make(&specs[i], i);
		if (spec_reference(o1model_bin, d.model, &specs[i], &refs[i]))
			return -1;
	}
	*state = &d;
	return 0;
}

static int teardown(void **state)
{
	harness_fini(*state);
	return 0;
}

static void expect_idle(struct daemon_proc *d)
{
	struct kv_status st;

	assert_int_equal(admin_wait_idle(d->socket, 5000, &st), 0);
	assert_int_equal(st.pages_free + st.pages_cached, st.pages_total);
}

static void test_single(void **state)
{
	struct daemon_proc *d = *state;
	struct result r;

	assert_int_equal(daemon_start(d, o1d_bin, NULL), 0);
	for (unsigned i = 0; i < 3; i++) {
		assert_int_equal(spec_run(d->socket, &specs[i], &r), 0);
		assert_int_equal(result_same(&r, &refs[i], "single"), 0);
		assert_int_equal(r.prompt_tokens, specs[i].n_ids);
		assert_int_equal(r.generated, r.n_ids);
	}
	expect_idle(d);
	assert_int_equal(daemon_stop(d), 0);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_single),
	};

	if (argc < 3) {
		fprintf(stderr, "usage: test_o1d O1D O1MODEL\n");
		return 2;
	}
	o1d_bin = argv[1];
	o1model_bin = argv[2];
	return cmocka_run_group_tests(tests, setup, teardown);
}
