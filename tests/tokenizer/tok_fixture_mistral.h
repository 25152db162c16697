/* A vocabulary in Mistral v3's shape for tests of tool calls, whose
 * markers are control tokens there: SentencePiece with byte fallback,
 * control tokens 0..9 as in its tokenizer.json (<unk> <s> </s> [INST]
 * [/INST] [TOOL_CALLS] [AVAILABLE_TOOLS] [/AVAILABLE_TOOLS]
 * [TOOL_RESULTS] [ARGS]), the byte tokens <0x00>..<0xFF> at 10..265 and
 * U+2581 at 266, no merges. Loaded through a tokenizer.json written to a
 * temporary file, as a real one is. */
#ifndef O1_TOK_FIXTURE_MISTRAL_H
#define O1_TOK_FIXTURE_MISTRAL_H

#include "model/vocab.h"

#define TOK_MISTRAL_N_CONTROLS 10
#define TOK_MISTRAL_EOS	       2
#define TOK_MISTRAL_CALLS      5 /* [TOOL_CALLS] */
#define TOK_MISTRAL_ARGS       9 /* [ARGS] */
#define TOK_MISTRAL_BYTE(b)    (TOK_MISTRAL_N_CONTROLS + (b))
#define TOK_MISTRAL_SPACE      (TOK_MISTRAL_N_CONTROLS + 256)

/* 0, or -1 when the file could not be written or loaded. */
int tok_fixture_mistral_v3(struct o1_vocab **out);

#endif
