"""OpenAI's Responses API through the official ``openai`` client, against the real server and engine on the tiny
models: text in and out, whole and streamed (OpenAI's event sequence as the client's own stream helper checks it),
function tools (a call forced by the engine's grammar, on the tiny model with Qwen 2.5's tool-declaring template)
and the tool's output sent back through ``previous_response_id`` and as explicit input items, both reaching the model
as the same prompt a chat completion renders; ``store: false``; GET and DELETE; a thinking model's reasoning items;
structured output; refusals in words."""

from __future__ import annotations

import base64
import json
import time

import httpx
import jsonschema
import openai
import pydantic
import pytest

from app import paths
from app.server.app import create_app
from app.server.response_store import DB_FILENAME
from app.server.thread import ServerThread
from tests.server.conftest import loaded_engine, openai_client

WEATHER_ARGS = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 10},
                                                 "unit": {"enum": ["celsius", "fahrenheit"]}},
                "required": ["city", "unit"], "additionalProperties": False}
TOOLS = [{"type": "function", "name": "get_weather", "description": "The weather in a city.",
          "parameters": WEATHER_ARGS, "strict": True}]
CHAT_TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "The weather in a city.",
                                                 "parameters": WEATHER_ARGS}}]
FORCE = {"type": "function", "name": "get_weather"}
ASK = "What is the weather in Paris?"
CALL_TOKENS = 600  # as tests/server/test_tools.py: the random model takes the grammar's room for whitespace
GREEDY = {"temperature": 0.0, "max_output_tokens": 8}


@pytest.fixture(scope="module")
def tool_engine(tiny_tool_model):
    yield from loaded_engine(tiny_tool_model, n_ctx=2048)  # the tools in the system prompt take ~700 tokens


@pytest.fixture
def api(tool_engine):
    yield from openai_client(tool_engine, stream_every_s=0)  # each engine event an event of its own


def _url(client: openai.OpenAI) -> str:
    return str(client.base_url).rstrip("/").removesuffix("/v1")


# --- text ---


def test_a_response_says_what_the_same_chat_completion_says(api):
    """instructions become the system turn and a string input the user's, as llama-server converts them: greedy, the
    response's text and its prompt's tokens are the chat completion's."""
    client, name = api
    response = client.responses.create(model=name, instructions="Book", input="What is the best book", **GREEDY)
    chat = client.chat.completions.create(model=name, temperature=0.0, max_tokens=8, messages=[
        {"role": "system", "content": "Book"}, {"role": "user", "content": "What is the best book"}])
    assert response.id.startswith("resp_") and response.object == "response" and response.model == name
    (message,) = response.output
    assert message.type == "message" and message.id.startswith("msg_") and message.role == "assistant"
    assert response.output_text == chat.choices[0].message.content and response.output_text
    usage = response.usage
    assert usage.input_tokens == chat.usage.prompt_tokens and usage.output_tokens == chat.usage.completion_tokens
    assert usage.total_tokens == usage.input_tokens + usage.output_tokens
    assert usage.output_tokens_details.reasoning_tokens == 0
    assert 0 <= usage.input_tokens_details.cached_tokens <= usage.input_tokens
    # eight tokens of a random model: cut off, and said so
    if chat.choices[0].finish_reason == "length":
        assert response.status == "incomplete" and response.incomplete_details.reason == "max_output_tokens"
    else:
        assert response.status == "completed"
    # the request's settings come back, as OpenAI's response repeats them
    assert (response.instructions, response.max_output_tokens, response.temperature) == ("Book", 8, 0.0)
    assert response.tools == [] and response.tool_choice == "auto" and response.parallel_tool_calls is True


def test_input_messages_and_parts_read_as_chat_messages(api):
    client, name = api
    response = client.responses.create(model=name, **GREEDY, input=[
        {"role": "developer", "content": "Be brief."},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Hello"},
                                                         {"type": "input_text", "text": " there"}]},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Hi.",
                                                              "annotations": []}]},
        {"role": "user", "content": "And now?"}])
    chat = client.chat.completions.create(model=name, temperature=0.0, max_tokens=8, messages=[
        {"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hello there"},
        {"role": "assistant", "content": "Hi."}, {"role": "user", "content": "And now?"}])
    assert response.output_text == chat.choices[0].message.content
    assert response.usage.input_tokens == chat.usage.prompt_tokens


