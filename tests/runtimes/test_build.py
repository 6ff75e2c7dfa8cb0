"""Building a runtime: a sentence for every missing prerequisite, the CMake flags for what was found, the
step counter, offline, and the install / check / rename steps after the compile.

The compile itself (13+ minutes for Vulkan) runs in CI through `quantdesk runtime build vulkan` (.ci/run);
the Vulkan tests in test_vulkan.py use what it built."""

from __future__ import annotations

import hashlib
import json
import os
import stat
import zipfile
from pathlib import Path

import pytest

from app.runtimes import build, catalog, pins
from app.runtimes.build import BuildError, Tools

# The lines of Debian 12's libvulkan-dev 1.3.239 vulkan_core.h and Debian 13's 1.4.309 that the check
# reads (version defines; the newer one declares VK_EXT_layer_settings).
OLD_HEADER = ("#define VK_HEADER_VERSION 239\n"
              "#define VK_HEADER_VERSION_COMPLETE VK_MAKE_API_VERSION(0, 1, 3, VK_HEADER_VERSION)\n")
NEW_HEADER = ("#define VK_HEADER_VERSION 309\n"
              "#define VK_HEADER_VERSION_COMPLETE VK_MAKE_API_VERSION(0, 1, 4, VK_HEADER_VERSION)\n"
              "#define VK_EXT_layer_settings 1\n")
# llama.cpp's own releases' configuration (issue 36): no instruction of the build machine's CPU, every backend a
# module, the CPU one in one variant per instruction-set level, installed beside libggml.
PORTABLE = ["-DGGML_NATIVE=OFF", "-DGGML_BACKEND_DL=ON", "-DGGML_CPU_ALL_VARIANTS=ON",
            "-DCMAKE_INSTALL_BINDIR=llama_cpp/lib"]


def nothing_here(tmp_path: Path, **changes) -> Tools:
    empty = str(tmp_path / "empty")
    return Tools(**{"which": lambda name: None, "include_dirs": (empty,), "lib_dirs": (empty,),
                    "cmake_dirs": (empty,), "toolkit_dirs": (empty,), "env": {}, "platform": "linux", **changes})


