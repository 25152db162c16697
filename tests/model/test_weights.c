/* model/weights.c: bytes by type over a hand-made tensor list (a Q4_K_M
 * mix), the text form, a buffer too small (-ENOSPC, terminated), and more
 * types than the table holds (counted in "other"). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>
#include <errno.h>

#include "model/weights.h"

static struct o1_tensor tensor(enum o1_dtype type, uint64_t bytes)
{
	struct o1_tensor t = {0};

	t.dtype = type, t.n_bytes = bytes, t.n_dims = 2;
	return t;
}

static void test_mix(void **state)
{
	struct o1_tensor ts[] = {
	    tensor(O1_DTYPE_Q4_K, 3000000000ull),
	    tensor(O1_DTYPE_F32, 16384),
	    tensor(O1_DTYPE_Q6_K, 850000000ull),
	    tensor(O1_DTYPE_Q4_K, 930000000ull),
	    tensor(O1_DTYPE_F32, 16384),
	};
	struct o1_model m = {0};
	struct o1_model_weights w;
	char buf[256], tiny[12];

	(void)state;
	m.tensors = ts, m.n_tensors = 5;
	o1_model_weights(&m, &w);
	assert_int_equal(w.total, 4780032768ull);
	assert_int_equal(w.n, 3);
	assert_int_equal(w.t[0].type, O1_DTYPE_Q4_K);
	assert_int_equal(w.t[0].tensors, 2);
	assert_int_equal(w.t[0].bytes, 3930000000ull);
	/* largest first, whatever the order of the tensors */
	assert_int_equal(w.t[1].type, O1_DTYPE_Q6_K);
	assert_int_equal(w.t[2].type, O1_DTYPE_F32);
	assert_int_equal(w.t[2].bytes, 32768);
	assert_int_equal(w.other, 0);
	assert_int_equal(o1_model_weights_text(&w, buf, sizeof(buf)), 0);
	assert_string_equal(buf, "4.78 GB: Q4_K 3.93 GB (2), Q6_K 850.00 MB "
				 "(1), F32 32.77 kB (2)");
	assert_int_equal(o1_model_weights_text(&w, tiny, sizeof(tiny)),
			 -ENOSPC);
	assert_true(strlen(tiny) < sizeof(tiny));
}

static void test_many_types(void **state)
{
	static const enum o1_dtype types[] = {
	    O1_DTYPE_F32,  O1_DTYPE_F16,  O1_DTYPE_BF16, O1_DTYPE_Q8_0,
	    O1_DTYPE_Q4_0, O1_DTYPE_Q4_K, O1_DTYPE_Q6_K};
	struct o1_tensor ts[O1_MODEL_WEIGHT_TYPES_MAX + 3];
	struct o1_model m = {0};
	struct o1_model_weights w;
	size_t nt = sizeof(types) / sizeof(types[0]);

	(void)state;
	/* more distinct types than the table holds: the seven real ones,
	 * then ids no file has (the counter takes any id) */
	for (size_t i = 0; i < O1_MODEL_WEIGHT_TYPES_MAX + 3; i++)
		ts[i] =
		    tensor(i < nt ? types[i] : (enum o1_dtype)(100 + i), 100);
	m.tensors = ts, m.n_tensors = O1_MODEL_WEIGHT_TYPES_MAX + 3;
	o1_model_weights(&m, &w);
	assert_int_equal(w.n, O1_MODEL_WEIGHT_TYPES_MAX);
	assert_int_equal(w.other, 300);
	assert_int_equal(w.total, 100 * (O1_MODEL_WEIGHT_TYPES_MAX + 3));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_mix),
	    cmocka_unit_test(test_many_types),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