def test_a_stream_is_openais_event_sequence(api):
    """Each event as the client parses it, numbered from 0 without a gap: created, in_progress, the message added,
    its part, the text's deltas, their done events, the item done, and the end; the deltas add up to the text of the
    same request answered whole, and the end carries the same output."""
    client, name = api
    whole = client.responses.create(model=name, input=ASK, **GREEDY)
    events = list(client.responses.create(model=name, input=ASK, stream=True, **GREEDY))
    assert [e.sequence_number for e in events] == list(range(len(events)))
    kinds = [e.type for e in events]
    deltas = kinds.count("response.output_text.delta")
    assert deltas >= 1
    end = f"response.{whole.status}"
    assert kinds == ["response.created", "response.in_progress", "response.output_item.added",
                     "response.content_part.added", *["response.output_text.delta"] * deltas,
                     "response.output_text.done", "response.content_part.done", "response.output_item.done", end]
    created, last = events[0].response, events[-1].response
    assert created.status == "in_progress" and created.output == [] and last.id == created.id
    added, done = events[2].item, events[-2].item
    assert added.status == "in_progress" and added.id == done.id and done.status in ("completed", "incomplete")
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert all(e.item_id == added.id and e.output_index == 0 and e.content_index == 0
               for e in events if e.type == "response.output_text.delta")
    assert text == whole.output_text == last.output_text == events[-4].text
    assert last.output[0].id == added.id and last.usage.output_tokens == whole.usage.output_tokens


def test_llama_servers_own_stream_checks(api):
    """llama-server's test_responses_stream_with_openai_library, on this server: ids by their prefixes, every part of
    the message named by its item_id, the deltas gathered into the end's output_text."""
    client, name = api
    stream = client.responses.create(model=name, max_output_tokens=8, temperature=0.8,
                                     stream=True, input=[{"role": "system", "content": "Book"},
                                                         {"role": "user", "content": "What is the best book"}])
    gathered, resp_id, msg_id, ended = "", "", "", None
    for r in stream:
        if r.type == "response.created":
            assert r.response.id.startswith("resp_")
            resp_id = r.response.id
        if r.type == "response.in_progress":
            assert r.response.id == resp_id
        if r.type == "response.output_item.added":
            assert r.item.id.startswith("msg_")
            msg_id = r.item.id
        if r.type in ("response.content_part.added", "response.output_text.delta", "response.output_text.done",
                      "response.content_part.done"):
            assert r.item_id == msg_id
        if r.type == "response.output_item.done":
            assert r.item.id == msg_id
        if r.type == "response.output_text.delta":
            gathered += r.delta
        if r.type in ("response.completed", "response.incomplete"):
            ended = r.response
    assert ended is not None and ended.id == resp_id and ended.output[0].id == msg_id
    assert gathered == ended.output_text and gathered


def test_a_client_that_hangs_up_mid_stream_stops_its_generation(tool_engine):
    """The stream lets go of its job and its lease however it ends (the same event stream as chat's): a reply
    only a cancel would end early is cancelled, and the engine answers the next request."""
    server = ServerThread(create_app(tool_engine, stream_every_s=0)).start()
    queue = server.app.state.openai.queue
    try:
        with httpx.stream("POST", f"{server.url}/v1/responses", timeout=120, json={
                "input": "Hello there! How are you?", "max_output_tokens": 1500, "stream": True,
                "temperature": 1.0, "seed": 2}) as reply:
            deltas = 0
            for line in reply.iter_lines():
                deltas += line.startswith("event: response.output_text.delta")
                if deltas == 2:
                    break  # and the connection closes
        deadline = time.monotonic() + 60
        while queue.finished_count < 1 and time.monotonic() < deadline:
            time.sleep(0.02)
        (outcome,) = queue.outcomes()
        assert outcome.stop_reason == "cancelled" and outcome.generated_tokens < 1500
        after = httpx.post(f"{server.url}/v1/responses", json={"input": "Hi", "max_output_tokens": 2}, timeout=120)
        assert after.status_code == 200 and after.json()["usage"]["output_tokens"] >= 1
    finally:
        server.stop()


