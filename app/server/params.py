"""Request bodies of the OpenAI API, checked before anything reaches the engine.

Every field we read is type-checked here and the sampling values go through
``SamplingSettings.validate()``; anything we cannot honour (penalties, ``logit_bias``, a schema keyword the
grammar cannot enforce) is refused with a 400 that names the parameter rather than silently ignored. Tools,
``tool_choice``, ``response_format`` and llama-server's thinking controls (``chat_template_kwargs``,
``reasoning_format``, ``reasoning_budget_tokens``, ...) become ``SamplingSettings`` fields: the engine host renders
them through the model's chat format, forces a call or a schema with its grammar, and reads the reply into its
answer, thinking and tool calls (backends/chat_format). Unknown fields are ignored, as OpenAI clients send extras
(``user``, ``metadata``) that change nothing here.

Images come as ``image_url`` content parts holding a ``data:`` URL, for a model that sees them; each is checked
here (format, size and dimensions from its header, then decoded whole: app/images). A URL to fetch is refused:
the server never reaches out to the network for a request.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
import sys
from dataclasses import dataclass
from typing import Any, NoReturn, overload

from app import images
from backends import json_schema
from app.datatypes import (MAX_TOP_LOGPROBS, Message, ModelSampling, OVERFLOW_POLICIES, Prompt, REASONING_FORMATS,
                           SamplingSettings, choose_sampling)

# ``n``: choices per request, generated one after the other on the model's engine (llama-server runs them in
# parallel slots); each is a whole reply, so the bound keeps one request from holding the queue for long.
MAX_CHOICES = 8
MAX_BODY_BYTES = 48 * 1024 * 1024  # room for a few images as base64; each is held to images.MAX_IMAGE_BYTES
MAX_IMAGES = 8  # per request
MAX_MESSAGES = 4096
MAX_STOP_CHARS = 256
MAX_TOP_K = 1_000_000  # beyond any vocabulary: larger values mean nothing more
_FLOAT_MAX = sys.float_info.max
_ROLES = {"system": "system", "developer": "system", "user": "user", "assistant": "assistant", "tool": "tool"}
MAX_TOOLS = 128
MAX_REASONING_BUDGET = 1_000_000  # SamplingSettings.validate()'s bound, checked here under the request's names
_FUNCTION_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")  # OpenAI's rule (dots too, as MCP tool names use them)


class ApiError(Exception):
    """An error answered in OpenAI's shape: {"error": {"message", "type", "param", "code"}}."""

    def __init__(self, status: int, message: str, *, type: str = "invalid_request_error",
                 param: str | None = None, code: str | None = None, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type
        self.param = param
        self.code = code
        self.headers = headers or {}

    def body(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}


def bad_param(param: str, message: str, code: str = "invalid_value") -> ApiError:
    return ApiError(400, message, param=param, code=code)


@dataclass(frozen=True)
class GenerationRequest:
    """What a chat or completion request asks of the engine, checked."""

    messages: Prompt  # a conversation for /v1/chat/completions, the raw prompt for /v1/completions
    sampling: SamplingSettings
    stream: bool
    include_usage: bool
    n: int = 1  # choices, generated one after the other
    overflow: str | None = None  # the request's overflow policy ("quantdesk": {"overflow": ...}); None: the server's
    documents: tuple[str, ...] = ()  # the collections it is answered from ("quantdesk": {"documents": [...]})

    def choice(self, index: int) -> GenerationRequest:
        """The request for choice ``index`` of ``n``: a seed, when given, advanced by the index, so the choices differ
        and each is reproducible (a greedy reply is the same whatever the seed)."""
        if index == 0 or self.sampling.seed is None:
            return self
        return dataclasses.replace(self, sampling=dataclasses.replace(
            self.sampling, seed=(self.sampling.seed + index) % 2**32))


def _refuse_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not valid JSON")  # Python's json accepts NaN and Infinity; the API must not


def parse_json_body(raw: bytes) -> dict[str, Any]:
    try:
        body = json.loads(raw, parse_constant=_refuse_constant)
    except (ValueError, RecursionError) as exc:
        raise ApiError(400, f"the request body is not valid JSON: {exc}", code="invalid_json") from None
    if not isinstance(body, dict):
        raise ApiError(400, "the request body must be a JSON object", code="invalid_json")
    return body


def _shown(value: Any) -> str:
    """A request value as an error message quotes it: cut short (a body may hold megabytes)."""
    text = repr(value)
    return text if len(text) <= 60 else text[:59] + "…"


def _number(body: dict[str, Any], name: str, default: float) -> float:
    value = body.get(name)
    if value is None:
        return default
    # An int from JSON may have thousands of digits: compare it, never float() it (OverflowError).
    finite = isinstance(value, int) and abs(value) <= _FLOAT_MAX or isinstance(value, float) and math.isfinite(value)
    if isinstance(value, bool) or not finite:
        raise bad_param(name, f"{name} must be a number, not {_shown(value)}", "invalid_type")
    return float(value)


@overload
def _integer(body: dict[str, Any], name: str, default: int) -> int: ...
@overload
def _integer(body: dict[str, Any], name: str, default: None) -> int | None: ...
def _integer(body: dict[str, Any], name: str, default: int | None) -> int | None:
    value = body.get(name)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise bad_param(name, f"{name} must be an integer, not {_shown(value)}", "invalid_type")
    return value


def _flag(body: dict[str, Any], name: str, default: bool = False) -> bool:
    value = body.get(name)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise bad_param(name, f"{name} must be true or false, not {_shown(value)}", "invalid_type")
    return value


def _string(body: dict[str, Any], name: str, default: str = "", param: str | None = None) -> str:
    value = body.get(name)
    if value is None:
        return default
    if not isinstance(value, str):
        raise bad_param(param or name, f"{name} must be a string, not {_shown(value)}", "invalid_type")
    return value


def _refuse_unsupported(body: dict[str, Any], names: dict[str, object]) -> None:
    """Refuse features we cannot honour when set to anything but their no-op value."""
    for name, neutral in names.items():
        value = body.get(name)
        if value is not None and value != neutral and value != [] and value != {}:
            raise bad_param(name, f"{name} is not supported by this server", "unsupported_parameter")


def _stop(body: dict[str, Any]) -> tuple[str, ...]:
    value = body.get("stop")
    if value is None:
        return ()
    stops = [value] if isinstance(value, str) else value
    if not isinstance(stops, list) or not all(isinstance(s, str) for s in stops):
        raise bad_param("stop", "stop must be a string or a list of strings", "invalid_type")
    if any(len(s) > MAX_STOP_CHARS for s in stops):
        raise bad_param("stop", f"each stop string must be at most {MAX_STOP_CHARS} characters")
    return tuple(stops)


def check_model(body: dict[str, Any], served_id: str) -> None:
    """The model is chosen when the server starts; a request may name it, never another one or a path."""
    model = body.get("model")
    if model is None or model == "":
        return
    if not isinstance(model, str):
        raise bad_param("model", "model must be a string", "invalid_type")
    if model != served_id:
        raise ApiError(404, f"the model {model[:200]!r} is not served here; this server serves {served_id!r} "
                            "and does not load models from requests", param="model", code="model_not_found")


def _top_k(body: dict[str, Any], default: int) -> int:
    # SamplingSettings.validate() has no upper bound for top_k, and the engines keep it in a C int.
    top_k = _integer(body, "top_k", default)
    if top_k > MAX_TOP_K:
        raise bad_param("top_k", f"top_k must be at most {MAX_TOP_K:,} (0 turns it off), not {top_k}")
    return top_k


def _sampling(body: dict[str, Any], max_tokens_default: int, max_tokens_limit: int,
              recommended: ModelSampling | None = None, preset: dict[str, Any] | None = None) -> SamplingSettings:
    """A request's sampling; a value it does not give is the served model's preset's (``preset``: the user's values
    for the model, app/hub/presets.py, as llama-server's --models-preset gives a model its defaults), else its
    recommendation (``recommended``: app/models/metadata/sampling.py), else QuantDesk's default, by the one rule
    app.datatypes.choose_sampling. Only the sampling values: a request's reply length stays the API's own."""
    defaults = choose_sampling({}, recommended, preset).settings
    max_tokens = _integer(body, "max_completion_tokens", None)
    if max_tokens is None:
        max_tokens = _integer(body, "max_tokens", max_tokens_default)
    if not 1 <= max_tokens <= max_tokens_limit:
        raise bad_param("max_tokens", f"max_tokens must be between 1 and {max_tokens_limit} (the context "
                                      f"length), not {max_tokens}")
    seed = _integer(body, "seed", None)
    if seed == -1:
        seed = None  # llama.cpp's server reads -1 as "random"
    sampling = SamplingSettings(
        temperature=_number(body, "temperature", defaults.temperature),
        top_p=_number(body, "top_p", defaults.top_p),
        top_k=_top_k(body, defaults.top_k),
        min_p=_number(body, "min_p", defaults.min_p),
        repeat_penalty=_number(body, "repeat_penalty", defaults.repeat_penalty),
        max_tokens=max_tokens,
        seed=seed,
        stop=_stop(body),
    )
    try:
        sampling.validate()
    except ValueError as exc:
        # validate() starts each problem with the field's name ("top_p must be in (0, 1], not 0").
        raise bad_param(str(exc).split(" ", 1)[0], str(exc)) from None
    return sampling


def _stream_options(body: dict[str, Any], stream: bool) -> bool:
    options = body.get("stream_options")
    if options is None:
        return False
    if not isinstance(options, dict):
        raise bad_param("stream_options", "stream_options must be an object", "invalid_type")
    if not stream:
        raise bad_param("stream_options", "stream_options is only allowed with stream: true")
    return _flag(options, "include_usage")


# llama-server's ``grammar`` (GBNF) too: replies are held to JSON schemas here (llguidance), and a reply a client
# asked to hold to a grammar must not come back free
_COMMON_UNSUPPORTED = {"presence_penalty": 0, "frequency_penalty": 0, "logit_bias": None, "grammar": None}


def _choices(body: dict[str, Any]) -> int:
    n = _integer(body, "n", 1)
    if not 1 <= n <= MAX_CHOICES:
        raise bad_param("n", f"n must be between 1 and {MAX_CHOICES} (choices are generated one after the other), "
                             f"not {n}")
    return n


def _chat_logprobs(body: dict[str, Any]) -> int:
    """OpenAI's chat ``logprobs`` (true: each token's log-probability) and ``top_logprobs`` (0 to 20 alternatives,
    only with logprobs), as SamplingSettings.logprobs."""
    wanted = _flag(body, "logprobs")
    top = _integer(body, "top_logprobs", None)
    if top is None:
        return 0 if wanted else -1
    if not wanted:
        raise bad_param("top_logprobs", "top_logprobs needs logprobs: true")
    if not 0 <= top <= MAX_TOP_LOGPROBS:
        raise bad_param("top_logprobs", f"top_logprobs must be between 0 and {MAX_TOP_LOGPROBS}, not {top}")
    return top


def _completion_logprobs(body: dict[str, Any]) -> int:
    """The completions API's ``logprobs``: how many alternatives (0 to 20) beside each chosen token's."""
    top = _integer(body, "logprobs", None)
    if top is None:
        return -1
    if not 0 <= top <= MAX_TOP_LOGPROBS:
        raise bad_param("logprobs", f"logprobs must be between 0 and {MAX_TOP_LOGPROBS}, not {top}")
    return top


def _image(part: dict[str, Any], param: str) -> str:
    """An ``image_url`` part's image as base64, checked: a ``data:`` URL of a PNG, JPEG or WebP image within the
    limits that decodes whole (app/images)."""
    image_url = part.get("image_url")
    url = image_url.get("url") if isinstance(image_url, dict) else image_url
    if not isinstance(url, str):
        raise bad_param(param, "image_url must be an object with a url", "invalid_type")
    if not url.startswith("data:"):
        raise bad_param(param, "this server does not fetch images from URLs; send the image itself as a data: URL "
                               "(data:image/png;base64,...)", "unsupported_image_url")
    header, comma, payload = url.partition(",")
    if not comma or not header.endswith(";base64"):
        raise bad_param(param, "the image's data: URL must be base64-encoded (data:image/png;base64,...)",
                        "invalid_image")
    if len(payload) > (images.MAX_IMAGE_BYTES * 4) // 3 + 4:
        raise bad_param(param, f"the image is larger than {images.MAX_IMAGE_BYTES >> 20} MiB", "image_too_large")
    try:
        images.decode_rgb(images.from_base64(payload))
    except images.ImageError as exc:
        raise bad_param(param, exc.message, "invalid_image") from None
    return payload


def _content(message: dict[str, Any], index: int, sees_images: bool) -> tuple[str, tuple[str, ...]]:
    """A message's text and its images (base64): the images go to the model ahead of the message's text."""
    content = message.get("content")
    if isinstance(content, str):
        return content, ()
    if content is None and message.get("role") == "assistant" and message.get("tool_calls"):
        return "", ()  # an assistant turn that only called tools
    if isinstance(content, list):  # the array form: text parts and image_url parts
        parts, found = [], []
        for j, part in enumerate(content):
            param = f"messages[{index}].content[{j}]"
            kind = part.get("type") if isinstance(part, dict) else None
            if kind == "text" and isinstance(part.get("text"), str):
                parts.append(part["text"])
            elif kind == "image_url":
                if not sees_images:  # said before any decoding
                    raise bad_param(param, "the model served here does not see images (it was loaded without a "
                                           "vision projector)", "model_without_vision")
                found.append(_image(part, param))
            else:
                raise bad_param(param, "content parts must be text or image_url parts", "unsupported_content")
        return "".join(parts), tuple(found)
    raise bad_param(f"messages[{index}].content", "content must be a string or a list of text and image_url parts",
                    "invalid_type")


def json_arguments(value: Any, param: str) -> dict[str, Any]:
    """A call's arguments as the object chat templates expect: OpenAI sends them as JSON text."""
    if isinstance(value, str):
        try:
            value = json.loads(value, parse_constant=_refuse_constant) if value.strip() else {}
        except (ValueError, RecursionError):
            raise bad_param(param, "the arguments of a tool call must be a JSON object (as text)") from None
    if not isinstance(value, dict):
        raise bad_param(param, "the arguments of a tool call must be a JSON object", "invalid_type")
    return value


def _assistant_tool_calls(message: dict[str, Any], index: int) -> tuple[dict[str, Any], ...]:
    calls = message.get("tool_calls")
    if calls is None:
        return ()
    where = f"messages[{index}].tool_calls"
    if not isinstance(calls, list):
        raise bad_param(where, "tool_calls must be a list", "invalid_type")
    out = []
    for j, call in enumerate(calls):
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            raise bad_param(f"{where}[{j}]", "each tool call needs a function with a name", "invalid_type")
        call_id = call.get("id", "")
        if not isinstance(call_id, str):
            raise bad_param(f"{where}[{j}].id", "a tool call's id must be a string", "invalid_type")
        out.append({"id": call_id, "type": "function",
                    "function": {"name": function["name"],
                                 "arguments": json_arguments(function.get("arguments"),
                                                             f"{where}[{j}].function.arguments")}})
    return tuple(out)


def chat_message(message: Any, i: int, sees_images: bool = False) -> Message:
    if not isinstance(message, dict):
        raise bad_param(f"messages[{i}]", "each message must be an object", "invalid_type")
    role = message.get("role")
    role = _ROLES.get(role) if isinstance(role, str) else None  # a list or an object is no key of _ROLES
    if role is None:
        raise bad_param(f"messages[{i}].role", f"role must be one of {', '.join(_ROLES)}, "
                                               f"not {_shown(message.get('role'))}")
    content, attached = _content(message, i, sees_images)
    if role == "tool":
        call_id = message.get("tool_call_id")
        if not isinstance(call_id, str) or not call_id:
            raise bad_param(f"messages[{i}].tool_call_id", "a tool message needs the tool_call_id it answers",
                            "invalid_type")
        name = message.get("name", "")
        return Message(role, content, attached, tool_call_id=call_id, name=name if isinstance(name, str) else "")
    if role == "assistant":
        return Message(role, content, attached, tool_calls=_assistant_tool_calls(message, i),
                       reasoning=_reasoning(message, i))
    return Message(role, content, attached)


def _reasoning(message: dict[str, Any], index: int) -> str:
    """An assistant turn's thinking, as llama-server sends it back (``reasoning_content``) or vLLM (``reasoning``)."""
    name = "reasoning_content" if message.get("reasoning_content") is not None else "reasoning"
    return _string(message, name, param=f"messages[{index}].{name}")


def parse_tools(tools: Any, param: str = "tools") -> list[dict[str, Any]]:
    """OpenAI's function tools, checked: [{"type": "function", "function": {"name", "description"?,
    "parameters"?}}]."""
    if not isinstance(tools, list):
        raise bad_param(param, "tools must be a list", "invalid_type")
    if len(tools) > MAX_TOOLS:
        raise bad_param(param, f"at most {MAX_TOOLS} tools are accepted")
    out, names = [], set()
    for i, tool in enumerate(tools):
        function = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(tool, dict) or tool.get("type") != "function" or not isinstance(function, dict):
            raise bad_param(f"{param}[{i}]", "each tool must be {\"type\": \"function\", \"function\": {...}}",
                            "invalid_type")
        name = function.get("name")
        if not isinstance(name, str) or not _FUNCTION_NAME.match(name):
            raise bad_param(f"{param}[{i}].function.name", "a function name is 1 to 64 letters, digits, "
                                                          "underscores, dots or dashes")
        if name in names:
            raise bad_param(f"{param}[{i}].function.name", f"the function name {name!r} is given twice")
        names.add(name)
        parameters = function.get("parameters")
        if parameters is not None and not isinstance(parameters, dict):
            raise bad_param(f"{param}[{i}].function.parameters", "parameters must be a JSON Schema object",
                            "invalid_type")
        description = function.get("description")
        if description is not None and not isinstance(description, str):
            raise bad_param(f"{param}[{i}].function.description", "description must be a string", "invalid_type")
        clean = {"name": name, **({"description": description} if description else {}),
                 **({"parameters": parameters} if parameters is not None else {})}
        out.append({"type": "function", "function": clean})
    return out


def _tool_choice(body: dict[str, Any], tools: list[dict[str, Any]]) -> str:
    """"auto", "none", "required", or the name of the one function to call."""
    choice = body.get("tool_choice")
    if choice is None or choice == "auto":  # comparisons only: a list or an object is never hashed
        return "auto"
    if choice in ("none", "required"):
        return str(choice)
    if isinstance(choice, dict) and choice.get("type") == "function" and isinstance(choice.get("function"), dict):
        name = choice["function"].get("name")
        if not isinstance(name, str) or name not in {t["function"]["name"] for t in tools}:
            raise bad_param("tool_choice", f"tool_choice names {str(name)[:64]!r}, which is not among the tools")
        return name
    raise bad_param("tool_choice", 'tool_choice must be "none", "auto", "required" or '
                                   '{"type": "function", "function": {"name": ...}}')


def checked_schema(schema: Any, param: str, *, strict: bool) -> dict[str, Any]:
    """A strict schema the grammar enforces whole, or a 400 naming what it would not; a loose one is marked so
    that the grammar holds what it can."""
    if not isinstance(schema, dict):
        raise bad_param(param, json_schema.NOT_A_SCHEMA, "invalid_type")
    if not strict:
        return json_schema.lenient(schema)
    problem = json_schema.refusal(schema)
    if problem:
        raise bad_param(param, problem, "unsupported_schema")
    return schema


def llama_server_schema(schema: Any, param: str) -> dict[str, Any]:
    """A schema given in llama-server's own fields (``json_schema``, a ``schema`` inside ``json_object``): held to
    whole where the grammar can enforce all of it, as llama-server's converter holds it; else what it can."""
    if not isinstance(schema, dict):
        raise bad_param(param, json_schema.NOT_A_SCHEMA, "invalid_type")
    return checked_schema(schema, param, strict=json_schema.refusal(schema) is None)


def response_schema(response_format: Any) -> dict[str, Any] | None:
    """The JSON schema ``response_format`` asks for: None for text, ``{"type": "object"}`` for json_object."""
    if response_format is None:
        return None
    kind = response_format.get("type") if isinstance(response_format, dict) else None
    if kind == "text":
        return None
    if kind == "json_object":
        if response_format.get("schema") is not None:  # llama-server's: a schema inside json_object
            return llama_server_schema(response_format["schema"], "response_format.schema")
        return {"type": "object"}
    if kind == "json_schema":
        spec = response_format.get("json_schema")
        if not isinstance(spec, dict) or "schema" not in spec:
            raise bad_param("response_format.json_schema", "json_schema needs a schema", "invalid_type")
        strict = spec.get("strict", False)
        if not isinstance(strict, bool):
            raise bad_param("response_format.json_schema.strict", "strict must be true or false", "invalid_type")
        return checked_schema(spec["schema"], "response_format.json_schema.schema", strict=strict)
    raise bad_param("response_format", 'response_format type must be "text", "json_object" or "json_schema"')


def with_tools(sampling: SamplingSettings, tools: list[dict[str, Any]], choice: str, takes_tools: bool
               ) -> SamplingSettings:
    """``sampling`` with the tools and ``choice`` (as ``_tool_choice`` reads it) as the engine takes them: a named
    function is the only tool given, and required. ``takes_tools``: the served model's template has tool support."""
    if not tools:
        return sampling
    if choice != "none" and not takes_tools:
        raise bad_param("tools", "the served model's chat template has no tool support, so it cannot be given "
                                 "tools", "unsupported_parameter")
    if choice in ("auto", "none"):
        return dataclasses.replace(sampling, tools=tuple(tools), tool_choice=choice)
    if sampling.json_schema is not None:
        raise bad_param("tool_choice", "a forced tool call and response_format cannot both shape the reply")
    if choice != "required":
        tools = [t for t in tools if t["function"]["name"] == choice]
    return dataclasses.replace(sampling, tools=tuple(tools), tool_choice="required")


REASONING_EFFORTS = ("none", "low", "medium", "high")  # "none": no thinking, as llama-server reads it


def thinking_budget(value: Any, param: str, *, least: int = -1) -> int:
    """A thinking budget in tokens (-1: none, 0: no thinking), checked under the request's name for it."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise bad_param(param, f"{param} must be an integer, not {_shown(value)}", "invalid_type")
    if not least <= value <= MAX_REASONING_BUDGET:
        raise bad_param(param, f"{param} must be between {least} and {MAX_REASONING_BUDGET:,}, not {value}")
    return value


def _thinking(body: dict[str, Any], sampling: SamplingSettings) -> SamplingSettings:
    """llama-server's thinking controls: ``chat_template_kwargs`` (its ``enable_thinking`` turns thinking on or off),
    ``reasoning_effort``, ``reasoning_format``, ``reasoning_budget_tokens`` (or ``thinking_budget_tokens``) and
    ``reasoning_budget_message``."""
    kwargs = body.get("chat_template_kwargs")
    if kwargs is None:
        kwargs = {}
    if not isinstance(kwargs, dict):
        raise bad_param("chat_template_kwargs", "chat_template_kwargs must be an object", "invalid_type")
    kwargs = dict(kwargs)
    enable = kwargs.pop("enable_thinking", None)  # a field of its own, which the engine gives the template
    if enable is not None and not isinstance(enable, bool):
        raise bad_param("chat_template_kwargs.enable_thinking",
                        f"enable_thinking must be true or false, not {_shown(enable)}", "invalid_type")
    effort = _string(body, "reasoning_effort")
    if effort and effort not in REASONING_EFFORTS:
        raise bad_param("reasoning_effort", f"reasoning_effort must be one of {', '.join(REASONING_EFFORTS)}, "
                                            f"not {_shown(effort)}")
    if effort == "none":
        enable, effort = False, ""
    reasoning_format = _string(body, "reasoning_format", "auto")
    if reasoning_format not in REASONING_FORMATS:
        raise bad_param("reasoning_format", f"reasoning_format must be one of {', '.join(REASONING_FORMATS)}, "
                                            f"not {_shown(reasoning_format)}")
    budget = -1
    for name in ("reasoning_budget_tokens", "thinking_budget_tokens"):  # llama-server's name first, then its alias
        if body.get(name) is not None:
            budget = thinking_budget(body[name], name)
            break
    return dataclasses.replace(sampling, enable_thinking=enable, reasoning_effort=effort, reasoning_budget=budget,
                               reasoning_budget_message=_string(body, "reasoning_budget_message"),
                               reasoning_format=reasoning_format, chat_template_kwargs=kwargs)


def parse_chat(body: dict[str, Any], *, served_id: str, n_ctx: int, sees_images: bool = False,
               takes_tools: bool = False, recommended: ModelSampling | None = None,
               preset: dict[str, Any] | None = None) -> GenerationRequest:
    """``sees_images``: the served model takes images; ``takes_tools``: its chat template has tool support
    (Loaded.details' ``tool_format``); ``recommended``: the sampling its files recommend."""
    check_model(body, served_id)
    _refuse_unsupported(body, {**_COMMON_UNSUPPORTED, "functions": None, "audio": None, "modalities": None})
    raw = body.get("messages")
    if not isinstance(raw, list) or not raw:
        raise bad_param("messages", "messages must be a non-empty list", "invalid_type")
    if len(raw) > MAX_MESSAGES:
        raise bad_param("messages", f"at most {MAX_MESSAGES} messages are accepted")
    messages = [chat_message(message, i, sees_images) for i, message in enumerate(raw)]
    n_images = 0
    for i, message in enumerate(messages):
        n_images += len(message.images)
        if n_images > MAX_IMAGES:
            raise bad_param(f"messages[{i}].content", f"at most {MAX_IMAGES} images are accepted in one request",
                            "too_many_images")
    stream = _flag(body, "stream")
    schema = response_schema(body.get("response_format"))
    if schema is None and body.get("json_schema") is not None:  # llama-server's own field for it
        schema = llama_server_schema(body["json_schema"], "json_schema")
    sampling = dataclasses.replace(_sampling(body, n_ctx, n_ctx, recommended, preset),
                                   json_schema=schema,
                                   parallel_tool_calls=_flag(body, "parallel_tool_calls", True),
                                   logprobs=_chat_logprobs(body))
    tools = parse_tools(body["tools"]) if body.get("tools") is not None else []
    sampling = with_tools(sampling, tools, _tool_choice(body, tools) if tools else "auto", takes_tools)
    return GenerationRequest(messages, _thinking(body, sampling), stream, _stream_options(body, stream),
                             _choices(body), overflow_choice(body), documents_choice(body))


OVERFLOW_HEADER = "X-QuantDesk-Overflow"  # a request's overflow policy as a header; the body's field wins
DROPPED_HEADER = "X-QuantDesk-Context-Dropped"  # how many of the request's messages the policy left out


def overflow_choice(body: dict[str, Any], header: str | None = None) -> str | None:
    """The overflow policy a request asks for: ``"quantdesk": {"overflow": POLICY}`` in its body, else the
    ``X-QuantDesk-Overflow`` header; None when it asks none (the server's own applies)."""
    extra = body.get("quantdesk")
    if extra is not None and not isinstance(extra, dict):
        raise bad_param("quantdesk", "quantdesk must be an object, such as {\"overflow\": \"drop-oldest\"}",
                        "invalid_type")
    asked = (extra or {}).get("overflow")
    param = "quantdesk.overflow"
    if asked is None and header is not None:
        asked, param = header.strip(), OVERFLOW_HEADER
    if asked is None:
        return None
    if asked not in OVERFLOW_POLICIES:
        raise bad_param(param, f"the overflow policy must be one of {', '.join(OVERFLOW_POLICIES)}, not "
                               f"{_shown(asked)}")
    return str(asked)


MAX_COLLECTIONS = 16


def documents_choice(body: dict[str, Any]) -> tuple[str, ...]:
    """The document collections a chat request is answered from: ``"quantdesk": {"documents": ["NAME", ...]}``
    (app/server/documents.py); none when it names none."""
    extra = body.get("quantdesk")
    if not isinstance(extra, dict) or extra.get("documents") is None:
        return ()  # a quantdesk that is not an object is overflow_choice's sentence
    names = extra["documents"]
    if isinstance(names, str):
        names = [names]
    if not isinstance(names, list) or not all(isinstance(n, str) and n.strip() for n in names):
        raise bad_param("quantdesk.documents", "quantdesk.documents must be a list of collection names, such as "
                                               "[\"manuals\"] (quantdesk docs ls lists them)", "invalid_type")
    if len(names) > MAX_COLLECTIONS:
        raise bad_param("quantdesk.documents", f"at most {MAX_COLLECTIONS} collections are accepted in one request")
    return tuple(dict.fromkeys(n.strip() for n in names))


def parse_completion(body: dict[str, Any], *, served_id: str, n_ctx: int,
                     recommended: ModelSampling | None = None, preset: dict[str, Any] | None = None
                     ) -> GenerationRequest:
    check_model(body, served_id)
    _refuse_unsupported(body, {**_COMMON_UNSUPPORTED, "best_of": 1, "echo": False, "suffix": None})
    prompt = body.get("prompt")
    if isinstance(prompt, list) and len(prompt) == 1:
        prompt = prompt[0]
    if not isinstance(prompt, str):
        raise bad_param("prompt", "prompt must be a string (token arrays and several prompts are not supported)",
                        "invalid_type")
    stream = _flag(body, "stream")
    # A raw completion: the prompt reaches the model as it is, without the chat template.
    sampling = dataclasses.replace(_sampling(body, n_ctx, n_ctx, recommended, preset),
                                   logprobs=_completion_logprobs(body))
    return GenerationRequest(prompt, sampling, stream, _stream_options(body, stream), _choices(body))


MAX_EMBED_INPUTS = 2048  # OpenAI's own limit per request


@dataclass(frozen=True)
class EmbeddingRequest:
    texts: list[str]
    encoding_format: str  # float | base64 (little-endian float32, what the openai client asks for by default)


def parse_embeddings(body: dict[str, Any], *, served_id: str, n_embd: int) -> EmbeddingRequest:
    check_model(body, served_id)
    texts = body.get("input")
    if isinstance(texts, str):
        texts = [texts]
    if not isinstance(texts, list) or not texts or not all(isinstance(t, str) for t in texts):
        raise bad_param("input", "input must be a string or a non-empty list of strings (token arrays are not "
                                 "supported)", "invalid_type")
    if len(texts) > MAX_EMBED_INPUTS:
        raise bad_param("input", f"at most {MAX_EMBED_INPUTS} inputs are accepted in one request")
    if any(not t for t in texts):
        raise bad_param("input", "an input may not be empty")
    encoding = body.get("encoding_format") or "float"
    if encoding not in ("float", "base64"):
        raise bad_param("encoding_format", 'encoding_format must be "float" or "base64"')
    dimensions = _integer(body, "dimensions", None)
    if dimensions is not None and dimensions != n_embd:
        raise bad_param("dimensions", f"this model's embeddings have {n_embd} dimensions; it cannot give "
                                      f"{dimensions}", "unsupported_parameter")
    return EmbeddingRequest(texts, encoding)


MAX_RERANK_DOCUMENTS = 1000  # Cohere's and Jina's own limit per request


@dataclass(frozen=True)
class RerankQuery:
    """A /v1/rerank request, checked: Jina's and Cohere's shape (``query``, ``documents``, ``top_n``,
    ``return_documents``) as llama-server takes it, or TEI's (``texts``, ``return_text``; the answer a bare list)."""

    query: str
    documents: list[str]
    top_n: int
    return_documents: bool
    tei: bool  # Hugging Face text-embeddings-inference's shape: asked with "texts", answered with a list


def parse_rerank(body: dict[str, Any], *, served_id: str) -> RerankQuery:
    check_model(body, served_id)
    query = body.get("query")
    if not isinstance(query, str):
        raise bad_param("query", "query must be provided, as a string", "invalid_type" if "query" in body else
                        "missing_required_parameter")
    tei = "texts" in body and "documents" not in body
    param = "texts" if tei else "documents"
    documents = body.get(param)
    if isinstance(documents, list):  # Jina and Cohere also take {"text": ...} objects
        documents = [d.get("text") if isinstance(d, dict) else d for d in documents]
    if not isinstance(documents, list) or not documents or not all(isinstance(d, str) for d in documents):
        raise bad_param(param, f"{param} must be a non-empty list of strings", "invalid_type")
    if len(documents) > MAX_RERANK_DOCUMENTS:
        raise bad_param(param, f"at most {MAX_RERANK_DOCUMENTS} documents are accepted in one request")
    top_n = _integer(body, "top_n", len(documents))
    if top_n < 1:
        raise bad_param("top_n", f"top_n must be 1 or more, not {top_n}")
    return_documents = _flag(body, "return_text" if tei else "return_documents")
    return RerankQuery(query, documents, min(top_n, len(documents)), return_documents, tei)
