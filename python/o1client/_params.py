"""Checks generate()'s arguments and builds a struct o1_submit_opts.

Everything a caller can get wrong in type or range is caught here, with
TypeError or ValueError, before anything reaches the daemon: o1d counts
malformed submissions as violations and drops a client after a few, so
the daemon only ever sees what its own decoder (shm/wire.c) accepts.
What only the daemon can judge (a token id against the vocabulary, text
against the tokenizer, limits of its configuration) goes through and
comes back as a typed O1Error.

The ranges are wire.c's: temperature [0, 100], top_p (0, 1], min_p
[0, 1), repeat_penalty (0, 100], presence and frequency penalties
[-2, 2], logprobs 0..20, refine_steps 0..16, stop strings 1..255 bytes.

Tools (_tools.py): tools and tool_choice as OpenAI's, or messages with
tool_calls or role "tool", send the chat as JSON; "required" or a named
function is a grammar too, so it excludes the three below.

Structured output: at most one of grammar (grammar text), json_schema (a
schema as a mapping, serialized compactly in its own member order, or
JSON text) and response_format (OpenAI's: {"type": "text" |
"json_object" | "json_schema", "json_schema": {"schema": ...}}). Their
shape is checked here; whether the daemon takes the grammar (syntax,
schema keywords, its size limit) comes back as GrammarError or
BadRequestError.
"""

from __future__ import annotations

import ctypes
import json
import math
from collections.abc import Mapping, Sequence
from typing import Any, Optional, Union

from . import _lib, _tools

U32_MAX = (1 << 32) - 1
U64_MAX = (1 << 64) - 1
LOGPROBS_MAX = 20
REFINE_MAX = 16
STOP_STR_MAX = 255

Prompt = Union[str, bytes, Sequence[int], Sequence[Mapping[str, str]]]


def check_int(name: str, v: Any, lo: int, hi: int) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise TypeError(f"{name} must be an int, not {type(v).__name__}")
    if not lo <= v <= hi:
        raise ValueError(f"{name} must be in {lo}..{hi}, got {v}")
    return v


def check_float(name: str, v: Any, lo: float, hi: float, *,
                lo_open: bool = False, hi_open: bool = False) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise TypeError(f"{name} must be a number, not {type(v).__name__}")
    x = float(v)
    ok = math.isfinite(x) and (x > lo if lo_open else x >= lo) and \
        (x < hi if hi_open else x <= hi)
    if not ok:
        lb = "(" if lo_open else "["
        rb = ")" if hi_open else "]"
        raise ValueError(f"{name} must be in {lb}{lo}, {hi}{rb}, got {v}")
    return x


def check_bool(name: str, v: Any) -> bool:
    if not isinstance(v, bool):
        raise TypeError(f"{name} must be a bool, not {type(v).__name__}")
    return v


def _ids(name: str, seq: Any) -> list[int]:
    if isinstance(seq, (str, bytes)) or not isinstance(seq, Sequence):
        raise TypeError(f"{name} must be a sequence of ints")
    return [check_int(f"{name}[{i}]", t, 0, U32_MAX)
            for i, t in enumerate(seq)]


def _chat_bytes(messages: Any) -> bytes:
    """role\\0content\\0role\\0content..., as O1_FLAG_CHAT wants it."""
    if isinstance(messages, (str, bytes)) or \
            not isinstance(messages, Sequence):
        raise TypeError("messages must be a sequence of "
                        "{'role': str, 'content': str} mappings")
    if not messages:
        raise ValueError("messages is empty")
    parts = []
    for i, m in enumerate(messages):
        if not isinstance(m, Mapping):
            raise TypeError(f"messages[{i}] must be a mapping")
        for key in ("role", "content"):
            v = m.get(key)
            if not isinstance(v, str):
                raise TypeError(f"messages[{i}]['{key}'] must be a str")
            if "\0" in v:
                raise ValueError(f"messages[{i}]['{key}'] holds a NUL")
        if not m["role"]:
            raise ValueError(f"messages[{i}]['role'] is empty")
        parts += [m["role"].encode(), m["content"].encode()]
    return b"\0".join(parts)


def _is_messages(p: Any) -> bool:
    return isinstance(p, Sequence) and not isinstance(p, (str, bytes)) \
        and len(p) > 0 and isinstance(p[0], Mapping)


def split_prompt(prompt: Any, messages: Any, token_ids: Any) \
        -> tuple[Optional[bytes], Optional[list[int]], bool]:
    """(text, ids, chat) from generate()'s three ways to give a prompt."""
    given = [x is not None for x in (prompt, messages, token_ids)]
    if sum(given) != 1:
        raise TypeError("give exactly one of prompt, messages, token_ids")
    if prompt is not None:
        if isinstance(prompt, str):
            prompt = prompt.encode("utf-8", "surrogatepass")
        if isinstance(prompt, (bytes, bytearray, memoryview)):
            text = bytes(prompt)
            if not text:
                raise ValueError("the prompt is empty")
            return text, None, False
        if _is_messages(prompt):
            messages = prompt
        else:
            token_ids = prompt
    if messages is not None:
        return _chat_bytes(messages), None, True
    ids = _ids("token_ids", token_ids)
    if not ids:
        raise ValueError("token_ids is empty")
    return None, ids, False


