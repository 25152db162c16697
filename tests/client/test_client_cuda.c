/* libo1client-cuda's checks that need no GPU: arguments, a connection
 * without an area (the daemon's typed refusal passes through), and fake
 * IPC handles from the test server, which must fail cleanly (-EIO) on any
 * machine: without a device, or on one where the handles mean nothing.
 * The mapping itself is tested on a GPU by tests/gpu/test_gpu_devout. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "tests/ipc/ipc_harness.h"
#include "o1/client.h"
#include "o1/client_cuda.h"

static struct o1_client *connect_to(const struct test_server *s, uint32_t flags)
{
	struct o1_client_opts o = {.sz = sizeof(o),
				   .socket_path = s->path,
				   .name = "cuda",
				   .flags = flags};
	struct o1_client *c = NULL;

	assert_int_equal(o1_client_connect(&o, &c), 0);
	return c;
}

static void start(struct test_server *s, const char *devout)
{
	const char *args[] = {devout ? "--devout" : NULL, devout, NULL};

	memset(s, 0, sizeof(*s));
	assert_int_equal(server_start(s, O1_TEST_SERVER, args), 0);
}

static void test_arguments(void **state)
{
	struct o1_cuda_output_opts bad = {.sz = 0, .device = 0};
	struct o1_cuda_output *o = (struct o1_cuda_output *)&bad;
	struct o1_event ev = {.type = O1_EVENT_TOKEN, .n_ids = 1};
	struct test_server s;
	struct o1_client *c;
	const float *row = NULL;

	(void)state;
	start(&s, NULL);
	c = connect_to(&s, O1_CONNECT_DEVICE_OUT);
	assert_int_equal(o1_cuda_output_open(NULL, NULL, &o), -EINVAL);
	assert_int_equal(o1_cuda_output_open(c, NULL, NULL), -EINVAL);
	assert_int_equal(o1_cuda_output_open(c, &bad, &o), -EINVAL);
	assert_ptr_equal(o, &bad); /* untouched on failure */
	assert_int_equal(o1_cuda_output_row(NULL, &ev, 0, &row), -EINVAL);
	assert_null(row);
	assert_int_equal(o1_cuda_output_check(NULL, &ev, 0), -EINVAL);
	assert_int_equal(o1_cuda_output_rows(NULL), 0);
	assert_int_equal(o1_cuda_output_row_floats(NULL), 0);
	o1_cuda_output_close(NULL);
	o1_client_close(c);
	assert_int_equal(server_stop(&s), 0);
}

/* No area: the daemon's refusal comes back, with its text. */
static void test_no_area(void **state)
{
	struct test_server s;
	struct o1_client *c, *plain;
	struct o1_cuda_output *o = NULL;

	(void)state;
	start(&s, NULL);
	c = connect_to(&s, O1_CONNECT_DEVICE_OUT);
	assert_int_equal(o1_cuda_output_open(c, NULL, &o),
			 O1_CLIENT_E_NO_DEVOUT);
	assert_null(o);
	assert_non_null(strstr(o1_cuda_last_error(), "no device output"));
	plain = connect_to(&s, 0);
	assert_int_equal(o1_cuda_output_open(plain, NULL, &o), -EINVAL);
	assert_non_null(strstr(o1_cuda_last_error(), "O1_CONNECT_DEVICE_OUT"));
	o1_client_close(plain);
	o1_client_close(c);
	assert_int_equal(server_stop(&s), 0);
}

/* Handles that map nothing: -EIO from the CUDA call that refused them,
 * with or without a device, and no handle comes back. */
static void test_fake_handles(void **state)
{
	struct o1_cuda_output_opts opts = {.sz = sizeof(opts), .device = 0};
	struct o1_device_output d = {.sz = sizeof(d)};
	struct test_server s;
	struct o1_client *c;
	struct o1_cuda_output *o = NULL;

	(void)state;
	start(&s, "1");
	c = connect_to(&s, O1_CONNECT_DEVICE_OUT);
	assert_int_equal(o1_client_device_output(c, &d), 0);
	assert_int_equal(o1_cuda_output_open(c, NULL, &o), -EIO);
	assert_null(o);
	assert_true(strlen(o1_cuda_last_error()) > 0);
	assert_int_equal(o1_cuda_output_open(c, &opts, &o), -EIO);
	assert_null(o);
	o1_client_close(c);
	assert_int_equal(server_stop(&s), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_arguments),
	    cmocka_unit_test(test_no_area),
	    cmocka_unit_test(test_fake_handles),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
