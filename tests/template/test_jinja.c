/* Tests of the Jinja interpreter (daemon/template/jinja.h).
 *
 * - Constructs: a table of small templates, each with the exact text that
 *   jinja2 3.1.6 renders for it in transformers' environment (immutable
 *   sandbox, trim_blocks, lstrip_blocks, loop controls, transformers'
 *   tojson, raise_exception and strftime_now). The expected texts were
 *   produced by running jinja2, not by this interpreter.
 * - Errors: syntax and runtime errors with their line, column and message
 *   (jinja2's message where jinja2 has the same error).
 * - Limits: steps, output, memory and nesting stop a hostile template with
 *   an O1_JINJA_ERR_LIMIT error; failed allocations fail cleanly.
 * - Threads: one parsed template rendered from several threads at once.
 * - The outside reference: every rendering in ../shared/testdata/chat
 *   (37 real templates, 666 renderings by transformers 5.17), byte for
 *   byte, and for the 30 where the template raises, the same message. When
 *   ../shared is absent the executable exits 77 after the other tests.
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/error.h"
#include "template/jinja.h"
#include "tests/common/test_util.h"

#define CHAT_DIR O1_SHARED_DIR "/testdata/chat"

/* 2025-03-07 14:05:09 UTC, the clock strftime_now sees (TZ=UTC). */
static const time_t fixed_now = 1741356309;

/* The variables every case sees (a case may add or replace some). */
static const char base_vars[] =
    "{\"messages\": [{\"role\": \"system\", \"content\": \"Sys\"},"
    " {\"role\": \"user\", \"content\": \"  Hi there  \"},"
    " {\"role\": \"assistant\", \"content\": \"Yo\", \"tool_calls\":"
    " [{\"function\": {\"name\": \"f\", \"arguments\": {\"a\": 1,"
    " \"b\": [1, 2.5, null, true, \"x\"]}}}]}],"
    " \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\","
    " \"parameters\": {\"type\": \"object\", \"properties\": {\"a\":"
    " {\"type\": \"integer\"}, \"z\": {\"type\": \"string\"}}}}}],"
    " \"n\": 7, \"f\": 2.5, \"s\": \"Hello World\", \"e\": \"\","
    " \"u\": \"\\u00e9\\u00e0\\u00fc \\u00df\\u03c3 \\u00c0\\u00c9\","
    " \"l\": [3, 1, 2], \"d\": {\"b\": 2, \"a\": 1, \"c\": null},"
    " \"t\": true, \"nil\": null, \"big\": 12345678901, \"neg\": -3,"
    " \"words\": [\"b\", \"A\", \"c\", \"B\"], \"objs\": [{\"n\": \"x\","
    " \"v\": 2, \"ok\": true}, {\"n\": \"y\", \"v\": 1, \"ok\": false},"
    " {\"n\": \"z\", \"v\": 3}]}";

struct render_case {
	const char *name;
	const char *tmpl;
	const char *vars; /* JSON object merged over base_vars, or NULL */
	const char *want; /* jinja2's rendering */
};

