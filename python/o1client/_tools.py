"""Tool calling: the chat request o1d renders with tools, and tool calls
read back from an answer.

A request with ``tools`` (or messages carrying ``tool_calls`` or role
"tool" results) goes to o1d as a chat request in JSON (wire protocol 6,
O1_FLAG_CHAT_JSON): {"messages", "tools", "tool_choice"}, as OpenAI's
chat API takes them; the model's own template renders them.
``tool_choice`` "required" or {"type": "function", "function": {"name"}}
also sends a tool-call grammar (the tools the call may use), so the
answer is one call with arguments that fit the tool's parameters.

Answers are read back in the format o1d says its template writes calls
in (the connection's tool_format), by the same rules as o1d's own reader
(daemon/tokenizer/tool_call.c, which tests/python/test_tools.py compares
this one with): Hermes ``<tool_call>{json}</tool_call>``, XML
``<function=NAME><parameter=P>value</parameter></function>``, Llama 3
``{"name", "parameters"}`` objects separated by ";", Mistral
``[TOOL_CALLS][{...}]`` or ``[TOOL_CALLS]NAME[ARGS]{...}``. A call that
does not parse is not guessed at: the whole answer is then text.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Optional

from . import _lib

WS = " \t\n\r"
TOOLS_MAX = 128
FORMATS = ("none", "hermes", "xml", "llama3_json", "mistral")
# The sidecar's rule for function names (tools/sidecar/sidecar_tools.c
# name_ok, OpenAI's): 1 to 64 ASCII letters, digits, '_' or '-'.
NAME_RE = re.compile(r"[A-Za-z0-9_-]{1,64}")


def _name_ok(name: Any) -> bool:
    return isinstance(name, str) and NAME_RE.fullmatch(name) is not None


@dataclass(frozen=True)
class ToolCall:
    """One call read back from an answer: ``arguments`` is a JSON
    object's compact text (``args`` parses it); ``id`` the model's own
    (Mistral) or None."""

    name: str
    arguments: str
    id: Optional[str] = None

    @property
    def args(self) -> dict:
        return json.loads(self.arguments)


# -- the request ---------------------------------------------------------

def _uses_tools(messages: Any) -> bool:
    return isinstance(messages, Sequence) and not isinstance(
        messages, (str, bytes)) and any(
        isinstance(m, Mapping) and ("tool_calls" in m or
                                    m.get("role") == "tool")
        for m in messages)


def _check_tools(tools: Any) -> list:
    if isinstance(tools, (str, bytes)) or not isinstance(tools, Sequence) \
            or not 1 <= len(tools) <= TOOLS_MAX:
        raise TypeError(f"tools must be a list of 1..{TOOLS_MAX} "
                        "{'type': 'function', 'function': {...}} mappings")
    for i, t in enumerate(tools):
        f = t.get("function") if isinstance(t, Mapping) else None
        if not isinstance(f, Mapping) or t.get("type") != "function" or \
                not isinstance(f.get("name"), str) or not f["name"]:
            raise ValueError(f"tools[{i}] must be {{'type': 'function', "
                             "'function': {'name': str, ...}}")
        if not _name_ok(f["name"]):
            raise ValueError(f"tools[{i}]['function']['name'] must be 1 to "
                             "64 letters, digits, '_' or '-' (OpenAI's "
                             f"rule), not {f['name']!r}")
        if "parameters" in f and not isinstance(f["parameters"], Mapping):
            raise TypeError(f"tools[{i}]['function']['parameters'] must "
                            "be a mapping (a JSON Schema)")
    return list(tools)


def _check_call_names(calls: Any, i: int) -> None:
    """Names of message I's tool_calls by the same rule as the tools'
    (as the sidecar checks them); their shape is o1d's to check."""
    if isinstance(calls, (str, bytes)) or not isinstance(calls, Sequence):
        return
    for j, c in enumerate(calls):
        f = c.get("function") if isinstance(c, Mapping) else None
        name = f.get("name") if isinstance(f, Mapping) else None
        if isinstance(name, str) and not _name_ok(name):
            raise ValueError(f"messages[{i}]['tool_calls'][{j}]: function "
                             "name must be 1 to 64 letters, digits, '_' "
                             f"or '-', not {name!r}")


