"""What a request returns: stream events and the Completion.

Events mirror struct o1_event, one class per type, with only the fields
that type carries (client.h says which); they are plain immutable
objects, safe to keep and to hand to other threads. A Completion is what
``Client.generate`` assembles from one request's events.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional, Union

from ._tools import ToolCall


@dataclass(frozen=True)
class TokenEvent:
    """Generated tokens (one to seven ids) and their text.

    ``text`` is the decoded UTF-8 of this event's bytes (o1d never ends a
    chunk inside a character; a chunk that did would be decoded with the
    next one). ``logprobs`` holds one value per id when the daemon sent
    them (logprobs=N or confidence=True), else None; ``entropy`` the
    token's entropy in nats with confidence=True, else None; ``round`` the
    refinement round; ``dev_seq`` the device-logits sequence number of the
    id (device_logits requests only)."""

    req_id: int
    ids: tuple[int, ...]
    text: str
    logprobs: Optional[tuple[float, ...]] = None
    entropy: Optional[float] = None
    round: int = 0
    dev_seq: Optional[int] = None


@dataclass(frozen=True)
class LogprobsEvent:
    """Top alternatives of the generated token at ``position`` (0-based
    over the request's generated tokens), best first; a token with more
    than 14 alternatives gets several events."""

    req_id: int
    position: int
    top: tuple[tuple[int, float], ...]


@dataclass(frozen=True)
class TopTextEvent:
    """The bytes of alternatives ``first``, ``first`` + 1, ... of the
    token at ``position`` (in LogprobsEvent order), as the daemon's
    tokenizer writes them: raw bytes, since a token may be part of a
    UTF-8 character."""

    req_id: int
    position: int
    first: int
    texts: tuple[bytes, ...]


@dataclass(frozen=True)
class RoundEvent:
    """One refinement round ended (refine_steps > 0)."""

    req_id: int
    round: int
    finish_reason: str
    refine_stop: Optional[str]
    prompt_tokens: int
    generated_tokens: int
    cached_tokens: int
    mean_logprob: float
    min_logprob: float
    mean_entropy: float
    text_bytes: int
    latency_ns: int


@dataclass(frozen=True)
class FinalEvent:
    """The request ended; nothing of it follows.

    ``error`` is 0 unless ``finish_reason`` is "error" (the stream raises
    the matching O1Error then, carrying this event as ``exc.final``)."""

    req_id: int
    finish_reason: str
    error: int
    prompt_tokens: int
    generated_tokens: int
    cached_tokens: int
    mean_logprob: float
    min_logprob: float
    mean_entropy: float
    conf_tokens: int
    rounds: int
    refine_stop: Optional[str]


@dataclass(frozen=True)
class ErrorEvent:
    """The daemon's complaint about an entry that was not a submission
    (a cancel or ping it could not take), with its message."""

    req_id: int
    error: int
    message: str


Event = Union[TokenEvent, LogprobsEvent, TopTextEvent, RoundEvent,
              FinalEvent, ErrorEvent]


@dataclass(frozen=True)
class Usage:
    """Token counts of a request (over all rounds of a refinement)."""

    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass(frozen=True)
class TokenLogprob:
    """One generated token: its logprob and entropy when sent, and the
    top alternatives when logprobs=N asked for them, with each one's
    bytes in ``top_text`` (same order; empty when the daemon sent none,
    e.g. detokenize=False)."""

    token_id: int
    logprob: Optional[float]
    entropy: Optional[float] = None
    top: tuple[tuple[int, float], ...] = ()
    top_text: tuple[bytes, ...] = ()


@dataclass(frozen=True)
class Confidence:
    """The daemon's summary of the (last round's) generated tokens, from
    the model's raw distribution: natural-log probabilities, nats."""

    mean_logprob: float
    min_logprob: float
    mean_entropy: float
    tokens: int


@dataclass(frozen=True)
class RefineRound:
    """One round of a refinement trace (o1_trace_round)."""

    round: int
    text: str
    token_ids: tuple[int, ...]
    prompt_tokens: int
    cached_tokens: int
    generated_tokens: int
    mean_logprob: float
    min_logprob: float
    mean_entropy: float
    latency_ns: int
    finish_reason: str
    refine_stop: Optional[str]
    complete: bool


@dataclass(frozen=True)
class Completion:
    """Everything one request returned.

    ``text`` and ``token_ids`` are the answer (the last round's, for a
    refinement); ``logprobs`` has one entry per answer token when the
    daemon sent per-token values (logprobs=N or confidence=True), else
    None; ``confidence`` is set when the daemon summarised the answer;
    ``rounds`` is the refinement trace (empty without refine_steps) and
    ``refine_stop`` why it ended. ``tool_calls`` holds the calls read
    back from the answer, a non-empty list (finish_reason is then
    "tool_calls"), or None when there are none, as OpenAI's
    ``message.tool_calls``: no ``tools``, tool_choice "none", or "auto"
    answered in text. ``content`` is the text before the first call (text
    after a call dropped), the whole text for "auto" without a call, None
    without tools or with "none"."""

    id: int
    text: str
    token_ids: list[int]
    finish_reason: str
    usage: Usage
    logprobs: Optional[list[TokenLogprob]] = None
    confidence: Optional[Confidence] = None
    rounds: list[RefineRound] = field(default_factory=list)
    refine_stop: Optional[str] = None
    tool_calls: Optional[list[ToolCall]] = None
    content: Optional[str] = None


@dataclass(frozen=True)
class DeviceOutputInfo:
    """The device output area the daemon gave a connection
    (struct o1_device_output): geometry and the opaque CUDA IPC handles."""

    area: int
    rows: int
    row_floats: int
    row_stride_bytes: int
    stamps_off: int
    area_bytes: int
    pci_bus_id: str
    mem_handle: bytes
    event_handle: bytes


@dataclass(frozen=True)
class Latency:
    """Ping round trips through the rings, in nanoseconds."""

    count: int
    min_ns: int
    p50_ns: int
    p99_ns: int
    max_ns: int
