/* Internals shared by the tokenizer's source files; not for other modules.
 *
 * Every array here is written once by o1_tokenizer_create and only read
 * afterwards, which is what makes concurrent encodes safe. Strings live in
 * blobs: key i spans blob[off[i]] .. blob[off[i + 1] - 2], NUL-terminated.
 */
#ifndef O1_TOKENIZER_INT_H
#define O1_TOKENIZER_INT_H

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "tokenizer.h"

/* String -> id, open addressing over ids whose keys live in a blob. */
struct tok_strmap {
	uint32_t mask;
	int32_t *ids;	  /* [mask + 1], -1 when empty */
	uint32_t *hashes; /* [mask + 1] */
	const char *blob; /* borrowed from the tokenizer */
	const uint32_t *off;
};

/* (left id, right id) -> merge rank and merged id; one slot per probe so
 * a lookup touches one cache line. */
struct tok_pair_slot {
	uint64_t key; /* left << 32 | right, UINT64_MAX when empty */
	uint32_t rank;
	int32_t merged;
};

struct tok_pairmap {
	uint32_t mask;
	struct tok_pair_slot *slots; /* [mask + 1] */
};

/* Output sink: counts every id, stores the first CAP. */
struct tok_sink {
	int32_t *ids;
	size_t cap;
	size_t n;
};

/* Growable per-call scratch memory (never shared between threads). */
struct tok_scratch {
	void *mem;
	size_t size;
};

#define TOK_MAX_TOOL_MARKERS 8

struct o1_tokenizer {
	enum o1_vocab_kind kind;
	uint32_t n_tokens;
	char *text;	     /* token texts, model encoding */
	uint32_t *text_off;  /* [n_tokens + 1] */
	char *piece;	     /* decoded bytes of each token */
	uint32_t *piece_off; /* [n_tokens + 1] */
	size_t max_piece;
	float *scores;	/* [n_tokens] */
	int32_t *types; /* [n_tokens] enum o1_token_type */
	struct tok_strmap by_text;
	struct tok_strmap by_piece; /* BPE: raw bytes of normal tokens */
	struct tok_pairmap merges;
	int32_t byte_id[256]; /* BPE: mapped byte char; SPM: <0xNN>; or -1 */
	pcre2_code *re;	      /* BPE pre-tokenizer */
	bool re_jit;	      /* re is JIT-compiled: pcre2_jit_match */
	int32_t *specials;    /* ids matched in text, by first byte then
			       * longest first */
	uint32_t n_specials;
	uint32_t special_first[257]; /* specials[] range per first byte */
	/* control tokens whose text is a tool-call marker
	 * (o1_tool_format_markers), kept by O1_DECODE_KEEP_TOOL_MARKERS */
	int32_t tool_marker[TOK_MAX_TOOL_MARKERS];
	uint32_t n_tool_marker;
	int32_t bos_id, eos_id, unk_id;
	bool add_bos, add_eos, add_space_prefix, ignore_merges;
	bool spm_runs; /* SPM: no token has U+2581 after another character */
};

static inline uint32_t tok_len(const uint32_t *off, int32_t id)
{
	return off[id + 1] - off[id] - 1;
}

uint32_t tok_hash(const char *s, size_t len);
int tok_strmap_init(struct tok_strmap *m, uint32_t n, const char *blob,
		    const uint32_t *off,
		    bool (*want)(const struct o1_tokenizer *, int32_t),
		    const struct o1_tokenizer *t);
void tok_strmap_fini(struct tok_strmap *m);
int32_t tok_strmap_get(const struct tok_strmap *m, const char *s, size_t len);

static inline void tok_push(struct tok_sink *s, int32_t id)
{
	if (s->n < s->cap)
		s->ids[s->n] = id;
	s->n++;
}

void *tok_scratch_get(struct tok_scratch *s, size_t size);

/* Each id's decoded piece, as PIECE writes it (returning its length), into
 * t->piece (a blob of CAP bytes: room for every piece and its NUL),
 * t->piece_off and t->max_piece. -ENOMEM. */
int tok_pieces_build(struct o1_tokenizer *t, size_t cap,
		     uint32_t (*piece)(const struct o1_tokenizer *t, int32_t id,
				       char *out));

/* Byte-level BPE (tokenizer_bpe.c). */
int tok_bpe_init(struct o1_tokenizer *t, const struct o1_vocab *v);
void tok_bpe_fini(struct o1_tokenizer *t);
int tok_bpe_encode(const struct o1_tokenizer *t, const char *text, size_t len,
		   struct tok_scratch *scratch, struct tok_sink *out);
/* The GPT-2 byte-to-unicode mapping: code point of byte B, and the byte of
 * code point CP (-1 when CP is no byte's image). */
uint32_t tok_byte_to_cp(uint8_t b);
int tok_cp_to_byte(uint32_t cp);

/* SentencePiece BPE (tokenizer_spm.c). */
int tok_spm_init(struct o1_tokenizer *t);
int tok_spm_encode(const struct o1_tokenizer *t, const char *text, size_t len,
		   bool prefix, struct tok_scratch *scratch,
		   struct tok_sink *out);

#endif