def test_the_route_answers_without_v1_too(api):
    client, name = api
    reply = httpx.post(f"{_url(client)}/responses", json={"model": name, "input": "Hi", "max_output_tokens": 2},
                       timeout=120)
    assert reply.status_code == 200 and reply.json()["object"] == "response"


# --- function tools ---


# As tests/server/test_tools.py: a seed with which the random model closes its call within CALL_TOKENS (greedy, it
# fills the grammar's whitespace to the end); the seed is llama-server's extra, read as chat's.
CALL = {"tools": TOOLS, "tool_choice": FORCE, "max_output_tokens": CALL_TOKENS, "parallel_tool_calls": False,
        "extra_body": {"seed": 1}}


def _forced_call(client, name):
    response = client.responses.create(model=name, input=ASK, **CALL)
    calls = [item for item in response.output if item.type == "function_call"]
    assert calls and response.status == "completed", response.output
    return response, calls


def test_a_forced_call_is_a_function_call_item(api):
    client, name = api
    response, calls = _forced_call(client, name)
    for call in calls:
        assert call.name == "get_weather" and call.call_id.startswith("call_") and call.id.startswith("fc_")
        assert call.status == "completed"
        jsonschema.validate(json.loads(call.arguments), WEATHER_ARGS)
    assert response.output_text == ""  # the call's syntax never leaks as text
    assert response.tools[0].name == "get_weather" and response.tools[0].strict is True
    assert response.tool_choice.name == "get_weather"


def test_a_streamed_call_is_announced_extended_and_closed(api):
    """Through the client's stream helper, which checks that each delta belongs to an item it was told of and that
    the end's items are the ones announced."""
    client, name = api
    whole, calls = _forced_call(client, name)
    with client.responses.stream(model=name, input=ASK, **CALL) as stream:
        events = list(stream)
        final = stream.get_final_response()
    kinds = [e.type for e in events]
    assert kinds[:3] == ["response.created", "response.in_progress", "response.output_item.added"]
    assert kinds[-1] == "response.completed"
    first = kinds.index("response.function_call_arguments.delta")
    assert kinds[first - 1] == "response.output_item.added" and events[first - 1].item.type == "function_call"
    assert [e.arguments for e in events if e.type == "response.function_call_arguments.done"] == \
           [c.arguments for c in calls]
    deltas = [e for e in events if e.type == "response.function_call_arguments.delta"]
    assert deltas[-1].snapshot == calls[-1].arguments
    streamed = [item for item in final.output if item.type == "function_call"]
    assert [(c.name, c.arguments) for c in streamed] == [(c.name, c.arguments) for c in calls]


def test_a_tool_output_goes_back_by_previous_response_id(api):
    """The acceptance's round trip: a call, its output sent with previous_response_id, a final message. The prompt the
    model reads is the one the same conversation as explicit input items makes, and a chat completion's with the
    tool's turn."""
    client, name = api
    first, calls = _forced_call(client, name)
    outputs = [{"type": "function_call_output", "call_id": call.call_id, "output": "22 degrees"} for call in calls]
    then = client.responses.create(model=name, previous_response_id=first.id, input=outputs, tools=TOOLS,
                                   tool_choice="none", **GREEDY)
    assert then.previous_response_id == first.id
    assert [item.type for item in then.output] == ["message"] and then.output_text
    explicit = client.responses.create(model=name, tools=TOOLS, tool_choice="none", **GREEDY, input=[
        {"role": "user", "content": ASK},
        *[{"type": "function_call", "call_id": c.call_id, "name": c.name, "arguments": c.arguments} for c in calls],
        *outputs])
    assert (explicit.output_text, explicit.usage.input_tokens) == (then.output_text, then.usage.input_tokens)
    chat = client.chat.completions.create(model=name, tools=CHAT_TOOLS, tool_choice="none", temperature=0.0,
                                          max_tokens=8, messages=[
        {"role": "user", "content": ASK},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": c.call_id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in calls]},
        *[{"role": "tool", "tool_call_id": c.call_id, "content": "22 degrees"} for c in calls]])
    assert chat.usage.prompt_tokens == then.usage.input_tokens
    assert chat.choices[0].message.content == then.output_text
    # a chain: the second response goes on from the first, a third from the second (the tools, as the instructions,
    # are each request's own: OpenAI carries neither over)
    third = client.responses.create(model=name, previous_response_id=then.id, input="Thanks!", tools=TOOLS,
                                    tool_choice="none", **GREEDY)
    assert third.usage.input_tokens > then.usage.input_tokens + then.usage.output_tokens