def _stops(stop: Any) -> list[bytes]:
    if stop is None:
        return []
    if isinstance(stop, (str, bytes)):
        stop = [stop]
    if not isinstance(stop, Sequence):
        raise TypeError("stop must be a str or a sequence of str")
    out = []
    for i, s in enumerate(stop):
        if isinstance(s, str):
            s = s.encode("utf-8")
        if not isinstance(s, bytes):
            raise TypeError(f"stop[{i}] must be a str")
        if not 1 <= len(s) <= STOP_STR_MAX or b"\0" in s:
            raise ValueError(f"stop[{i}] must be 1..{STOP_STR_MAX} bytes "
                             "of UTF-8 without NUL")
        out.append(s)
    return out


def _text(name: str, v: Any) -> bytes:
    if isinstance(v, str):
        v = v.encode("utf-8")
    if not isinstance(v, (bytes, bytearray)):
        raise TypeError(f"{name} must be a str")
    if not v:
        raise ValueError(f"{name} is empty")
    return bytes(v)


def _schema(name: str, v: Any) -> bytes:
    """A JSON Schema as JSON text: a mapping (or bool) serialized in its
    own order (the order of `properties` is the order of the output's
    members), or JSON text as given."""
    if isinstance(v, (Mapping, bool)):
        return json.dumps(v, separators=(",", ":"),
                          ensure_ascii=False).encode("utf-8")
    if isinstance(v, (str, bytes, bytearray)):
        return _text(name, v)
    raise TypeError(f"{name} must be a mapping or JSON text")


def _response_format(rf: Any) -> tuple[int, Optional[bytes]]:
    if not isinstance(rf, Mapping):
        raise TypeError("response_format must be a mapping with a 'type'")
    kind = rf.get("type")
    if kind == "text":
        return _lib.GRAMMAR_TYPE_NONE, None
    if kind == "json_object":
        return _lib.GRAMMAR_TYPE_JSON_OBJECT, None
    if kind == "json_schema":
        js = rf.get("json_schema")
        if not isinstance(js, Mapping) or "schema" not in js:
            raise ValueError("response_format['json_schema'] must be a "
                             "mapping with a 'schema'")
        return _lib.GRAMMAR_TYPE_JSON_SCHEMA, _schema(
            "response_format['json_schema']['schema']", js["schema"])
    raise ValueError("response_format['type'] must be 'text', "
                     f"'json_object' or 'json_schema', not {kind!r}")


def split_grammar(grammar: Any, json_schema: Any, response_format: Any) \
        -> tuple[int, Optional[bytes]]:
    """(grammar type, bytes) from generate()'s three ways to give one."""
    given = [x is not None for x in (grammar, json_schema, response_format)]
    if sum(given) > 1:
        raise TypeError("give at most one of grammar, json_schema, "
                        "response_format")
    if grammar is not None:
        return _lib.GRAMMAR_TYPE_TEXT, _text("grammar", grammar)
    if json_schema is not None:
        return _lib.GRAMMAR_TYPE_JSON_SCHEMA, _schema("json_schema",
                                                      json_schema)
    if response_format is not None:
        return _response_format(response_format)
    return _lib.GRAMMAR_TYPE_NONE, None


