"""llama-server's model presets (``llama-server --models-preset FILE.ini``) read into QuantDesk's per-model presets
(app/hub/presets.py) and written back out, so that a user's llama.cpp presets come along.

The format, as llama.cpp's common/preset.cpp parses it (its grammar, followed here line for line):

- ``[NAME]`` starts a section; keys before any section belong to the section ``default``; ``[*]`` holds options
  every other section of the file inherits (a section's own value wins). A section header met again starts that
  section afresh, as llama.cpp's map assignment does.
- ``key = value``: the key is a command-line argument without its dashes (``n-gpu-layers``), a short form (``ngl``)
  or its environment variable (``LLAMA_ARG_N_GPU_LAYERS``); ``no-`` forms negate a flag. The value runs to the end of
  the line or to the first ``;`` or ``#`` (comments), trailing blanks dropped. ``version`` is reserved.
- A section names a model llama-server knows (``user/repo:QUANT``, the quant tag upper-cased as llama.cpp does) or
  gives one with ``model = PATH`` / ``hf-repo = user/repo:QUANT``.

Each key QuantDesk has a setting for is mapped (``KEYS``); every other key is reported by name with the reason it is
skipped, never dropped silently. A section is matched to a library model by ``model``'s path (else its file name),
by ``hf-repo`` or the section's name (repo and quant), or by the section's name as the model's served id (the file
name without .gguf); one that matches none is reported and not imported, unless its ``model`` is a file that exists
(then its preset is kept for that path).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.hub.presets import KV_CACHE_TYPES, ModelPreset, entry_key

GLOBAL = "*"
DEFAULT_SECTION = "default"
_IDENT = re.compile(r"[a-zA-Z_][a-zA-Z0-9_.-]*")


class PresetFileError(ValueError):
    """A file that is no llama-server preset file (llama-server refuses it too)."""


def parse(text: str, name: str = "the preset file") -> dict[str, dict[str, str]]:
    """Sections and their keys, as llama.cpp's parse_ini_from_file reads them; PresetFileError names the first line
    it would refuse."""
    sections: dict[str, dict[str, str]] = {}
    current = DEFAULT_SECTION
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.lstrip(" \t")
        if not line.strip(" \t") or line[0] in ";#":
            continue
        if line.startswith("["):
            end = line.find("]")
            rest = line[end + 1:].lstrip(" \t") if end > 0 else ""
            if end < 0 or (rest and rest[0] not in ";#") or not line[1:end].strip(" \t"):
                raise PresetFileError(f"{name}, line {number}: {raw.strip()!r} is no section header ([NAME])")
            current = line[1:end].strip(" \t")
            sections[current] = {}
            continue
        match = _IDENT.match(line)
        after = line[match.end():].lstrip(" \t") if match else ""
        if match is None or not after.startswith("="):
            raise PresetFileError(f"{name}, line {number}: {raw.strip()!r} is neither a section header, a "
                                  "'key = value' line nor a comment")
        value = re.split(r"[;#]", after[1:], maxsplit=1)[0].strip(" \t")
        sections.setdefault(current, {})[match.group()] = value
    return {k: v for k, v in sections.items() if v or k != DEFAULT_SECTION}


# --- the keys ----------------------------------------------------------------------------------------------------


def _int(value: str) -> int:
    return int(value.strip())


def _float(value: str) -> float:
    return float(value.strip())


def _truthy(value: str) -> bool | None:
    """llama.cpp's common_arg_utils: on/enabled/true/1, off/disabled/false/0, auto/-1 (None)."""
    if value in ("on", "enabled", "true", "1"):
        return True
    if value in ("off", "disabled", "false", "0"):
        return False
    if value in ("auto", "-1"):
        return None
    raise ValueError(f"{value!r} is none of on / off / auto")


def _gpu_layers(value: str) -> int | None:
    """``auto`` (llama.cpp's -1): the fit check's choice, as without the key; ``all`` (-2): every layer, which
    QuantDesk writes -1."""
    if value in ("auto", "-1"):
        return None
    if value in ("all", "-2"):
        return -1
    return _int(value)


def _kv_type(value: str) -> str:
    if value not in KV_CACHE_TYPES:
        raise ValueError(f"QuantDesk's engines take the KV cache types {', '.join(KV_CACHE_TYPES)}, not {value!r}")
    return value