static const struct render_case cases[] = {
    {"trim_blocks", "{% if t %}\nA\n{% endif %}\nB", NULL, "A\nB"},
    {"lstrip_blocks", "  {% if t %}\n\t x\n  {% endif %}\ny", NULL, "\t x\ny"},
    {"lstrip_plus", "  {%+ if t %}x{% endif +%}\ny", NULL, "  x\ny"},
    {"dash_strip", "a  \n {%- if t -%} \n b \n {%- endif -%}\n  c {{- n -}}  d",
     NULL, "abc7d"},
    {"comments", "a {# c #} b\n  {# own line #}\nc {#- x -#} d", NULL,
     "a  b\ncd"},
    {"raw",
     "{% raw %}{{ x }}{% if %}{% endraw %}|  {%- raw -%}  y  {%- endraw %}",
     NULL, "{{ x }}{% if %}|y"},
    {"trailing_newline", "{{ n }}\n", NULL, "7"},
    {"crlf", "x\r\n{% if t %}\r\n  y\r\n{% endif %}\r\nz", NULL, "x\n  y\nz"},
    {"var_braces", "{{ {'a': {'b': 1}} }}|{{ {'a':{'b':1}}}}", NULL,
     "{'a': {'b': 1}}|{'a': {'b': 1}}"},
    {"numbers",
     "{{ 0x1F }} {{ 1_000 }} {{ 1e3 }} {{ 0b101 }} {{ 0o17 }} {{ 1.5e-3 }} {{ "
     "10.0 }}",
     NULL, "31 1000 1000.0 5 15 0.0015 10.0"},
    {"strings",
     "{{ 'ab' \"cd\" 'ef' }}|{{ '\\x41\\u00e9\\U0001F680\\t\\\\\\'\\\"\\q' }}",
     NULL, "abcdef|A\303\251\360\237\232\200\t\\'\"\\q"},
    /* a lone surrogate is one character, as in Python (common/utf8's
     * o1_utf8_decode_surrogates) */
    {"surrogate_literal",
     "{{ '\\ud800'|length }} {{ ('a\\udfffb'[1:])|length }} {{ '\\ud800x'[1] "
     "}}",
     NULL, "1 2 x"},
    /* every level of the expression grammar against its neighbours
     * (jinja_parse.c's table; jinja2 3.1.6 gave the expected text) */
    {"precedence",
     "{{ 2 ** 3 ** 2 }}|{{ -2 ** 2 }}|{{ 1 + 2 * 3 - 4 / 2 }}|{{ 10 - 2 - 3 "
     "}}|{{ 7 // 2 * 2 }}|{{ 2 * 3 % 4 }}|{{ 'a' ~ 2 * 3 ~ 'b' }}|{{ (1 ~ 2) + "
     "'3' }}|{{ not 1 == 2 }}|{{ 1 < 2 < 3 }}|{{ 3 > 2 > 2 }}|{{ 'a' in 'abc' "
     "and not 'd' in 'abc' or false }}|{{ false and true or true }}|{{ not "
     "false and false }}|{{ 1 if not 0 else 2 }}|{{ 2 + 3 == 5 }}|{{ 'x' if 0 "
     "else 'y' ~ 3 * 2 }}|{{ '1' + 1 ~ 1 }}",
     NULL,
     "64|4|5.0|5|6|2|a6b|123|True|True|False|True|True|False|1|True|y6|111"},
    {"if_elif",
     "{% for v in [1, 2, 3] %}{% if v == 1 %}one{% elif v == 2 %}two{% else "
     "%}many{% endif %};{% endfor %}",
     NULL, "one;two;many;"},
    {"for_loop_vars",
     "{% for x in l %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ "
     "loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }};{% "
     "endfor %}",
     NULL, "1032TrueFalse3;2121FalseFalse3;3210FalseTrue3;"},
    {"for_prev_next_cycle",
     "{% for x in l %}{{ loop.cycle('a', 'b') }}[{{ loop.previtem }},{{ "
     "loop.nextitem }}]{% endfor %}",
     NULL, "a[,1]b[3,2]a[1,]"},
    {"for_else_filter",
     "{% for x in l if x > 1 %}{{ x }}/{{ loop.length }} {% else %}none{% "
     "endfor %}|{% for x in [] %}a{% else %}empty{% endfor %}",
     NULL, "3/2 2/2 |empty"},
    {"for_break_continue",
     "{% for x in [1, 2, 3, 4] %}{% if x == 2 %}{% continue %}{% endif %}{% if "
     "x == 4 %}{% break %}{% endif %}{{ x }}{% endfor %}",
     NULL, "13"},
    {"for_unpack",
     "{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}|{% for a, b in "
     "[(1, 2), (3, 4)] %}{{ a * b }}{% endfor %}|{% for k in d %}{{ k }}{% "
     "endfor %}|{% for ch in 'h\303\251' %}[{{ ch }}]{% endfor %}",
     NULL, "b=2;a=1;c=None;|212|bac|[h][\303\251]"},
    {"for_recursive",
     "{% for x in [[1, [2]], [3], 4] recursive %}{% if x is iterable %}({{ "
     "loop(x) }}){% else %}{{ x }}@{{ loop.depth }}{% endif %}{% endfor %}",
     NULL, "(1@2(2@3))(3@2)4@1"},
    {"for_changed",
     "{% for x in [1, 1, 2, 2, 1] %}{{ loop.changed(x) }}{% endfor %}", NULL,
     "TrueFalseTrueFalseTrue"},
    {"for_nested",
     "{% for i in range(2) %}{% for j in range(2) %}{{ i }}{{ j }}{% endfor "
     "%}/{% endfor %}",
     NULL, "0001/1011/"},
    {"set_scoping",
     "{% set x = 1 %}{% if t %}{% set x = 2 %}{% endif %}{{ x }}{% for i in "
     "[1] %}{% set x = 3 %}{{ x }}{% endfor %}{{ x }}{% for i in [1, 2] %}{% "
     "if loop.first %}{% set y = 5 %}{% endif %}[{{ y }}]{% endfor %}",
     NULL, "232[5][]"},
    {"set_tuple",
     "{% set a, b = 1, 2 %}{{ a }}{{ b }}|{% set c = 1, 2 %}{{ c }}", NULL,
     "12|(1, 2)"},
    {"namespace",
     "{% set ns = namespace(found=false, n=0) %}{% for m in messages %}{% if "
     "m.role == 'user' %}{% set ns.found = true %}{% endif %}{% set ns.n = "
     "ns.n + 1 %}{% endfor %}{{ ns.found }}{{ ns.n }}",
     NULL, "True3"},
    {"set_block",
     "{% set x %}  in {{ n }}  {% endset %}[{{ x }}]|{% set y | trim | upper "
     "%}  yy  {% endset %}[{{ y }}]",
     NULL, "[  in 7  ]|[YY]"},
    {"macro_defaults",
     "{% macro greet(name, greeting='Hello', punct='!') %}{{ greeting }}, {{ "
     "name }}{{ punct }}{% endmacro %}{{ greet('Bob') }}|{{ greet('Al', "
     "punct='?') }}|{{ greet('X', 'Hi') }}",
     NULL, "Hello, Bob!|Hello, Al?|Hi, X!"},
    {"macro_late_binding",
     "{% macro m() %}{{ x }}{% endmacro %}{% set x = 1 %}{{ m() }}", NULL, "1"},
    {"macro_varargs",
     "{% macro m(a) %}{{ a }}{{ varargs }}{{ kwargs }}{% endmacro %}{{ m(1, 2, "
     "3, k=4) }}",
     NULL, "1(2, 3){'k': 4}"},
    {"call_block",
     "{% macro wrap(tag) %}<{{ tag }}>{{ caller() }}</{{ tag }}>{% endmacro "
     "%}{% call wrap('b') %}bold {{ s }}{% endcall %}",
     NULL, "<b>bold Hello World</b>"},
    {"call_block_args",
     "{% macro each(xs) %}{% for x in xs %}{{ caller(x) }}{% endfor %}{% "
     "endmacro %}{% call(item) each(l) %}[{{ item }}]{% endcall %}",
     NULL, "[3][1][2]"},
    {"macro_recursive",
     "{% macro r(v) %}{% if v is mapping %}{% for k, x in v.items() %}{{ k "
     "}}:({{ r(x) }}){% endfor %}{% elif v is iterable and v is not string "
     "%}[{% for x in v %}{{ r(x) }}{% if not loop.last %},{% endif %}{% endfor "
     "%}]{% else %}{{ v }}{% endif %}{% endmacro %}{{ "
     "r(messages[2].tool_calls[0]) }}",
     NULL, "function:(name:(f)arguments:(a:(1)b:([1,2.5,None,True,x])))"},
    {"filter_block",
     "{% filter upper %}abc {{ s }}{% endfilter %}|{% filter replace('a', 'b') "
     "| trim %}  aaa  {% endfilter %}",
     NULL, "ABC HELLO WORLD|bbb"},
    {"with_block", "{% with x = 5, y = 6 %}{{ x + y }}{% endwith %}[{{ x }}]",
     NULL, "11[]"},
    {"generation_block", "{% generation %}gen {{ n }}{% endgeneration %}", NULL,
     "gen 7"},
    {"print_stmt", "{% print n + 1 %}", NULL, "8"},
    {"arith_int",
     "{{ n + 1 }}|{{ n - 10 }}|{{ n * 3 }}|{{ n / 2 }}|{{ n // 2 }}|{{ -n // 2 "
     "}}|{{ n % 3 }}|{{ -n % 3 }}|{{ n ** 2 }}|{{ 2 ** -2 }}|{{ big * 3 }}",
     NULL, "8|-3|21|3.5|3|-4|1|2|49|0.25|37037036703"},
    {"arith_float",
     "{{ f + 1 }}|{{ f * 2 }}|{{ 7.5 // 2 }}|{{ -7.5 % 2 }}|{{ 1 / 3 }}|{{ "
     "-0.0 }}|{{ 10 / 2 }}|{{ 0.1 + 0.2 }}",
     NULL, "3.5|5.0|3.0|0.5|0.3333333333333333|-0.0|5.0|0.30000000000000004"},
    {"concat_repeat",
     "{{ 'abc' ~ 1 ~ none ~ nosuch ~ true ~ 2.0 }}|{{ l + [4] }}|{{ s * 2 "
     "}}|{{ l * 2 }}|{{ (1, 2) + (3,) }}",
     NULL,
     "abc1NoneTrue2.0|[3, 1, 2, 4]|Hello WorldHello World|[3, 1, 2, 3, 1, "
     "2]|(1, 2, 3)"},
    {"compare",
     "{{ 1 < n < 10 }}{{ 1 < n > 100 }}{{ n == 7.0 }}{{ true == 1 }}{{ 'a' < "
     "'b' }}{{ [1, 2] < [1, 3] }}{{ l != [3, 1, 2] }}",
     NULL, "TrueFalseTrueTrueTrueTrueFalse"},
    {"in_operator",
     "{{ 'ell' in s }}{{ 3 in l }}{{ 'a' in d }}{{ 'q' not in s }}{{ 9 not in "
     "l }}{{ 'x' in nosuch }}",
     NULL, "TrueTrueTrueTrueTrueFalse"},
    {"logic",
     "{{ t and 'yes' or 'no' }}|{{ nil or e or 'dflt' }}|{{ 0 and 1 }}|{{ not "
     "t }}|{{ not nil }}|{{ 'a' if t else 'b' }}{{ 'a' if nil else 'b' }}[{{ "
     "'a' if nil }}]",
     NULL, "yes|dflt|0|False|True|ab[]"},
    {"access",
     "{{ messages[1].role }}|{{ messages[1]['content'] }}|{{ d.a }}|{{ d['b'] "
     "}}|{{ l[-1] }}|{{ l.0 }}|[{{ d.zz }}][{{ l[10] }}][{{ s.nope }}]|{{ "
     "messages[-1].tool_calls[0].function.name }}",
     NULL, "user|  Hi there  |1|2|2|3|[][][]|f"},
    {"slices",
     "{{ s[0] }}{{ s[-1] }}{{ s[1:4] }}|{{ s[::-1] }}|{{ s[::2] }}|{{ s[-3:] "
     "}}|{{ s[:-3] }}|{{ u[1:3] }}|{{ l[::-1] }}{{ l[1:] }}{{ l[5:] }}|{{ "
     "s[2:100] }}",
     NULL,
     "Hdell|dlroW olleH|HloWrd|rld|Hello Wo|\303\240\303\274|[2, 1, 3][1, "
     "2][]|llo World"},
    {"literals",
     "{{ [] }}{{ {} }}{{ () }}{{ (1,) }}{{ (1, 'a') }}{{ [1, 'a', none, true, "
     "1.5] }}{{ {'a': 1, 'b': [1, (2, 3)], 'c': {'d': none}} }}",
     NULL,
     "[]{}()(1,)(1, 'a')[1, 'a', None, True, 1.5]{'a': 1, 'b': [1, (2, 3)], "
     "'c': {'d': None}}"},
    {"repr_strings",
     "{{ [\"quote's\", 'dq\"', 'both\\'\"', 'nl\\nx', 'tab\\t', 'bs\\\\', "
     "'\\x01\\x7f\\xa0\\u200b', '\\U0001F680\\u00e9'] }}",
     NULL,
     "[\"quote's\", 'dq\"', 'both\\'\"', 'nl\\nx', 'tab\\t', 'bs\\\\', "
     "'\\x01\\x7f\\xa0\\u200b', '\360\237\232\200\303\251']"},
    {"print_values",
     "{{ none }}|{{ true }}|{{ 1.0 }}|{{ 1e16 }}|{{ 1e15 }}|{{ 0.00001 }}|{{ "
     "1/3 }}|{{ d }}|{{ nosuch }}",
     NULL,
     "None|True|1.0|1e+16|1000000000000000.0|1e-05|0.3333333333333333|{'b': 2, "
     "'a': 1, 'c': None}|"},
    {"f_case",
     "{{ s|upper }}|{{ s|lower }}|{{ 'hello wORLD-foo(bar'|title }}|{{ "
     "s|capitalize }}|{{ u|upper }}|{{ u|lower }}",
     NULL,
     "HELLO WORLD|hello world|Hello World-Foo(Bar|Hello "
     "world|\303\211\303\200\303\234 SS\316\243 "
     "\303\200\303\211|\303\251\303\240\303\274 \303\237\317\203 "
     "\303\240\303\251"},
    {"f_trim_replace",
     "[{{ '  x  '|trim }}][{{ 'xxyxx'|trim('x') }}][{{ s|replace('o', '0') "
     "}}][{{ s|replace('l', 'L', 2) }}]",
     NULL, "[x][y][Hell0 W0rld][HeLLo World]"},
    {"f_length_first_last",
     "{{ l|length }}{{ s|length }}{{ u|length }}{{ d|length }}{{ l|count }}|{{ "
     "l|first }}{{ l|last }}{{ s|first }}[{{ []|first }}]",
     NULL, "311933|32H[]"},
    {"f_list_reverse",
     "{{ l|reverse|list }}|{{ s|reverse }}|{{ s|list }}|{{ d|list }}", NULL,
     "[2, 1, 3]|dlroW olleH|['H', 'e', 'l', 'l', 'o', ' ', 'W', 'o', 'r', 'l', "
     "'d']|['b', 'a', 'c']"},
    {"f_join",
     "{{ l|join }}|{{ l|join(', ') }}|{{ objs|join('-', attribute='n') }}|{{ "
     "d|join(',') }}",
     NULL, "312|3, 1, 2|x-y-z|b,a,c"},
    {"f_default",
     "{{ nosuch|default('dflt') }}|{{ e|default('dflt') }}|{{ "
     "e|default('dflt', true) }}|{{ nil|default('x') }}|{{ nosuch|d('y') }}",
     NULL, "dflt||dflt|None|y"},
    {"f_sort_unique",
     "{{ l|sort }}{{ l|sort(reverse=true) }}{{ words|sort }}{{ "
     "words|sort(case_sensitive=true) }}{{ words|unique|list }}{{ "
     "objs|sort(attribute='v')|map(attribute='n')|join }}",
     NULL,
     "[1, 2, 3][3, 2, 1]['A', 'b', 'B', 'c']['A', 'B', 'b', 'c']['b', 'A', "
     "'c']yxz"},
    {"f_min_max_sum",
     "{{ l|max }}{{ l|min }}{{ words|max }}{{ l|sum }}{{ "
     "objs|sum(attribute='v') }}{{ objs|max(attribute='v') }}",
     NULL, "31c66{'n': 'z', 'v': 3}"},
    {"f_select",
     "{{ objs|selectattr('ok')|map(attribute='n')|list }}{{ "
     "objs|rejectattr('ok')|map(attribute='n')|list }}{{ objs|selectattr('v', "
     "'gt', 1)|list|length }}{{ l|select('odd')|list }}{{ l|reject('odd')|list "
     "}}{{ l|select|list }}",
     NULL, "['x']['y', 'z']2[3, 1][2][3, 1, 2]"},
    {"f_map",
     "{{ objs|map(attribute='ok', default='no')|list }}|{{ "
     "l|map('string')|join('-') }}|{{ messages|map(attribute='role')|join(',') "
     "}}|{{ ['a', 'b']|map('upper')|list }}",
     NULL, "[True, False, 'no']|3-1-2|system,user,assistant|['A', 'B']"},
    {"f_items_dictsort",
     "{{ d|items|list }}|{{ d|dictsort }}|{{ d|dictsort(reverse=true) }}|{{ "
     "{'x': 2, 'y': 1}|dictsort(by='value') }}",
     NULL,
     "[('b', 2), ('a', 1), ('c', None)]|[('a', 1), ('b', 2), ('c', "
     "None)]|[('c', None), ('b', 2), ('a', 1)]|[('y', 1), ('x', 2)]"},
    {"f_numbers",
     "{{ n|string + 'x' }}|{{ '42'|int + 1 }}|{{ '4.7'|int }}|{{ 'zz'|int "
     "}}|{{ 'zz'|int(9) }}|{{ '3.5'|float }}|{{ n|float }}|{{ f|int }}|{{ "
     "-f|abs }}|{{ neg|abs }}",
     NULL, "7x|43|4|0|9|3.5|7.0|2|2.5|3"},
    {"f_round",
     "{{ 2.5|round }}|{{ 3.5|round }}|{{ 2.675|round(2) }}|{{ "
     "2.5|round(method='floor') }}|{{ 2.1|round(method='ceil') }}|{{ "
     "12|round(-1) }}|{{ 15|round(-1) }}|{{ 7|round }}",
     NULL, "2.0|4.0|2.67|2.0|3.0|10|20|7"},
    {"f_indent_center",
     "[{{ 'a\\nb\\n\\nc'|indent(2) }}][{{ 'a\\nb'|indent(2, true) }}][{{ "
     "'a\\n\\nb\\n'|indent(width='> ', blank=true) }}][{{ 'hi'|center(7) }}]",
     NULL, "[a\n  b\n\n  c][  a\n  b][a\n> \n> b\n> ][   hi  ]"},
    {"f_misc",
     "{{ 'one two  three'|wordcount }}|{{ '<a href=\"x\">&\\'</a>'|e }}|{{ "
     "'%s-%s'|format(1, 'b') }}|{{ s|safe }}|{{ l|pprint }}|{{ n|string|length "
     "}}",
     NULL,
     "3|&lt;a href=&#34;x&#34;&gt;&amp;&#39;&lt;/a&gt;|1-b|Hello World|[3, 1, "
     "2]|1"},
    {"f_tojson",
     "{{ d|tojson }}|{{ d|tojson(indent=2) }}|{{ d|tojson(sort_keys=true) "
     "}}|{{ d|tojson(separators=(',', ':')) }}|{{ u|tojson }}|{{ "
     "u|tojson(ensure_ascii=true) }}",
     NULL,
     "{\"b\": 2, \"a\": 1, \"c\": null}|{\n  \"b\": 2,\n  \"a\": 1,\n  \"c\": "
     "null\n}|{\"a\": 1, \"b\": 2, \"c\": "
     "null}|{\"b\":2,\"a\":1,\"c\":null}|\"\303\251\303\240\303\274 "
     "\303\237\317\203 \303\200\303\211\"|\"\\u00e9\\u00e0\\u00fc "
     "\\u00df\\u03c3 \\u00c0\\u00c9\""},
    {"f_tojson_values",
     "{{ [1.0, 1e20, 1e-7, 0.1, -0.0, 3.14159, 1/3, 2.5e-5, none, true, "
     "'\\x01\\n\"\\\\/'] |tojson }}|{{ {1: 'a', true: 'b', none: 'c', 2.5: "
     "'d'}|tojson }}|{{ []|tojson(indent=2) }}{{ {}|tojson(indent=2) }}|{{ "
     "n|tojson(2) }}",
     NULL,
     "[1.0, 1e+20, 1e-07, 0.1, -0.0, 3.14159, 0.3333333333333333, 2.5e-05, "
     "null, true, \"\\u0001\\n\\\"\\\\/\"]|{\"1\": \"b\", \"null\": \"c\", "
     "\"2.5\": \"d\"}|[]{}|7"},
    {"f_tojson_tools", "{{ tools|tojson(indent=4) }}", NULL,
     "[\n    {\n        \"type\": \"function\",\n        \"function\": {\n     "
     "       \"name\": \"f\",\n            \"parameters\": {\n                "
     "\"type\": \"object\",\n                \"properties\": {\n               "
     "     \"a\": {\n                        \"type\": \"integer\"\n           "
     "         },\n                    \"z\": {\n                        "
     "\"type\": \"string\"\n                    }\n                }\n         "
     "   }\n        }\n    }\n]"},
    {"tests_types",
     "{{ nosuch is defined }}{{ n is defined }}{{ nosuch is undefined }}{{ nil "
     "is none }}{{ n is number }}{{ t is number }}{{ t is integer }}{{ f is "
     "float }}{{ s is string }}{{ d is mapping }}{{ l is mapping }}{{ t is "
     "boolean }}",
     NULL, "FalseTrueTrueTrueTrueTrueFalseTrueTrueTrueFalseTrue"},
    {"tests_iter",
     "{{ l is iterable }}{{ s is iterable }}{{ nosuch is iterable }}{{ n is "
     "iterable }}{{ d is sequence }}{{ l is sequence }}{{ n is sequence }}",
     NULL, "TrueTrueTrueFalseTrueTrueFalse"},
    {"tests_values",
     "{{ n is odd }}{{ n is even }}{{ n is divisibleby 7 }}{{ n is "
     "divisibleby(2) }}{{ t is true }}{{ t is false }}{{ s is lower }}{{ 'abc' "
     "is lower }}{{ 'ABC' is upper }}{{ n is eq 7 }}{{ n is ne 7 }}{{ n is gt "
     "3 }}{{ n is lessthan 3 }}{{ 3 is in l }}{{ nil is sameas none }}{{ "
     "'upper' is filter }}{{ 'odd' is test }}{{ n is not none }}",
     NULL,
     "TrueFalseTrueFalseTrueFalseFalseTrueTrueTrueFalseTrueFalseTrueTrueTrueTru"
     "eTrue"},
    {"m_split",
     "{{ s.split() }}{{ s.split('o') }}{{ 'a,b,,c'.split(',') }}{{ "
     "'a,b,c'.split(',', 1) }}{{ 'a,b,c'.rsplit(',', 1) }}{{ '  a  b  "
     "'.split() }}{{ '  a  b  '.split(None, 1) }}{{ '  a  b  '.rsplit(None, 1) "
     "}}",
     NULL,
     "['Hello', 'World']['Hell', ' W', 'rld']['a', 'b', '', 'c']['a', "
     "'b,c']['a,b', 'c']['a', 'b']['a', 'b  ']['  a', 'b']"},
    {"m_splitlines",
     "{{ 'x\\ny\\r\\nz'.splitlines() }}{{ 'x\\ny\\n'.splitlines(true) }}", NULL,
     "['x', 'y', 'z']['x\\n', 'y\\n']"},
    {"m_str",
     "{{ s.startswith('He') }}{{ s.endswith(('x', 'ld')) }}{{ s.find('o') }}{{ "
     "s.rfind('o') }}{{ s.find('zz') }}{{ u.find('\303\274') }}{{ s.count('l') "
     "}}|{{ s.replace('l', 'L') }}|{{ '-'.join(['a', 'b']) }}|{{ s.strip('Hd') "
     "}}|{{ 'xxhixx'.lstrip('x') }}|{{ 'xxhixx'.rstrip('x') }}|{{ '  pad "
     "'.strip() }}",
     NULL, "TrueTrue47-123|HeLLo WorLd|a-b|ello Worl|hixx|xxhi|pad"},
    {"m_str_case",
     "{{ s.upper() }}{{ s.lower() }}{{ \"it's a dog's life\".title() }}{{ "
     "u.title() }}{{ 'hELLO'.capitalize() }}{{ '123'.isdigit() }}{{ "
     "'abc'.isalpha() }}{{ ' '.isspace() }}{{ s.upper().isupper() }}{{ "
     "s.islower() }}",
     NULL,
     "HELLO WORLDhello worldIt'S A Dog'S Life\303\211\303\240\303\274 "
     "Ss\317\203 \303\200\303\251HelloTrueTrueTrueTrueFalse"},
    {"m_format",
     "{{ '%s-%d-%05.2f-%r-%x' % ('a', 42, 3.14159, 'q', 255) }}|{{ '%s' % s "
     "}}|{{ '%(a)s/%(b)s' % {'a': 1, 'b': 2} }}|{{ '{} and {}'.format('x', "
     "'y') }}|{{ '{1}{0}{name}'.format('a', 'b', name='c') }}",
     NULL, "a-42-03.14-'q'-ff|Hello World|1/2|x and y|bac"},
    {"m_format_huge",
     "{{ ('%99999999999d' % 7)|length }}|{{ ('%.99999999999f' % 1.5)|length "
     "}}",
     NULL, "4096|4098"},
    {"m_dict_list",
     "{{ d.get('a') }}{{ d.get('zz') }}{{ d.get('zz', 5) }}|{{ d.keys()|list "
     "}}{{ d.values()|list }}|{{ d.items()|list }}|{{ l.index(1) }}{{ "
     "l.count(3) }}",
     NULL,
     "1None5|['b', 'a', 'c'][2, 1, None]|[('b', 2), ('a', 1), ('c', None)]|11"},
    {"g_range",
     "{{ range(5)|list }}{{ range(2, 10, 3)|list }}{{ range(10, 0, -3)|list "
     "}}{{ range(0)|list }}",
     NULL, "[0, 1, 2, 3, 4][2, 5, 8][10, 7, 4, 1][]"},
    {"g_dict_namespace",
     "{{ dict(a=1, b='x') }}|{{ namespace(a=1).a }}|{{ namespace(d).b }}", NULL,
     "{'a': 1, 'b': 'x'}|1|2"},
    {"g_strftime_now", "{{ strftime_now('%Y-%m-%d %H:%M:%S %b %A') }}", NULL,
     "2025-03-07 14:05:09 Mar Friday"},
    {"idiom_system_split",
     "{% if messages[0]['role'] == 'system' %}{% set sys = "
     "messages[0]['content'] %}{% set rest = messages[1:] %}{% else %}{% set "
     "rest = messages %}{% endif %}{{ sys }}|{{ rest|length }}",
     NULL, "Sys|2"},
    {"idiom_think_split",
     "{{ messages[2].content.split('</think>')[-1].lstrip('\\n') }}|{{ "
     "(messages[2].content.split('</"
     "think>')[0].rstrip('\\n').split('<think>')[-1].lstrip('\\n')) }}",
     "{\"messages\": [{\"role\": \"user\", \"content\": \"q\"}, {\"role\": "
     "\"user\", \"content\": \"q\"}, {\"role\": \"assistant\", \"content\": "
     "\"<think>\\nplan\\n</think>\\n\\nanswer\"}]}",
     "answer|plan"},
    {"idiom_reverse_ns",
     "{% set ns = namespace(last=-1) %}{% for m in messages[::-1] %}{% set i = "
     "(messages|length - 1) - loop.index0 %}{% if ns.last == -1 and m.role == "
     "'user' %}{% set ns.last = i %}{% endif %}{% endfor %}{{ ns.last }}",
     NULL, "1"},
    {"generators",
     "{{ 'yes' if messages|selectattr('role', 'equalto', 'nobody') else 'no' "
     "}}|{{ l|map('string')|list|length }}|{{ d.items() }}|{{ d.keys() }}|{{ "
     "d.values()|length }}|{{ l|select|first }}|{{ l|reverse|join }}|{{ "
     "(l|unique|list)[0] }}",
     NULL,
     "yes|3|dict_items([('b', 2), ('a', 1), ('c', None)])|dict_keys(['b', 'a', "
     "'c'])|3|3|213|3"},
    {"idiom_tool_args",
     "{% for tc in messages[2].tool_calls %}{% for k, v in "
     "tc.function.arguments|items %}<{{ k }}>{{ v|tojson if v is not string "
     "else v }}</{{ k }}>{% endfor %}{% endfor %}",
     NULL, "<a>1</a><b>[1, 2.5, null, true, \"x\"]</b>"},
};

