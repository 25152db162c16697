/* Jinja lexer: template text to tokens, with jinja2's whitespace rules as
 * transformers configures them.
 *
 * - Line ends \r\n and \r become \n, and one trailing newline of the
 *   template is dropped (keep_trailing_newline off).
 * - trim_blocks: the newline right after a block or comment tag is dropped
 *   ("+%}" keeps it).
 * - lstrip_blocks: spaces and tabs before a block or comment tag that
 *   starts a line are dropped ("{%+" keeps them).
 * - "{%-", "{{-", "{#-" strip all whitespace before the tag, "-%}", "-}}",
 *   "-#}" all whitespace after it.
 * - Inside a tag, an end delimiter only counts where brackets balance, so
 *   "{{ {'a': 1}}}" works.
 * Comments and raw blocks are resolved here; the parser sees text (DATA),
 * tag delimiters and expression tokens. Positions are 1-based lines and
 * code-point columns of the normalised text (same lines as the original).
 */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/utf8.h"
#include "template/jinja_int.h"

struct lexer {
	struct jfail *f;
	struct ja_arena *a;
	const char *s;
	size_t n, pos;
	uint32_t line, col; /* of s[pos] */
	size_t at;	    /* the byte line/col were counted up to */
	struct jtoken *v;
	size_t nt, cap;
	bool line_starting; /* the last match ended with a newline */
	char depth_stack[64];
	size_t depth;
};

static _Noreturn void lex_fail(struct lexer *lx, const char *fmt,
			       const char *arg)
{
	jfail(lx->f, O1_JINJA_ERR_SYNTAX, lx->line, lx->col, fmt, arg);
}

/* Moves line/col to byte POS (forward only). */
static void seek(struct lexer *lx, size_t pos)
{
	for (; lx->at < pos; lx->at++) {
		unsigned char ch = (unsigned char)lx->s[lx->at];

		if (ch == '\n') {
			lx->line++;
			lx->col = 1;
		} else if ((ch & 0xc0) != 0x80) {
			lx->col++;
		}
	}
	lx->pos = pos;
}

static struct jtoken *push(struct lexer *lx, enum jtok type)
{
	struct jtoken *t;

	if (lx->nt == lx->cap) {
		size_t cap = lx->cap ? lx->cap * 2 : 64;
		struct jtoken *v = jalloc(lx->f, lx->a, cap * sizeof(*v),
					  lx->line, lx->col);

		if (lx->nt)
			memcpy(v, lx->v, lx->nt * sizeof(*v));
		lx->v = v;
		lx->cap = cap;
	}
	t = &lx->v[lx->nt++];
	*t = (struct jtoken){.type = (uint8_t)type,
			     .line = lx->line,
			     .col = lx->col};
	return t;
}

/* Length of the whitespace run (Python's \s) at S[I]. */
static size_t space_run(const char *s, size_t n, size_t i)
{
	size_t start = i;

	while (i < n) {
		size_t j = i;
		uint32_t cp = ju_next((struct jstr){s, n}, &j);

		if (!ju_isspace(cp))
			break;
		i = j;
	}
	return i - start;
}

/* Length of S[0..N) without its trailing whitespace. */
static size_t rstrip_len(const char *s, size_t n)
{
	size_t keep = 0, i = 0;

	while (i < n) {
		uint32_t cp = ju_next((struct jstr){s, n}, &i);

		if (!ju_isspace(cp))
			keep = i;
	}
	return keep;
}

/* lstrip_blocks: the data before a block or comment tag loses its last
 * line when that line is only whitespace and starts a line. */
static size_t lstrip_len(struct lexer *lx, const char *s, size_t n)
{
	size_t l_pos = n;

	while (l_pos && s[l_pos - 1] != '\n')
		l_pos--;
	if (l_pos == 0 && !lx->line_starting)
		return n;
	if (l_pos < n && space_run(s, n, l_pos) == n - l_pos)
		return l_pos;
	return n;
}

static void emit_data(struct lexer *lx, size_t start, size_t len)
{
	struct jtoken *t;

	seek(lx, start);
	if (!len)
		return;
	t = push(lx, JT_DATA);
	t->s = (struct jstr){lx->s + start, len};
}

/* Where the next "{{", "{%" or "{#" starts at or after POS, or N. */
static size_t next_tag(const struct lexer *lx, size_t pos)
{
	const char *p;

	while (pos + 1 < lx->n) {
		p = memchr(lx->s + pos, '{', lx->n - pos - 1);
		if (!p)
			break;
		pos = (size_t)(p - lx->s);
		if (p[1] == '{' || p[1] == '%' || p[1] == '#')
			return pos;
		pos++;
	}
	return lx->n;
}