def _template_kwargs(value: str) -> dict[str, Any]:
    parsed = json.loads(value)
    if not isinstance(parsed, dict):
        raise ValueError("it must be a JSON object")
    return parsed


def _seed(value: str) -> int | None:
    seed = _int(value)
    return None if seed < 0 else seed  # llama.cpp's -1: a random seed, QuantDesk's None


def _n_predict(value: str) -> int:
    tokens = _int(value)
    if tokens < 1:
        raise ValueError("QuantDesk has no unlimited reply length (-1); give a number of tokens")
    return tokens


def _effort(value: str) -> str:
    if value == "default":
        return ""
    if value not in ("low", "medium", "high"):
        raise ValueError(f"QuantDesk takes the efforts low, medium and high, not {value!r}")
    return value


def _path(value: str) -> str:
    return str(Path(value).expanduser().resolve())


@dataclass(frozen=True)
class Key:
    where: str  # "load", "sampling" or "system_prompt"
    field: str  # LoadSettings' or SamplingSettings' name
    parse: Callable[[str], Any]
    names: tuple[str, ...]  # the long form first (written on export), then short forms and the environment variable


KEYS = (
    Key("load", "n_ctx", _int, ("ctx-size", "c", "LLAMA_ARG_CTX_SIZE")),
    Key("load", "gpu_layers", _gpu_layers, ("n-gpu-layers", "ngl", "gpu-layers", "LLAMA_ARG_N_GPU_LAYERS")),
    Key("load", "kv_cache_type", _kv_type, ("cache-type-k", "ctk", "LLAMA_ARG_CACHE_TYPE_K")),
    Key("load", "kv_cache_type", _kv_type, ("cache-type-v", "ctv", "LLAMA_ARG_CACHE_TYPE_V")),
    Key("load", "threads", _int, ("threads", "t", "LLAMA_ARG_THREADS")),
    Key("load", "flash_attention", _truthy, ("flash-attn", "fa", "LLAMA_ARG_FLASH_ATTN")),
    Key("load", "cpu_moe", _int, ("n-cpu-moe", "ncmoe", "LLAMA_ARG_N_CPU_MOE")),
    Key("load", "cpu_moe", lambda v: -1 if _truthy(v) else 0, ("cpu-moe", "cmoe", "LLAMA_ARG_CPU_MOE")),
    Key("load", "mmproj", _path, ("mmproj", "mm", "LLAMA_ARG_MMPROJ")),
    Key("load", "draft", _path, ("model-draft", "md", "spec-draft-model", "LLAMA_ARG_SPEC_DRAFT_MODEL")),
    Key("load", "draft_tokens", _int, ("draft-max", "draft", "draft-n", "LLAMA_ARG_DRAFT_MAX")),
    Key("load", "draft_p_min", _float, ("draft-p-min", "spec-draft-p-min", "LLAMA_ARG_SPEC_DRAFT_P_MIN")),
    # llama-server's built-in template names are QuantDesk's bundled ones (backends/chat_format/bundled.py ALIASES)
    Key("load", "chat_template", str, ("chat-template", "LLAMA_ARG_CHAT_TEMPLATE")),
    Key("load", "chat_template", _path, ("chat-template-file", "LLAMA_ARG_CHAT_TEMPLATE_FILE")),
    Key("sampling", "temperature", _float, ("temp", "temperature", "LLAMA_ARG_TEMPERATURE")),
    Key("sampling", "top_k", _int, ("top-k", "LLAMA_ARG_TOP_K")),
    Key("sampling", "top_p", _float, ("top-p", "LLAMA_ARG_TOP_P")),
    Key("sampling", "min_p", _float, ("min-p", "LLAMA_ARG_MIN_P")),
    Key("sampling", "repeat_penalty", _float, ("repeat-penalty", "LLAMA_ARG_REPEAT_PENALTY")),
    Key("sampling", "max_tokens", _n_predict, ("n-predict", "n", "predict", "LLAMA_ARG_N_PREDICT")),
    Key("sampling", "seed", _seed, ("seed", "s")),
    Key("sampling", "chat_template_kwargs", _template_kwargs,
        ("chat-template-kwargs", "LLAMA_ARG_CHAT_TEMPLATE_KWARGS")),
    Key("sampling", "enable_thinking", _truthy, ("reasoning", "rea", "LLAMA_ARG_REASONING")),
    Key("sampling", "reasoning_effort", _effort, ("reasoning-effort", "LLAMA_ARG_REASONING_EFFORT")),
    Key("sampling", "reasoning_budget", _int, ("reasoning-budget", "LLAMA_ARG_THINK_BUDGET")),
    Key("sampling", "reasoning_budget_message", str,
        ("reasoning-budget-message", "LLAMA_ARG_THINK_BUDGET_MESSAGE")),
    Key("sampling", "reasoning_format", str, ("reasoning-format", "LLAMA_ARG_THINK")),
    # llama-cli's system prompt (llama-server takes none on its command line; QuantDesk's presets keep one).
    Key("system_prompt", "system_prompt", str, ("system-prompt", "sys")),
)
_BY_NAME = {name: key for key in KEYS for name in key.names}
# The keys that say which model a section is for.
MODEL_KEYS = ("model", "m", "LLAMA_ARG_MODEL")
REPO_KEYS = ("hf-repo", "hf", "hfr", "LLAMA_ARG_HF_REPO")
FILE_KEYS = ("hf-file", "hff", "LLAMA_ARG_HF_FILE")
# Keys QuantDesk reads as they are already: said as skipped, with the reason.
ALWAYS = {"jinja": "QuantDesk always renders the model's Jinja chat template",
          "LLAMA_ARG_JINJA": "QuantDesk always renders the model's Jinja chat template",
          "no-jinja": "QuantDesk has no chat formats but Jinja templates"}
