"""Function names: the Python client refuses exactly the names the
sidecar refuses (OpenAI's rule, 1 to 64 ASCII letters, digits, '_' or
'-'), in ``tools`` and in an assistant message's ``tool_calls``, held
against the sidecar's own request parser (o1_py_sidecar_request). No
daemon needed: the checks run before anything is sent."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from conftest import BUILD
from o1client import _tools

NAMES = ["a", "get_weather", "A-Z_a-z_0-9", "-", "_", "x" * 64, "x" * 65,
         "", "has space", "na\u00efve", "\u65e5\u672c", "a.b", "a/b",
         "a\n", "\na", "a\tb", "a\u00a0b", "a:b", "f()", "\uff41"]


def sidecar_accepts(body: dict) -> bool:
    exe = os.environ.get("O1_PY_SIDECAR_REQUEST") or str(
        BUILD / "tests" / "python" / "o1_py_sidecar_request")
    out = subprocess.run([exe], input=json.dumps(body).encode(),
                         check=True, capture_output=True).stdout
    return json.loads(out)["ok"]


def client_accepts(messages: list, tools: list) -> bool:
    try:
        _tools.chat_request(messages, tools, None)
    except (ValueError, TypeError):
        return False
    return True


USER = [{"role": "user", "content": "hi"}]


def tool(name: str) -> dict:
    return {"type": "function", "function": {"name": name}}


@pytest.mark.parametrize("name", NAMES)
def test_tool_names_as_the_sidecar_s(name):
    want = sidecar_accepts({"model": "m", "messages": USER,
                            "tools": [tool(name)]})
    assert client_accepts(USER, [tool(name)]) == want, name
    # the rule itself, so that both cannot drift together
    assert want == (1 <= len(name) <= 64 and all(
        c.isascii() and (c.isalnum() or c in "_-") for c in name))


@pytest.mark.parametrize("name", NAMES)
def test_call_names_as_the_sidecar_s(name):
    msgs = USER + [
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function",
             "function": {"name": name, "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "ok"}]
    want = sidecar_accepts({"model": "m", "messages": msgs,
                            "tools": [tool("f")]})
    assert client_accepts(msgs, [tool("f")]) == want, name


def test_refusal_names_the_tool():
    with pytest.raises(ValueError, match=r"tools\[1\].*'has space'"):
        _tools.chat_request(USER, [tool("ok"), tool("has space")], None)
