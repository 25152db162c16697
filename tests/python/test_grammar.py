"""Structured output through o1client: json_schema=, response_format= and
grammar= give outputs that parse as JSON and validate against their schema
(with the jsonschema package when it is installed: draft 2020-12, formats
checked), many of them in flight beside unconstrained requests whose
tokens stay exactly those `o1model run` makes; a grammar the daemon
refuses raises GrammarError with the reason; malformed arguments raise
TypeError / ValueError before anything is sent."""

import json

import o1client
import pytest
from conftest import spec

SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 10},
        "age": {"type": "integer", "minimum": 0, "maximum": 120},
        "tags": {"type": "array", "items": {"enum": ["a", "b", "c"]},
                 "maxItems": 3},
        "day": {"type": "string", "format": "date"},
    },
    "required": ["name", "age", "day"],
    "additionalProperties": False,
}


def validate(schema, text):
    """The document TEXT: parsed, and validated when jsonschema is there."""
    doc = json.loads(text)
    try:
        import jsonschema
    except ImportError:
        return doc
    cls = jsonschema.Draft202012Validator
    cls(schema, format_checker=getattr(cls, "FORMAT_CHECKER", None)) \
        .validate(doc)
    return doc


def test_json_schema(client):
    ended = 0
    for seed in range(8):
        c = client.generate("Who? ", json_schema=SCHEMA, temperature=1.0,
                            seed=seed, max_tokens=300)
        assert c.finish_reason in ("eos", "length")
        if c.finish_reason == "eos":
            doc = validate(SCHEMA, c.text)
            assert list(doc)[:2] == ["name", "age"]  # properties order
            ended += 1
    assert ended >= 6  # bounded schema, random weights: most end


def test_response_format_and_grammar(client):
    rf = {"type": "json_schema",
          "json_schema": {"name": "p", "strict": True, "schema": SCHEMA}}
    c = client.generate("Who? ", response_format=rf, temperature=1.0,
                        seed=11, max_tokens=300)
    assert c.finish_reason == "eos"
    validate(SCHEMA, c.text)
    # JSON text is taken as it is
    c2 = client.generate("Who? ", json_schema=json.dumps(SCHEMA),
                         temperature=1.0, seed=11, max_tokens=300)
    assert c2.text == c.text
    c = client.generate("Who? ", response_format={"type": "json_object"},
                        temperature=1.0, seed=5, max_tokens=200)
    assert c.text.startswith("{")
    if c.finish_reason == "eos":
        assert isinstance(json.loads(c.text), dict)
    for seed in range(4):
        c = client.generate("Yes or no? ", grammar='root ::= "yes" | "no"',
                            temperature=1.0, seed=seed, max_tokens=10)
        assert (c.text, c.finish_reason) in (("yes", "eos"), ("no", "eos"))
    plain = client.generate("Who? ", response_format={"type": "text"},
                            max_tokens=8)
    assert plain.token_ids == client.generate("Who? ",
                                              max_tokens=8).token_ids


def test_many_at_once(client, reference):
    free = [spec(i) for i in range(12)]
    streams = []
    for i in range(24):
        if i % 2:
            s = free[i // 2]
            streams.append((s, client.generate(list(s.ids), stream=True,
                                               **s.params())))
        else:
            streams.append((None, client.generate(
                "Who? ", json_schema=SCHEMA, temperature=1.0, seed=100 + i,
                max_tokens=300, stream=True)))
    for s, st in streams:
        c = st.completion()
        if s is not None:
            assert c.token_ids == reference.ids(s)
        elif c.finish_reason == "eos":
            validate(SCHEMA, c.text)


def test_refused(client):
    with pytest.raises(o1client.GrammarError) as ei:
        client.generate("x", json_schema={"type": "object", "not": {}})
    assert ei.value.code == -10017
    assert "'not'" in str(ei.value)
    assert isinstance(ei.value, o1client.BadRequestError)
    with pytest.raises(o1client.GrammarError) as ei:
        client.generate("x", grammar='root ::= ("x"')
    assert "1:" in ei.value.message
    with pytest.raises(o1client.GrammarError):
        client.generate("x", stream=True, grammar="root ::= nothing") \
            .completion()
    # the client serves on
    assert client.generate("x", max_tokens=2).usage.completion_tokens >= 1


BAD_ARGS = [
    (TypeError, dict(grammar=3)),
    (ValueError, dict(grammar="")),
    (TypeError, dict(json_schema=3.5)),
    (ValueError, dict(json_schema="")),
    (TypeError, dict(grammar="root ::= \"a\"", json_schema={})),
    (TypeError, dict(response_format="json_object")),
    (ValueError, dict(response_format={"type": "xml"})),
    (ValueError, dict(response_format={"type": "json_schema"})),
    (ValueError, dict(response_format={"type": "json_schema",
                                       "json_schema": {"name": "x"}})),
]


@pytest.mark.parametrize("exc,kw", BAD_ARGS)
def test_bad_args(client, exc, kw):
    with pytest.raises(exc):
        client.generate("x", **kw)
    assert client.inflight() == 0