def test_a_functions_output_may_come_as_input_text_parts(api):
    client, name = api
    call = {"type": "function_call", "call_id": "call_7", "name": "get_weather",
            "arguments": '{"city": "Rome", "unit": "celsius"}'}
    as_text = client.responses.create(model=name, tools=TOOLS, tool_choice="none", **GREEDY, input=[
        {"role": "user", "content": ASK}, call, {"type": "function_call_output", "call_id": "call_7", "output": "sun"}])
    as_parts = client.responses.create(model=name, tools=TOOLS, tool_choice="none", **GREEDY, input=[
        {"role": "user", "content": ASK}, call,
        {"type": "function_call_output", "call_id": "call_7", "output": [{"type": "input_text", "text": "s"},
                                                                         {"type": "input_text", "text": "un"}]}])
    assert (as_parts.output_text, as_parts.usage.input_tokens) == (as_text.output_text, as_text.usage.input_tokens)


# --- store ---


def test_stored_responses_are_read_and_deleted(api):
    client, name = api
    response = client.responses.create(model=name, input="Hi", max_output_tokens=2)
    assert (paths.data_dir() / DB_FILENAME).is_file()  # under the user data folder
    assert client.responses.retrieve(response.id).model_dump() == response.model_dump()
    raw = httpx.get(f"{_url(client)}/responses/{response.id}", timeout=30)  # also without /v1
    assert raw.status_code == 200 and raw.json()["id"] == response.id
    client.responses.delete(response.id)
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(response.id)
    with pytest.raises(openai.NotFoundError):
        client.responses.delete(response.id)


def test_store_false_keeps_nothing(api):
    client, name = api
    response = client.responses.create(model=name, input="Hi", max_output_tokens=2, store=False)
    assert response.store is False
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(response.id)
    with pytest.raises(openai.NotFoundError) as caught:
        client.responses.create(model=name, input="Again", max_output_tokens=2, previous_response_id=response.id)
    assert "store: false" in caught.value.body["message"]


def test_an_unknown_previous_response_id_is_a_404_in_words(api):
    client, name = api
    with pytest.raises(openai.NotFoundError) as caught:
        client.responses.create(model=name, input="Hi", max_output_tokens=2, previous_response_id="resp_nothing")
    body = caught.value.body
    assert body["param"] == "previous_response_id" and body["code"] == "response_not_found"
    assert "no stored response 'resp_nothing'" in body["message"] and "30 days" in body["message"]


def test_a_streamed_response_is_stored_when_it_ends(api):
    client, name = api
    events = list(client.responses.create(model=name, input="Hi", max_output_tokens=2, stream=True))
    last = events[-1].response
    assert client.responses.retrieve(last.id).output_text == last.output_text


def test_a_store_that_cannot_open_loses_no_answer(tool_engine):
    """The data folder is a file: a response is still answered (and logged as not stored), a request that needs
    the store gets a 500 that says why, and store: false is untouched."""
    paths.data_dir().parent.mkdir(parents=True, exist_ok=True)
    paths.data_dir().write_text("not a folder")
    for client, name in openai_client(tool_engine):
        assert client.responses.create(model=name, input="Hi", max_output_tokens=2).output
        assert client.responses.create(model=name, input="Hi", max_output_tokens=2, store=False).output
        with pytest.raises(openai.InternalServerError) as caught:
            client.responses.create(model=name, input="Hi", max_output_tokens=2, previous_response_id="resp_1")
        assert caught.value.body["code"] == "store_unavailable"
        assert "store: false" in caught.value.body["message"]


# --- structured output ---