static bool match_word(const struct lexer *lx, size_t *i, const char *w)
{
	size_t len = strlen(w);

	if (lx->n - *i < len || memcmp(lx->s + *i, w, len))
		return false;
	*i += len;
	return true;
}

/* Matches a block end at I: "+%}", "-%}" and following whitespace, or
 * "%}" and one newline. Sets *END past it. */
static bool block_end_at(const struct lexer *lx, size_t i, size_t *end)
{
	if (match_word(lx, &i, "+%}")) {
		*end = i;
		return true;
	}
	if (match_word(lx, &i, "-%}")) {
		*end = i + space_run(lx->s, lx->n, i);
		return true;
	}
	if (!match_word(lx, &i, "%}"))
		return false;
	if (i < lx->n && lx->s[i] == '\n')
		i++;
	*end = i;
	return true;
}

static bool var_end_at(const struct lexer *lx, size_t i, size_t *end)
{
	if (match_word(lx, &i, "-}}")) {
		*end = i + space_run(lx->s, lx->n, i);
		return true;
	}
	if (!match_word(lx, &i, "}}"))
		return false;
	*end = i;
	return true;
}

static void set_line_starting(struct lexer *lx, size_t end)
{
	lx->line_starting = end > 0 && lx->s[end - 1] == '\n';
}

/* A comment from POS (after "{#" and its sign) to its end. */
static size_t lex_comment(struct lexer *lx, size_t pos)
{
	size_t end;

	for (size_t i = pos; i < lx->n; i++) {
		if (lx->s[i] == '+' && (end = i, match_word(lx, &end, "+#}")))
			return end;
		if (lx->s[i] == '-' && (end = i, match_word(lx, &end, "-#}")))
			return end + space_run(lx->s, lx->n, end);
		end = i;
		if (match_word(lx, &end, "#}")) {
			if (end < lx->n && lx->s[end] == '\n')
				end++;
			return end;
		}
	}
	lex_fail(lx, "Missing end of comment tag%s", "");
}

/* "{%" sign? \s* "raw" \s* ("-%}" \s* | "%}") at POS: sets *END. */
static bool raw_begin_at(const struct lexer *lx, size_t pos, size_t *end)
{
	size_t i = pos + 2;

	if (i < lx->n && (lx->s[i] == '-' || lx->s[i] == '+'))
		i++;
	i += space_run(lx->s, lx->n, i);
	if (!match_word(lx, &i, "raw"))
		return false;
	i += space_run(lx->s, lx->n, i);
	if (match_word(lx, &i, "-%}")) {
		*end = i + space_run(lx->s, lx->n, i);
		return true;
	}
	if (!match_word(lx, &i, "%}"))
		return false;
	*end = i;
	return true;
}

/* "{%" sign? \s* "endraw" \s* block-end at I. */
static bool raw_end_at(const struct lexer *lx, size_t i, char *sign,
		       size_t *end)
{
	if (!match_word(lx, &i, "{%"))
		return false;
	*sign = 0;
	if (i < lx->n && (lx->s[i] == '-' || lx->s[i] == '+'))
		*sign = lx->s[i++];
	i += space_run(lx->s, lx->n, i);
	if (!match_word(lx, &i, "endraw"))
		return false;
	i += space_run(lx->s, lx->n, i);
	return block_end_at(lx, i, end);
}

/* The text of a raw block from POS: data up to {% endraw %}. */
static size_t lex_raw(struct lexer *lx, size_t pos)
{
	size_t end, len;
	char sign;

	for (size_t i = pos; i < lx->n; i++) {
		if (lx->s[i] != '{' || !raw_end_at(lx, i, &sign, &end))
			continue;
		len = i - pos;
		if (sign == '-')
			len = rstrip_len(lx->s + pos, len);
		else if (sign != '+')
			len = lstrip_len(lx, lx->s + pos, len);
		emit_data(lx, pos, len);
		return end;
	}
	seek(lx, pos);
	lex_fail(lx, "Missing end of raw directive%s", "");
}

static void lex_tag(struct lexer *lx, size_t pos, bool block);

/* The text before the tag at T, then the tag itself; returns where the
 * text continues. */