struct error_case {
	const char *name;
	const char *tmpl;
	enum o1_jinja_error_kind kind;
	uint32_t line, col;
	const char *msg;
};

static const struct error_case errors[] = {
	{"e_unknown_tag", "ab\n{% foo %}", O1_JINJA_ERR_SYNTAX, 2, 4, "Encountered unknown tag 'foo'."},
	{"e_unclosed_if", "{% if t %}\nx", O1_JINJA_ERR_SYNTAX, 2, 2, "Unexpected end of template. Jinja was looking for the following tags: 'elif' or 'else' or 'endif'. The innermost block that needs to be closed is 'if'."},
	{"e_stray_endfor", "{% if t %}{% endfor %}{% endif %}", O1_JINJA_ERR_SYNTAX, 1, 14, "Encountered unknown tag 'endfor'. Jinja was looking for the following tags: 'elif' or 'else' or 'endif'. The innermost block that needs to be closed is 'if'."},
	{"e_unknown_filter", "{{ x | nosuch }}", O1_JINJA_ERR_SYNTAX, 1, 8, "No filter named 'nosuch'."},
	{"e_unknown_test", "{{ x is nosuch }}", O1_JINJA_ERR_SYNTAX, 1, 9, "No test named 'nosuch'."},
	{"e_bad_expr", "{{ 1 + }}", O1_JINJA_ERR_SYNTAX, 1, 8, "unexpected 'end of print statement'"},
	{"e_unterminated_string", "{{ 'abc }}", O1_JINJA_ERR_SYNTAX, 1, 4, "unexpected char \"'\" at 3"},
	{"e_unclosed_comment", "a {# b", O1_JINJA_ERR_SYNTAX, 1, 3, "Missing end of comment tag"},
	{"e_unbalanced", "{{ (1 }}", O1_JINJA_ERR_SYNTAX, 1, 7, "unexpected '}', expected ')'"},
	{"e_unclosed_var", "{{ x ", O1_JINJA_ERR_SYNTAX, 1, 6, "unexpected end of template, expected 'end of print statement'."},
	{"e_unsupported_tag", "{% include 'x' %}", O1_JINJA_ERR_SYNTAX, 1, 4, "the 'include' tag is not supported in chat templates"},
	{"e_undefined_attr", "{{ nosuch.x }}", O1_JINJA_ERR_RUNTIME, 1, 10, "'nosuch' is undefined"},
	{"e_none_attr", "{{ nil.a.b }}", O1_JINJA_ERR_RUNTIME, 1, 9, "'None' has no attribute 'a'"},
	{"e_type_add", "{{ 1 + 'a' }}", O1_JINJA_ERR_RUNTIME, 1, 6, "unsupported operand type(s) for +: 'int' and 'str'"},
	{"e_str_add", "{{ 'a' + 1 }}", O1_JINJA_ERR_RUNTIME, 1, 8, "can only concatenate str (not \"int\") to str"},
	{"e_unsafe", "{{ l.append(1) }}", O1_JINJA_ERR_RUNTIME, 1, 12, "access to attribute 'append' of 'list' object is unsafe."},
	{"e_zero_div", "{{ 1 // 0 }}", O1_JINJA_ERR_RUNTIME, 1, 6, "integer division or modulo by zero"},
	{"e_not_callable", "{{ n() }}", O1_JINJA_ERR_RUNTIME, 1, 5, "'int' object is not callable"},
	{"e_raise", "{% if t %}\n  {{ raise_exception('Only user and assistant roles are supported!') }}\n{% endif %}", O1_JINJA_ERR_RAISED, 2, 21, "Only user and assistant roles are supported!"},
	{"e_range_big", "{{ range(1000000)|length }}", O1_JINJA_ERR_RUNTIME, 1, 9, "Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000)."},
	{"e_tojson_undefined", "{{ nosuch|tojson }}", O1_JINJA_ERR_RUNTIME, 1, 11, "Object of type Undefined is not JSON serializable"},
	{"e_ns_assign", "{% set n.x = 1 %}", O1_JINJA_ERR_RUNTIME, 1, 9, "cannot assign attribute on non-namespace object"},
	{"e_generator_len", "{{ l|select|length }}", O1_JINJA_ERR_RUNTIME, 1, 13, "object of type 'generator' has no len()"},
	{"e_format_args", "{{ '' % 'x' }}", O1_JINJA_ERR_RUNTIME, 1, 7, "not all arguments converted during string formatting"},
	{"e_unhashable", "{{ l[1:] in d }}", O1_JINJA_ERR_RUNTIME, 1, 4, "unhashable type: 'list'"},
	{"e_undefined_int", "{{ nosuch|int }}", O1_JINJA_ERR_RUNTIME, 1, 11, "'nosuch' is undefined"},
	{"e_unpack", "{% set a, b = [1, 2, 3] %}", O1_JINJA_ERR_RUNTIME, 1, 8, "too many values to unpack (expected 2)"},
};