def _named(tools: list, choice: Any) -> Optional[Mapping]:
    """The tool a tool_choice names, or None for the strings."""
    if choice is None or choice in ("none", "auto", "required"):
        return None
    f = choice.get("function") if isinstance(choice, Mapping) else None
    name = f.get("name") if isinstance(f, Mapping) else None
    if not isinstance(name, str) or choice.get("type") != "function":
        raise ValueError("tool_choice must be 'none', 'auto', 'required' "
                         "or {'type': 'function', 'function': {'name'}}")
    for t in tools:
        if t["function"]["name"] == name:
            return t
    raise ValueError(f"tool_choice names {name!r}, which is not one of "
                     "the tools")


def _dumps(v: Any) -> str:
    return json.dumps(v, separators=(",", ":"), ensure_ascii=False)


def chat_request(messages: Any, tools: Any, tool_choice: Any) \
        -> Optional[tuple[bytes, int, Optional[bytes], Optional[str]]]:
    """None when the request needs no JSON form; else (the JSON chat
    request, its grammar type, the grammar's bytes or None, the tools to
    read calls back against as JSON or None)."""
    if tools is None and tool_choice is not None:
        raise ValueError("tool_choice needs tools")
    if tools is None and not _uses_tools(messages):
        return None
    if isinstance(messages, (str, bytes)) or \
            not isinstance(messages, Sequence) or not messages:
        raise TypeError("tools need messages (a chat prompt)")
    for i, m in enumerate(messages):
        if not isinstance(m, Mapping) or not isinstance(m.get("role"), str):
            raise TypeError(f"messages[{i}] must be a mapping with a "
                            "'role' str")
        _check_call_names(m.get("tool_calls"), i)
    req: dict[str, Any] = {"messages": list(messages)}
    gtype, gbytes, back = _lib.GRAMMAR_TYPE_NONE, None, None
    if tools is not None:
        tools = _check_tools(tools)
        named = _named(tools, tool_choice)
        req["tools"] = tools
        if tool_choice is not None:
            req["tool_choice"] = tool_choice
        if tool_choice != "none":
            back = _dumps(tools)
        if tool_choice == "required" or named is not None:
            gtype = _lib.GRAMMAR_TYPE_TOOL_CALL
            gbytes = _dumps([named] if named is not None
                            else tools).encode("utf-8")
    try:
        text = _dumps(req)
    except (TypeError, ValueError) as e:
        raise TypeError(f"messages and tools must be JSON data: {e}") \
            from None
    return text.encode("utf-8"), gtype, gbytes, back


# -- reading calls back --------------------------------------------------

class _Bad(Exception):
    """A malformed call: the whole answer is text."""


_dec = json.JSONDecoder()


def _value_at(s: str, i: int) -> tuple[Any, int]:
    """One JSON value at s[i:] after blanks; (value, end) or _Bad."""
    while i < len(s) and s[i] in WS:
        i += 1
    try:
        return _dec.raw_decode(s, i)
    except ValueError:
        raise _Bad() from None


def _exact(s: str) -> Any:
    """s as one JSON value with nothing but blanks around it, or None."""
    try:
        v, end = _value_at(s, 0)
    except _Bad:
        return None
    return v if not s[end:].strip(WS) else None


def _get(obj: Mapping, key: str) -> Any:
    if key in obj:
        return obj[key]
    for k, v in obj.items():  # o1d's JSON reader matches keys caselessly
        if k.lower() == key:
            return v
    return None


