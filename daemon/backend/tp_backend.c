/* The tensor-parallel backend (tp_backend.h).
 *
 * Threads: the caller's thread (the engine loop) and one worker per rank.
 * mu guards cmd, gen and n_done. The caller publishes a command by setting
 * cmd (and step) and advancing gen under mu, then waits until n_done ==
 * n_threads; each worker runs the command once per gen, writes only its
 * own struct tp_rank, and counts itself done under mu. So between commands
 * every rank's state is quiescent and readable from the caller's thread
 * (graph counters), and a step's borrowed pointers outlive its use. */
#include "tp_backend.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/log.h"
#include "tp_group.h"
#include "tp_shard.h"

_Static_assert(O1_BACKEND_DEVICES_MAX == O1_TP_MAX_RANKS,
	       "one rank per device");

enum tp_cmd { TP_CREATE, TP_STEP, TP_DESTROY, TP_EXIT };

struct tp_state;

struct tp_rank {
	struct tp_state *tp;
	pthread_t thread;
	struct o1_tp_shard shard;
	struct o1_backend_config cfg; /* with tp_rank, tp_size, tp_link */
	void *state;		      /* the rank backend's */
	int err;		      /* of the last command */
};

struct tp_state {
	const struct o1_backend_ops *ops; /* the ranks' */
	const struct o1_tp_group_ops *gops;
	void *group;
	const struct o1_model *model; /* borrowed during create */
	uint32_t n, n_threads, vocab;
	pthread_mutex_t mu;
	pthread_cond_t go, done;
	uint64_t gen;
	uint32_t n_done;
	enum tp_cmd cmd;
	const struct o1_step *step;
	bool stopped; /* a rank failed: no more steps */
	struct tp_rank ranks[O1_BACKEND_DEVICES_MAX];
};

static const struct o1_tp_group_ops *const group_table[] = {
    [O1_BACKEND_CPU] = &o1_tp_group_cpu_ops,
#ifdef O1_WITH_NCCL
    [O1_BACKEND_CUDA] = &o1_tp_group_nccl_ops,
#else
    [O1_BACKEND_CUDA] = NULL,
#endif
};
_Static_assert(sizeof(group_table) / sizeof(group_table[0]) == O1_BACKEND_COUNT,
	       "one group kind per backend kind");

/* The rank's shard model, then its backend over it. */
static int rank_create(struct tp_rank *k)
{
	struct o1_model *sm;
	int err = o1_tp_shard_model(k->tp->model, &k->shard, &sm);

	if (!err) {
		err = k->tp->ops->create(sm, &k->cfg, &k->state);
		o1_model_close(sm);
	}
	return err;
}

static int run_cmd(struct tp_rank *k, enum tp_cmd cmd)
{
	int err = 0;

	switch (cmd) {
	case TP_CREATE:
		err = rank_create(k);
		break;
	case TP_STEP:
		err = k->tp->ops->step(k->state, k->tp->step);
		break;
	case TP_DESTROY:
		k->tp->ops->destroy(k->state);
		k->state = NULL;
		if (k->tp->gops->rank_fini)
			k->tp->gops->rank_fini(k->tp->group,
					       (uint32_t)(k - k->tp->ranks));
		break;
	case TP_EXIT:
		break;
	}
	if (err && k->cfg.tp_link.fail)
		k->cfg.tp_link.fail(k->cfg.tp_link.ctx);
	return err;
}

static void *worker(void *arg)
{
	struct tp_rank *k = arg;
	struct tp_state *tp = k->tp;
	uint64_t seen = 0;
	enum tp_cmd cmd;

	do {
		pthread_mutex_lock(&tp->mu);
		while (tp->gen == seen)
			pthread_cond_wait(&tp->go, &tp->mu);
		seen = tp->gen;
		cmd = tp->cmd;
		pthread_mutex_unlock(&tp->mu);
		k->err = run_cmd(k, cmd);
		pthread_mutex_lock(&tp->mu);
		if (++tp->n_done == tp->n_threads)
			pthread_cond_signal(&tp->done);
		pthread_mutex_unlock(&tp->mu);
	} while (cmd != TP_EXIT);
	return NULL;
}

/* Runs CMD on every rank thread and waits for all; the first rank's
 * error. */