def test_a_json_schema_format_holds_the_text(api):
    client, name = api
    schema = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 8}}, "required": ["city"],
              "additionalProperties": False}
    response = client.responses.create(model=name, input="A city as JSON.", max_output_tokens=60, temperature=0.0,
                                       text={"format": {"type": "json_schema", "name": "city", "schema": schema,
                                                        "strict": True}})
    assert response.output_text.startswith("{")
    if response.status == "completed":
        jsonschema.validate(json.loads(response.output_text), schema)
    assert response.text.format.type == "json_schema"


class City(pydantic.BaseModel):
    name: str = pydantic.Field(max_length=8)
    sunny: bool


def test_the_clients_parse_helper_gets_its_pydantic_model_back(api):
    """``responses.parse(text_format=...)`` sends the model's strict schema (pydantic's: every field required, no
    others) as text.format, which the grammar holds; a reply that ends is parsed into the model."""
    client, name = api
    ended = 0
    for seed in range(4):
        response = client.responses.parse(model=name, input="A city as JSON.", text_format=City, max_output_tokens=60,
                                          extra_body={"seed": seed})
        if response.status == "completed":
            assert isinstance(response.output_parsed, City)
            ended += 1
        else:
            assert response.output_text.startswith("{")
    assert ended


# --- refusals ---