class _Reader:
    def __init__(self, text: str, tools: Any) -> None:
        self.text = text
        self.tools = tools
        self.content: list[str] = []
        self.calls: list[ToolCall] = []

    def call(self, name: str, args: Any, id: Optional[str]) -> None:
        name = name.strip(WS)
        if not name or not isinstance(args, dict) or \
                any(ord(ch) < 0x20 for ch in name):
            raise _Bad()
        self.calls.append(ToolCall(name, _dumps(args), id))

    def json_call(self, obj: Any) -> None:
        if not isinstance(obj, dict) or not isinstance(_get(obj, "name"),
                                                       str):
            raise _Bad()
        args = _get(obj, "arguments")
        if args is None:
            args = _get(obj, "parameters")
        if isinstance(args, str):
            args = _exact(args)
        if args is None:
            args = {}
        cid = _get(obj, "id")
        self.call(obj["name"] if "name" in obj else _get(obj, "name"), args,
                  cid if isinstance(cid, str) else None)

    def hermes(self) -> None:
        s, i = self.text, 0
        while i < len(s):
            a = s.find("<tool_call>", i)
            if a < 0:  # text after a call is dropped
                if not self.calls:
                    self.content.append(s[i:])
                return
            if not self.calls:
                self.content.append(s[i:a])
            body = a + len("<tool_call>")
            b = s.find("</tool_call>", body)
            j = _exact(s[body:b if b >= 0 else len(s)].strip(WS))
            if j is None:
                raise _Bad()
            self.json_call(j)
            i = b + len("</tool_call>") if b >= 0 else len(s)

    def _param_type(self, fn: str, p: str) -> Optional[str]:
        """The type parameter p of tool fn declares, or None. Any level
        may be something other than an object (a boolean schema is valid
        JSON Schema): then None, as o1d's reader says (no type: text)."""
        for t in self.tools or ():
            f = t.get("function", t) if isinstance(t, dict) else None
            if not isinstance(f, dict) or f.get("name") != fn:
                continue
            v: Any = f
            for key in ("parameters", "properties", p, "type"):
                v = v.get(key) if isinstance(v, dict) else None
            return v if isinstance(v, str) else None
        return None

    def _params(self, fn: str, s: str) -> dict:
        args: dict = {}
        i = 0
        while True:
            a = s.find("<parameter=", i)
            if a < 0:
                return args
            pn = a + len("<parameter=")
            gt = s.find(">", pn)
            if gt < 0:
                raise _Bad()
            v = gt + 1
            stop = s.find("</parameter>", v)
            if stop < 0:
                stop = s.find("<parameter=", v)
            if stop < 0:
                stop = len(s)
            val = s[v:stop]
            if val.startswith("\n"):
                val = val[1:]
            if val.endswith("\n"):
                val = val[:-1]
            ty = self._param_type(fn, s[pn:gt])
            typed = _exact(val) if ty and ty != "string" else None
            if s[pn:gt] not in args:
                args[s[pn:gt]] = typed if typed is not None else val
            i = stop

    def xml(self) -> None:
        s = self.text
        first = s.find("<function=")
        if first < 0:
            self.content.append(s)
            return
        block = s.find("<tool_call>", 0, first)
        self.content.append(s[:block if block >= 0 else first])
        i = first
        while True:
            a = s.find("<function=", i)
            if a < 0:
                return
            name = a + len("<function=")
            gt = s.find(">", name)
            if gt < 0:
                raise _Bad()
            b = s.find("</function>", gt)
            fn = s[name:gt]
            self.call(fn, self._params(fn, s[gt + 1:b if b >= 0 else
                                              len(s)]), None)
            i = b + len("</function>") if b >= 0 else len(s)

    def llama3(self) -> None:
        s = self.text.strip(WS)
        if s.startswith("<|python_tag|>"):
            s = s[len("<|python_tag|>"):].strip(WS)
        if not s.startswith("{"):
            self.content.append(self.text)
            return
        i = 0
        while i < len(s):
            v, i = _value_at(s, i)
            self.json_call(v)
            while i < len(s) and (s[i] in WS or s[i] == ";"):
                i += 1

    def _mistral_args(self, s: str) -> None:
        i = 0
        while i < len(s):
            a = s.find("[ARGS]", i)
            if a < 0:
                raise _Bad()
            idp = s.find("[CALL_ID]", i)
            cid = s[idp + len("[CALL_ID]"):a] if 0 <= idp < a else None
            v, end = _value_at(s, a + len("[ARGS]"))
            self.call(s[i:idp if 0 <= idp < a else a], v, cid)
            i = end
            while i < len(s) and s[i] in WS:
                i += 1
            if s.startswith("[TOOL_CALLS]", i):
                i += len("[TOOL_CALLS]")

    def mistral(self) -> None:
        s = self.text
        t = s.find("[TOOL_CALLS]")
        if t < 0:
            self.content.append(s)
            return
        self.content.append(s[:t])
        rest = s[t + len("[TOOL_CALLS]"):].strip(WS)
        if not rest.startswith("["):
            self._mistral_args(rest)
            return
        lst, _ = _value_at(rest, 0)
        if not isinstance(lst, list):
            raise _Bad()
        for it in lst:
            self.json_call(it)


def parse(fmt: int, text: str, tools: Any = None) \
        -> tuple[str, list[ToolCall]]:
    """(content, calls) of an answer in tool format fmt (the wire's
    number: 1 hermes, 2 xml, 3 llama3_json, 4 mistral); TOOLS (a list, or
    None) types the XML format's parameters. Without a well-formed call:
    (text, [])."""
    r = _Reader(text, tools)
    read = {1: r.hermes, 2: r.xml, 3: r.llama3, 4: r.mistral}.get(fmt)
    try:
        if read is not None:
            read()
    except (_Bad, RecursionError):
        return text, []
    if not r.calls:
        return text, []
    return "".join(r.content).rstrip(WS), r.calls