/* base_vars with the members of EXTRA (a JSON object) added or replaced. */
static cJSON *make_vars(const char *extra)
{
	cJSON *vars = cJSON_Parse(base_vars), *more, *it;

	assert_non_null(vars);
	if (!extra)
		return vars;
	more = cJSON_Parse(extra);
	assert_non_null(more);
	while ((it = more->child)) {
		cJSON_DetachItemViaPointer(more, it);
		cJSON_DeleteItemFromObject(vars, it->string);
		cJSON_AddItemToObject(vars, it->string, it);
	}
	cJSON_Delete(more);
	return vars;
}

/* Parses and renders TMPL; returns the text (caller frees) or NULL with
 * *RET and *ERR set. */
static char *render(const char *tmpl, const cJSON *vars,
		    const struct o1_jinja_limits *limits, int *ret,
		    struct o1_jinja_error *err)
{
	struct o1_jinja_render_opts opts = {.sz = sizeof(opts),
					    .limits = limits,
					    .now = fixed_now};
	struct o1_jinja *t;
	char *out = NULL;
	size_t len;

	*ret = o1_jinja_parse(tmpl, strlen(tmpl), &t, err);
	if (*ret)
		return NULL;
	*ret = o1_jinja_render(t, vars, &opts, &out, &len, err);
	if (!*ret)
		assert_int_equal(strlen(out), len);
	o1_jinja_destroy(t);
	return out;
}

