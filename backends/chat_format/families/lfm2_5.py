"""LFM2.5: LFM2's format (families/lfm2.py) with the tool list written as plain "List of tools: [...]", without
LFM2's ``<|tool_list_start|>`` / ``<|tool_list_end|>`` tokens (llama.cpp: common_chat_params_init_lfm2 with
``tool_list_tokens`` false)."""

from __future__ import annotations

from backends.chat_format.families import lfm2
from backends.chat_format.request import Prepared, Request, Template


def prepare(template: Template, request: Request) -> Prepared:
    return lfm2.prepare(template, request, tool_list_tokens=False)