ROUTER_ONLY = ("load-on-startup", "stop-timeout", "dedup-cache-models", "alias", "a", "LLAMA_ARG_ALIAS", "host",
               "port", "api-key")


@dataclass
class ImportedSection:
    name: str
    preset: ModelPreset | None  # None: matched no model (``problem`` says why)
    model: str = ""  # the model it was matched to (its path)
    skipped: list[str] = field(default_factory=list)  # "key = value: why"
    problem: str = ""


def section_values(options: dict[str, str]) -> tuple[dict[str, Any], dict[str, Any], str | None, list[str]]:
    """A section's load values, sampling values and system prompt by QuantDesk's names, and the keys skipped, each
    with the reason. cache-type-k and -v are one setting in QuantDesk: two different types are skipped."""
    load: dict[str, Any] = {}
    sampling: dict[str, Any] = {}
    system: str | None = None
    skipped: list[str] = []
    kv: dict[str, str] = {}
    for name, value in options.items():
        if name in MODEL_KEYS + REPO_KEYS + FILE_KEYS or name == "version":
            continue
        key = _BY_NAME.get(name)
        if key is None:
            if name in ALWAYS:
                skipped.append(f"{name} = {value}: {ALWAYS[name]}")
            elif name in ROUTER_ONLY:
                skipped.append(f"{name} = {value}: llama-server's router setting, not the model's")
            elif name.startswith("no-") and name[3:] in _BY_NAME:
                skipped.append(f"{name}: QuantDesk has no negated form of {name[3:]}; write {name[3:]} = off")
            else:
                skipped.append(f"{name} = {value}: QuantDesk has no such setting")
            continue
        try:
            parsed = key.parse(value)
        except (ValueError, TypeError) as exc:
            skipped.append(f"{name} = {value}: {exc}")
            continue
        if key.field == "kv_cache_type":
            kv[name] = parsed
        elif key.where == "load":
            if parsed is not None or key.field != "gpu_layers":
                load[key.field] = parsed
        elif key.where == "sampling":
            sampling[key.field] = parsed
        else:
            system = parsed
    if len(set(kv.values())) > 1:
        skipped += [f"{name} = {value}: QuantDesk keeps one type for K and V, and these differ"
                    for name, value in kv.items()]
    elif kv:
        load["kv_cache_type"] = next(iter(kv.values()))
    return load, sampling, system, skipped


def canonical_tag(tag: str) -> str:
    """llama.cpp's canonical_tag: the quant after the last - or . in a tag, upper-cased (``model-q4_k_m`` → Q4_K_M)."""
    match = re.search(r"[-.]([A-Z0-9_]+)$", tag, re.IGNORECASE)
    return (match.group(1) if match else tag).upper()


