/* Grammars enforced while decoding: a context-free grammar over bytes, a
 * pushdown matcher that follows one sequence's output, and the per-step
 * mask of the vocabulary's tokens that the grammar still allows.
 *
 * Grammar text (GBNF-like; docs/GRAMMAR.md has the full description):
 *
 *   # a comment runs to the end of the line
 *   root   ::= "{" pair ("," pair)* "}"      # the rule named root is the start
 *   pair   ::= string ":" [0-9]+
 *   string ::= "\"" [^"\\]{1,20} "\""
 *
 * Rules are `name ::= alternatives`; a rule ends where the next `name ::=`
 * begins, so newlines carry no meaning. Items: "literal" (escapes \n \r \t
 * \\ \" \xNN \uNNNN \UNNNNNNNN), [class] of code points with ranges and ^
 * for the complement, . (any code point), a rule name, ( ... ) groups,
 * postfix * + ? {n} {n,} {n,m}. Classes and literals are code points, so
 * every text a grammar accepts is valid UTF-8; the matcher runs over the
 * UTF-8 bytes, so a token may end inside a character.
 *
 * One item names a control token: @"[TOOL_CALLS]" is the vocabulary's
 * control token of that text (O1_GRAMMAR_TOKEN_CONTROL), that one token
 * and never the text spelled out. It stands for the bytes 0xFF NAME 0xFF,
 * which no UTF-8 text contains, so a grammar allows a control token only
 * where it names it (the tool-call markers of grammar_tools.h), and text
 * tokens with a 0xFF byte (byte fallback) are never allowed. A name the
 * vocabulary does not hold as a control token matches no token.
 *
 * Refused at compile time (an error with line:col): syntax errors,
 * undefined or doubly defined rules, left recursion (a rule that can reach
 * itself without consuming a byte), a rule that can never finish
 * (recursion without a base case), and grammars past the size limits.
 *
 * Objects:
 *   o1_grammar          compiled grammar; immutable, any number of threads
 *   o1_grammar_vocab    the model's tokens as byte strings in a trie;
 *                       immutable, built once per model
 *   o1_grammar_tokens   grammar x vocabulary: per grammar position, which
 *                       tokens are allowed whatever the stack below holds
 *                       (XGrammar's context-independent tokens), which are
 *                       refused, and which need a check; immutable
 *   o1_grammar_matcher  one sequence's parse state; one thread at a time
 * Each borrows the objects it was created from: they must outlive it.
 *
 * Nothing allocates after o1_grammar_matcher_create: a matcher holds at
 * most the limits it was created with (stack frames, parallel stacks,
 * tokens of history) and an input that would need more fails with
 * -O1_E_BOUNDS, leaving the matcher as it was.
 */
#ifndef O1_GRAMMAR_H
#define O1_GRAMMAR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct o1_grammar;
struct o1_grammar_vocab;
struct o1_grammar_tokens;
struct o1_grammar_matcher;

/* Where and why a grammar (or schema) was refused. LINE and COL are
 * 1-based; 0 when the problem has no place in the text. */
struct o1_grammar_error {
	uint32_t line, col;
	char msg[256];
};

/* Compiles LEN bytes of grammar TEXT. -O1_E_FORMAT for malformed text or
 * a grammar refused as above, -O1_E_BOUNDS past the size limits (both
 * explained in *ERR when ERR is given), -ENOMEM. */
int o1_grammar_compile(const char *text, size_t len,
		       struct o1_grammar_error *err, struct o1_grammar **out);
void o1_grammar_destroy(struct o1_grammar *g);
/* Sizes of the compiled form, for tests and logs. */
uint32_t o1_grammar_n_rules(const struct o1_grammar *g);
uint32_t o1_grammar_n_states(const struct o1_grammar *g);
/* Heap bytes G holds (for a cache's budget). */
size_t o1_grammar_bytes(const struct o1_grammar *g);

/* Token kinds for o1_grammar_vocab_create. */
enum o1_grammar_token_kind {
	O1_GRAMMAR_TOKEN_TEXT,	  /* its bytes are output text */
	O1_GRAMMAR_TOKEN_END,	  /* ends the output (EOS, <|eot_id|>) */
	O1_GRAMMAR_TOKEN_IGNORE,  /* never allowed (other control tokens) */
	O1_GRAMMAR_TOKEN_CONTROL, /* a control token, its bytes its name:
				   * allowed only where a grammar names it */
};

/* A vocabulary of N tokens: token i is LENS[i] bytes at BYTES[i] (copied)
 * of kind KINDS[i] (NULL: every token is text). An empty text token is
 * never allowed. -EINVAL for N == 0. */
int o1_grammar_vocab_create(uint32_t n, const uint8_t *const *bytes,
			    const uint32_t *lens, const uint8_t *kinds,
			    struct o1_grammar_vocab **out);
