"""app.hub.formats: which branch names are bit rates, and which repos are known to be EXL before a config is read."""

from __future__ import annotations

import pytest

from app.hub.formats import exl_branches, exl_format_hint, exl_quant_of, is_bare_bit_rate


@pytest.mark.parametrize("name, bpw, quant", [
    ("6_5", 6.5, "6.5bpw"), ("4_25", 4.25, "4.25bpw"), ("8_0", 8.0, "8.0bpw"), ("3_75", 3.75, "3.75bpw"),
    ("2.5", 2.5, "2.5bpw"), ("4.0bpw", 4.0, "4.0bpw"), ("6_5bpw-h8", 6.5, "6.5bpw"),
])
def test_bare_numbers_are_bit_rates_where_the_repo_is_exl(name, bpw, quant):
    info = exl_quant_of(name, "exl2", bare_numbers=True)
    assert (info.format, info.bits_per_weight, info.quant) == ("exl2", bpw, quant)


@pytest.mark.parametrize("name", ["main", "dev", "v1_0", "6", "65", "6_5_1", "6-5", "fp16", "Q4_0", "6_5x", "123_4"])
def test_other_names_are_never_bit_rates(name):
    assert exl_quant_of(name, "exl2", bare_numbers=True) is None
    assert not is_bare_bit_rate(name)


def test_bare_numbers_need_the_repo_known_as_exl():
    assert exl_quant_of("6_5", "exl2") is None  # bare_numbers off: a bare number alone could be a version
    assert exl_quant_of("4.0bpw", "exl2").bits_per_weight == 4.0  # a name that says bpw needs no such knowledge
    names = ["main", "8_0", "4_25", "6_5", "notes", "4.0bpw"]
    assert list(exl_branches("bartowski/M-exl2", names, "exl2", bare_numbers=True)) == ["4.0bpw", "4_25", "6_5",
                                                                                       "8_0"]
    assert list(exl_branches("acme/M-GGUF", names)) == ["4.0bpw"]


@pytest.mark.parametrize("repo, tags, files, fmt", [
    ("bartowski/Llama-3-8B-exl2", None, ["README.md"], "exl2"),
    ("turboderp/Qwen3-8B-exl3", None, [], "exl3"),
    ("Someone/EXL2_quants-Mistral", None, [], "exl2"),
    ("acme/Model", ["exl3", "text-generation"], [], "exl3"),
    ("acme/Model", None, ["README.md", "measurement.json"], "exl2"),  # exllamav2's measurement, kept on main
    ("acme/Model-GGUF", ["gguf"], ["Model-Q4_K_M.gguf"], ""),
    ("acme/flexl2-Model", None, ["sub/measurement.json"], ""),  # "exl2" inside a word; measurement not on top
    ("acme/Model-exl25", None, [], ""),
])
def test_exl_format_hint(repo, tags, files, fmt):
    assert exl_format_hint(repo, tags, files) == fmt
