/* libFuzzer harness for the config loader: any text either loads, or fails
 * with a message and leaves the struct unchanged. A loaded config must
 * survive a dump and reload unchanged; the input is also tried as one
 * --set assignment. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "common/error.h"

static void check_round_trip(const struct o1_config *c)
{
	struct o1_config back;
	char err[512], *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);

	if (!f)
		return;
	o1_config_dump(c, f);
	fclose(f);
	o1_config_init_defaults(&back);
	if (o1_config_load_string(&back, text, "dump", err, sizeof(err)) ||
	    memcmp(&back, c, sizeof(back)) != 0)
		abort();
	free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct o1_config d, c;
	char err[1024];
	char *text = malloc(size + 1);

	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = 0;
	o1_config_init_defaults(&d);
	c = d;
	if (o1_config_load_string(&c, text, "fuzz", err, sizeof(err)) == 0)
		check_round_trip(&c);
	else if (memcmp(&c, &d, sizeof(c)) != 0 || !err[0])
		abort();
	c = d;
	if (o1_config_set(&c, text, err, sizeof(err)) == 0)
		check_round_trip(&c);
	free(text);
	return 0;
}
