"""Property-based tests of the server's request parser (app/server/params.py): any body gives a checked request
or an ApiError with a 4xx status and a one-line message, never another exception (which the server would answer
with a 500). Bodies are real request shapes with every field given every kind of JSON value, extreme numbers,
deep nesting, and now and then bytes that are not JSON at all."""

from __future__ import annotations

import json

from hypothesis import example, given, settings
from hypothesis import strategies as st

from app.server.params import MAX_BODY_BYTES, ApiError, GenerationRequest, parse_chat, parse_completion, \
    parse_json_body
from tests.fixtures.limits import capped_examples

SERVED = "tiny-Q8_0.gguf"
N_CTX = 2048
EXTREME = [0, 1, -1, 2**31, 2**32, 2**53 + 1, 2**63, 2**64, -(2**63), 10**400, 1e308, -1e308, 5e-324, 0.5, 1.0]

json_scalars = (st.none() | st.booleans() | st.sampled_from(EXTREME) | st.integers() | st.floats(allow_nan=False)
                | st.text(max_size=10) | st.sampled_from(["", SERVED, "system", "user", "assistant", "text"]))
json_values = st.recursive(json_scalars, lambda children: st.lists(children, max_size=4)
                           | st.dictionaries(st.text(max_size=6), children, max_size=4), max_leaves=16)

content_parts = st.lists(st.fixed_dictionaries({"type": st.sampled_from(["text", "image_url"]) | json_values,
                                                "text": st.text(max_size=20) | json_values}) | json_values, max_size=3)
messages = st.lists(st.fixed_dictionaries({}, optional={
    "role": st.sampled_from(["system", "developer", "user", "assistant", "tool"]) | json_values,
    "content": st.text(max_size=40) | content_parts | json_values}) | json_values, max_size=4)
FIELDS = ["model", "temperature", "top_p", "top_k", "min_p", "repeat_penalty", "max_tokens", "max_completion_tokens",
          "seed", "stop", "stream", "stream_options", "n", "logprobs", "presence_penalty", "frequency_penalty",
          "logit_bias", "tools", "functions", "top_logprobs", "audio", "modalities", "response_format", "best_of",
          "echo", "suffix", "user", "tool_choice", "parallel_tool_calls", "chat_template_kwargs", "reasoning_format",
          "reasoning_effort", "reasoning_budget_tokens", "thinking_budget_tokens", "reasoning_budget_message"]
valid_messages = st.lists(st.fixed_dictionaries({"role": st.sampled_from(["system", "user", "assistant"]),
                                                 "content": st.text(max_size=20)}), min_size=1, max_size=3)



@st.composite
def bodies(draw) -> dict:
    """Mostly valid messages and prompt, so the checks further down (sampling, stop, stream) are reached, and
    one to three fields with any value; now and then hostile messages."""
    body = {"messages": draw(valid_messages | messages | json_values),
            "prompt": draw(st.text(max_size=40) | st.lists(st.text(max_size=8), max_size=2) | json_values)}
    if draw(st.integers(0, 3)) == 0:
        body["messages"] = draw(valid_messages)
    body.update(draw(st.dictionaries(st.sampled_from(FIELDS), json_values | st.sampled_from(EXTREME), max_size=3)))
    return body


def _deep(depth: int) -> bytes:
    return b'{"messages": ' + b"[" * depth + b"]" * depth + b"}"


raw_bodies = (bodies().map(lambda b: json.dumps(b).encode()) | st.binary(max_size=64)
              | st.integers(1, 500_000).map(_deep)
              | st.sampled_from([b"NaN", b'{"top_p": NaN}', b'{"seed": Infinity}', b'{"max_tokens": 1' + b"0" * 5000
                                 + b"}", b"\xff\xfe{}", b""]))


def _check(raw: bytes, parse) -> None:
    try:
        request = parse(parse_json_body(raw), served_id=SERVED, n_ctx=N_CTX)
    except ApiError as exc:
        assert 400 <= exc.status < 500, exc.status
        assert exc.message and "\n" not in exc.message and len(exc.message) < 1000, exc.message
        json.dumps(exc.body())
        return
    assert isinstance(request, GenerationRequest)
    request.sampling.validate()


# Each example takes well under a millisecond: four times the profile's budget.
MORE = settings(max_examples=4 * settings().max_examples)


# Found by this test (the server answered 500): a role that is a list, a number beyond float range.
FOUND = [b'{"messages": [{"role": [1], "content": "x"}]}',
         b'{"messages": [{"role": "user", "content": ""}], "temperature": 1' + b"0" * 400 + b"}"]


@MORE
@example(raw=FOUND[0])
@example(raw=FOUND[1])
@given(raw=raw_bodies)
@capped_examples
def test_any_chat_body_gives_a_request_or_a_4xx(raw):
    assert len(raw) <= MAX_BODY_BYTES
    _check(raw, parse_chat)


@MORE
@example(raw=b'{"prompt": "x", "top_p": -1' + b"0" * 400 + b"}")
@given(raw=raw_bodies)
@capped_examples
def test_any_completion_body_gives_a_request_or_a_4xx(raw):
    _check(raw, parse_completion)
