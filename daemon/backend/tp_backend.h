/* The tensor-parallel backend: one backend (backend.h) to its caller over
 * N rank backends of one kind, one thread per rank.
 *
 * Create plans every rank (tp_shard.h, with the rank kind's alignment),
 * creates the kind's group (tp_group.h: an in-process all-reduce on CPU,
 * NCCL on CUDA), starts one thread per rank and has each build its shard
 * model and create its rank backend there (rank r on devices[r]; CUDA
 * rank backends bind their thread to their device), all at once: CUDA
 * ranks run their graph warm-ups, whose all-reduces need every rank. With
 * graphs, every rank must hold a graph for the same buckets (NCCL needs
 * the same captured collectives on every rank), else create fails.
 *
 * A step checks the token ids on the caller's thread, hands the same step
 * to every rank thread and waits for all: each rank runs the whole forward
 * over its heads and FFN columns, summing the O and down partials across
 * the group, and rank 0 alone runs the LM head into the caller's logits.
 * A rank's error fails the step and poisons the group (the other ranks
 * stop at their next all-reduce instead of waiting for ever); the backend
 * then refuses every later step (-EIO): a rank's state is unknown after a
 * failure. With cfg.sampling (allowed when the rank kind can sample) rank
 * 0 also samples the step's rows after its LM head. Graph counters are
 * rank 0's. The KV layout the caller sees is
 * the whole model's: its page ids index every rank's pool, which holds
 * that rank's kv heads. */
#ifndef O1_TP_BACKEND_H
#define O1_TP_BACKEND_H

#include "backend.h"

/* Steps, destroys and reports; its create is o1_tp_backend_create. */
extern const struct o1_backend_ops o1_tp_backend_ops;

/* RANK_OPS (of KIND) over CFG->tensor_parallel ranks; CFG resolved. */
int o1_tp_backend_create(enum o1_backend_kind kind,
			 const struct o1_backend_ops *rank_ops,
			 const struct o1_model *m,
			 const struct o1_backend_config *cfg, void **state);

#endif
