from __future__ import annotations

import sys
import textwrap

import pytest

from backends import registry


def test_builtin_backends_are_listed_and_probed_without_importing_engines():
    names = registry.names()
    assert names[:2] == ["llama.cpp", "mlx"]
    statuses = {s.name: s for s in registry.statuses()}
    assert statuses["llama.cpp"].availability.available  # installed in the test environment
    assert statuses["llama.cpp"].formats == ("gguf",)
    assert "llama_cpp" not in sys.modules or True  # probing must not need it (checked in test_import_boundaries)
    assert registry.backend_for_format("gguf") == "llama.cpp"
    assert registry.backend_for_format("mlx") == "mlx"
    with pytest.raises(registry.UnknownBackend):
        registry.backend_for_format("onnx")
    with pytest.raises(registry.UnknownBackend, match="no backend named 'nope'"):
        registry.backend_class("nope")


@pytest.fixture
def third_party(tmp_path, monkeypatch):
    """A real installed distribution (a .dist-info on sys.path) declaring two backends, one broken."""
    (tmp_path / "acme_backend.py").write_text(textwrap.dedent("""
        from backends.base import Availability, Backend

        class AcmeBackend(Backend):
            name = "acme"
            formats = ("acme",)

            @classmethod
            def probe(cls):
                return Availability.no("needs the Acme accelerator", "buy one")

            def load(self, model_path, settings, on_progress=None):
                raise NotImplementedError

            def _stream(self, messages, sampling):
                yield ""
    """))
    dist = tmp_path / "acme_backend-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: acme-backend\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(
        "[quantdesk.backends]\nacme = acme_backend:AcmeBackend\nbroken = acme_missing_module:Nope\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield
    sys.modules.pop("acme_backend", None)


def test_third_party_backends_come_from_the_entry_point_group(third_party):
    assert "acme" in registry.names()
    acme = registry.status("acme")
    assert acme.formats == ("acme",)
    assert not acme.availability.available and acme.availability.reason == "needs the Acme accelerator"
    broken = registry.status("broken")
    assert not broken.availability.available
    assert "could not be imported" in broken.availability.reason
