"""Runtime pins: per model and for every model, kept atomically; an unreadable file means "automatic"."""

from app.runtimes import pins


def test_a_model_pin_wins_over_the_global_one(tmp_path):
    model = tmp_path / "m.gguf"
    pins.pin("vulkan")
    pins.pin("cpu", model)
    loaded = pins.load()
    assert loaded.for_model(model) == ("cpu", "for this model")
    assert loaded.for_model(tmp_path / "other.gguf") == ("vulkan", "for every model")
    assert loaded.for_model(None) == ("vulkan", "for every model")


def test_auto_removes_a_pin(tmp_path):
    model = tmp_path / "m.gguf"
    pins.pin("cpu", model)
    pins.pin("vulkan")
    pins.pin("auto", model)
    pins.pin("auto")
    assert pins.load().for_model(model) is None


def test_forgetting_a_removed_runtime_drops_its_pins(tmp_path):
    pins.pin("vulkan")
    pins.pin("vulkan", tmp_path / "a.gguf")
    pins.pin("cpu", tmp_path / "b.gguf")
    pins.forget("vulkan")
    loaded = pins.load()
    assert loaded.default is None and list(loaded.models.values()) == ["cpu"]


def test_an_unreadable_pins_file_means_the_automatic_choice():
    path = pins.pins_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("{not json", encoding="utf-8")
    loaded = pins.load()
    assert loaded.for_model(None) is None
    assert "cannot be read" in loaded.problem and "automatic choice" in loaded.problem
    pins.pin("cpu")  # the next pin replaces it
    assert pins.load().default == "cpu"
