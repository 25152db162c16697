/* Internals of the grammar module, shared by its source files only.
 *
 * Pipeline: text -> syntax tree (grammar_parse.c) -> one NFA over bytes
 * per rule, small non-recursive rules inlined (grammar_nfa.c) -> one
 * minimal DFA per rule whose edges are byte classes or calls of other
 * rules (grammar_dfa.c) -> checks and the global state table
 * (grammar_compile.c). The matcher (grammar_matcher.c) runs that table as
 * a pushdown automaton with several stacks at once.
 *
 * State numbers are global: rule r owns states [rule_first[r],
 * rule_first[r + 1]) and its start is rule_first[r]. Every state can still
 * reach its rule's accepting state, and every rule can finish, so a stack
 * the matcher holds can always be completed.
 */
#ifndef O1_GRAMMAR_INT_H
#define O1_GRAMMAR_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "grammar/grammar.h"

#define GR_NONE	    UINT32_MAX
#define GR_INF	    UINT32_MAX /* unbounded repetition */
#define GR_MAX_REP  10000      /* largest {n,m} bound */
#define GR_MAX_NEST 200	       /* nested groups in the text */
#define GR_MAX_CP   0x10ffffu

/* Limits that keep a compile bounded in memory and time. */
#define GR_MAX_RULES	   65536
#define GR_MAX_NFA_STATES  (1u << 20) /* one rule, after inlining */
#define GR_MAX_DFA_STATES  65536      /* whole grammar */
#define GR_MAX_SUBSET_WORK (1u << 26) /* NFA states visited building DFAs */
#define GR_INLINE_MAX	   96	      /* a rule this small is inlined */
#define GR_MAX_TOKEN	   4096	      /* longer tokens are never allowed */

/* Syntax tree (grammar_parse.c). */

enum gast_kind {
	GA_EMPTY,
	GA_LIT,	  /* a: offset in bytes, b: length */
	GA_CLASS, /* a: offset in ranges, b: count; sorted, disjoint */
	GA_REF,	  /* a: rule */
	GA_SEQ,	  /* children in order */
	GA_ALT,	  /* children are alternatives */
	GA_REP,	  /* one child; a: min, b: max (GR_INF) */
};

struct gast {
	uint8_t kind;
	uint32_t child, next; /* first child, next sibling: GR_NONE */
	uint32_t a, b;
	uint32_t line, col;
};

struct gcp_range {
	uint32_t lo, hi; /* code points, inclusive */
};

struct grule {
	char *name;    /* owned */
	uint32_t body; /* tree node, GR_NONE while undefined */
	uint32_t line, col; /* definition, or first use while undefined */
};

struct gparse {
	struct gast *ast;
	uint32_t n_ast, cap_ast;
	uint8_t *bytes; /* literal bytes, UTF-8 */
	uint32_t n_bytes, cap_bytes;
	struct gcp_range *ranges;
	uint32_t n_ranges, cap_ranges;
	struct grule *rules;
	uint32_t n_rules, cap_rules;
	uint32_t *by_name; /* hash of names -> rule + 1, [name_mask + 1] */
	uint32_t name_mask;
	uint32_t root;
};

int gr_parse(const char *text, size_t len, struct gparse *p,
	     struct o1_grammar_error *err);
void gr_parse_fini(struct gparse *p);
/* Sets *ERR (when not NULL) and returns CODE. */
int gr_fail(struct o1_grammar_error *err, int code, uint32_t line,
	    uint32_t col, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));

/* UTF-8 (grammar_utf8.c). */

/* One UTF-8 byte sequence pattern: byte i in [lo[i], hi[i]]. */
struct gutf8_seq {
	uint8_t n;
	uint8_t lo[4], hi[4];
};

/* Splits code points [LO, HI] (no surrogates inside) into at most CAP
 * byte sequence patterns that match exactly their UTF-8 forms; returns
 * how many, or -1 past CAP. */
int gr_utf8_split(uint32_t lo, uint32_t hi, struct gutf8_seq *out, int cap);

/* A growable uint32 array (grammar_vec.c): all zero is empty, free(v)
 * releases it. Pushes return 0 or -ENOMEM. */
struct gvec {
	uint32_t *v;
	size_t n, cap;
};

int gr_vec_push(struct gvec *x, uint32_t val);

/* Per-rule NFA (grammar_nfa.c). */

enum { NE_EPS, NE_BYTE, NE_REF };