static int run_all(struct tp_state *tp, enum tp_cmd cmd)
{
	int err = 0;

	pthread_mutex_lock(&tp->mu);
	tp->cmd = cmd;
	tp->n_done = 0;
	tp->gen++;
	pthread_cond_broadcast(&tp->go);
	while (tp->n_done < tp->n_threads)
		pthread_cond_wait(&tp->done, &tp->mu);
	pthread_mutex_unlock(&tp->mu);
	for (uint32_t r = 0; r < tp->n_threads; r++)
		if (tp->ranks[r].err && !err) {
			err = tp->ranks[r].err;
			o1_err("tensor parallel: rank %u: %s", r,
			       o1_strerror(err));
		}
	return err;
}

static void tp_destroy(void *state)
{
	struct tp_state *tp = state;

	if (!tp)
		return;
	if (tp->n_threads) {
		run_all(tp, TP_DESTROY);
		run_all(tp, TP_EXIT);
	}
	for (uint32_t r = 0; r < tp->n_threads; r++)
		pthread_join(tp->ranks[r].thread, NULL);
	tp->gops->destroy(tp->group);
	pthread_cond_destroy(&tp->done);
	pthread_cond_destroy(&tp->go);
	pthread_mutex_destroy(&tp->mu);
	free(tp);
}

static int start_threads(struct tp_state *tp)
{
	for (uint32_t r = 0; r < tp->n; r++) {
		int e = pthread_create(&tp->ranks[r].thread, NULL, worker,
				       &tp->ranks[r]);

		if (e) {
			o1_err("tensor parallel: cannot start rank %u's "
			       "thread: %s",
			       r, strerror(e));
			return -e;
		}
		tp->n_threads++;
	}
	return 0;
}

/* Every rank's shard and config, and the group. */
static int plan_ranks(struct tp_state *tp, const struct o1_model *m,
		      const struct o1_backend_config *cfg)
{
	int err = 0;

	for (uint32_t r = 0; !err && r < tp->n; r++) {
		struct tp_rank *k = &tp->ranks[r];

		k->tp = tp;
		err = o1_tp_shard_plan(&m->desc, r, tp->n, tp->ops->tp_align,
				       &k->shard);
		k->cfg = *cfg;
		k->cfg.tensor_parallel = 0;
		k->cfg.device = cfg->devices[r];
		k->cfg.tp_rank = r;
		k->cfg.tp_size = tp->n;
	}
	if (!err)
		err = tp->gops->create(
		    tp->n, cfg->devices,
		    (uint64_t)cfg->max_batch_tokens * m->desc.dim, &tp->group);
	for (uint32_t r = 0; !err && r < tp->n; r++)
		tp->gops->link(tp->group, r, &tp->ranks[r].cfg.tp_link);
	return err;
}

/* NCCL needs every rank to replay the same captured collectives: the
 * ranks must hold graphs for the same buckets and spans. */
static int check_graphs(const struct tp_state *tp)
{
	struct o1_backend_graph_stats a, b;

	if (!tp->ops->graph_stats)
		return 0;
	tp->ops->graph_stats(tp->ranks[0].state, &a);
	for (uint32_t r = 1; r < tp->n; r++) {
		tp->ops->graph_stats(tp->ranks[r].state, &b);
		if (b.n_buckets != a.n_buckets || b.n_spans != a.n_spans) {
			o1_err("tensor parallel: rank %u has %u graph buckets "
			       "in %u context spans, rank 0 %u in %u",
			       r, b.n_buckets, b.n_spans, a.n_buckets,
			       a.n_spans);
			return -O1_E_CUDA;
		}
		for (uint32_t i = 0; i < a.n_buckets; i++)
			if (b.buckets[i].captured != a.buckets[i].captured) {
				o1_err("tensor parallel: rank %u's graph for "
				       "batch %u %s captured, rank 0's %s",
				       r, a.buckets[i].batch,
				       b.buckets[i].captured ? "was" : "not",
				       a.buckets[i].captured ? "was" : "not");
				return -O1_E_CUDA;
			}
	}
	return 0;
}

