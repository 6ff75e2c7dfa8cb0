"""Property-based tests of the developer API's parsers (tools, tool turns, response_format, thinking controls,
embeddings and Anthropic's Messages): any body gives a checked request or an ApiError with a 4xx status and a one-line message,
never another exception (which the server would answer with a 500)."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from app.server.anthropic import parse_messages
from app.server.params import ApiError, EmbeddingRequest, GenerationRequest, parse_chat, parse_embeddings

SERVED = "tiny"
EXTREME = [0, 1, -1, 2**31, 2**64, 10**400, 1e308, 0.5, True]
json_scalars = (st.none() | st.booleans() | st.sampled_from(EXTREME) | st.integers() | st.floats(allow_nan=False)
                | st.text(max_size=8) | st.sampled_from(["", "auto", "none", "required", "any", "tool", "function",
                                                         "text", "json_object", "json_schema", "get_weather",
                                                         "enabled", "disabled", "adaptive", "deepseek", "low"]))
json_values = st.recursive(json_scalars, lambda children: st.lists(children, max_size=3)
                           | st.dictionaries(st.sampled_from(["type", "function", "name", "parameters", "schema",
                                                              "json_schema", "strict", "properties", "items",
                                                              "input_schema", "arguments", "id", "anyOf",
                                                              "budget_tokens", "enable_thinking", "display",
                                                              "disable_parallel_tool_use"])
                                             | st.text(max_size=5), children, max_size=4), max_leaves=12)
WEATHER = {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}
tools = st.lists(st.just(WEATHER) | st.fixed_dictionaries({"type": st.just("function") | json_values,
                                                           "function": json_values}) | json_values, max_size=3)
openai_turns = st.lists(st.fixed_dictionaries({"role": st.sampled_from(["user", "assistant", "tool"]) | json_values},
                                              optional={"content": st.text(max_size=8) | json_values,
                                                        "tool_calls": json_values, "tool_call_id": json_values,
                                                        "name": json_values, "reasoning_content": json_values,
                                                        "reasoning": json_values}), min_size=1, max_size=3)
blocks = st.lists(st.fixed_dictionaries({"type": st.sampled_from(["text", "tool_use", "tool_result", "image", "thinking",
                                                          "redacted_thinking"]) | json_values},
                                        optional={"text": json_values, "id": json_values, "name": json_values,
                                                  "thinking": json_values, "signature": json_values,
                                                  "input": json_values, "tool_use_id": json_values,
                                                  "content": json_values, "is_error": json_values}), max_size=3)
anthropic_turns = st.lists(st.fixed_dictionaries({"role": st.sampled_from(["user", "assistant"]) | json_values,
                                                  "content": st.text(max_size=8) | blocks | json_values}),
                           min_size=1, max_size=3)


def _four_hundred(parse, body) -> object | None:
    try:
        return parse(json.loads(json.dumps(body)))
    except ApiError as exc:
        assert 400 <= exc.status < 500, exc.status
        assert exc.message and "\n" not in exc.message and len(exc.message) < 1000, exc.message
        json.dumps(exc.body())
        return None


MORE = settings(max_examples=300, deadline=None)


THINKING_FIELDS = ["chat_template_kwargs", "reasoning_format", "reasoning_effort", "reasoning_budget_tokens",
                   "thinking_budget_tokens", "reasoning_budget_message", "parallel_tool_calls"]


@MORE
@given(messages=openai_turns, tools=tools | json_values, tool_choice=json_values, response_format=json_values,
       thinking=st.dictionaries(st.sampled_from(THINKING_FIELDS), json_values | st.integers(-2, 64), max_size=3))
def test_any_tools_or_response_format_give_a_request_or_a_4xx(messages, tools, tool_choice, response_format,
                                                              thinking):
    body = {"messages": messages, "tools": tools, "tool_choice": tool_choice, "response_format": response_format,
            **thinking}
    for takes_tools in (True, False):
        request = _four_hundred(lambda b, t=takes_tools: parse_chat(b, served_id=SERVED, n_ctx=512, takes_tools=t),
                                body)
        if request is not None:
            assert isinstance(request, GenerationRequest)
            request.sampling.validate()


@MORE
@given(messages=anthropic_turns, system=json_values, tools=json_values, tool_choice=json_values,
       max_tokens=json_values | st.integers(1, 64),
       thinking=st.none() | json_values | st.fixed_dictionaries(
           {"type": st.sampled_from(["enabled", "disabled", "adaptive"])},
           optional={"budget_tokens": json_values | st.integers(-1, 64), "display": json_values}))
def test_any_anthropic_body_gives_a_request_or_a_4xx(messages, system, tools, tool_choice, max_tokens, thinking):
    body = {"messages": messages, "system": system, "tools": tools, "tool_choice": tool_choice,
            "max_tokens": max_tokens, "thinking": thinking}
    request = _four_hundred(lambda b: parse_messages(b, served_id=SERVED, n_ctx=512, takes_tools=True), body)
    if request is not None:
        request.sampling.validate()


@MORE
@given(inputs=json_values | st.lists(st.text(max_size=5), max_size=3), encoding=json_values, dimensions=json_values)
def test_any_embeddings_body_gives_a_request_or_a_4xx(inputs, encoding, dimensions):
    body = {"input": inputs, "encoding_format": encoding, "dimensions": dimensions}
    request = _four_hundred(lambda b: parse_embeddings(b, served_id=SERVED, n_embd=256), body)
    assert request is None or isinstance(request, EmbeddingRequest)