struct nfa_edge {
	uint32_t from, to;
	uint32_t rule; /* NE_REF */
	uint8_t kind, lo, hi;
};

struct gnfa {
	uint32_t n_states, start, final;
	struct nfa_edge *e;
	uint32_t n_e, cap_e;
	uint32_t *off; /* [n_states + 1]: edges of a state after sorting */
};

/* Which rules get inlined, from the tree: non-recursive and small. */
int gr_nfa_plan(const struct gparse *p, bool *inline_rule,
		struct o1_grammar_error *err);
int gr_nfa_build(const struct gparse *p, const bool *inline_rule,
		 uint32_t rule, struct gnfa *n, struct o1_grammar_error *err);
void gr_nfa_fini(struct gnfa *n);

/* Per-rule DFA (grammar_dfa.c). */

struct gdfa_ref {
	uint32_t state, rule, to;
};

struct gdfa {
	uint32_t n; /* states; 0 is the start */
	int32_t *trans; /* [n * n_classes]: next state or -1 */
	uint8_t *accept;
	struct gdfa_ref *refs; /* sorted by state */
	uint32_t n_refs;
};

/* Byte classes: bytes no edge of any NFA tells apart share a class; every
 * class is a contiguous byte range. Returns the number of classes. */
uint32_t gr_byte_classes(const struct gnfa *nfas, uint32_t n_rules,
			 uint8_t cls[256]);
/* Subset construction then minimisation. *WORK counts NFA states visited
 * against GR_MAX_SUBSET_WORK; -O1_E_BOUNDS past it or past MAX_STATES. */
int gr_dfa_build(const struct gnfa *nfa, const uint8_t cls[256],
		 uint32_t n_classes, uint32_t max_states, uint64_t *work,
		 struct gdfa *d);
void gr_dfa_fini(struct gdfa *d);

/* Compiled grammar. */

struct gstate {
	uint32_t rule;
	uint32_t ref_off, n_ref; /* into refs */
	uint8_t accept;		 /* the rule may end here */
	uint8_t has_bytes;	 /* some byte leads on */
	uint8_t final;		 /* accept and nothing else: a call that
				  * returns here needs no frame */
};

struct gref {
	uint32_t callee; /* start state of the called rule */
	uint32_t ret;	 /* where the caller goes on */
	uint8_t tail;	 /* ret is final: no frame pushed */
};

struct o1_grammar {
	uint32_t n_rules, n_states, n_classes;
	uint8_t cls[256];
	uint32_t *rule_first; /* [n_rules + 1] */
	char **rule_names;    /* [n_rules] */
	uint32_t root;	      /* rule */
	int32_t *trans;	      /* [n_states * n_classes] */
	struct gstate *states;
	struct gref *refs;
	uint32_t n_refs;
	uint32_t *follow_off; /* [n_rules + 1]: return states of the calls */
	uint32_t *follow;     /* of each rule, from every call site */
};

static inline int32_t gr_next(const struct o1_grammar *g, uint32_t s,
			      uint8_t byte)
{
	return g->trans[(size_t)s * g->n_classes + g->cls[byte]];
}

/* Vocabulary trie (grammar_vocab.c). */

/* Nodes in preorder (so in byte order of the tokens): node i's subtree
 * is [i, skip[i]); node 0 is the root (empty prefix). */
struct o1_grammar_vocab {
	uint32_t n_tokens;
	uint8_t *kind;	   /* [n_tokens] enum o1_grammar_token_kind */
	uint8_t *blob;	   /* token bytes */
	uint32_t *tok_off; /* [n_tokens + 1] */
	uint32_t n_nodes;
	uint8_t *node_byte;
	uint16_t *node_depth;
	uint32_t *node_skip;
	uint32_t *node_tok; /* [n_nodes + 1]: token ids of a node in ids */
	uint32_t *ids;
	uint32_t *end_ids; /* end tokens */
	uint32_t n_end;
	uint32_t max_len; /* longest text token, bytes (<= GR_MAX_TOKEN) */
};

static inline const uint8_t *gr_tok(const struct o1_grammar_vocab *v,
				    uint32_t id, uint32_t *len)
{
	*len = v->tok_off[id + 1] - v->tok_off[id];
	return v->blob + v->tok_off[id];
}

/* The pushdown engine (grammar_matcher.c). */

