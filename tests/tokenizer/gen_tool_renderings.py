#!/usr/bin/env python3
"""Makes tool_renderings.jsonl: the shared chat templates
(../shared/testdata/chat/templates.json) rendered by jinja2 set up as
transformers 5 sets it up (chat_template_utils.render_jinja_template: an
ImmutableSandboxedEnvironment with trim_blocks, lstrip_blocks, loop
controls, raise_exception, strftime_now and its tojson), for
conversations with tools, assistant tool_calls and tool results, the
tool_calls' arguments given as objects (as vLLM hands them over).

Usage: gen_tool_renderings.py TEMPLATES.json > tool_renderings.jsonl
"""
import json
import sys
from datetime import datetime

import jinja2
import jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment

TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "Current weather for a city",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "description": "City name"},
        "unit": {"type": "string", "enum": ["c", "f"]}},
        "required": ["city"]}}}]

CALL = {"id": "call_1", "type": "function", "function": {
    "name": "get_weather", "arguments": {"city": "Paris", "unit": "c"}}}

CASES = {
    "tool-call": [
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": "", "tool_calls": [CALL]},
        {"role": "tool", "tool_call_id": "call_1", "name": "get_weather",
         "content": "{\"temp\": 18}"},
    ],
    "tool-call-answer": [
        {"role": "system", "content": "You can call tools."},
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": "", "tool_calls": [CALL]},
        {"role": "tool", "tool_call_id": "call_1", "name": "get_weather",
         "content": "18 C"},
        {"role": "assistant", "content": "It is 18 C in Paris."},
        {"role": "user", "content": "Thanks!"},
    ],
}


class TemplateError(Exception):
    pass


def raise_exception(message):
    raise TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None,
           sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent,
                      separators=separators, sort_keys=sort_keys)


def env():
    e = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                      extensions=[jinja2.ext.loopcontrols])
    e.filters["tojson"] = tojson
    e.globals["raise_exception"] = raise_exception
    e.globals["strftime_now"] = lambda f: datetime.now().strftime(f)
    return e


def main():
    templates = json.load(open(sys.argv[1]))
    seen = {}
    e = env()
    for t in templates:
        seen[t["name"]] = seen.get(t["name"], 0) + 1
        name = t["name"] + ("#%d" % seen[t["name"]]
                            if seen[t["name"]] > 1 else "")
        tmpl = e.from_string(t["template"])
        for case, msgs in CASES.items():
            for agp in (True, False):
                rec = {"template": name, "case": case, "messages": msgs,
                       "tools": TOOLS, "add_generation_prompt": agp,
                       "bos_token": "<s>", "eos_token": "</s>"}
                try:
                    rec["rendered"] = tmpl.render(
                        messages=msgs, tools=TOOLS, documents=None,
                        add_generation_prompt=agp, bos_token="<s>",
                        eos_token="</s>")
                except TemplateError as x:
                    rec["error"] = "TemplateError: " + str(x)
                except Exception as x:  # the template itself failed
                    rec["error"] = type(x).__name__ + ": " + str(x)
                print(json.dumps(rec, ensure_ascii=False))


main()