static int check_kind(enum o1_backend_kind kind,
		      const struct o1_backend_ops *rank_ops)
{
	if (!rank_ops->tp_align || !group_table[kind]) {
		o1_err("tensor parallelism over the %s backend is not "
		       "available%s",
		       rank_ops->name,
		       kind == O1_BACKEND_CUDA ? ": this build has no NCCL"
					       : "");
		return -O1_E_UNSUPPORTED;
	}
	return 0;
}

int o1_tp_backend_create(enum o1_backend_kind kind,
			 const struct o1_backend_ops *rank_ops,
			 const struct o1_model *m,
			 const struct o1_backend_config *cfg, void **state)
{
	struct tp_state *tp;
	int err = check_kind(kind, rank_ops);

	if (err)
		return err;
	tp = calloc(1, sizeof(*tp));
	if (!tp)
		return -ENOMEM;
	tp->ops = rank_ops;
	tp->gops = group_table[kind];
	tp->n = cfg->tensor_parallel;
	tp->vocab = m->desc.vocab_size;
	tp->model = m;
	pthread_mutex_init(&tp->mu, NULL);
	pthread_cond_init(&tp->go, NULL);
	pthread_cond_init(&tp->done, NULL);
	err = plan_ranks(tp, m, cfg);
	err = err ? err : start_threads(tp);
	err = err ? err : run_all(tp, TP_CREATE);
	err = err ? err : check_graphs(tp);
	tp->model = NULL;
	if (err) {
		/* Ranks may be out of step: abort, do not finalize. */
		if (tp->group)
			tp->ranks[0].cfg.tp_link.fail(
			    tp->ranks[0].cfg.tp_link.ctx);
		tp_destroy(tp);
		return err;
	}
	o1_info("tensor parallel: %u ranks of the %s backend, %u query heads, "
		"%u kv heads "
		"and %u FFN columns each",
		tp->n, rank_ops->name, tp->ranks[0].shard.n_q_heads,
		tp->ranks[0].shard.n_kv_heads, tp->ranks[0].shard.n_ffn);
	*state = tp;
	return 0;
}

/* Token ids are checked here, once, so that no rank fails on them. */
static int check_ids(const struct tp_state *tp, const struct o1_step *st)
{
	for (uint32_t i = 0; i < st->n_seqs; i++)
		for (uint32_t j = 0; j < st->seqs[i].n_tokens; j++) {
			int32_t id = st->seqs[i].tokens[j];

			if (id < 0 || (uint32_t)id >= tp->vocab) {
				o1_err("tensor parallel: sequence %u: token "
				       "id %d at %u outside the vocabulary "
				       "of %u",
				       i, id, j, tp->vocab);
				return -O1_E_BOUNDS;
			}
		}
	return 0;
}

static int tp_step(void *state, const struct o1_step *st)
{
	struct tp_state *tp = state;
	int err;

	if (tp->stopped)
		return -EIO;
	err = check_ids(tp, st);
	if (err)
		return err;
	tp->step = st;
	err = run_all(tp, TP_STEP);
	tp->step = NULL;
	if (err || tp->gops->failed(tp->group)) {
		o1_err("tensor parallel: a rank failed; the %u-rank group is "
		       "stopped and refuses later steps",
		       tp->n);
		tp->stopped = true;
		err = err ? err : -EIO;
	}
	return err;
}

static void tp_graph_stats(const void *state,
			   struct o1_backend_graph_stats *out)
{
	const struct tp_state *tp = state;

	if (tp->ops->graph_stats)
		tp->ops->graph_stats(tp->ranks[0].state, out);
}

/* The graph_replay fault on every rank at once: the ranks replay in
 * lockstep, so each fails the same replays and falls back together, as
 * NCCL requires. Ranks are idle between steps. */
static int tp_fail_replays(void *state, uint32_t every)
{
	struct tp_state *tp = state;
	int err = 0;

	if (!tp->ops->fail_replays)
		return -O1_E_UNSUPPORTED;
	for (uint32_t r = 0; !err && r < tp->n; r++)
		err = tp->ops->fail_replays(tp->ranks[r].state, every);
	return err;
}

const struct o1_backend_ops o1_tp_backend_ops = {
    .name = "tensor-parallel",
    .create = NULL,
    .destroy = tp_destroy,
    .step = tp_step,
    .graph_stats = tp_graph_stats,
    .fail_replays = tp_fail_replays,
};
