/* Prints the size of every struct of <o1/client.h> that the Python
 * package mirrors with ctypes, and the offset of each field, one
 * "struct.field offset" or "struct size" per line; test_package.py compares
 * them with the ctypes structures, so the two cannot drift apart. */
#include <stddef.h>
#include <stdio.h>

#include "o1/client.h"

#define SIZE(s)	    printf(#s " %zu\n", sizeof(struct s))
#define OFF(s, f)   printf(#s "." #f " %zu\n", offsetof(struct s, f))

static void client_opts(void)
{
	SIZE(o1_client_opts);
	OFF(o1_client_opts, sz);
	OFF(o1_client_opts, socket_path);
	OFF(o1_client_opts, name);
	OFF(o1_client_opts, sq_entries);
	OFF(o1_client_opts, cq_entries);
	OFF(o1_client_opts, arena_bytes);
	OFF(o1_client_opts, spin_us);
	OFF(o1_client_opts, flags);
}

static void sampling(void)
{
	SIZE(o1_sampling);
	OFF(o1_sampling, sz);
	OFF(o1_sampling, temperature);
	OFF(o1_sampling, top_p);
	OFF(o1_sampling, min_p);
	OFF(o1_sampling, repeat_penalty);
	OFF(o1_sampling, presence_penalty);
	OFF(o1_sampling, frequency_penalty);
	OFF(o1_sampling, top_k);
	OFF(o1_sampling, repeat_last_n);
	OFF(o1_sampling, n_logprobs);
	OFF(o1_sampling, seed);
}

static void submit_opts(void)
{
	SIZE(o1_submit_opts);
	OFF(o1_submit_opts, sz);
	OFF(o1_submit_opts, req_id);
	OFF(o1_submit_opts, text);
	OFF(o1_submit_opts, text_len);
	OFF(o1_submit_opts, ids);
	OFF(o1_submit_opts, n_ids);
	OFF(o1_submit_opts, sampling);
	OFF(o1_submit_opts, max_tokens);
	OFF(o1_submit_opts, stop_ids);
	OFF(o1_submit_opts, n_stop_ids);
	OFF(o1_submit_opts, stop_strings);
	OFF(o1_submit_opts, n_stop_strings);
	OFF(o1_submit_opts, flags);
	OFF(o1_submit_opts, refine_steps);
	OFF(o1_submit_opts, grammar_type);
	OFF(o1_submit_opts, grammar);
	OFF(o1_submit_opts, grammar_len);
}

static void event(void)
{
	SIZE(o1_event);
	OFF(o1_event, type);
	OFF(o1_event, req_id);
	OFF(o1_event, n_ids);
	OFF(o1_event, ids);
	OFF(o1_event, has_logprobs);
	OFF(o1_event, logprobs);
	OFF(o1_event, text_len);
	OFF(o1_event, text);
	OFF(o1_event, finish);
	OFF(o1_event, error);
	OFF(o1_event, prompt_tokens);
	OFF(o1_event, generated_tokens);
	OFF(o1_event, message);
	OFF(o1_event, client_ns);
	OFF(o1_event, daemon_ns);
	OFF(o1_event, position);
	OFF(o1_event, n_top);
	OFF(o1_event, top_ids);
	OFF(o1_event, top_logprobs);
	OFF(o1_event, round);
	OFF(o1_event, entropy);
	OFF(o1_event, mean_logprob);
	OFF(o1_event, min_logprob);
	OFF(o1_event, mean_entropy);
	OFF(o1_event, conf_tokens);
	OFF(o1_event, rounds);
	OFF(o1_event, cached_tokens);
	OFF(o1_event, refine_stop);
	OFF(o1_event, text_bytes);
	OFF(o1_event, latency_ns);
	OFF(o1_event, dev_seq);
	OFF(o1_event, top_first);
	OFF(o1_event, top_off);
	OFF(o1_event, top_len);
	OFF(o1_event, top_cut);
	OFF(o1_event, top_text);
}

static void client_limits(void)
{
	SIZE(o1_client_limits);
	OFF(o1_client_limits, sz);
	OFF(o1_client_limits, max_prompt_bytes);
	OFF(o1_client_limits, max_prompt_tokens);
	OFF(o1_client_limits, max_tokens);
	OFF(o1_client_limits, max_inflight);
	OFF(o1_client_limits, vocab_size);
	OFF(o1_client_limits, max_grammar_bytes);
	OFF(o1_client_limits, tool_format);
}

static void trace(void)
{
	SIZE(o1_trace_round);
	OFF(o1_trace_round, round);
	OFF(o1_trace_round, prompt_tokens);
	OFF(o1_trace_round, cached_tokens);
	OFF(o1_trace_round, generated_tokens);
	OFF(o1_trace_round, mean_logprob);
	OFF(o1_trace_round, min_logprob);
	OFF(o1_trace_round, mean_entropy);
	OFF(o1_trace_round, latency_ns);
	OFF(o1_trace_round, finish);
	OFF(o1_trace_round, stop);
	OFF(o1_trace_round, text);
	OFF(o1_trace_round, text_len);
	OFF(o1_trace_round, complete);
	SIZE(o1_trace);
	OFF(o1_trace, n_rounds);
	OFF(o1_trace, rounds);
	OFF(o1_trace, stop);
	OFF(o1_trace, done);
}

static void device_output(void)
{
	SIZE(o1_device_output);
	OFF(o1_device_output, sz);
	OFF(o1_device_output, area);
	OFF(o1_device_output, rows);
	OFF(o1_device_output, row_floats);
	OFF(o1_device_output, row_stride_bytes);
	OFF(o1_device_output, stamps_off);
	OFF(o1_device_output, area_bytes);
	OFF(o1_device_output, pci_bus_id);
	OFF(o1_device_output, mem_handle);
	OFF(o1_device_output, event_handle);
}

int main(void)
{
	client_opts();
	sampling();
	submit_opts();
	event();
	trace();
	device_output();
	client_limits();
	return 0;
}