static size_t lex_root_tag(struct lexer *lx, size_t pos, size_t t)
{
	char kind = lx->s[t + 1], sign = 0;
	size_t len = t - pos, end;

	if (t + 2 < lx->n && (lx->s[t + 2] == '-' || lx->s[t + 2] == '+'))
		sign = lx->s[t + 2];
	if (sign == '-')
		len = rstrip_len(lx->s + pos, len);
	else if (sign != '+' && kind != '{')
		len = lstrip_len(lx, lx->s + pos, len);
	emit_data(lx, pos, len);
	seek(lx, t);
	if (kind == '%' && raw_begin_at(lx, t, &end)) {
		lx->line_starting = false;
		return lex_raw(lx, end);
	}
	if (kind == '#') {
		end = lex_comment(lx, t + 2 + (sign != 0));
		set_line_starting(lx, end);
		return end;
	}
	lex_tag(lx, t, kind == '%');
	return lx->pos;
}

static void lex_root(struct lexer *lx)
{
	size_t pos = 0, t;

	lx->line_starting = true;
	while (pos < lx->n) {
		t = next_tag(lx, pos);
		if (t == lx->n) {
			emit_data(lx, pos, lx->n - pos);
			break;
		}
		pos = lex_root_tag(lx, pos, t);
	}
	seek(lx, lx->n);
	push(lx, JT_EOF);
}

/* Digits with single underscores between them ((\d+_)*\d+) at I. */
static size_t digit_run(const struct lexer *lx, size_t i)
{
	size_t start = i;

	while (i < lx->n && lx->s[i] >= '0' && lx->s[i] <= '9') {
		i++;
		if (i + 1 < lx->n && lx->s[i] == '_' && lx->s[i + 1] >= '0' &&
		    lx->s[i + 1] <= '9')
			i++;
	}
	return i - start;
}

/* A float literal at I (not after a dot): its length, or 0. */
static size_t float_len(const struct lexer *lx, size_t i)
{
	size_t start = i, d = digit_run(lx, i), frac = 0, e;

	if (!d || (i > 0 && lx->s[i - 1] == '.'))
		return 0;
	i += d;
	if (i + 1 < lx->n && lx->s[i] == '.' && (frac = digit_run(lx, i + 1)))
		i += 1 + frac;
	if (i < lx->n && (lx->s[i] == 'e' || lx->s[i] == 'E')) {
		e = i + 1;
		if (e < lx->n && (lx->s[e] == '+' || lx->s[e] == '-'))
			e++;
		if ((d = digit_run(lx, e)))
			return e + d - start;
	}
	return frac ? i - start : 0;
}

/* Digits of BASE with optional single underscores before each (_?d)+,
 * at I; returns the length. */
static size_t based_run(const struct lexer *lx, size_t i, int base)
{
	size_t start = i;

	for (;;) {
		size_t j = i + (i < lx->n && lx->s[i] == '_');
		int d;

		if (j >= lx->n)
			break;
		d = isdigit((unsigned char)lx->s[j]) ? lx->s[j] - '0'
		    : isxdigit((unsigned char)lx->s[j])
			? (lx->s[j] | 0x20) - 'a' + 10
			: 99;
		if (d >= base)
			break;
		i = j + 1;
	}
	return i - start;
}

/* An integer literal at I as jinja2 reads it: 0b.., 0o.., 0x.., a decimal
 * without leading zeros, or zeros. Sets *BASE and returns the length. */
static size_t int_len(const struct lexer *lx, size_t i, int *base)
{
	static const char prefixes[] = "bBoOxX";
	static const int bases[] = {2, 2, 8, 8, 16, 16};
	const char *p;
	size_t d;

	*base = 10;
	if (lx->s[i] == '0' && i + 1 < lx->n && lx->s[i + 1] &&
	    (p = strchr(prefixes, lx->s[i + 1]))) {
		d = based_run(lx, i + 2, bases[p - prefixes]);
		if (d) {
			*base = bases[p - prefixes];
			return 2 + d;
		}
	}
	if (lx->s[i] != '0')
		return 1 + based_run(lx, i + 1, 10);
	for (d = 1; i + d < lx->n; d++)
		if (!(lx->s[i + d] == '0' ||
		      (lx->s[i + d] == '_' && i + d + 1 < lx->n &&
		       lx->s[i + d + 1] == '0')))
			break;
	return d;
}

static void lex_number(struct lexer *lx, size_t i, size_t *end)
{
	char buf[80];
	size_t flen = float_len(lx, i), len, k = 0;
	int base = 10;
	struct jtoken *t;
	char *stop;

	len = flen ? flen : int_len(lx, i, &base);
	for (size_t p = i + (base != 10 ? 2 : 0); p < i + len; p++)
		if (lx->s[p] != '_' && k + 1 < sizeof(buf))
			buf[k++] = lx->s[p];
	buf[k] = 0;
	t = push(lx, flen ? JT_FLOAT : JT_INT);
	errno = 0;
	if (flen)
		t->f = strtod(buf, &stop);
	else
		t->i = strtoll(buf, &stop, base);
	if (k + 1 >= sizeof(buf) || (errno == ERANGE && !flen) || *stop)
		lex_fail(lx, "number '%s' out of range", buf);
	*end = i + len;
}