@pytest.mark.parametrize(("request_body", "param", "words"), [
    ({}, "input", "input is required"),
    ({"input": []}, "input", "non-empty list"),
    ({"input": [{"role": "robot", "content": "x"}]}, "input[0].role", "user, system, developer or assistant"),
    ({"input": [{"type": "function_call_output", "call_id": "call_x", "output": "1"}]}, "input[0].call_id",
     "no function_call with call_id 'call_x'"),
    ({"input": [{"type": "function_call", "call_id": "c", "name": "f", "arguments": "[1"}]}, "input[0].arguments",
     "JSON object"),
    ({"input": [{"role": "user", "content": [{"type": "input_file", "file_id": "f"}]}]}, "input[0].content[0]",
     "input_file"),
    ({"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "data:image/png;base64,AA"}]}]},
     "input[0].content[0]", "does not see images"),
    ({"input": "x", "tools": [{"type": "web_search"}]}, "tools[0]", "only function tools"),
    ({"input": "x", "tools": [{"type": "function", "name": "bad name"}]}, "tools[0].name", "a function name"),
    ({"input": "x", "tools": TOOLS, "tool_choice": {"type": "function", "name": "nope"}}, "tool_choice",
     "not among the tools"),
    ({"input": "x", "tool_choice": {"type": "function", "name": "f"}}, "tool_choice", "not among the tools"),
    ({"input": "x", "tool_choice": "sometimes"}, "tool_choice", 'must be "none", "auto", "required"'),
    ({"input": [{"type": "item_reference", "id": "msg_1"}]}, "input[0].type", "previous_response_id"),
    ({"input": [{"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"},
                {"type": "function_call_output", "call_id": "c", "output": [{"type": "input_image"}]}]},
     "input[1].output", "a string or input_text parts"),
    ({"input": "x", "max_output_tokens": 0}, "max_output_tokens", "between 1 and 2048"),
    ({"input": "x", "temperature": "hot"}, "temperature", "must be a number"),
    ({"input": "x", "reasoning": {"effort": "extreme"}}, "reasoning.effort", "none, low, medium, high, minimal"),
    ({"input": "x", "reasoning": {"summary": ["all"]}}, "reasoning.summary", "comes whole"),
    ({"input": "x", "text": {"format": {"type": "json_schema", "name": "s", "strict": True,
                                        "schema": {"type": "array", "uniqueItems": True}}}}, "text.format.schema",
     "the grammar cannot hold replies to this JSON schema"),
    ({"input": "x", "background": True}, "background", "not supported"),
    ({"input": "x", "truncation": "middle"}, "truncation", 'or "auto" (the oldest items are left out)'),
    ({"input": "x", "store": "yes"}, "store", "true or false"),
])
def test_bad_requests_are_400s_that_name_the_field(api, request_body, param, words):
    client, name = api
    with pytest.raises(openai.BadRequestError) as caught:
        client.post("/responses", cast_to=httpx.Response, body={"model": name, **request_body})
    body = caught.value.body
    assert body["param"] == param and words in body["message"], body
    assert caught.value.status_code == 400
    # and the server and its engine go on
    assert client.responses.create(model=name, input="Hi", max_output_tokens=1).output


def test_the_guard_stands_before_every_responses_route(tool_engine):
    """The same guard as every route: no key, no answer (nor a word of what is stored); another origin, refused."""
    key = "k" * 20
    server = ServerThread(create_app(tool_engine, api_key=key)).start()
    try:
        auth = {"Authorization": f"Bearer {key}"}
        made = httpx.post(f"{server.url}/v1/responses", json={"input": "Hi", "max_output_tokens": 1}, headers=auth,
                          timeout=120)
        assert made.status_code == 200
        where = f"{server.url}/v1/responses/{made.json()['id']}"
        assert httpx.post(f"{server.url}/v1/responses", json={"input": "Hi"}).status_code == 401
        assert httpx.post(f"{server.url}/responses", json={"input": "Hi"}).status_code == 401
        assert httpx.get(where).status_code == 401 and httpx.delete(where).status_code == 401
        assert httpx.get(where, headers={**auth, "Origin": "http://evil.example"}).status_code == 403
        assert httpx.get(where, headers=auth).status_code == 200
    finally:
        server.stop()


def test_another_model_is_a_404(api):
    client, _ = api
    with pytest.raises(openai.NotFoundError) as caught:
        client.responses.create(model="gpt-4.1", input="Hi", max_output_tokens=1)
    assert caught.value.body["code"] == "model_not_found"


# --- a thinking model ---

BUDGET = 6
THINK = {"temperature": 0.0, "max_output_tokens": 24, "extra_body": {"reasoning_budget_tokens": BUDGET}}


@pytest.fixture(scope="module")
def thinking_engine(tiny_thinking_model):
    yield from loaded_engine(tiny_thinking_model, n_ctx=2048)


@pytest.fixture
def thinker(thinking_engine):
    yield from openai_client(thinking_engine, stream_every_s=0)


def test_a_thinking_model_answers_a_reasoning_item_then_a_message(thinker):
    """Qwen3.5's template opens <think>; the budget closes it (tests/server/test_thinking.py): the thinking is a
    reasoning item before the message, with its tokens counted, and the same as chat's reasoning_content."""
    client, name = thinker
    response = client.responses.create(model=name, input="Why is the sky blue?", **THINK)
    reasoning, message = response.output
    assert reasoning.type == "reasoning" and reasoning.id.startswith("rs_") and reasoning.summary == []
    (content,) = reasoning.content
    assert content.type == "reasoning_text" and content.text.strip() and "<think>" not in content.text
    assert message.type == "message" and response.output_text.strip()
    assert BUDGET <= response.usage.output_tokens_details.reasoning_tokens < response.usage.output_tokens
    chat = client.chat.completions.create(model=name, messages=[{"role": "user", "content": "Why is the sky blue?"}],
                                          temperature=0.0, max_tokens=24,
                                          extra_body={"reasoning_budget_tokens": BUDGET})
    assert (chat.choices[0].message.model_extra["reasoning_content"], chat.choices[0].message.content) == \
           (content.text, response.output_text)


def test_a_thinking_stream_sends_the_reasoning_item_first(thinker):
    client, name = thinker
    whole = client.responses.create(model=name, input="Why is the sky blue?", **THINK)
    events = list(client.responses.create(model=name, input="Why is the sky blue?", stream=True, **THINK))
    kinds = [e.type for e in events]
    first_text = kinds.index("response.output_text.delta")
    assert kinds[2:4] == ["response.output_item.added", "response.content_part.added"]
    assert events[2].item.type == "reasoning"
    assert "response.reasoning_text.delta" in kinds[:first_text]
    assert "response.reasoning_text.done" in kinds[:first_text]
    thought = "".join(e.delta for e in events if e.type == "response.reasoning_text.delta")
    assert thought == whole.output[0].content[0].text
    assert [i.type for i in events[-1].response.output] == ["reasoning", "message"]


SWITCH = {"type": "function", "name": "set_light", "parameters": {
    "type": "object", "properties": {"on": {"type": "boolean"}}, "required": ["on"], "additionalProperties": False}}


def test_a_thinking_model_thinks_then_calls_a_function(thinker):
    """The engine forces the call after the thinking, in Qwen3.5's own syntax (tests/server/test_thinking.py): a
    reasoning item, then a function_call item; streamed in that order, each item closed before the next opens."""
    client, name = thinker
    forced = {"input": "Turn the light on.", "tools": [SWITCH], "tool_choice": "required", "temperature": 0.0,
              "max_output_tokens": 200, "parallel_tool_calls": False,
              "extra_body": {"reasoning_budget_tokens": BUDGET}}
    response = client.responses.create(model=name, **forced)
    assert [item.type for item in response.output] == ["reasoning", "function_call"], response.output
    call = response.output[1]
    assert call.name == "set_light" and set(json.loads(call.arguments)) == {"on"}
    events = list(client.responses.create(model=name, stream=True, **forced))
    items = [(e.type, e.item.type) for e in events if e.type.startswith("response.output_item.")]
    assert items == [("response.output_item.added", "reasoning"), ("response.output_item.done", "reasoning"),
                     ("response.output_item.added", "function_call"), ("response.output_item.done", "function_call")]
    assert events[-1].type == "response.completed"
    assert [i.type for i in events[-1].response.output] == ["reasoning", "function_call"]
    assert events[-1].response.output[1].arguments == call.arguments


def test_reasoning_effort_none_turns_the_thinking_off(thinker):
    client, name = thinker
    response = client.responses.create(model=name, input="Why is the sky blue?", reasoning={"effort": "none"},
                                       temperature=0.0, max_output_tokens=8)
    assert [item.type for item in response.output] == ["message"]
    assert response.usage.output_tokens_details.reasoning_tokens == 0
    assert response.reasoning.effort == "none"


def test_earlier_reasoning_goes_back_with_the_conversation(thinker):
    """A reasoning item in the input is the assistant turn's thinking, as a chat message's reasoning_content."""
    client, name = thinker
    response = client.responses.create(model=name, temperature=0.0, max_output_tokens=4, input=[
        {"role": "user", "content": "Hi"},
        {"type": "reasoning", "id": "rs_1", "summary": [], "content": [{"type": "reasoning_text", "text": "Greet."}]},
        {"role": "assistant", "content": "Hello!"},
        {"role": "user", "content": "Again"}])
    chat = client.chat.completions.create(model=name, temperature=0.0, max_tokens=4, messages=[
        {"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!", "reasoning_content": "Greet."},
        {"role": "user", "content": "Again"}])
    assert response.usage.input_tokens == chat.usage.prompt_tokens


# --- a vision model ---


@pytest.fixture(scope="module")
def vision_engine(tiny_vision):
    from app.datatypes import LoadSettings
    from app.engine.client import EngineClient

    with EngineClient() as client:
        client.load(tiny_vision.text.gguf_q8_0, LoadSettings(n_ctx=512, mmproj=str(tiny_vision.mmproj_f16)))
        yield client


def test_an_input_image_reaches_the_model_as_chats_image_url_does(vision_engine, tmp_path):
    from tests.fixtures.models import write_test_png

    url = "data:image/png;base64," + base64.b64encode(write_test_png(tmp_path / "p.png").read_bytes()).decode()
    for client, name in openai_client(vision_engine):
        response = client.responses.create(model=name, temperature=0.0, max_output_tokens=4, input=[
            {"role": "user", "content": [{"type": "input_text", "text": "What is in this picture?"},
                                         {"type": "input_image", "image_url": url, "detail": "auto"}]}])
        chat = client.chat.completions.create(model=name, temperature=0.0, max_tokens=4, messages=[
            {"role": "user", "content": [{"type": "text", "text": "What is in this picture?"},
                                         {"type": "image_url", "image_url": {"url": url}}]}])
        plain = client.responses.create(model=name, input="What is in this picture?", max_output_tokens=1)
        assert response.usage.input_tokens == chat.usage.prompt_tokens >= plain.usage.input_tokens + 16
        assert response.output_text == chat.choices[0].message.content
        with pytest.raises(openai.BadRequestError) as caught:
            client.responses.create(model=name, max_output_tokens=1, input=[
                {"role": "user", "content": [{"type": "input_image", "image_url": "https://example.com/a.png"}]}])
        assert caught.value.body["code"] == "unsupported_image_url"