static void test_constructs(void **state)
{
	size_t failed = 0;

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct render_case *rc = &cases[i];
		cJSON *vars = make_vars(rc->vars);
		struct o1_jinja_error err;
		int ret;
		char *out = render(rc->tmpl, vars, NULL, &ret, &err);

		if (ret || strcmp(out, rc->want)) {
			print_error("case %s: ret %d (%u:%u %s)\n want [%s]\n got  "
				    "[%s]\n", rc->name, ret, err.line, err.col,
				    err.msg, rc->want, out ? out : "");
			failed++;
		}
		free(out);
		cJSON_Delete(vars);
	}
	assert_int_equal(failed, 0);
}

static void test_errors(void **state)
{
	cJSON *vars = make_vars(NULL);
	size_t failed = 0;

	(void)state;
	for (size_t i = 0; i < sizeof(errors) / sizeof(errors[0]); i++) {
		const struct error_case *ec = &errors[i];
		struct o1_jinja_error err;
		int ret, want_ret = ec->kind == O1_JINJA_ERR_SYNTAX
					? -O1_E_FORMAT
					: -EINVAL;
		char *out = render(ec->tmpl, vars, NULL, &ret, &err);

		if (ret != want_ret || err.kind != ec->kind ||
		    err.line != ec->line || err.col != ec->col ||
		    strcmp(err.msg, ec->msg)) {
			print_error("error %s: ret %d kind %d at %u:%u [%s]\n",
				    ec->name, ret, err.kind, err.line, err.col,
				    err.msg);
			failed++;
		}
		free(out);
	}
	cJSON_Delete(vars);
	assert_int_equal(failed, 0);
}