/* Parents: a frame index, or one of these. */
#define GP_ROOT UINT32_MAX	   /* the bottom of a real stack */
#define GP_BASE (UINT32_MAX - 1)   /* precompute: the stack below a position */
#define GP_CTX	(UINT32_MAX - 2)   /* precompute: any caller whatever */
#define GP_MAXF (UINT32_MAX - 16)

struct ghead {
	uint32_t s, p; /* state, parent frame */
};

struct gframe {
	uint32_t s, p;	 /* return state, its parent */
	uint32_t next;	 /* hash chain */
	uint8_t ctx;	 /* rests on GP_CTX */
};

/* Result of a byte step: heads produced by the byte itself (before
 * closure), real or resting on GP_CTX; whether the root may end. */
struct gstep {
	uint32_t n_real, n_ctx;
	bool complete;
};

/* The engine one matcher (or the precompute) runs: frames hash-consed so
 * equal stacks are one frame, and a rollback is a truncation. */
struct gcore {
	const struct o1_grammar *g;
	struct gframe *frames;
	uint32_t n_frames, max_frames;
	uint32_t *bucket; /* [bucket_mask + 1] chain heads */
	uint32_t bucket_mask;
	uint32_t max_heads;
	struct ghead *work;	/* [8 * max_heads] closure worklist */
	struct ghead *step_buf; /* [max_heads] heads after a byte */
	uint64_t *seen;	    /* [seen_mask + 1] keys, seen_tag marks */
	uint32_t *seen_tag;
	uint32_t seen_mask, tag;
};

int gr_core_init(struct gcore *c, const struct o1_grammar *g,
		 uint32_t max_frames, uint32_t max_heads);
void gr_core_fini(struct gcore *c);
void gr_core_truncate(struct gcore *c, uint32_t n_frames);
/* Closure of IN (N heads) into OUT (room for CAP): calls pushed,
 * finished rules popped; only heads that can take a byte are kept.
 * Returns how many, -O1_E_BOUNDS past a limit. *COMPLETE when the root
 * may end. IN and OUT may not overlap. */
int gr_core_closure(struct gcore *c, const struct ghead *in, uint32_t n,
		    struct ghead *out, uint32_t cap, bool *complete);
/* One byte from IN (closed heads, N <= max_heads) to OUT (closed, room
 * for CAP). Returns the number of heads in OUT or -O1_E_BOUNDS; fills
 * *ST. */
int gr_core_step(struct gcore *c, const struct ghead *in, uint32_t n,
		 uint8_t byte, struct ghead *out, uint32_t cap,
		 struct gstep *st);

/* Heads per trie depth, for walking token bytes with prefix sharing:
 * level d holds the n[d] heads after d bytes at pool + off[d], packed
 * (level d + 1 starts where level d ends), and frames[d] the frame count
 * to truncate back to when a walk returns to level d. */
struct gdepth {
	struct ghead *pool;
	uint32_t pool_size;
	uint32_t *off, *n, *frames; /* [max_len + 1] */
	uint32_t max_len;
};

int gr_depth_init(struct gdepth *d, uint32_t max_len, uint32_t max_heads);
void gr_depth_fini(struct gdepth *d);
/* Steps level K to level K + 1 with BYTE, frames truncated to level K's
 * first. Returns the heads at K + 1 or a negative error. */
int gr_depth_step(struct gdepth *d, struct gcore *c, uint32_t k,
		  uint8_t byte, struct gstep *st);

/* Token classes per position (grammar_mask.c). */

struct gpos {
	uint32_t acc_off, n_acc; /* accepted ids in ids, or */
	uint32_t acc_bits;	 /* GR_NONE, or bitmask index in bits */
	uint32_t unc_off, n_unc; /* ids to check, in trie order */
};

struct o1_grammar_tokens {
	const struct o1_grammar *g;
	const struct o1_grammar_vocab *v;
	uint32_t n_words;
	struct gpos *pos; /* [n_states] */
	uint32_t *ids;
	uint32_t *bits; /* bitmasks, n_words each */
	size_t n_ids, n_bits; /* entries of ids and bits */
};

/* The mask for a matcher whose closed heads are HEADS (N) with C's frames;
 * DEPTH is scratch. Frames are back to their count on return. */
int gr_mask_fill(const struct o1_grammar_tokens *t, struct gcore *c,
		 const struct ghead *heads, uint32_t n, bool complete,
		 struct gdepth *depth, uint32_t *mask);

#endif