def executable(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def sdk(root: Path, header: str) -> Path:
    """A Vulkan SDK-like prefix: headers, the loader, glslc, SPIRV-Headers with their CMake config."""
    for rel, text in [("include/vulkan/vulkan_core.h", header), ("include/vulkan/vulkan.hpp", "// C++\n"),
                      ("include/spirv/unified1/spirv.hpp", "// spirv\n"), ("lib/libvulkan.so.1", ""),
                      ("share/cmake/SPIRV-Headers/SPIRV-HeadersConfig.cmake", "# config\n")]:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    executable(root / "bin" / "glslc", "#!/bin/sh\n")
    return root


def compiler_and_cmake(tmp_path: Path, cmake_version: str = "3.25.1"):
    tools = {"c++": executable(tmp_path / "bin" / "c++", "#!/bin/sh\n"),
             "cmake": executable(tmp_path / "bin" / "cmake", f"#!/bin/sh\necho 'cmake version {cmake_version}'\n")}
    return lambda name: str(tools[name]) if name in tools else None


def test_every_missing_prerequisite_gets_its_own_sentence(tmp_path):
    plan = build.plan_build("vulkan", tools=nothing_here(tmp_path), version="0.3.36")
    assert [m.split(":")[0] for m in plan.missing] == [
        "No C++ compiler was found", "CMake is missing", "The Vulkan headers are missing (vulkan/vulkan_core.h)",
        "The Vulkan loader is missing", "The shader compiler glslc is missing", "SPIRV-Headers are missing"]
    assert "sudo apt install build-essential" in plan.missing[0]
    assert "--vulkan-sdk DIR or set VULKAN_SDK" in plan.missing[2]


def test_vulkan_headers_too_old_for_llama_cpp_are_refused(tmp_path):
    root = sdk(tmp_path / "sdk", OLD_HEADER)
    plan = build.plan_build("vulkan", vulkan_sdk=str(root), version="0.3.36",
                            tools=nothing_here(tmp_path, which=compiler_and_cmake(tmp_path)))
    [missing] = plan.missing
    assert missing.startswith(f"The Vulkan headers in {root / 'include'} (1.3.239) are too old for llama.cpp's "
                              "Vulkan backend (it needs VK_EXT_layer_settings, in 1.3.272 and newer)")


def test_what_was_found_becomes_the_cmake_flags(tmp_path):
    root = sdk(tmp_path / "sdk", NEW_HEADER)
    plan = build.plan_build("vulkan", vulkan_sdk=str(root), version="0.3.36", jobs=2,
                            tools=nothing_here(tmp_path, which=compiler_and_cmake(tmp_path)))
    assert plan.missing == []
    assert plan.cmake_args == [
        *PORTABLE, "-DGGML_VULKAN=on", f"-DVulkan_INCLUDE_DIR={root / 'include'}",
        f"-DVulkan_LIBRARY={root / 'lib/libvulkan.so.1'}",
        f"-DVulkan_GLSLC_EXECUTABLE={root / 'bin/glslc'}",
        f"-DSPIRV-Headers_DIR={root / 'share/cmake/SPIRV-Headers'}"]
    assert plan.estimate_text() == "a first build takes 12 min here (2 cores)"


def test_spirv_headers_outside_the_vulkan_include_folder_are_named_to_the_compiler(tmp_path):
    root = sdk(tmp_path / "sdk", NEW_HEADER)
    elsewhere = tmp_path / "spirv-prefix"  # as Debian's spirv-headers unpacked apart from newer Vulkan headers
    (elsewhere / "include").mkdir(parents=True)
    (root / "include" / "spirv").rename(elsewhere / "include" / "spirv")
    (root / "share").rename(elsewhere / "share")
    tools = nothing_here(tmp_path, which=compiler_and_cmake(tmp_path), include_dirs=(str(elsewhere / "include"),),
                         cmake_dirs=(str(elsewhere / "share" / "cmake"),))
    plan = build.plan_build("vulkan", vulkan_sdk=str(root), version="0.3.36", tools=tools)
    assert plan.missing == []
    assert plan.cmake_args[-1] == f"-DCMAKE_CXX_FLAGS=-isystem {elsewhere / 'include'}"


@pytest.mark.parametrize("backend", build.BUILDABLE)
@pytest.mark.parametrize("platform", ["linux", "win32"])
def test_every_runtime_is_built_for_every_cpu_of_its_platform(tmp_path, backend, platform):
    """No build carries the build machine's CPU: the CPU part of a GPU build is portable too."""
    plan = build.plan_build(backend, version="0.3.36", tools=nothing_here(tmp_path, platform=platform))
    assert plan.cmake_args == PORTABLE + build.BACKEND_FLAGS[backend]  # nothing found here adds no other flag


def test_a_macos_build_is_for_every_apple_silicon_mac(tmp_path):
    plan = build.plan_build("metal", version="0.3.36", tools=nothing_here(tmp_path, platform="darwin"))
    assert plan.cmake_args == ["-DGGML_NATIVE=OFF", "-DGGML_METAL=on"]


def test_a_wheel_kept_before_builds_were_portable_is_compiled_again(tmp_path, monkeypatch):
    """A wheel cached by a QuantDesk that built for the build machine's CPU, under the key it wrote then, is not
    taken for the portable build; the portable wheel kept afterwards is."""
    monkeypatch.setattr(build, "cache_root", lambda: tmp_path / "cache")
    source = tmp_path / "llama_cpp_python-0.3.36.tar.gz"
    source.write_bytes(b"the source archive")
    plan = build.plan_build("cpu", version="0.3.36", tools=nothing_here(tmp_path))
    old_wheel = tmp_path / "old" / "llama_cpp_python-0.3.36-py3-none-linux_x86_64.whl"
    old_wheel.parent.mkdir()
    old_wheel.write_bytes(b"a native wheel")
    folder = build._wheel_dir(plan)
    folder.mkdir(parents=True)
    (folder / old_wheel.name).write_bytes(old_wheel.read_bytes())
    old_key = hashlib.sha256(source.read_bytes())  # the key as it was written before issue 36
    old_key.update(json.dumps([plan.backend, build.BACKEND_FLAGS["cpu"], build.sys.platform]).encode())
    (folder / "key.txt").write_text(old_key.hexdigest()[:16] + "\n")
    with open(os.devnull, "w") as log:
        assert build._cached_wheel(plan, source, False, log) is None
        kept = build._keep_wheel(plan, source, old_wheel)
        assert build._cached_wheel(plan, source, False, log) == kept
        native = build.Plan("cpu", "0.3.36", plan.python, ["-DGGML_NATIVE=on"])  # other flags: another key
        assert build._cached_wheel(native, source, False, log) is None


def test_a_runtime_can_be_built_under_another_name_but_not_any_name():
    with pytest.raises(BuildError, match="the cpu runtime is already there"):
        build.build("cpu", name="cpu")
    with pytest.raises(BuildError, match="'../x' cannot name a runtime"):
        build.build("cpu", name="../x")


def test_an_old_cmake_is_named(tmp_path):
    plan = build.plan_build("cpu", version="0.3.36", tools=nothing_here(tmp_path, which=compiler_and_cmake(
        tmp_path, "3.18.4")))
    assert plan.missing == ["CMake 3.18.4 is too old: llama-cpp-python needs 3.21 or newer (pip install cmake gives "
                            "a current one)."]


@pytest.mark.parametrize("backend, words", [
    ("cuda", "nvcc (the CUDA toolkit) is missing: install CUDA 12"),
    ("rocm", "hipcc (ROCm) is missing: install ROCm 6"),
    ("metal", "The Metal runtime runs on macOS only."),
])
def test_gpu_toolkits(tmp_path, backend, words):
    plan = build.plan_build(backend, version="0.3.36", tools=nothing_here(tmp_path, which=compiler_and_cmake(tmp_path)))
    [missing] = plan.missing
    assert missing.startswith(words)


def test_nvcc_found_is_the_cuda_compiler(tmp_path):
    nvcc = executable(tmp_path / "cuda" / "bin" / "nvcc", "#!/bin/sh\n")
    plan = build.plan_build("cuda", version="0.3.36", tools=nothing_here(
        tmp_path, which=compiler_and_cmake(tmp_path), env={"CUDA_HOME": str(tmp_path / "cuda")}))
    assert plan.missing == [] and plan.cmake_args == [*PORTABLE, "-DGGML_CUDA=on", f"-DCMAKE_CUDA_COMPILER={nvcc}"]
    assert plan.estimate_text().startswith("a first build takes roughly")


def test_the_step_counter_of_ninja_and_make():
    # Lines from a real Vulkan build log of llama-cpp-python 0.3.36 (ninja), and make's format.
    assert build.parse_step("  [123/517] cd /tmp/b/vendor/llama.cpp/ggml/src/ggml-vulkan && vulkan-shaders-gen") \
        == (123, 517)
    assert build.parse_step("[ 45%] Building CXX object ggml/src/CMakeFiles/ggml-base.dir/ggml.c.o") == (45, 100)
    assert build.parse_step("  -- Found Vulkan: /usr/lib/x86_64-linux-gnu/libvulkan.so.1") is None


def test_the_time_left_follows_the_main_build_not_a_nested_one():
    # The order of counters in a real Vulkan build log: vulkan-shaders-gen's own ninja run ("[n/2]")
    # shows up before and among the main build's 517 steps.
    clock = build.StepClock(start=0.0)
    lines = [(10.0, "[0/2] Re-checking globbed directories..."), (70.0, "[1/2] Building CXX object vulkan-shaders-gen"),
             (100.0, "  [1/517] Building C object ggml-base.c.o"), (110.0, "[2/2] Linking CXX executable"),
             (200.0, "  [101/517] vulkan-shaders-gen --source mul_mm.comp")]
    seen = [clock.feed(line, now) for now, line in lines]
    assert [(p.step, p.total) if p else None for p in seen] == [(0, 2), (1, 2), (1, 517), None, (101, 517)]
    assert seen[-1].remaining_s == pytest.approx(416 / (100 / 100.0)) and seen[-1].elapsed_s == 200.0
    assert seen[2].remaining_s is None  # no rate yet at the main build's first step


def test_a_failed_build_names_the_compiler_error():
    # The tail of a real failed build: ggml-vulkan compiled without SPIRV-Headers on the include path.
    tail = ["  /tmp/pip-req-build/vendor/llama.cpp/ggml/src/ggml-vulkan/ggml-vulkan.cpp:396:33: error: ‘spv’ has "
            "not been declared", "    396 |         uint32_t wc   = word >> spv::WordCountShift;",
            "  ninja: build stopped: subcommand failed.", "  *** CMake build failed",
            "  error: subprocess-exited-with-error", "ERROR: Failed building wheel for llama_cpp_python"]
    assert build._failure_line(tail).endswith("ggml-vulkan.cpp:396:33: error: ‘spv’ has not been declared")


def test_offline_the_source_cannot_be_fetched_and_the_sentence_says_what_to_do(monkeypatch):
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/simple")  # nothing listens on the discard port
    monkeypatch.setenv("PIP_RETRIES", "0")
    monkeypatch.setenv("PIP_NO_CACHE_DIR", "1")
    plan = build.Plan("vulkan", "0.3.36", build.build_python(Tools()) or "")
    with open(os.devnull, "w") as log, pytest.raises(BuildError) as caught:
        build.fetch_sdist(plan, log)
    assert caught.value.message.startswith("the llama-cpp-python 0.3.36 source could not be downloaded")
    assert "are you offline? Connect, or give the source archive with --sdist FILE" in caught.value.hint


def wheel_of(site: Path, out: Path, version: str) -> Path:
    """A wheel of an installed llama_cpp package (what `pip wheel` makes of the sdist, without the compile)."""
    wheel = out / f"llama_cpp_python-{version}-py3-none-linux_x86_64.whl"
    dist = f"llama_cpp_python-{version}.dist-info"
    records = []
    with zipfile.ZipFile(wheel, "w") as zf:
        for path in sorted((site / "llama_cpp").rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                name = path.relative_to(site).as_posix()
                zf.write(path, name)
                digest = hashlib.sha256(path.read_bytes()).hexdigest()
                records.append(f"{name},sha256={digest},{path.stat().st_size}")
        zf.writestr(f"{dist}/METADATA", f"Metadata-Version: 2.1\nName: llama_cpp_python\nVersion: {version}\n")
        zf.writestr(f"{dist}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: false\n"
                                     "Tag: py3-none-linux_x86_64\n")
        zf.writestr(f"{dist}/RECORD", "\n".join(records + [f"{dist}/METADATA,,", f"{dist}/WHEEL,,",
                                                           f"{dist}/RECORD,,"]) + "\n")
    return wheel


def test_a_build_reusing_its_cached_wheel_installs_checks_and_renames_into_place(tmp_path, environment_site):
    """The steps after the compile, on a wheel of this environment's llama_cpp put where a first build keeps
    its wheel: installed into a temp folder, started in a child, given its manifest, renamed into place."""
    root = sdk(tmp_path / "sdk", NEW_HEADER)
    tools = Tools(which=compiler_and_cmake(tmp_path))
    version = catalog.app_version()
    source = tmp_path / f"llama_cpp_python-{version}.tar.gz"
    source.write_bytes(b"the source archive the wheel was built from")
    plan = build.plan_build("vulkan", vulkan_sdk=str(root), tools=tools)
    build._keep_wheel(plan, source, wheel_of(environment_site, tmp_path, version))
    seen = []
    runtime = build.build("vulkan", vulkan_sdk=str(root), sdist=str(source), tools=tools,
                          on_progress=lambda p: seen.append(p.phase))
    assert seen == ["fetching the source", "installing", "checking", "done"]  # no compile: the wheel was reused
    assert (runtime.name, runtime.origin, runtime.problem) == ("vulkan", "user", "")
    manifest = json.loads((catalog.user_dir() / "vulkan" / catalog.MANIFEST).read_text())
    assert manifest["cmake_args"] == " ".join(plan.cmake_args) and manifest["llama_cpp_python"] == version
    assert "reusing the wheel built before" in Path(manifest["log"]).read_text()
    assert [p.name for p in catalog.user_dir().iterdir()] in (["vulkan", ".logs"], [".logs", "vulkan"])
    assert (runtime.lib_dir / "libllama.so").is_file()


def test_remove_deletes_a_user_runtime_and_its_pins(environment_site):
    from tests.fixtures.runtimes import install_copy

    install_copy(environment_site, "vulkan", "vulkan")
    pins.pin("vulkan")
    build.remove("vulkan")
    assert catalog.find("vulkan") is None and pins.load().default is None
    with pytest.raises(BuildError, match="the cpu runtime is the app's own environment and cannot be removed"):
        build.remove("cpu")
    with pytest.raises(BuildError, match="there is no runtime named vulkan"):
        build.remove("vulkan")


def test_the_environments_runtime_is_not_built_again():
    with pytest.raises(BuildError, match="the cpu runtime is already there \\(the app's own environment\\)"):
        build.build("cpu")