def _by_repo(reference: str, entries: list[Any]) -> list[Any]:
    """Library entries of ``user/repo[:QUANT]`` (case as the Hub ignores it), the quant by the entry's quant or its
    file name."""
    repo, _, tag = reference.partition(":")
    found = [e for e in entries if e.repo_id and e.repo_id.lower() == repo.strip().lower()]
    if tag:
        quant = canonical_tag(tag.strip())
        found = [e for e in found if (e.quant or "").upper() == quant or quant in Path(e.path).name.upper()]
    return found


def match_section(name: str, options: dict[str, str], entries: list[Any], base: Path) -> tuple[str, str] | str:
    """(preset key, model path) for a section, or why it matches no model. ``base``: the folder a relative
    ``model`` path is read from (the INI file's)."""
    model = next((options[k] for k in MODEL_KEYS if options.get(k)), "")
    if model:
        path = Path(model).expanduser()
        path = (path if path.is_absolute() else base / path).resolve()
        same = [e for e in entries if Path(e.path).expanduser().resolve() == path]
        if not same:
            same = [e for e in entries if Path(e.path).name == path.name]
        if len(same) == 1:
            return entry_key(same[0]), same[0].path
        if path.exists():
            return str(path), str(path)
        if same:
            return f"its model {path.name} is several models of the library: give its full path"
        return f"its model {model} is neither a file here nor a model of the library"
    repo = next((options[k] for k in REPO_KEYS if options.get(k)), "")
    for reference in (repo, name if "/" in name else ""):
        if reference:
            found = _by_repo(reference, entries)
            file = next((options[k] for k in FILE_KEYS if options.get(k)), "")
            if file:
                found = [e for e in found if Path(e.path).name == Path(file).name]
            if len(found) == 1:
                return entry_key(found[0]), found[0].path
            if found:
                return (f"{reference} is {len(found)} models of the library "
                        f"({', '.join(Path(e.path).name for e in found)}): name the quant (user/repo:Q4_K_M)")
    served = [e for e in entries if name.lower() in (Path(e.path).name.lower().removesuffix(".gguf"),
                                                     e.name.lower(), Path(e.path).name.lower())]
    if len(served) == 1:
        return entry_key(served[0]), served[0].path
    return "it names no model of the library (give model = PATH, or hf-repo = user/repo:QUANT)"


def import_text(text: str, entries: list[Any], *, name: str = "the preset file", base: Path | None = None
                ) -> tuple[list[ImportedSection], list[str]]:
    """The sections of a llama-server preset file as presets of the library's models (``entries``), and what the
    ``[*]`` section's keys were not used for (none of its keys is lost: each reaches every section)."""
    sections = parse(text, name)
    shared = sections.pop(GLOBAL, {})
    notes = [f"[*]: {len(shared)} shared setting{'s' if len(shared) != 1 else ''} applied to each section"] \
        if shared else []
    out = []
    for section, own in sections.items():
        own = {k: v for k, v in own.items() if k != "version"}  # reserved: llama.cpp skips it
        if section == DEFAULT_SECTION and not own:
            continue  # "version = 1" above the first section, as llama-server's files start
        options = {**shared, **own}  # the model's own options win over [*]
        load, sampling, system, skipped = section_values(options)
        matched = match_section(section, options, entries, base or Path.cwd())
        if isinstance(matched, str):
            out.append(ImportedSection(section, None, skipped=skipped, problem=matched))
            continue
        key, path = matched
        out.append(ImportedSection(section, ModelPreset(key, path, load, sampling, system), path, skipped))
    return out, notes


# --- export ------------------------------------------------------------------------------------------------------


def _ini_value(field_name: str, value: Any) -> str:
    if field_name == "gpu_layers":
        return "all" if value == -1 else str(value)
    if isinstance(value, bool):
        return "on" if value else "off"
    if value is None:
        return "auto" if field_name in ("flash_attention", "enable_thinking") else "-1"
    if isinstance(value, dict):
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return str(value)


def _writable(field_name: str) -> Key:
    """The key a field is written with: its first in KEYS (cache-type-k; cache-type-v follows it)."""
    return next(k for k in KEYS if k.field == field_name)