/* Renders TMPL under LIMITS and expects a limit error whose message
 * contains WHAT. */
static void expect_limit(const char *tmpl, const struct o1_jinja_limits *l,
			 const char *what)
{
	struct o1_jinja_error err;
	int ret;
	char *out = render(tmpl, NULL, l, &ret, &err);

	assert_null(out);
	if (ret != -O1_E_BOUNDS || err.kind != O1_JINJA_ERR_LIMIT ||
	    !strstr(err.msg, what))
		fail_msg("%s: ret %d kind %d [%s]", tmpl, ret, err.kind,
			 err.msg);
}

static void test_limits(void **state)
{
	struct o1_jinja_limits steps = {.max_steps = 10000};
	struct o1_jinja_limits steps_big = {.max_steps = 1000000};
	struct o1_jinja_limits output = {.max_output_bytes = 1000};
	struct o1_jinja_limits memory = {.max_memory_bytes = 1 << 20};

	(void)state;
	expect_limit("{% for i in range(100000) %}{% for j in range(100000) %}"
		     "{% endfor %}{% endfor %}",
		     &steps, "steps");
	expect_limit("{% for i in range(100000) %}0123456789{% endfor %}",
		     &output, "exceeds 1000 bytes");
	expect_limit("{% set ns = namespace(s='x') %}{% for i in range(64) %}"
		     "{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
		     &memory, "memory");
	expect_limit("{{ 'x' * 1000000000000 }}", NULL, "memory");
	/* scanning a long string over and over allocates nothing: steps */
	expect_limit("{% set s = 'x' * 1000000 %}{% for i in range(100000) %}"
		     "{{ s[-1] ~ (s|length) ~ ('y' in s) ~ s.find('y') }}"
		     "{% endfor %}",
		     &steps_big, "steps");
	expect_limit("{% macro r() %}{{ r() }}{% endmacro %}{{ r() }}", NULL,
		     "deeper than");
	expect_limit("{% for x in [[1]] recursive %}{{ loop([x]) }}"
		     "{% endfor %}",
		     NULL, "deeper than");
}

