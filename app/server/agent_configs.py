"""Each coding tool's own configuration for a model this server serves (``quantdesk launch TOOL``): Claude Code, Codex,
OpenCode, Continue, Cline and any OpenAI client, in the format each tool documents, with the base URL, the API key,
the model's id and its context size; and the least context each tool is documented (or well known) to need, so that a
model too small for a tool is refused in words instead of failing at the tool's first long prompt.

Each ``Tool`` makes a ``Setup``: what to print (environment lines, the values for a settings panel) and, where the
tool reads a file, that file and how to merge our part into what the user already has there (``merge``, given the
file's text or None). Writing it (a backup of the user's file first, atomically) is ``write_setup``'s.

Sources of the formats, one per tool, are cited beside each builder. The context minimums:
- Claude Code, Codex, OpenCode: 64,000 tokens. Ollama's documentation for coding tools ("Tasks which require large
  context like web search, agents, and coding tools should be set to at least 64000 tokens",
  https://docs.ollama.com/context-length) and its ``ollama launch`` for these three tools ("Update the context length
  in Ollama's settings to at least 64000 tokens", https://ollama.com/blog/launch): their system prompts and tool
  definitions alone take tens of thousands of tokens before the first message.
- Cline: 32K (32,768) tokens: "Update the context window to at least 32K tokens" (https://docs.ollama.com/cline).
- Continue and plain OpenAI clients: no minimum is documented; Continue prunes its prompt to the ``contextLength`` it
  is given (its reference's default is 2,048), so the model's own context is written for it to use.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.errors import QuantDeskError
from app.files import write_text_atomic

API_KEY_ENV = "QUANTDESK_API_KEY"  # the server's and the CLI's variable for the key (app/commands/server.py)
NO_KEY = "quantdesk"  # what a tool that insists on some key sends to a server that wants none: any value does
PROVIDER_ID = "quantdesk"  # our provider's name in the tools' files


class AgentConfigError(QuantDeskError):
    """A tool's configuration that cannot be made or written; the message says why."""