class Submission:
    """A checked request: struct o1_submit_opts and the buffers it points
    to (kept alive here until o1_client_submit copied them)."""

    def __init__(self, prompt: Any = None, *, messages: Any = None,
                 token_ids: Any = None, max_tokens: int = 256,
                 temperature: float = 0.0, top_p: float = 1.0,
                 top_k: int = 0, min_p: float = 0.0,
                 repeat_penalty: float = 1.0, repeat_last_n: int = 0,
                 presence_penalty: float = 0.0,
                 frequency_penalty: float = 0.0, seed: int = 0,
                 stop: Any = None, stop_token_ids: Any = None,
                 logprobs: int = 0, confidence: bool = False,
                 refine_steps: int = 0, add_bos: Optional[bool] = None,
                 ignore_eos: bool = False, detokenize: bool = True,
                 device_logits: bool = False, grammar: Any = None,
                 json_schema: Any = None, response_format: Any = None,
                 tools: Any = None, tool_choice: Any = None) -> None:
        if sum(x is not None for x in (prompt, messages, token_ids)) != 1:
            raise TypeError("give exactly one of prompt, messages, "
                            "token_ids")
        gtype, gbytes = split_grammar(grammar, json_schema, response_format)
        tr = _tools.chat_request(messages if messages is not None
                                 else prompt, tools, tool_choice)
        self.tools: Optional[str] = None
        if tr is None:
            text, ids, chat = split_prompt(prompt, messages, token_ids)
        else:  # a chat request as JSON (tools, tool calls, results)
            text, ttype, tbytes, self.tools = tr
            ids, chat = None, True
            if ttype != _lib.GRAMMAR_TYPE_NONE:
                if gtype != _lib.GRAMMAR_TYPE_NONE:
                    raise TypeError("tool_choice 'required' or a named "
                                    "function is a grammar: give no "
                                    "grammar, json_schema or "
                                    "response_format with it")
                gtype, gbytes = ttype, tbytes
        smp = _lib.Sampling(sz=ctypes.sizeof(_lib.Sampling))
        smp.temperature = check_float("temperature", temperature, 0, 100)
        smp.top_p = check_float("top_p", top_p, 0, 1, lo_open=True)
        smp.min_p = check_float("min_p", min_p, 0, 1, hi_open=True)
        smp.repeat_penalty = check_float("repeat_penalty", repeat_penalty,
                                         0, 100, lo_open=True)
        smp.presence_penalty = check_float("presence_penalty",
                                           presence_penalty, -2, 2)
        smp.frequency_penalty = check_float("frequency_penalty",
                                            frequency_penalty, -2, 2)
        smp.top_k = check_int("top_k", top_k, 0, U32_MAX)
        smp.repeat_last_n = check_int("repeat_last_n", repeat_last_n, 0,
                                      U32_MAX)
        smp.n_logprobs = check_int("logprobs", logprobs, 0, LOGPROBS_MAX)
        smp.seed = check_int("seed", seed, 0, U64_MAX)
        self.sampling = smp
        self.flags = self._flags(text is not None and not chat, chat,
                                 add_bos, confidence, ignore_eos,
                                 detokenize, device_logits)
        steps = check_int("refine_steps", refine_steps, 0, REFINE_MAX)
        if steps and not (chat and detokenize):
            raise ValueError("refine_steps needs messages (a chat prompt) "
                             "and detokenize=True")
        self._build(text, ids, check_int("max_tokens", max_tokens, 1,
                                         U32_MAX), stop, stop_token_ids,
                    steps)
        self._grammar(gtype, gbytes)
        if tr is not None:
            self.opts.flags |= _lib.FLAG_CHAT_JSON
        self.chat = chat

    @staticmethod
    def _flags(plain_text: bool, chat: bool, add_bos: Optional[bool],
               confidence: bool, ignore_eos: bool, detokenize: bool,
               device_logits: bool) -> int:
        if add_bos is None:
            add_bos = plain_text  # as `o1model run --prompt` encodes
        f = _lib.FLAG_ADD_BOS if check_bool("add_bos", add_bos) else 0
        if chat:
            f |= _lib.FLAG_CHAT
        if check_bool("confidence", confidence):
            f |= _lib.FLAG_CONFIDENCE
        if check_bool("ignore_eos", ignore_eos):
            f |= _lib.FLAG_IGNORE_EOS
        if not check_bool("detokenize", detokenize):
            f |= _lib.FLAG_NO_TEXT
        if check_bool("device_logits", device_logits):
            f |= _lib.FLAG_DEVICE_LOGITS
        return f

    def _build(self, text: Optional[bytes], ids: Optional[list[int]],
               max_tokens: int, stop: Any, stop_token_ids: Any,
               steps: int) -> None:
        o = _lib.SubmitOpts(sz=ctypes.sizeof(_lib.SubmitOpts))
        if text is not None:
            self._text = ctypes.create_string_buffer(text, len(text))
            o.text = ctypes.cast(self._text, ctypes.c_void_p)
            o.text_len = len(text)
        else:
            self._ids = (ctypes.c_uint32 * len(ids))(*ids)
            o.ids = self._ids
            o.n_ids = len(ids)
        stop_ids = [] if stop_token_ids is None else \
            _ids("stop_token_ids", stop_token_ids)
        if stop_ids:
            self._stop_ids = (ctypes.c_uint32 * len(stop_ids))(*stop_ids)
            o.stop_ids = self._stop_ids
            o.n_stop_ids = len(stop_ids)
        strs = _stops(stop)
        if strs:
            self._stops = (ctypes.c_char_p * len(strs))(*strs)
            o.stop_strings = self._stops
            o.n_stop_strings = len(strs)
        o.sampling = ctypes.pointer(self.sampling)
        o.max_tokens = max_tokens
        o.flags = self.flags
        o.refine_steps = steps
        self.opts = o
        self.refine = steps > 0

    def _grammar(self, gtype: int, gbytes: Optional[bytes]) -> None:
        self.opts.grammar_type = gtype
        if gbytes:
            self._gbuf = ctypes.create_string_buffer(gbytes, len(gbytes))
            self.opts.grammar = ctypes.cast(self._gbuf, ctypes.c_void_p)
            self.opts.grammar_len = len(gbytes)
