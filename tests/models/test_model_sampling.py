"""A model's recommended sampling (GGUF general.sampling.*, generation_config.json) read into ModelSampling, bounded,
and the one rule that applies it (app.datatypes.choose_sampling): the user's value, then the model's, then
QuantDesk's."""

from __future__ import annotations

import json
import math

from hypothesis import given
from hypothesis import strategies as st

from app.datatypes import ModelSampling, SamplingSettings, choose_sampling
from app.models.metadata import model_sampling, read_model
from app.models.metadata.sampling import (GENERATION_CONFIG, GENERATION_CONFIG_KEYS, GGUF_SAMPLING_KEYS,
                                          sampling_from_generation_config, sampling_from_gguf)


def test_a_gguf_with_general_sampling_keys_recommends_its_values(tiny_sampling_model):
    expected = {"temperature": 0.6, "top_p": 0.9, "top_k": 20, "min_p": 0.0, "repeat_penalty": 1.05}
    assert model_sampling(tiny_sampling_model).values() == expected  # float32 in the file, read as written
    meta = read_model(tiny_sampling_model)
    assert meta.sampling.values() == expected and meta.sampling.origin == "general.sampling.*"
    assert meta.summary()["recommended_sampling"] == expected
    chosen = choose_sampling({}, meta.sampling)
    assert chosen.settings.temperature == 0.6 and chosen.settings.top_k == 20
    assert set(chosen.sources.values()) == {"model"}


def test_a_gguf_without_them_recommends_nothing(tiny_models):
    assert model_sampling(tiny_models.gguf_f16) == ModelSampling()
    assert read_model(tiny_models.gguf_f16).summary()["recommended_sampling"] is None


def _header_only_gguf(path, values) -> None:
    """A GGUF with no tensors and the given general.sampling.* keys, each written in the type given."""
    import gguf

    writer = gguf.GGUFWriter(str(path), "llama")
    for name, (kind, value) in values.items():
        getattr(writer, f"add_{kind}")(f"general.sampling.{name}", value)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def test_bad_values_are_ignored_with_a_reason_never_an_error(tmp_path):
    path = tmp_path / "odd.gguf"
    _header_only_gguf(path, {"temp": ("string", "hot"), "top_p": ("float32", 5.0), "top_k": ("int32", -3),
                             "min_p": ("float32", math.nan), "penalty_repeat": ("float32", 0.0)})
    sampling = model_sampling(path)
    assert sampling.values() == {} and sampling.origin == ""
    reasons = " | ".join(sampling.ignored)
    for key in ("temp", "top_p", "top_k", "min_p", "penalty_repeat"):
        assert f"general.sampling.{key}" in reasons
    assert "'hot'" in reasons and "expected a number from 0 to 1" in reasons
    # The good ones of a mixed header still count.
    mixed = tmp_path / "mixed.gguf"
    _header_only_gguf(mixed, {"temp": ("float32", 0.7), "top_p": ("float32", -1.0), "top_k": ("uint32", 64)})
    sampling = model_sampling(mixed)
    assert sampling.values() == {"temperature": 0.7, "top_k": 64} and len(sampling.ignored) == 1
    chosen = choose_sampling({}, sampling)
    assert chosen.sources["top_p"] == "default" and chosen.settings.top_p == SamplingSettings().top_p
    chosen.settings.validate()


def test_a_model_folder_recommends_its_generation_config(tmp_path):
    folder = tmp_path / "Qwen3-0.6B-4bit"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    (folder / GENERATION_CONFIG).write_text(json.dumps(
        {"do_sample": True, "temperature": 0.6, "top_p": 0.95, "top_k": 20, "repetition_penalty": 1.0,
         "eos_token_id": [151645, 151643], "transformers_version": "4.51.0"}))
    sampling = model_sampling(folder)
    assert sampling.values() == {"temperature": 0.6, "top_p": 0.95, "top_k": 20, "repeat_penalty": 1.0}
    assert sampling.origin == GENERATION_CONFIG
    chosen = choose_sampling({}, sampling)
    assert chosen.sources["min_p"] == "default" and chosen.sources["temperature"] == "model"
    # transformers' do_sample false is greedy decoding: temperature 0, whatever else it says.
    (folder / GENERATION_CONFIG).write_text(json.dumps({"do_sample": False, "temperature": 0.9}))
    assert model_sampling(folder).values() == {"temperature": 0.0}
    # Bad values and a broken file: left out with a reason.
    (folder / GENERATION_CONFIG).write_text(json.dumps({"temperature": "warm", "top_k": 1.5, "top_p": 10**400}))
    sampling = model_sampling(folder)
    assert sampling.values() == {} and len(sampling.ignored) == 3
    (folder / GENERATION_CONFIG).write_text("{not json")
    sampling = model_sampling(folder)
    assert sampling.values() == {} and "not valid JSON" in sampling.ignored[0]


def test_a_folder_without_generation_config_and_a_missing_model_recommend_nothing(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    assert model_sampling(tmp_path) == ModelSampling()
    assert model_sampling(tmp_path / "gone.gguf") == ModelSampling()
    assert model_sampling(None) == ModelSampling()
    assert model_sampling("remote:lan/some-model") == ModelSampling()


def test_the_users_value_wins_then_the_models_then_quantdesks():
    model = ModelSampling(temperature=0.6, top_p=0.9, origin="general.sampling.*")
    chosen = choose_sampling({"temperature": 1.2, "top_k": None, "max_tokens": 64, "seed": None}, model)
    assert chosen.settings.temperature == 1.2 and chosen.sources["temperature"] == "user"
    assert chosen.settings.top_p == 0.9 and chosen.sources["top_p"] == "model"
    assert chosen.settings.top_k == SamplingSettings().top_k and chosen.sources["top_k"] == "default"  # None: unset
    assert chosen.settings.max_tokens == 64 and chosen.settings.seed is None
    assert chosen.described()["top_p"] == {"value": 0.9, "source": "model"}
    assert choose_sampling({}, None).settings == SamplingSettings()


# Whatever a header or a config holds under the keys read: numbers of every size and sign, NaN and infinities,
# booleans, strings, lists, objects.
ANY_VALUE = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True, allow_infinity=True),
                      st.text(max_size=20), st.lists(st.integers(), max_size=3), st.dictionaries(st.text(), st.integers()))


@given(gguf=st.dictionaries(st.sampled_from(sorted(GGUF_SAMPLING_KEYS)), ANY_VALUE),
       config=st.dictionaries(st.sampled_from([*GENERATION_CONFIG_KEYS, "do_sample"]), ANY_VALUE))
def test_any_value_is_read_in_bounds_or_left_out_with_a_reason(gguf, config):
    for sampling, given_keys in ((sampling_from_gguf(gguf), gguf), (sampling_from_generation_config(config), config)):
        choose_sampling({}, sampling).settings.validate()  # what is kept, an engine takes
        if config is given_keys and config.get("do_sample") is False:
            continue
        kept_or_told = len(sampling.values()) + len(sampling.ignored)
        assert kept_or_told == sum(value is not None for key, value in given_keys.items() if key != "do_sample")