@dataclass(frozen=True)
class Endpoint:
    """A model as a running server serves it."""

    url: str  # http://127.0.0.1:8080, without /v1
    model: str  # the id requests name it by
    n_ctx: int  # its context, in tokens
    api_key: str | None = None  # None: the server wants no key

    @property
    def openai_base(self) -> str:
        return f"{self.url}/v1"

    @property
    def key_or_placeholder(self) -> str:
        return self.api_key or NO_KEY

    def output_tokens(self) -> int:
        """A reply's length to tell a tool: a quarter of the context, at most 32,768 tokens."""
        return max(256, min(32_768, self.n_ctx // 4))


@dataclass(frozen=True)
class Setup:
    """What ``quantdesk launch`` prints and, for a tool that reads a file, writes."""

    lines: list[str]  # to print: environment lines or the settings to enter
    file: Path | None = None  # the file --write merges into
    merge: Callable[[str | None], str] | None = None  # the file's new text from its old text (None: no file yet)
    run: str = ""  # the command that starts the tool with it
    private: bool = False  # the file holds the API key: written readable by the user only


@dataclass(frozen=True)
class Tool:
    name: str
    title: str
    min_context: int
    min_context_source: str  # where the minimum comes from, in words
    make: Callable[[Endpoint], Setup] = field(repr=False)

    def refusal(self, endpoint: Endpoint) -> str | None:
        """Why the model is too small for this tool, or None."""
        if endpoint.n_ctx >= self.min_context:
            return None
        return (f"{endpoint.model} is served with a context of {endpoint.n_ctx:,} tokens; {self.title} needs at least "
                f"{self.min_context:,} ({self.min_context_source})")


def home() -> Path:
    return Path.home()


# --- Claude Code ---------------------------------------------------------------------------------------------------
# Claude Code speaks Anthropic's Messages API (this server's /v1/messages) and reads its endpoint from environment
# variables, or from the "env" block of ~/.claude/settings.json: ANTHROPIC_BASE_URL (the root: it adds /v1/messages),
# ANTHROPIC_AUTH_TOKEN (sent as "Authorization: Bearer"), ANTHROPIC_MODEL, and the models it uses for its tiers and
# background work, ANTHROPIC_DEFAULT_{OPUS,SONNET,HAIKU}_MODEL (ANTHROPIC_SMALL_FAST_MODEL in older releases).
# https://docs.anthropic.com/en/docs/claude-code/llm-gateway, https://docs.anthropic.com/en/docs/claude-code/settings
def claude_env(endpoint: Endpoint) -> dict[str, str]:
    model = endpoint.model
    return {"ANTHROPIC_BASE_URL": endpoint.url, "ANTHROPIC_AUTH_TOKEN": endpoint.key_or_placeholder,
            "ANTHROPIC_MODEL": model, "ANTHROPIC_DEFAULT_OPUS_MODEL": model,
            "ANTHROPIC_DEFAULT_SONNET_MODEL": model, "ANTHROPIC_DEFAULT_HAIKU_MODEL": model,
            "ANTHROPIC_SMALL_FAST_MODEL": model}


def _claude(endpoint: Endpoint) -> Setup:
    env = claude_env(endpoint)

    def merge(old: str | None) -> str:
        settings = _json_object(old, "settings.json")
        block = settings.get("env")
        settings["env"] = {**(block if isinstance(block, dict) else {}), **env}
        return json.dumps(settings, indent=2) + "\n"

    lines = [*_exports(env), "export ANTHROPIC_API_KEY=''  # a key of Anthropic's would be sent instead"]
    return Setup(lines, home() / ".claude" / "settings.json", merge, "claude", private=endpoint.api_key is not None)


# --- Codex ---------------------------------------------------------------------------------------------------------
# Codex speaks only OpenAI's Responses API (this server's /v1/responses): a provider in ~/.codex/config.toml
# ($CODEX_HOME) with wire_api = "responses", its base_url with /v1 (Codex adds /responses) and env_key naming the
# variable that holds the key; model_provider and model choose it, model_context_window tells Codex the context.
# https://developers.openai.com/codex/config-reference, https://developers.openai.com/codex/config-sample
def codex_home() -> Path:
    return Path(os.environ.get("CODEX_HOME") or home() / ".codex")


def _codex(endpoint: Endpoint) -> Setup:
    provider = {"name": "QuantDesk", "base_url": endpoint.openai_base, "wire_api": "responses"}
    if endpoint.api_key:
        provider["env_key"] = API_KEY_ENV
    root: dict[str, Any] = {"model": endpoint.model, "model_provider": PROVIDER_ID,
                            "model_context_window": endpoint.n_ctx}

    def merge(old: str | None) -> str:
        return _toml_with(old or "", root, f"model_providers.{PROVIDER_ID}", provider)

    lines = [f"[model_providers.{PROVIDER_ID}] in {codex_home() / 'config.toml'}:",
             *(f"  {k} = {_toml_value(v)}" for k, v in provider.items()),
             *(f"  (top level) {k} = {_toml_value(v)}" for k, v in root.items())]
    if endpoint.api_key:
        lines.append(f"export {API_KEY_ENV}=...  # the server's API key, which Codex reads from it")
    return Setup(lines, codex_home() / "config.toml", merge, "codex")


# --- OpenCode ------------------------------------------------------------------------------------------------------
# A custom provider in opencode.json (~/.config/opencode/opencode.json for every project): "npm":
# "@ai-sdk/openai-compatible", "options": {"baseURL": ".../v1", "apiKey"}, "models": {ID: {"name", "limit":
# {"context", "output"}}}; "model": "PROVIDER/ID" makes it the default. https://opencode.ai/docs/providers/#custom-provider
# and https://opencode.ai/docs/config/ (schema https://opencode.ai/config.json).
def opencode_file() -> Path:
    return home() / ".config" / "opencode" / "opencode.json"


def opencode_provider(endpoint: Endpoint) -> dict[str, Any]:
    options = {"baseURL": endpoint.openai_base,
               "apiKey": f"{{env:{API_KEY_ENV}}}" if endpoint.api_key else NO_KEY}  # {env:…}: OpenCode's variable
    return {"npm": "@ai-sdk/openai-compatible", "name": "QuantDesk", "options": options,
            "models": {endpoint.model: {"name": endpoint.model,
                                        "limit": {"context": endpoint.n_ctx, "output": endpoint.output_tokens()}}}}


def _opencode(endpoint: Endpoint) -> Setup:
    provider = opencode_provider(endpoint)

    def merge(old: str | None) -> str:
        config = _json_object(old, "opencode.json")
        config.setdefault("$schema", "https://opencode.ai/config.json")
        providers = config.get("provider")
        config["provider"] = {**(providers if isinstance(providers, dict) else {}), PROVIDER_ID: provider}
        config["model"] = f"{PROVIDER_ID}/{endpoint.model}"
        return json.dumps(config, indent=2) + "\n"

    shown = {"provider": {PROVIDER_ID: provider}, "model": f"{PROVIDER_ID}/{endpoint.model}"}
    lines = [f"in {opencode_file()}:", *json.dumps(shown, indent=2).splitlines()]
    if endpoint.api_key:
        lines.append(f"export {API_KEY_ENV}=...  # the server's API key, which opencode.json reads from it")
    return Setup(lines, opencode_file(), merge, "opencode")


# --- Continue ------------------------------------------------------------------------------------------------------
# A models entry in ~/.continue/config.yaml: name, provider "openai" (any OpenAI-compatible server, with apiBase),
# model, apiKey, roles, and defaultCompletionOptions' contextLength and maxTokens; a new file needs the top-level
# name, version and schema: v1. https://docs.continue.dev/reference,
# https://docs.continue.dev/customize/model-providers/top-level/openai
def continue_file() -> Path:
    return home() / ".continue" / "config.yaml"


def continue_model(endpoint: Endpoint) -> dict[str, Any]:
    return {"name": f"QuantDesk {endpoint.model}", "provider": "openai", "model": endpoint.model,
            "apiBase": endpoint.openai_base, "apiKey": endpoint.key_or_placeholder,
            "roles": ["chat", "edit", "apply"],
            "defaultCompletionOptions": {"contextLength": endpoint.n_ctx, "maxTokens": endpoint.output_tokens()}}


def _continue(endpoint: Endpoint) -> Setup:
    import yaml  # PyYAML: huggingface_hub's own dependency, so always here

    entry = continue_model(endpoint)

    def merge(old: str | None) -> str:
        try:
            config = yaml.safe_load(old) if old else None
        except yaml.YAMLError as exc:
            raise AgentConfigError(f"{continue_file()} is not YAML QuantDesk can read ({exc})") from None
        if config is None:
            config = {"name": "Local config", "version": "1.0.0", "schema": "v1"}
        if not isinstance(config, dict):
            raise AgentConfigError(f"{continue_file()} does not hold a YAML mapping")
        models = [m for m in config.get("models") or [] if not (isinstance(m, dict) and m.get("name") == entry["name"])]
        config["models"] = [*models, entry]
        return str(yaml.safe_dump(config, sort_keys=False))

    lines = [f"in {continue_file()}, under models:", *yaml.safe_dump([entry], sort_keys=False).splitlines()]
    return Setup(lines, continue_file(), merge, private=endpoint.api_key is not None)


# --- Cline ---------------------------------------------------------------------------------------------------------
# Cline keeps its settings in the editor's extension storage, not a file of the user's: its panel's API Provider
# "OpenAI Compatible", Base URL, API Key, Model ID, and under Model Configuration the context window.
# https://docs.cline.bot/provider-config/openai-compatible
def _cline(endpoint: Endpoint) -> Setup:
    return Setup(["in Cline's settings (the gear in its panel):", "  API Provider: OpenAI Compatible",
                  f"  Base URL: {endpoint.openai_base}", f"  API Key: {endpoint.key_or_placeholder}",
                  f"  Model ID: {endpoint.model}",
                  f"  Model Configuration → Context Window Size: {endpoint.n_ctx}",
                  f"  Model Configuration → Max Output Tokens: {endpoint.output_tokens()}"])


# --- any OpenAI client ---------------------------------------------------------------------------------------------
# The official SDKs read OPENAI_BASE_URL and OPENAI_API_KEY (https://github.com/openai/openai-python#usage); many tools
# also read OPENAI_MODEL.
def openai_env(endpoint: Endpoint) -> dict[str, str]:
    return {"OPENAI_BASE_URL": endpoint.openai_base, "OPENAI_API_KEY": endpoint.key_or_placeholder,
            "OPENAI_MODEL": endpoint.model}


def _openai(endpoint: Endpoint) -> Setup:
    return Setup([*_exports(openai_env(endpoint)), f"# context: {endpoint.n_ctx} tokens"])


AGENTS_64K = "Ollama's documentation for coding tools and agents, docs.ollama.com/context-length"
TOOLS: dict[str, Tool] = {t.name: t for t in (
    Tool("claude", "Claude Code", 64_000, AGENTS_64K, _claude),
    Tool("codex", "Codex", 64_000, AGENTS_64K, _codex),
    Tool("opencode", "OpenCode", 64_000, AGENTS_64K, _opencode),
    Tool("continue", "Continue", 0, "none documented", _continue),
    Tool("cline", "Cline", 32_768, "Ollama's Cline guide, docs.ollama.com/cline: at least 32K", _cline),
    Tool("openai", "an OpenAI client", 0, "none", _openai),
)}


def write_setup(setup: Setup) -> tuple[Path, Path | None]:
    """Merge ``setup`` into its file: the user's file is copied first to FILE.quantdesk-backup-TIME, then the new
    text replaces it atomically (app/files.py). The file and its backup (None: there was no file)."""
    if setup.file is None or setup.merge is None:
        raise AgentConfigError("this tool reads no file QuantDesk can write")
    path = setup.file
    old = path.read_text(encoding="utf-8") if path.exists() else None
    text = setup.merge(old)
    backup = None
    if old is not None:
        if old == text:
            return path, None
        backup = path.with_name(f"{path.name}.quantdesk-backup-{time.strftime('%Y%m%d-%H%M%S')}")
        shutil.copy2(path, backup)
    write_text_atomic(path, text, private=setup.private)
    return path, backup


def _exports(env: dict[str, str]) -> list[str]:
    import shlex

    return [f"export {k}={shlex.quote(v)}" for k, v in env.items()]


def _json_object(text: str | None, name: str) -> dict[str, Any]:
    if not text or not text.strip():
        return {}
    try:
        data = json.loads(text)
    except ValueError:
        raise AgentConfigError(f"{name} is not plain JSON (comments?): QuantDesk leaves it as it is",
                               "add the printed part by hand") from None
    if not isinstance(data, dict):
        raise AgentConfigError(f"{name} does not hold a JSON object")
    return data


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    return json.dumps(str(value))  # a TOML basic string is a JSON string for what we write


_HEADER = re.compile(r"^\s*\[\[?\s*([^\]]+?)\s*\]\]?\s*(#.*)?$")


def _toml_with(text: str, root: dict[str, Any], table: str, values: dict[str, Any]) -> str:
    """``text`` (TOML) with the root keys set and ``[table]`` replaced by ``values``; the rest of the file, comments
    included, kept as it was. Checked by reading it back."""
    try:
        tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise AgentConfigError(f"the Codex configuration is not TOML QuantDesk can read ({exc})") from None
    lines = text.splitlines()
    first_table = next((i for i, line in enumerate(lines) if _HEADER.match(line)), len(lines))
    head, rest = lines[:first_table], lines[first_table:]
    for key, value in root.items():  # a root key replaced where it is, else added before the first table
        pattern = re.compile(rf"^\s*{re.escape(key)}\s*=")
        line = f"{key} = {_toml_value(value)}"
        at = next((i for i, old in enumerate(head) if pattern.match(old)), None)
        if at is None:
            head.append(line)
        else:
            head[at] = line
    kept: list[str] = []
    skipping = False
    for line in rest:  # our table out (a dotted table of it too), every other table kept
        match = _HEADER.match(line)
        if match:
            name = match.group(1).replace('"', "")
            skipping = name == table or name.startswith(table + ".")
        if not skipping:
            kept.append(line)
    ours = [f"[{table}]", *(f"{k} = {_toml_value(v)}" for k, v in values.items())]
    new = "\n".join([*head, *([""] if head and head[-1].strip() else []), *ours, "", *kept]).rstrip("\n") + "\n"
    parsed = tomllib.loads(new)  # what Codex will read: our values, or fail here and write nothing
    node: Any = parsed
    for part in table.split("."):
        node = node[part]
    assert node == values and all(parsed[k] == v for k, v in root.items())
    return new
