"""Request bodies of the OpenAI API, checked before anything reaches the engine.

Every field we read is type-checked here and the sampling values go through
``SamplingSettings.validate()``; anything we cannot honour (several choices, tools, log-probs) is
refused with a 400 that names the parameter rather than silently ignored. Unknown fields are ignored, as
OpenAI clients send extras (``user``, ``metadata``) that change nothing here.

Images come as ``image_url`` content parts holding a ``data:`` URL, for a model that sees them; each is checked
here (format, size and dimensions from its header, then decoded whole: app/images). A URL to fetch is refused:
the server never reaches out to the network for a request.
"""

from __future__ import annotations

import json
import math
import sys
from dataclasses import dataclass
from typing import Any

from app import images
from backends.base import Message, Prompt, SamplingSettings

MAX_BODY_BYTES = 48 * 1024 * 1024  # room for a few images as base64; each is held to images.MAX_IMAGE_BYTES
MAX_IMAGES = 8  # per request
MAX_MESSAGES = 4096
MAX_STOP_CHARS = 256
MAX_TOP_K = 1_000_000  # beyond any vocabulary: larger values mean nothing more
_FLOAT_MAX = sys.float_info.max
_ROLES = {"system": "system", "developer": "system", "user": "user", "assistant": "assistant"}


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


def _refuse_constant(name: str):
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


def _number(body: dict, name: str, default: float) -> float:
    value = body.get(name)
    if value is None:
        return default
    # An int from JSON may have thousands of digits: compare it, never float() it (OverflowError).
    finite = isinstance(value, int) and abs(value) <= _FLOAT_MAX or isinstance(value, float) and math.isfinite(value)
    if isinstance(value, bool) or not finite:
        raise bad_param(name, f"{name} must be a number, not {_shown(value)}", "invalid_type")
    return float(value)


def _integer(body: dict, name: str, default: int | None) -> int | None:
    value = body.get(name)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise bad_param(name, f"{name} must be an integer, not {_shown(value)}", "invalid_type")
    return value


def _flag(body: dict, name: str) -> bool:
    value = body.get(name, False)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise bad_param(name, f"{name} must be true or false, not {_shown(value)}", "invalid_type")
    return value


def _refuse_unsupported(body: dict, names: dict[str, object]) -> None:
    """Refuse features we cannot honour when set to anything but their no-op value."""
    for name, neutral in names.items():
        value = body.get(name)
        if value is not None and value != neutral and value != [] and value != {}:
            raise bad_param(name, f"{name} is not supported by this server", "unsupported_parameter")


def _stop(body: dict) -> tuple[str, ...]:
    value = body.get("stop")
    if value is None:
        return ()
    stops = [value] if isinstance(value, str) else value
    if not isinstance(stops, list) or not all(isinstance(s, str) for s in stops):
        raise bad_param("stop", "stop must be a string or a list of strings", "invalid_type")
    if any(len(s) > MAX_STOP_CHARS for s in stops):
        raise bad_param("stop", f"each stop string must be at most {MAX_STOP_CHARS} characters")
    return tuple(stops)


def check_model(body: dict, served_id: str) -> None:
    """The model is chosen when the server starts; a request may name it, never another one or a path."""
    model = body.get("model")
    if model is None or model == "":
        return
    if not isinstance(model, str):
        raise bad_param("model", "model must be a string", "invalid_type")
    if model != served_id:
        raise ApiError(404, f"the model {model[:200]!r} is not served here; this server serves {served_id!r} "
                            "and does not load models from requests", param="model", code="model_not_found")


def _top_k(body: dict, default: int) -> int:
    # SamplingSettings.validate() has no upper bound for top_k, and the engines keep it in a C int.
    top_k = _integer(body, "top_k", default)
    if top_k > MAX_TOP_K:
        raise bad_param("top_k", f"top_k must be at most {MAX_TOP_K:,} (0 turns it off), not {top_k}")
    return top_k


def _sampling(body: dict, max_tokens_default: int, max_tokens_limit: int) -> SamplingSettings:
    defaults = SamplingSettings()
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


def _stream_options(body: dict, stream: bool) -> bool:
    options = body.get("stream_options")
    if options is None:
        return False
    if not isinstance(options, dict):
        raise bad_param("stream_options", "stream_options must be an object", "invalid_type")
    if not stream:
        raise bad_param("stream_options", "stream_options is only allowed with stream: true")
    return _flag(options, "include_usage")


_COMMON_UNSUPPORTED = {"n": 1, "logprobs": False, "presence_penalty": 0, "frequency_penalty": 0,
                       "logit_bias": None}


def _image(part: dict, param: str) -> str:
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


def _content(message: dict, index: int, sees_images: bool) -> tuple[str, tuple[str, ...]]:
    """A message's text and its images (base64): the images go to the model ahead of the message's text."""
    content = message.get("content")
    if isinstance(content, str):
        return content, ()
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


def parse_chat(body: dict, *, served_id: str, n_ctx: int, sees_images: bool = False) -> GenerationRequest:
    check_model(body, served_id)
    _refuse_unsupported(body, {**_COMMON_UNSUPPORTED, "tools": None, "functions": None, "top_logprobs": None,
                               "audio": None, "modalities": None})
    response_format = body.get("response_format")
    if response_format is not None and response_format != {"type": "text"}:
        raise bad_param("response_format", "only the text response format is supported", "unsupported_parameter")
    raw = body.get("messages")
    if not isinstance(raw, list) or not raw:
        raise bad_param("messages", "messages must be a non-empty list", "invalid_type")
    if len(raw) > MAX_MESSAGES:
        raise bad_param("messages", f"at most {MAX_MESSAGES} messages are accepted")
    messages = []
    n_images = 0
    for i, message in enumerate(raw):
        if not isinstance(message, dict):
            raise bad_param(f"messages[{i}]", "each message must be an object", "invalid_type")
        role = message.get("role")
        role = _ROLES.get(role) if isinstance(role, str) else None  # a list or an object is no key of _ROLES
        if role is None:
            raise bad_param(f"messages[{i}].role", f"role must be one of {', '.join(_ROLES)}, "
                                                   f"not {_shown(message.get('role'))}")
        text, attached = _content(message, i, sees_images)
        n_images += len(attached)
        if n_images > MAX_IMAGES:
            raise bad_param(f"messages[{i}].content", f"at most {MAX_IMAGES} images are accepted in one request",
                            "too_many_images")
        messages.append(Message(role, text, attached))
    stream = _flag(body, "stream")
    return GenerationRequest(messages, _sampling(body, n_ctx, n_ctx), stream, _stream_options(body, stream))


def parse_completion(body: dict, *, served_id: str, n_ctx: int) -> GenerationRequest:
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
    return GenerationRequest(prompt, _sampling(body, n_ctx, n_ctx), stream,
                             _stream_options(body, stream))
