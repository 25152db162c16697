/* libFuzzer harness for the GGUF reader and the GGUF model/vocab loaders.
 *
 * Each input is parsed from memory; on success every key is read with the
 * getter its type implies, every array element and every tensor's data is
 * touched, and the first row of each small tensor is dequantized. The
 * same bytes are then loaded as a model and as a vocabulary through a
 * memfd (the loaders take paths), and a loaded model's tensors are read as
 * float32. Any out-of-bounds access shows up under ASan. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "model/gguf.h"
#include "model/model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static volatile uint64_t sink;

static void walk_array(const struct o1_gguf *g, const char *key)
{
	enum o1_gguf_type et;
	struct o1_gguf_str s;
	const void *p;
	uint64_t n;

	if (o1_gguf_get_arr(g, key, &et, &n) != 0)
		return;
	if (et == O1_GGUF_STRING) {
		for (uint64_t i = 0; i < n; i++)
			if (o1_gguf_arr_str(g, key, i, &s) == 0 && s.len)
				sink += (uint8_t)s.ptr[s.len - 1];
		return;
	}
	if (n > 0 && o1_gguf_arr_data(g, key, &p) == 0)
		sink += *(const uint8_t *)p;
}

static void walk_key(const struct o1_gguf *g, uint64_t i)
{
	struct o1_gguf_str k = o1_gguf_key(g, i), s;
	char key[256];
	int64_t v;
	double d;
	bool b;

	if (k.len >= sizeof(key) || memchr(k.ptr, 0, k.len))
		return;
	memcpy(key, k.ptr, k.len);
	key[k.len] = 0;
	if (o1_gguf_find_key(g, key) != (int64_t)i)
		abort(); /* keys are unique: lookup must find this one */
	switch (o1_gguf_kv_type(g, i)) {
	case O1_GGUF_STRING:
		if (o1_gguf_get_str(g, key, &s) == 0 && s.len)
			sink += (uint8_t)s.ptr[s.len - 1];
		break;
	case O1_GGUF_ARRAY:
		walk_array(g, key);
		break;
	case O1_GGUF_BOOL:
		if (o1_gguf_get_bool(g, key, &b) == 0)
			sink += b;
		break;
	case O1_GGUF_FLOAT32:
	case O1_GGUF_FLOAT64:
		if (o1_gguf_get_f64(g, key, &d) == 0)
			sink += d > 0;
		break;
	default:
		if (o1_gguf_get_i64(g, key, &v) == 0)
			sink += (uint64_t)v;
	}
}

static void walk_tensor(const struct o1_gguf *g, uint64_t i)
{
	const struct o1_gguf_tensor_info *t = o1_gguf_tensor(g, i);
	const uint8_t *p = t->data;
	float row[4096];

	if (t->n_bytes) {
		sink += p[0];
		sink += p[t->n_bytes - 1];
	}
	if (t->ne[0] <= 4096)
		o1_dtype_to_f32(t->type, t->data, row, t->ne[0]);
}

static void load_model(const char *path)
{
	struct o1_model *m;
	struct o1_vocab *v;
	float *buf;

	if (o1_vocab_load_gguf(path, &v) == 0)
		o1_vocab_destroy(v);
	if (o1_model_open(path, &m) != 0)
		return;
	for (uint32_t i = 0; i < m->n_tensors; i++) {
		uint64_t n = o1_tensor_elements(&m->tensors[i]);

		if (n > (1u << 20))
			continue;
		buf = malloc(n * sizeof(float));
		if (buf && o1_tensor_read_f32(m, &m->tensors[i], buf) == 0)
			sink += buf[0] > 0;
		free(buf);
	}
	o1_model_close(m);
}

static void load_via_memfd(const uint8_t *data, size_t size)
{
	char path[64];
	int fd = memfd_create("fuzz_gguf", MFD_CLOEXEC);

	if (fd < 0)
		return;
	if (write(fd, data, size) == (ssize_t)size) {
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
		load_model(path);
	}
	close(fd);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct o1_gguf *g;

	if (o1_gguf_open_memory(data, size, &g) != 0)
		return 0;
	for (uint64_t i = 0; i < o1_gguf_n_kv(g); i++)
		walk_key(g, i);
	for (uint64_t i = 0; i < o1_gguf_n_tensors(g); i++)
		walk_tensor(g, i);
	o1_gguf_close(g);
	load_via_memfd(data, size);
	return 0;
}
