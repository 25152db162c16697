/* Linked into every fuzz harness (o1_add_fuzzer): no log lines. A parser
 * logs why it rejects an input, once per input, and a fuzzer feeds
 * millions of rejected inputs (fuzz_safetensors wrote 1.1 GB in three
 * minutes). O1_FUZZ_LOG=LEVEL (error|warn|info|debug|trace) brings them
 * back, to see why a crashing input was taken where it was. Runs before
 * main, so the replay driver and libFuzzer's own main both get it. */
#include <stdlib.h>

#include "common/log.h"

__attribute__((constructor)) static void fuzz_quiet(void)
{
	const char *want = getenv("O1_FUZZ_LOG");
	enum o1_log_level level;

	if (want && o1_log_parse_level(want, &level) == 0)
		o1_log_set_level(level);
	else
		o1_log_set_level(O1_LOG_OFF);
}