/* jinja2's message: the character as Python's repr, and its offset. */
static _Noreturn void unexpected_char(struct lexer *lx, size_t i)
{
	char ch = lx->s[i];

	jfail(lx->f, O1_JINJA_ERR_SYNTAX, lx->line, lx->col,
	      ch == '\'' ? "unexpected char \"%c\" at %zu"
	      : (unsigned char)ch >= 0x20 && (unsigned char)ch < 0x7f
		  ? "unexpected char '%c' at %zu"
		  : "unexpected char '\\x%02x' at %zu",
	      (unsigned char)ch, i);
}

static int hexval(char ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	ch |= 0x20;
	return ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 : -1;
}

/* N hex digits at P as a code point, or -1. */
static long hex_escape(const char *p, size_t avail, int n)
{
	long v = 0;

	if ((size_t)n > avail)
		return -1;
	for (int k = 0; k < n; k++) {
		int h = hexval(p[k]);

		if (h < 0)
			return -1;
		v = v * 16 + h;
	}
	return v;
}

/* One escape after a backslash at Q[*i] (Python's unicode-escape):
 * writes its bytes to OUT, returns their count; unknown escapes stay as
 * written. */
static size_t unescape_one(struct lexer *lx, const char *q, size_t n,
			   size_t *i, char *out)
{
	static const char simple[] = "\\\\''\"\"a\ab\bf\fn\nr\rt\tv\v";
	char ch = q[*i];
	long cp;
	int digits = 0;

	for (const char *p = simple; *p; p += 2)
		if (*p == ch) {
			(*i)++;
			out[0] = p[1];
			return 1;
		}
	if (ch == '\n') {
		(*i)++;
		return 0;
	}
	if (ch >= '0' && ch <= '7') {
		for (cp = 0; digits < 3 && *i < n && q[*i] >= '0' &&
			     q[*i] <= '7';
		     digits++)
			cp = cp * 8 + (q[(*i)++] - '0');
		return o1_utf8_encode((uint32_t)cp, out);
	}
	digits = ch == 'x' ? 2 : ch == 'u' ? 4 : ch == 'U' ? 8 : 0;
	if (!digits) {
		out[0] = '\\';
		return 1; /* the character itself follows as plain text */
	}
	cp = hex_escape(q + *i + 1, n - *i - 1, digits);
	if (cp < 0 || cp > 0x10ffff)
		lex_fail(lx, "truncated or invalid \\%c escape in a string",
			 (char[]){ch, 0});
	*i += 1 + (size_t)digits;
	return o1_utf8_encode((uint32_t)cp, out);
}

/* A quoted string at I: its unescaped value into the arena. */
static void lex_string(struct lexer *lx, size_t i, size_t *end)
{
	char quote = lx->s[i];
	size_t j = i + 1, k = 0;
	struct jtoken *t;
	char *out;

	while (j < lx->n && lx->s[j] != quote)
		j += lx->s[j] == '\\' ? 2 : 1;
	if (j >= lx->n)
		unexpected_char(lx, i);
	out = jalloc(lx->f, lx->a, j - i + 4, lx->line, lx->col);
	for (size_t p = i + 1; p < j;) {
		if (lx->s[p] != '\\') {
			out[k++] = lx->s[p++];
			continue;
		}
		p++;
		k += unescape_one(lx, lx->s, j, &p, out + k);
	}
	t = push(lx, JT_STRING);
	t->s = (struct jstr){out, k};
	*end = j + 1;
}

static const struct {
	const char *text;
	enum jop op;
} operators[] = {
    {"//", JO_FLOORDIV}, {"**", JO_POW},      {"==", JO_EQ},
    {"!=", JO_NE},	 {">=", JO_GTEQ},     {"<=", JO_LTEQ},
    {"+", JO_ADD},	 {"-", JO_SUB},	      {"/", JO_DIV},
    {"*", JO_MUL},	 {"%", JO_MOD},	      {"~", JO_TILDE},
    {"[", JO_LBRACKET},	 {"]", JO_RBRACKET},  {"(", JO_LPAREN},
    {")", JO_RPAREN},	 {"{", JO_LBRACE},    {"}", JO_RBRACE},
    {">", JO_GT},	 {"<", JO_LT},	      {"=", JO_ASSIGN},
    {".", JO_DOT},	 {":", JO_COLON},     {"|", JO_PIPE},
    {",", JO_COMMA},	 {";", JO_SEMICOLON},
};

