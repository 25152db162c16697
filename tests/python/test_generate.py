"""Generation through o1client against `o1model run`: token ids (greedy
and seeded sampling), text prompts and their decoded text, stop strings,
chat messages and refinement traces, logprobs and confidence."""

import o1client
from conftest import spec

PROMPT = "hello world"


def test_ids_equal_o1model(client, reference):
    for i in range(12):
        s = spec(i)
        c = client.generate(list(s.ids), **s.params())
        assert c.token_ids == reference.ids(s), f"spec {i}"
        assert c.usage.prompt_tokens == len(s.ids)
        assert c.usage.completion_tokens == len(c.token_ids)
        assert c.finish_reason in ("length", "eos")
        if c.finish_reason == "length":
            assert len(c.token_ids) == s.max_tokens


def test_text_prompt_equals_o1model(client, reference):
    ids, text = reference.text(PROMPT, 24)
    c = client.generate(PROMPT, max_tokens=24)
    assert c.token_ids == ids
    assert c.text == text.decode("utf-8", "replace")
    # the three ways to give a prompt agree
    b = client.generate(PROMPT.encode(), max_tokens=24)
    assert b.token_ids == ids
    assert c.usage.prompt_tokens > 0


def test_token_ids_keyword_and_no_text(client, reference):
    s = spec(3)
    c = client.generate(token_ids=list(s.ids), detokenize=False,
                        **s.params())
    assert c.token_ids == reference.ids(s)
    assert c.text == ""


def test_stop_string_cuts_text(client, reference):
    _, raw = reference.text(PROMPT, 24)
    text = raw.decode("utf-8", "replace")
    # three printable ASCII characters from the middle on
    at = next(i for i in range(len(text) // 2, len(text) - 2)
              if all(" " <= ch <= "~" for ch in text[i:i + 3]))
    stop = text[at:at + 3]
    c = client.generate(PROMPT, max_tokens=24, stop=[stop])
    assert c.finish_reason == "stop"
    assert c.text == text[:text.index(stop)]


def test_stop_token_id(client, reference):
    s = spec(0)
    ref = reference.ids(s)
    c = client.generate(list(s.ids), max_tokens=s.max_tokens,
                        stop_token_ids=[ref[2]])
    k = ref.index(ref[2])
    assert c.finish_reason == "stop"
    assert c.token_ids[:k] == ref[:k]
    assert len(c.token_ids) <= k + 1


def test_logprobs_and_confidence(client, reference):
    s = spec(6)
    c = client.generate(list(s.ids), logprobs=5, confidence=True,
                        **s.params())
    assert c.token_ids == reference.ids(s)
    assert c.logprobs is not None and len(c.logprobs) == len(c.token_ids)
    for t, lp in zip(c.token_ids, c.logprobs):
        assert lp.token_id == t
        assert lp.logprob is not None and lp.logprob <= 0
        assert lp.entropy is not None and lp.entropy >= 0
        assert len(lp.top) == 5
        tops = [v for _, v in lp.top]
        assert tops == sorted(tops, reverse=True)
        if s.temperature == 0:  # greedy takes the best
            assert lp.top[0][0] == t
    assert c.confidence is not None
    assert c.confidence.tokens == len(c.token_ids)
    mean = sum(lp.logprob for lp in c.logprobs) / len(c.logprobs)
    assert abs(c.confidence.mean_logprob - mean) < 1e-3
    assert c.confidence.min_logprob == min(lp.logprob for lp in c.logprobs)


def test_twenty_logprobs_span_events(client):
    c = client.generate([5, 6, 7], max_tokens=3, logprobs=20)
    assert all(len(lp.top) == 20 for lp in c.logprobs)


def test_chat_and_refinement_trace(client):
    messages = [{"role": "system", "content": "Be brief."},
                {"role": "user", "content": "hello there"}]
    plain = client.generate(messages, max_tokens=6)
    assert plain.rounds == [] and plain.refine_stop is None
    assert plain.token_ids
    c = client.generate(messages=messages, max_tokens=6, refine_steps=2)
    assert c.refine_stop is not None
    assert 1 <= len(c.rounds) <= 3
    # round 0 is the plain answer: same prompt, greedy
    assert list(c.rounds[0].token_ids) == plain.token_ids
    assert c.rounds[0].text == plain.text
    last = c.rounds[-1]
    assert c.text == last.text and c.token_ids == list(last.token_ids)
    assert c.refine_stop == last.refine_stop
    assert all(r.complete for r in c.rounds)
    assert sum(r.generated_tokens for r in c.rounds) == \
        c.usage.completion_tokens
    assert [r.round for r in c.rounds] == list(range(len(c.rounds)))


def test_seeded_sampling_repeats(client):
    a = client.generate([9, 8, 7], max_tokens=12, temperature=1.0, seed=42)
    b = client.generate([9, 8, 7], max_tokens=12, temperature=1.0, seed=42)
    assert a.token_ids == b.token_ids


def test_completion_types(client):
    c = client.generate([1, 2, 3], max_tokens=2)
    assert isinstance(c, o1client.Completion)
    assert isinstance(c.usage, o1client.Usage)
    assert c.usage.total_tokens == 3 + len(c.token_ids)
    assert c.id > 0
