"""Finding runtimes: the app environment's own, bundled ones and user-built ones, broken ones with the reason."""

import json

from app.runtimes import catalog
from tests.fixtures.runtimes import install_copy


def test_the_app_environments_llama_cpp_is_the_cpu_runtime():
    [runtime] = catalog.discover()
    assert (runtime.name, runtime.backend, runtime.origin) == ("cpu", "cpu", "environment")
    assert runtime.version == catalog.app_version() and runtime.site is None and runtime.host_env() == {}
    assert (runtime.lib_dir / "libllama.so").exists()


def test_a_user_built_runtime_is_found_with_its_manifest(environment_site):
    install_copy(environment_site, "vulkan", "vulkan")
    runtime = catalog.find("vulkan")
    assert (runtime.origin, runtime.backend, runtime.problem) == ("user", "vulkan", "")
    assert runtime.host_env() == {catalog.RUNTIME_PATH_VAR: str(catalog.user_dir() / "vulkan" / "site")}
    assert runtime.size_bytes() > 1 << 20 and runtime.removable


def test_bundled_runtimes_come_before_user_built_ones(environment_site, tmp_path, monkeypatch):
    bundle = tmp_path / "bundle"
    monkeypatch.setenv(catalog.BUNDLED_VAR, str(bundle))
    install_copy(environment_site, "vulkan", "vulkan")
    bundle.mkdir()
    (catalog.user_dir() / "vulkan").rename(bundle / "vulkan")  # as a packaged app carries it
    install_copy(environment_site, "vulkan", "vulkan")  # and a user-built one of the same name
    found = [(r.name, r.origin, r.problem) for r in catalog.discover()]
    assert found == [("cpu", "environment", ""), ("vulkan", "bundled", ""),
                     ("vulkan", "user", "its name is taken by the runtime bundled with the app")]
    assert not catalog.find("vulkan").removable


def test_a_broken_runtime_folder_says_what_is_wrong(environment_site):
    folder = install_copy(environment_site, "vulkan", "vulkan")
    (folder / catalog.MANIFEST).write_text("{")
    assert "runtime.json cannot be read" in catalog.find("vulkan").problem
    (folder / catalog.MANIFEST).write_text(json.dumps({"backend": "vulkan"}))
    (folder / "site" / "llama_cpp" / "__init__.py").unlink()
    assert catalog.find("vulkan").problem == f"{folder / 'site'} holds no llama_cpp package"


def test_a_runtime_of_another_llama_cpp_python_version_must_be_rebuilt(environment_site):
    folder = install_copy(environment_site, "vulkan", "vulkan")
    (folder / catalog.MANIFEST).write_text(json.dumps({"backend": "vulkan", "llama_cpp_python": "0.3.2"}))
    assert catalog.find("vulkan").problem == (f"it was built from llama-cpp-python 0.3.2 and the app uses "
                                              f"{catalog.app_version()}: rebuild it (quantdesk runtime build vulkan)")