void o1_grammar_vocab_destroy(struct o1_grammar_vocab *v);
uint32_t o1_grammar_vocab_size(const struct o1_grammar_vocab *v);
/* The id of the control token named LEN bytes at NAME, or -1 when V has
 * none of that name (a scan of the vocabulary: for compiling). */
int32_t o1_grammar_vocab_control(const struct o1_grammar_vocab *v,
				 const char *name, size_t len);
/* Token ID's bytes (owned by V) and *LEN, a control token's name; NULL
 * for an id out of range. */
const uint8_t *o1_grammar_vocab_token(const struct o1_grammar_vocab *v,
				      uint32_t id, uint32_t *len);
/* Token ID's enum o1_grammar_token_kind; -EINVAL for an id out of range. */
int o1_grammar_vocab_kind(const struct o1_grammar_vocab *v, uint32_t id);
/* uint32 words of a mask: one bit per token, token i at bit i % 32 of
 * word i / 32; a set bit allows the token. */
uint32_t o1_grammar_mask_words(const struct o1_grammar_vocab *v);

/* Classifies every token at every grammar position: the expensive part
 * of using a grammar (a walk of the vocabulary trie per position, shared
 * between positions that differ by a counter, equivalent positions and
 * positions whose first byte leads to the same state: a few ms for the
 * test schemas over 128k tokens). N_THREADS threads share the positions
 * (0 or 1: the calling thread alone; at most 64). */
int o1_grammar_tokens_create(const struct o1_grammar *g,
			     const struct o1_grammar_vocab *v,
			     uint32_t n_threads,
			     struct o1_grammar_tokens **out);
void o1_grammar_tokens_destroy(struct o1_grammar_tokens *t);
/* Heap bytes T holds (for a cache's budget). */
size_t o1_grammar_tokens_bytes(const struct o1_grammar_tokens *t);

/* What one matcher may hold; zeros take the defaults. */
struct o1_grammar_limits {
	uint32_t max_frames;   /* distinct stack frames (default 4096) */
	uint32_t max_stacks;   /* parallel parses at once (default 64) */
	uint32_t max_rollback; /* tokens that can be rolled back (32) */
};

/* A matcher at the start of G. TOKENS (may be NULL: bytes only, no token
 * calls) must be built from G. */
int o1_grammar_matcher_create(const struct o1_grammar *g,
			      const struct o1_grammar_tokens *tokens,
			      const struct o1_grammar_limits *limits,
			      struct o1_grammar_matcher **out);
void o1_grammar_matcher_destroy(struct o1_grammar_matcher *m);
/* Back to the start of the grammar, history dropped. */
void o1_grammar_matcher_reset(struct o1_grammar_matcher *m);

/* Consumes LEN bytes as one step of history (rolled back as a unit).
 * -O1_E_GRAMMAR when the grammar does not allow them, -O1_E_BOUNDS when
 * a limit would be passed; the matcher is unchanged on any error. */
int o1_grammar_matcher_accept_bytes(struct o1_grammar_matcher *m,
				    const uint8_t *bytes, size_t len);
/* Consumes token ID: its bytes, or for an end token the end of the output
 * (allowed only when complete; the matcher is then terminated). Returns
 * 0, or 1 when ID was an end token. Errors as for accept_bytes, plus
 * -O1_E_BOUNDS for an id outside the vocabulary and -O1_E_GRAMMAR for an
 * ignored token. */
int o1_grammar_matcher_accept_token(struct o1_grammar_matcher *m,
				    int32_t id);
/* Undoes the last N steps. -O1_E_BOUNDS (nothing undone) past
 * max_rollback or the steps since the start. Trying a token (accept, then
 * rollback 1) leaves the max_rollback steps before it available. */
int o1_grammar_matcher_rollback(struct o1_grammar_matcher *m, uint32_t n);
/* The output so far is a whole sentence of the grammar. */
bool o1_grammar_matcher_is_complete(const struct o1_grammar_matcher *m);
/* Nothing more may follow: an end token was accepted, or the output is
 * complete and the grammar allows no further byte. */
bool o1_grammar_matcher_is_terminated(const struct o1_grammar_matcher *m);
/* o1_grammar_mask_words of the matcher's vocabulary; 0 without one. */
uint32_t o1_grammar_matcher_mask_words(const struct o1_grammar_matcher *m);
/* Fills MASK (N_WORDS >= o1_grammar_mask_words) with the tokens allowed
 * next: text tokens whose bytes the grammar accepts here, and end tokens
 * when complete. -EINVAL without tokens or with too few words,
 * -O1_E_BOUNDS when a limit stopped a check (the mask then holds only
 * tokens that are certainly allowed). */
int o1_grammar_matcher_fill_mask(struct o1_grammar_matcher *m,
				 uint32_t *mask, uint32_t n_words);

#endif
