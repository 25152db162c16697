/* A grammar vocabulary (grammar.h) from the model's tokenizer: text
 * tokens are their decoded bytes; EOS and the control tokens that end a
 * turn (<|eot_id|>, <|eom_id|>, <|end_of_text|>, <|endoftext|>,
 * <|im_end|>, <|end|>, </s>) are end tokens; the tool-call markers
 * (o1_tool_format_markers) that are control tokens are control tokens,
 * allowed where a grammar names them; other control tokens are never
 * allowed. */
#ifndef O1_GRAMMAR_TOKENIZER_H
#define O1_GRAMMAR_TOKENIZER_H

#include "grammar/grammar.h"
#include "tokenizer/tokenizer.h"

/* T is only read during the call. */
int o1_grammar_vocab_from_tokenizer(const struct o1_tokenizer *t,
				    struct o1_grammar_vocab **out);

#endif
