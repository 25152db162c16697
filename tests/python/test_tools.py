"""Tool calling through the Python client: tools and tool_choice reach
o1d (serving the tiny model with a Hermes-style template, so its welcome
says "hermes"), forced calls come back parsed into Completion.tool_calls
with arguments that fit the tool's schema, a conversation with a call and
its result renders, logprobs carry each alternative's bytes (checked
against `o1model detokenize`), bad arguments raise before anything is
sent; and the Python reader of tool calls gives what o1d's C reader gives
(o1_py_tool_calls) on canned answers and the C fuzzer's seeds."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from conftest import REPO, BUILD
import o1client
from o1client import _tools

TEMPLATE = REPO / "tests" / "tools" / "sidecar" / "data" / \
    "hermes_tools.jinja"

PARAMS = {"type": "object",
          "properties": {"city": {"enum": ["Paris", "Oslo"]},
                         "unit": {"enum": ["c", "f"]}},
          "required": ["city", "unit"], "additionalProperties": False}
TOOLS = [{"type": "function",
          "function": {"name": "get_weather", "parameters": PARAMS}},
         {"type": "function",
          "function": {"name": "get_time", "parameters": {
              "type": "object",
              "properties": {"zone": {"enum": ["utc", "cet"]}},
              "required": ["zone"], "additionalProperties": False}}}]
MSGS = [{"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather in Paris?"}]


@pytest.fixture(scope="module")
def tools_client(start_daemon):
    d = start_daemon(f"model.chat_template={TEMPLATE}", "refine.max_steps=2",
                     "refine.confidence_threshold=0")
    with o1client.Client(d.socket, name="pytest-tools") as c:
        yield c
    d.stop()


def fits(call: o1client.ToolCall) -> bool:
    a = call.args
    if call.name == "get_weather":
        return a.get("city") in ("Paris", "Oslo") and \
            a.get("unit") in ("c", "f") and len(a) == 2
    return call.name == "get_time" and a.get("zone") in ("utc", "cet") \
        and len(a) == 1


def test_required_forces_a_call(tools_client):
    c = tools_client.generate(messages=MSGS, tools=TOOLS,
                              tool_choice="required", max_tokens=300)
    assert c.finish_reason == "tool_calls", c.text
    assert len(c.tool_calls) == 1 and fits(c.tool_calls[0]), c.text
    assert c.content == ""


def test_named_function(tools_client):
    c = tools_client.generate(
        messages=MSGS, tools=TOOLS, max_tokens=300,
        tool_choice={"type": "function", "function": {"name": "get_time"}})
    assert c.finish_reason == "tool_calls", c.text
    assert [t.name for t in c.tool_calls] == ["get_time"]
    assert fits(c.tool_calls[0])


def test_call_and_result_render(tools_client):
    called = MSGS + [
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {
                "name": "get_weather",
                "arguments": json.dumps({"city": "Paris", "unit": "c"})}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "18 C"}]
    plain = tools_client.generate(messages=MSGS, max_tokens=4)
    with_tools = tools_client.generate(messages=called, tools=TOOLS,
                                       max_tokens=4)
    none = tools_client.generate(messages=called, tools=TOOLS,
                                 tool_choice="none", max_tokens=4)
    no_tools = tools_client.generate(messages=called, max_tokens=4)
    assert with_tools.usage.prompt_tokens > \
        no_tools.usage.prompt_tokens > plain.usage.prompt_tokens
    assert none.usage.prompt_tokens == no_tools.usage.prompt_tokens
    assert none.tool_calls is None  # "none": nothing read back


def test_no_call_is_none_for_auto_and_none(tools_client):
    """tool_calls is None whenever the answer holds no call (as OpenAI's
    message.tool_calls), whatever tool_choice was: "auto" answered in
    text (4 tokens cannot hold a whole call) gives None, as "none" and no
    tools do, and content is then the whole text."""
    auto = tools_client.generate(messages=MSGS, tools=TOOLS,
                                 tool_choice="auto", max_tokens=4)
    none = tools_client.generate(messages=MSGS, tools=TOOLS,
                                 tool_choice="none", max_tokens=4)
    plain = tools_client.generate(messages=MSGS, max_tokens=4)
    assert auto.finish_reason != "tool_calls", auto.text
    assert auto.tool_calls is None and auto.content == auto.text
    assert none.tool_calls is None and plain.tool_calls is None
    assert none.content is None and plain.content is None
    forced = tools_client.generate(messages=MSGS, tools=TOOLS,
                                   tool_choice="required", max_tokens=300)
    assert isinstance(forced.tool_calls, list) and forced.tool_calls


def test_refinement_of_a_tool_conversation(tools_client):
    """A refinement round appends the answer and the review to the JSON
    conversation (the daemon's own turns after the tool result)."""
    called = MSGS + [
        {"role": "assistant", "content": None, "tool_calls": [
            {"type": "function", "function": {
                "name": "get_time", "arguments": {"zone": "utc"}}}]},
        {"role": "tool", "content": "12:00"}]
    c = tools_client.generate(messages=called, tools=TOOLS, max_tokens=4,
                              refine_steps=2)
    assert len(c.rounds) >= 2
    assert c.rounds[1].prompt_tokens > c.rounds[0].prompt_tokens


def test_top_text_is_the_tokenizer_s(tools_client, o1model_bin, model):
    c = tools_client.generate(messages=MSGS, max_tokens=3, logprobs=3)
    assert len(c.logprobs) == 3
    for t in c.logprobs[:2]:
        assert len(t.top_text) == len(t.top) == 3
        for (tid, _), text in zip(t.top, t.top_text):
            ref = subprocess.run([o1model_bin, "detokenize", model],
                                 input=f"{tid}\n".encode(), check=True,
                                 capture_output=True).stdout
            if ref.endswith(b"\n") and not text.endswith(b"\n"):
                ref = ref[:-1]
            try:
                text.decode("utf-8")
            except UnicodeDecodeError:  # part of a character: the CLI
                continue                 # prints U+FFFD for it alone
            assert text == ref, (tid, text, ref)
    plain = tools_client.generate(messages=MSGS, max_tokens=3, logprobs=2,
                                  detokenize=False)
    assert all(t.top_text == () for t in plain.logprobs)


@pytest.mark.parametrize("kw, exc", [
    (dict(tools={"a": 1}), TypeError),
    (dict(tools=[]), TypeError),
    (dict(tools=[{"type": "function", "function": {}}]), ValueError),
    (dict(tools=[{"type": "retrieval", "function": {"name": "f"}}]),
     ValueError),
    (dict(tools=TOOLS, tool_choice="always"), ValueError),
    (dict(tools=TOOLS, tool_choice={"type": "function",
                                    "function": {"name": "nope"}}),
     ValueError),
    (dict(tool_choice="auto"), ValueError),
    (dict(tools=TOOLS, tool_choice="required",
          response_format={"type": "json_object"}), TypeError),
])
def test_bad_arguments(tools_client, kw, exc):
    with pytest.raises(exc):
        tools_client.generate(messages=MSGS, max_tokens=2, **kw)


def test_daemon_refuses_bad_tool_calls(tools_client):
    bad = MSGS + [{"role": "assistant", "tool_calls": [
        {"type": "function", "function": {"name": "f",
                                          "arguments": "{not json"}}]}]
    with pytest.raises(o1client.BadRequestError):
        tools_client.generate(messages=bad, max_tokens=2)


# -- the reader against o1d's --------------------------------------------

READER_TOOLS = [{"function": {"name": "f", "parameters": {"properties": {
    "n": {"type": "integer"}, "s": {"type": "string"},
    "o": {"type": "object"}}}}}]

CANNED = [
    (1, 'Sure.\n<tool_call>\n{"name": "f", "arguments": {"n": 1}}\n'
        '</tool_call>'),
    (1, '<tool_call>{"name": "f", "arguments": "{\\"s\\": \\"x\\"}"}'
        '</tool_call><tool_call>{"name": "g", "arguments": {}}'),
    (1, '<tool_call>{"name": "f", "arguments": {"n": 1}'),
    (1, ' Hm,\nok. \n<tool_call>{"name": "f", "arguments": {}}</tool_call>'
        ' and <tool_call>{"name": "g", "arguments": {}}</tool_call>\nDone.'),
    (1, 'no calls here'),
    (2, 'ok <tool_call>\n<function=f>\n<parameter=n>\n5\n</parameter>\n'
        '<parameter=s>\n5\n</parameter>\n<parameter=o>\n{"a": [1]}\n'
        '</parameter>\n</function>\n</tool_call>'),
    (2, '<function=f>\n<parameter=n>\nfive\n</parameter></function>'),
    (2, '<function=f'),
    (3, '<|python_tag|>{"name": "f", "parameters": {"n": 2}}; '
        '{"name": "g", "parameters": {}}'),
    (3, '{"name": "f", "parameters": {"n": 2}} trailing'),
    (3, 'The answer is {"name": "f"}'),
    (4, 'x[TOOL_CALLS][{"name": "f", "arguments": {"n": 1}, "id": "a1"}]'),
    (4, '[TOOL_CALLS]f[CALL_ID]k9[ARGS]{"n": 3}[TOOL_CALLS]g[ARGS]{}'),
    (4, '[TOOL_CALLS]f{"n": 3}'),
    (4, '[TOOL_CALLS]["f"]'),
]


def reference(fmt: int, text: bytes):
    exe = os.environ.get("O1_PY_TOOL_CALLS") or str(
        BUILD / "tests" / "python" / "o1_py_tool_calls")
    tools = BUILD / "py_reader_tools.json"
    tools.write_text(json.dumps(READER_TOOLS))
    out = subprocess.run([exe, str(fmt), str(tools)], input=text,
                         check=True, capture_output=True).stdout
    return json.loads(out)


def same(fmt: int, text: bytes) -> None:
    want = reference(fmt, text)
    content, calls = _tools.parse(fmt, text.decode("utf-8"), READER_TOOLS)
    assert content == want["content"], (fmt, text)
    got = [[c.name, json.loads(c.arguments), c.id] for c in calls]
    assert got == [[n, json.loads(a), i] for n, a, i in want["calls"]], \
        (fmt, text)


@pytest.mark.parametrize("fmt, text", CANNED)
def test_reader_as_o1d_s(fmt, text):
    same(fmt, text.encode())


@pytest.mark.parametrize("params", [
    {"properties": {"n": True}}, [1], {"properties": ["n"]},
    {"properties": {"n": "integer"}}])
def test_reader_on_odd_schemas(params):
    """A schema the reader cannot type a parameter from (a boolean
    subschema is valid JSON Schema) leaves its value text, as o1d's
    reader does, rather than raising."""
    tools = [{"type": "function",
              "function": {"name": "f", "parameters": params}}]
    content, calls = _tools.parse(
        2, "<function=f>\n<parameter=n>\n5\n</parameter></function>",
        tools)
    assert [(c.name, c.args) for c in calls] == [("f", {"n": "5"})]


def test_reader_on_the_fuzz_seeds():
    seeds = REPO / "tests" / "fuzz" / "corpus" / "tool_call"
    n = 0
    for p in sorted(seeds.iterdir()):
        data = p.read_bytes()
        if not data:
            continue
        try:
            data[1:].decode("utf-8")
        except UnicodeDecodeError:
            continue  # the Python reader takes text, not bytes
        if b"\0" in data:
            continue  # o1d's answers hold no NUL (C strings)
        same(data[0] % 5, data[1:])
        n += 1
    assert n > 20