/* A template nested deeper than the parser allows fails to parse. */
static void test_parse_depth(void **state)
{
	struct o1_jinja_error err;
	struct o1_jinja *t;
	char *src = malloc(40000), *p = src;

	(void)state;
	for (int i = 0; i < 300; i++)
		p += sprintf(p, "{%% if t %%}");
	for (int i = 0; i < 300; i++)
		p += sprintf(p, "{%% endif %%}");
	assert_int_equal(o1_jinja_parse(src, strlen(src), &t, &err),
			 -O1_E_FORMAT);
	assert_non_null(strstr(err.msg, "nested more than"));
	p = src;
	p += sprintf(p, "{{ ");
	for (int i = 0; i < 5000; i++)
		p += sprintf(p, "not ");
	sprintf(p, "x }}");
	assert_int_equal(o1_jinja_parse(src, strlen(src), &t, &err),
			 -O1_E_FORMAT);
	memset(src, '(', 10000);
	assert_int_equal(o1_jinja_parse(src, 10000, &t, &err), 0);
	o1_jinja_destroy(t);
	memcpy(src, "{{", 2);
	assert_int_equal(o1_jinja_parse(src, 10000, &t, &err), -O1_E_FORMAT);
	free(src);
}

/* Values nested without bound fail to print instead of overflowing. */
static void test_value_depth(void **state)
{
	static const char *const tmpls[] = {
	    "{% set ns = namespace(v=[]) %}{% for i in range(5000) %}"
	    "{% set ns.v = [ns.v] %}{% endfor %}{{ ns.v|tojson }}",
	    "{% set ns = namespace(v=[]) %}{% for i in range(5000) %}"
	    "{% set ns.v = [ns.v] %}{% endfor %}{{ ns.v }}",
	    "{% set ns = namespace(v=[]) %}{% for i in range(5000) %}"
	    "{% set ns.v = [ns.v] %}{% endfor %}{{ ns.v < ns.v }}",
	};
	struct o1_jinja_error err;
	int ret;

	(void)state;
	for (size_t i = 0; i < sizeof(tmpls) / sizeof(tmpls[0]); i++) {
		char *out = render(tmpls[i], NULL, NULL, &ret, &err);

		assert_null(out);
		assert_int_equal(ret, -EINVAL);
		assert_non_null(strstr(err.msg, "nested too deeply"));
	}
}

/* NULL variables and NULL error pointers are allowed; variables that are
 * not an object are an error. */
static void test_api_edges(void **state)
{
	struct o1_jinja *t;
	cJSON *arr = cJSON_CreateArray();
	struct o1_jinja_error err;
	char *out;
	size_t len;

	(void)state;
	assert_int_equal(o1_jinja_parse("a{{ x }}b", 9, &t, NULL), 0);
	assert_int_equal(o1_jinja_render(t, NULL, NULL, &out, &len, NULL), 0);
	assert_string_equal(out, "ab");
	free(out);
	assert_int_equal(o1_jinja_render(t, arr, NULL, &out, &len, &err),
			 -EINVAL);
	assert_null(out);
	o1_jinja_destroy(t);
	assert_int_equal(o1_jinja_parse("", 0, &t, NULL), 0);
	assert_int_equal(o1_jinja_render(t, NULL, NULL, &out, &len, NULL), 0);
	assert_string_equal(out, "");
	assert_int_equal(len, 0);
	free(out);
	o1_jinja_destroy(t);
	assert_int_equal(o1_jinja_parse("{{ x", 4, &t, NULL), -O1_E_FORMAT);
	assert_null(t);
	o1_jinja_destroy(NULL);
	cJSON_Delete(arr);
}

/* Every allocation failing in turn: parse and render fail with -ENOMEM
 * (or succeed), never crash or leak (ASan). */
static void test_alloc_failures(void **state)
{
	const char *tmpl = cases[0].tmpl;
	cJSON *vars = make_vars(NULL);
	int ok = 0;

	(void)state;
	for (long k = 0; k < 200 && ok < 3; k++) {
		struct o1_jinja *t = NULL;
		char *out = NULL;
		size_t len;
		int ret;

		o1_test_alloc_fail_at(k);
		ret = o1_jinja_parse(tmpl, strlen(tmpl), &t, NULL);
		if (!ret)
			ret = o1_jinja_render(t, vars, NULL, &out, &len, NULL);
		o1_test_alloc_fail_at(-1);
		assert_true(ret == 0 || ret == -ENOMEM);
		ok += ret == 0;
		free(out);
		o1_jinja_destroy(t);
	}
	assert_true(ok > 0);
	cJSON_Delete(vars);
}