def export_section(preset: ModelPreset, section: str, model_path: str | None) -> tuple[str, list[str]]:
    """One preset as a llama-server section (``model = PATH`` when the model is here) and what it leaves out, with the
    reason: llama-server has no setting for it, or it cannot be written on one line."""
    lines = [f"[{section}]"]
    left_out = []
    if model_path:
        lines.append(f"model = {model_path}")
    values = {**preset.load, **preset.sampling}
    for field_name, value in values.items():
        if field_name == "cpu_moe":
            lines.append(f"n-cpu-moe = {value}" if value >= 0 else "cpu-moe = on")
            continue
        text = _ini_value(field_name, value)
        if re.search(r"[;#\r\n]", text):  # the format has no quoting: a comment sign would cut the value
            left_out.append(f"{field_name}: its value holds ; or # or a line break, which the format cannot keep")
            continue
        lines.append(f"{_writable(field_name).names[0]} = {text}")
        if field_name == "kv_cache_type":
            lines.append(f"cache-type-v = {text}")
    if preset.system_prompt is not None:
        left_out.append("system prompt: llama-server takes none in a preset")
    if preset.overflow is not None:
        left_out.append("overflow policy: llama-server has no such setting")
    return "\n".join(lines) + "\n", left_out


def section_name(preset: ModelPreset, entry: Any | None) -> str:
    """A library model from the Hub as llama-server names a cached model (``user/repo:QUANT``), any other by its
    file name without .gguf (QuantDesk's served id)."""
    if entry is not None and entry.repo_id and entry.quant:
        return f"{entry.repo_id}:{entry.quant.upper()}"
    path = Path(entry.path if entry is not None else preset.path or preset.key)
    name = path.name.removesuffix(".gguf") or preset.key
    return name.replace("[", "(").replace("]", ")")


def export_text(models: list[ModelPreset], entries: list[Any]) -> tuple[str, list[str]]:
    """Presets as a llama-server preset file (``version = 1``, a section each) and what was left out, by section."""
    by_key = {entry_key(e): e for e in entries}
    parts = ["version = 1\n"]
    notes = []
    used: set[str] = set()
    for preset in models:
        entry = by_key.get(preset.key)
        name = section_name(preset, entry)
        if name in used:  # two models of one name: llama-server would merge their sections
            name = f"{name} ({len(used)})"
        used.add(name)
        path = entry.path if entry is not None else (preset.path or None)
        text, left_out = export_section(preset, name, path)
        parts.append(text)
        notes += [f"[{name}] {why}" for why in left_out]
    return "\n".join(parts), notes


@dataclass
class ImportReport:
    imported: list[ImportedSection]
    unmatched: list[ImportedSection]
    notes: list[str]

    def lines(self) -> list[str]:
        """What was imported for which model, each key skipped by name with its reason, each section not used."""
        out = list(self.notes)
        for section in self.imported:
            assert section.preset is not None
            out.append(f"[{section.name}] → {Path(section.model).name}: "
                       f"{len(section.preset.load) + len(section.preset.sampling)} setting(s)"
                       + (" and a system prompt" if section.preset.system_prompt is not None else ""))
            out += [f"  skipped {why}" for why in section.skipped]
        for section in self.unmatched:
            out.append(f"[{section.name}] not imported: {section.problem}")
            out += [f"  skipped {why}" for why in section.skipped]
        return out


def import_file(path: Path) -> ImportReport:
    """Read a llama-server preset file and save each section that matches a model as that model's preset (its values
    replace the preset's values of the same settings; others it had stay). PresetFileError: not readable or no preset
    file; PresetError: a value no engine takes (nothing is saved then)."""
    from app.hub import presets as store

    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise PresetFileError(f"cannot read {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise PresetFileError(f"{path} is not UTF-8 text, so it is no preset file") from None
    entries = store.library_entries()
    sections, notes = import_text(text, entries, name=str(path), base=path.parent)
    imported = [s for s in sections if s.preset is not None]
    saved = store.load()
    for section in imported:
        assert section.preset is not None
        new = section.preset
        old = saved.models.get(new.key)
        if old is not None:  # the file's values win, the preset's others stay
            new = ModelPreset(new.key, new.path, {**old.load, **new.load}, {**old.sampling, **new.sampling},
                              new.system_prompt if new.system_prompt is not None else old.system_prompt, old.overflow)
        try:
            new.validate()
        except ValueError as exc:
            raise type(exc)(f"[{section.name}]: {exc}") from None
        saved.models[new.key] = new
    if imported:
        store.save(saved)
    return ImportReport(imported, [s for s in sections if s.preset is None], notes)