/* Keeps brackets balanced: an end delimiter only counts at depth 0. */
static void balance(struct lexer *lx, char ch)
{
	static const char open[] = "([{", close[] = ")]}";
	const char *p;

	if ((p = strchr(open, ch)) && ch) {
		if (lx->depth == sizeof(lx->depth_stack))
			lex_fail(lx, "brackets nested too deeply%s", "");
		lx->depth_stack[lx->depth++] = close[p - open];
		return;
	}
	if (!(p = strchr(close, ch)) || !ch)
		return;
	if (!lx->depth)
		lex_fail(lx, "unexpected '%s'", (char[]){ch, 0});
	if (lx->depth_stack[--lx->depth] != ch)
		jfail(lx->f, O1_JINJA_ERR_SYNTAX, lx->line, lx->col,
		      "unexpected '%c', expected '%c'", ch,
		      lx->depth_stack[lx->depth]);
}

static void lex_operator(struct lexer *lx, size_t i, size_t *end)
{
	for (size_t k = 0; k < sizeof(operators) / sizeof(operators[0]); k++) {
		size_t len = strlen(operators[k].text);

		if (lx->n - i >= len &&
		    !memcmp(lx->s + i, operators[k].text, len)) {
			balance(lx, lx->s[i]);
			push(lx, JT_OP)->op = (uint8_t)operators[k].op;
			*end = i + len;
			return;
		}
	}
	unexpected_char(lx, i);
}

static bool is_name_start(char ch)
{
	return ch == '_' || isalpha((unsigned char)ch);
}

/* One token inside a tag at I (not its end); sets *END past it. */
static void lex_tag_token(struct lexer *lx, size_t i, size_t *end)
{
	char ch = lx->s[i];
	size_t j;

	if (isdigit((unsigned char)ch)) {
		lex_number(lx, i, end);
	} else if (is_name_start(ch)) {
		for (j = i + 1; j < lx->n && (is_name_start(lx->s[j]) ||
					      isdigit((unsigned char)lx->s[j]));
		     j++)
			;
		push(lx, JT_NAME)->s = (struct jstr){lx->s + i, j - i};
		*end = j;
	} else if (ch == '\'' || ch == '"') {
		lex_string(lx, i, end);
	} else {
		lex_operator(lx, i, end);
	}
}

/* A {{ }} or {% %} tag from its opening delimiter at POS. */
static void lex_tag(struct lexer *lx, size_t pos, bool block)
{
	size_t i = pos + 2, end, ws;

	push(lx, block ? JT_BLOCK_BEGIN : JT_VAR_BEGIN);
	if (i < lx->n && (lx->s[i] == '-' || lx->s[i] == '+'))
		i++;
	lx->depth = 0;
	for (;;) {
		seek(lx, i);
		if (i >= lx->n)
			lex_fail(lx, "unexpected end of template, expected "
				     "'%s'.", block ? "end of statement block"
						    : "end of print statement");
		if (!lx->depth && (block ? block_end_at(lx, i, &end)
					 : var_end_at(lx, i, &end))) {
			push(lx, block ? JT_BLOCK_END : JT_VAR_END);
			set_line_starting(lx, end);
			seek(lx, end);
			return;
		}
		ws = space_run(lx->s, lx->n, i);
		if (ws) {
			i += ws;
			continue;
		}
		lex_tag_token(lx, i, &end);
		i = end;
	}
}

/* Line ends normalised to \n, one trailing newline dropped. */
static void normalise(struct lexer *lx, const char *src, size_t len)
{
	char *d = jalloc(lx->f, lx->a, len + 1, 1, 1);
	size_t k = 0;

	for (size_t i = 0; i < len; i++) {
		if (src[i] == '\r') {
			d[k++] = '\n';
			if (i + 1 < len && src[i + 1] == '\n')
				i++;
		} else {
			d[k++] = src[i];
		}
	}
	if (k && d[k - 1] == '\n')
		k--;
	d[k] = 0;
	lx->s = d;
	lx->n = k;
}

void jlex(struct jfail *f, struct ja_arena *a, const char *src, size_t len,
	  struct jtokens *out)
{
	struct lexer lx = {.f = f, .a = a, .line = 1, .col = 1};

	normalise(&lx, src, len);
	lex_root(&lx);
	out->v = lx.v;
	out->n = lx.nt;
}