struct thread_arg {
	const struct o1_jinja *t;
	const cJSON *vars;
	const char *want;
	int bad;
};

static void *render_thread(void *p)
{
	struct thread_arg *a = p;

	for (int i = 0; i < 200; i++) {
		char *out;
		size_t len;

		if (o1_jinja_render(a->t, a->vars, NULL, &out, &len, NULL) ||
		    strcmp(out, a->want))
			a->bad++;
		free(out);
	}
	return NULL;
}

static void test_threads(void **state)
{
	const struct render_case *rc = NULL;
	struct thread_arg args[4];
	pthread_t th[4];
	struct o1_jinja *t;
	cJSON *vars;

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		if (!strcmp(cases[i].name, "macro_recursive"))
			rc = &cases[i];
	assert_non_null(rc);
	vars = make_vars(rc->vars);
	assert_int_equal(o1_jinja_parse(rc->tmpl, strlen(rc->tmpl), &t, NULL),
			 0);
	for (int i = 0; i < 4; i++) {
		args[i] = (struct thread_arg){t, vars, rc->want, 0};
		assert_int_equal(
		    pthread_create(&th[i], NULL, render_thread, &args[i]), 0);
	}
	for (int i = 0; i < 4; i++) {
		pthread_join(th[i], NULL);
		assert_int_equal(args[i].bad, 0);
	}
	o1_jinja_destroy(t);
	cJSON_Delete(vars);
}

/* templates.json's templates, named as renderings.jsonl names them:
 * "NAME", then "NAME#2", "NAME#3" for repeated names. */
struct named_template {
	char name[96];
	struct o1_jinja *t;
};

static size_t load_templates(struct named_template *out, size_t cap)
{
	size_t len, n = 0;
	char *text = o1_test_file_read(CHAT_DIR "/templates.json", &len);
	cJSON *all = cJSON_Parse(text), *it;
	struct o1_jinja_error err;

	assert_non_null(all);
	cJSON_ArrayForEach(it, all)
	{
		const char *name =
		    cJSON_GetStringValue(cJSON_GetObjectItem(it, "name"));
		const char *src =
		    cJSON_GetStringValue(cJSON_GetObjectItem(it, "template"));
		int seen = 1;

		assert_true(name && src && n < cap);
		for (size_t i = 0; i < n; i++)
			seen += !strncmp(out[i].name, name, strlen(name)) &&
				(out[i].name[strlen(name)] == 0 ||
				 out[i].name[strlen(name)] == '#');
		snprintf(out[n].name, sizeof(out[n].name),
			 seen > 1 ? "%s#%d" : "%s", name, seen);
		if (o1_jinja_parse(src, strlen(src), &out[n].t, &err))
			fail_msg("template %s: %u:%u %s", out[n].name, err.line,
				 err.col, err.msg);
		n++;
	}
	cJSON_Delete(all);
	free(text);
	return n;
}

/* The variables transformers passes: messages, tools, documents (None),
 * add_generation_prompt and the special tokens. */
static cJSON *rendering_vars(const cJSON *r)
{
	static const char *const keys[] = {"messages", "tools",
					   "add_generation_prompt",
					   "bos_token", "eos_token"};
	cJSON *vars = cJSON_CreateObject();

	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		const cJSON *v = cJSON_GetObjectItem(r, keys[i]);

		cJSON_AddItemToObject(vars, keys[i],
				      v ? cJSON_Duplicate(v, true)
					: cJSON_CreateNull());
	}
	cJSON_AddNullToObject(vars, "documents");
	return vars;
}

/* Whether rendering R with T gives what transformers gave. */
static bool rendering_matches(const struct o1_jinja *t, const cJSON *r)
{
	const char *want = cJSON_GetStringValue(cJSON_GetObjectItem(r, "rendered"));
	const char *raised = cJSON_GetStringValue(cJSON_GetObjectItem(r, "error"));
	static const char prefix[] = "TemplateError: ";
	cJSON *vars = rendering_vars(r);
	struct o1_jinja_error err;
	char *out;
	size_t len;
	int ret = o1_jinja_render(t, vars, NULL, &out, &len, &err);
	bool ok;

	if (raised)
		ok = ret == -EINVAL && err.kind == O1_JINJA_ERR_RAISED &&
		     !strncmp(raised, prefix, strlen(prefix)) &&
		     !strcmp(raised + strlen(prefix), err.msg);
	else
		ok = !ret && want && len == strlen(want) && !strcmp(out, want);
	free(out);
	cJSON_Delete(vars);
	return ok;
}

static void test_renderings(void **state)
{
	struct named_template tmpls[64];
	size_t n_tmpl, total = 0, same = 0, len;
	char *text, *line, *save = NULL;

	(void)state;
	if (access(CHAT_DIR "/renderings.jsonl", R_OK))
		skip();
	n_tmpl = load_templates(tmpls, 64);
	text = o1_test_file_read(CHAT_DIR "/renderings.jsonl", &len);
	for (line = strtok_r(text, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		cJSON *r = cJSON_Parse(line);
		const char *name =
		    cJSON_GetStringValue(cJSON_GetObjectItem(r, "template"));
		size_t k = 0;

		assert_non_null(name);
		while (k < n_tmpl && strcmp(tmpls[k].name, name))
			k++;
		assert_true(k < n_tmpl);
		total++;
		if (rendering_matches(tmpls[k].t, r))
			same++;
		else
			print_error("differs: %s case %s\n", name,
				    cJSON_GetStringValue(
					cJSON_GetObjectItem(r, "case")));
		cJSON_Delete(r);
	}
	print_message("renderings: %zu of %zu identical to transformers'\n",
		      same, total);
	for (size_t i = 0; i < n_tmpl; i++)
		o1_jinja_destroy(tmpls[i].t);
	free(text);
	assert_int_equal(total, 666);
	assert_int_equal(same, total);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_constructs),
	    cmocka_unit_test(test_errors),
	    cmocka_unit_test(test_limits),
	    cmocka_unit_test(test_parse_depth),
	    cmocka_unit_test(test_value_depth),
	    cmocka_unit_test(test_api_edges),
	    cmocka_unit_test(test_alloc_failures),
	    cmocka_unit_test(test_threads),
	    cmocka_unit_test(test_renderings),
	};
	int failed;

	setenv("TZ", "UTC", 1);
	tzset();
	failed = cmocka_run_group_tests(tests, NULL, NULL);
	if (!failed && access(CHAT_DIR "/renderings.jsonl", R_OK))
		return 77; /* the outside reference was not checked */
	return failed;
}
