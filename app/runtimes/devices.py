"""The devices a runtime's ggml sees, asked in a child process.

The parent (``probe``) never loads a runtime's libraries: a runtime that crashes while it starts (a
missing driver, a deleted ``.so``) only ends the child, and the GUI process never imports llama_cpp.
The child (``python -m app.runtimes.devices LIB_DIR``, or ``quantdesk --runtime-devices LIB_DIR`` in a
packaged app) loads the runtime's own libggml / libllama with ctypes and prints one JSON object:
llama-cpp-python's bindings have no ``ggml_backend_dev_*`` functions, but libggml exports them.

Loading libllama too proves the runtime can start at all, which is how a pinned runtime that cannot
start is caught before a model is sent to it.

Vulkan: ggml-vulkan skips devices of type CPU (Mesa's lavapipe "llvmpipe", SwiftShader) unless
``GGML_VK_VISIBLE_DEVICES`` names them, and ggml reports the device type only as GPU or integrated GPU.
So for a Vulkan runtime the child also asks the Vulkan loader itself for each physical device's type
and PCI vendor: a CPU-type device is marked ``software`` and is never chosen as "the GPU"
(app/runtimes/choose.py) unless the test-only ``QUANTDESK_TEST_SOFTWARE_VULKAN=1`` is set, in which
case the child (and the engine host, through ``Probe.env``) makes ggml see every Vulkan device.
"""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from app.datatypes import Device
from app.records import from_known
from app.runtimes import cpu_variants

SOFTWARE_VULKAN_VAR = "QUANTDESK_TEST_SOFTWARE_VULKAN"  # tests and CI only: lavapipe counts as a GPU
VISIBLE_VAR = "GGML_VK_VISIBLE_DEVICES"
PROBE_TIMEOUT_S = 60.0  # a first Vulkan start can compile its pipeline cache

DEVICE_TYPES = {0: "cpu", 1: "gpu", 2: "igpu", 3: "accel", 4: "meta"}  # enum ggml_backend_dev_type
PCI_VENDORS = {0x10DE: "nvidia", 0x1002: "amd", 0x1022: "amd", 0x8086: "intel", 0x106B: "apple",
               0x5143: "qualcomm", 0x13B5: "arm"}
# Vulkan's VkPhysicalDeviceType: 0 other, 1 integrated, 2 discrete, 3 virtual, 4 CPU.
VK_TYPE_CPU = 4


@dataclass(frozen=True)
class Probe:
    """What a runtime showed when it was started in a child: its devices, or why it could not start."""

    devices: tuple[Device, ...] = ()
    error: str = ""  # empty: the runtime started
    env: dict[str, str] = field(default_factory=dict)  # what an engine host of this runtime needs set too
    cpu_variant: str = ""  # a portable runtime's CPU variant chosen for this CPU (app/runtimes/cpu_variants.py)

    @property
    def ok(self) -> bool:
        return not self.error

    def gpus(self, allow_software: bool | None = None) -> list[Device]:
        """The GPUs this runtime can offload to; software (CPU-type) ones only where tests ask for them."""
        allow = software_vulkan_allowed() if allow_software is None else allow_software
        return [d for d in self.devices if d.is_gpu and (allow or not d.software)]

    def to_dict(self) -> dict[str, Any]:
        return {"devices": [asdict(d) for d in self.devices], "error": self.error, "env": dict(self.env),
                "cpu_variant": self.cpu_variant}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Probe:
        # A newer probe's extra figures are left out, not fatal.
        return cls(tuple(from_known(Device, d) for d in data.get("devices", [])),
                   str(data.get("error", "")), {str(k): str(v) for k, v in (data.get("env") or {}).items()},
                   str(data.get("cpu_variant") or ""))


def software_vulkan_allowed() -> bool:
    return os.environ.get(SOFTWARE_VULKAN_VAR) == "1"


def child_command(lib_dir: Path) -> list[str]:
    if getattr(sys, "frozen", False):  # a PyInstaller build: the app binary answers (app/cli.py)
        return [sys.executable, "--runtime-devices", str(lib_dir)]
    return [sys.executable, "-m", "app.runtimes.devices", str(lib_dir)]


def probe(lib_dir: Path, timeout_s: float = PROBE_TIMEOUT_S) -> Probe:
    """Start a runtime (its llama_cpp/lib folder) in a child process and list the devices it sees."""
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH", "")) if p)
    try:
        done = subprocess.run(child_command(lib_dir), capture_output=True, text=True, timeout=timeout_s, env=env,
                              stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return Probe(error=f"it did not start within {timeout_s:g} s")
    except OSError as exc:
        return Probe(error=f"its probe could not run: {exc}")
    try:
        answer = json.loads(done.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        last = next((ln.strip() for ln in reversed(done.stderr.splitlines()) if ln.strip()), "")
        why = f"exit code {done.returncode}" if done.returncode >= 0 else f"signal {-done.returncode}"
        return Probe(error=f"it crashed while starting ({why})" + (f": {last}" if last else ""))
    try:
        return Probe.from_dict(answer)
    except (TypeError, AttributeError) as exc:
        return Probe(error=f"its probe answered in a form this QuantDesk does not read ({exc})")


# --------------------------------------------------------------------------------------------- the child

def _library(lib_dir: Path, base: str) -> Path:
    """A ggml/llama library in ``lib_dir`` by base name, named as llama-cpp-python names them."""
    names = {"win32": [f"{base}.dll", f"lib{base}.dll"], "darwin": [f"lib{base}.dylib", f"lib{base}.so"]}
    for name in names.get(sys.platform, [f"lib{base}.so"]):
        if (lib_dir / name).exists():
            return lib_dir / name
    raise OSError(f"{lib_dir / names.get(sys.platform, [f'lib{base}.so'])[0]} is missing")


class _VkInstanceCreateInfo(ctypes.Structure):
    _fields_ = [("sType", ctypes.c_int), ("pNext", ctypes.c_void_p), ("flags", ctypes.c_uint32),
                ("pApplicationInfo", ctypes.c_void_p), ("enabledLayerCount", ctypes.c_uint32),
                ("ppEnabledLayerNames", ctypes.c_void_p), ("enabledExtensionCount", ctypes.c_uint32),
                ("ppEnabledExtensionNames", ctypes.c_void_p)]


def vulkan_physical_devices() -> list[tuple[str, int, int, int | None]]:
    """(name, VkPhysicalDeviceType, PCI vendor id, max tensor bytes) of every Vulkan device, in the
    loader's order (the indices GGML_VK_VISIBLE_DEVICES takes). Raises OSError without a Vulkan loader."""
    loader = {"win32": "vulkan-1.dll", "darwin": "libvulkan.1.dylib"}.get(sys.platform, "libvulkan.so.1")
    vk = ctypes.CDLL(loader)
    info = _VkInstanceCreateInfo(sType=1)  # VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO
    instance = ctypes.c_void_p()
    if vk.vkCreateInstance(ctypes.byref(info), None, ctypes.byref(instance)) != 0:
        raise OSError("the Vulkan loader could not create an instance (no Vulkan driver?)")
    try:
        count = ctypes.c_uint32()
        vk.vkEnumeratePhysicalDevices(instance, ctypes.byref(count), None)
        handles = (ctypes.c_void_p * count.value)()
        vk.vkEnumeratePhysicalDevices(instance, ctypes.byref(count), handles)
        found = []
        for handle in handles[:count.value]:
            # VkPhysicalDeviceProperties: apiVersion, driverVersion, vendorID, deviceID (uint32 each),
            # deviceType (int32) at byte 16, deviceName[256] at byte 20, pipelineCacheUUID[16], then
            # VkPhysicalDeviceLimits at byte 296 (8-aligned), whose maxStorageBufferRange is its 8th
            # uint32 (byte 296 + 28).
            props = ctypes.create_string_buffer(4096)
            vk.vkGetPhysicalDeviceProperties(ctypes.c_void_p(handle), props)
            vendor = int.from_bytes(props.raw[8:12], "little")
            kind = int.from_bytes(props.raw[16:20], "little")
            name = props.raw[20:276].split(b"\0", 1)[0].decode("utf-8", "replace")
            storage_range = int.from_bytes(props.raw[324:328], "little")
            # ggml-vulkan lifts that limit where the device indexes with 64 bits (VK_EXT_shader_64bit_indexing).
            limit = None if "VK_EXT_shader_64bit_indexing" in _extensions(vk, handle) else storage_range
            found.append((name, kind, vendor, limit))
        return found
    finally:
        vk.vkDestroyInstance(instance, None)


def _extensions(vk: ctypes.CDLL, handle: int | None) -> set[str]:
    """The device extensions' names (VkExtensionProperties: extensionName[256], specVersion)."""
    count = ctypes.c_uint32()
    vk.vkEnumerateDeviceExtensionProperties(ctypes.c_void_p(handle), None, ctypes.byref(count), None)
    raw = ctypes.create_string_buffer(260 * count.value)
    vk.vkEnumerateDeviceExtensionProperties(ctypes.c_void_p(handle), None, ctypes.byref(count), raw)
    return {raw.raw[i * 260:i * 260 + 256].split(b"\0", 1)[0].decode("ascii", "replace") for i in range(count.value)}


def _list_devices(lib_dir: Path) -> dict[str, Any]:
    env: dict[str, str] = {}
    vulkan: list[tuple[str, int, int, int | None]] = []
    if any(n.startswith(("libggml-vulkan", "ggml-vulkan")) for n in os.listdir(lib_dir)):
        try:
            vulkan = vulkan_physical_devices()
        except (OSError, AttributeError) as exc:
            print(f"quantdesk: Vulkan devices could not be listed: {exc}", file=sys.stderr)
        if software_vulkan_allowed() and vulkan and VISIBLE_VAR not in os.environ:
            env[VISIBLE_VAR] = ",".join(str(i) for i in range(len(vulkan)))
            os.environ.update(env)  # read by ggml-vulkan when it initialises, below
    mode = ctypes.RTLD_GLOBAL
    if sys.platform == "win32":
        os.add_dll_directory(str(lib_dir))
    ggml_base = ctypes.CDLL(str(_library(lib_dir, "ggml-base")), mode=mode)
    ggml = ctypes.CDLL(str(_library(lib_dir, "ggml")), mode=mode)
    ctypes.CDLL(str(_library(lib_dir, "llama")), mode=mode)  # the runtime must be able to start, not only list
    # A portable runtime's backends are modules of their own, loaded as the engine's load does.
    # (ggml and ggml-base were opened first, by path: libllama's dependencies are these same copies.)
    cpu_variant = cpu_variants.load_backends([ggml, ggml_base], lib_dir, os.environ.get(cpu_variants.CPU_VARIANT_VAR))

    log_type = ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p)
    quiet = log_type(lambda _level, _text, _data: None)  # ggml's chatter would bury the answer
    ggml_base.ggml_log_set(quiet, None)
    ggml.ggml_backend_dev_count.restype = ctypes.c_size_t
    ggml.ggml_backend_dev_get.restype = ctypes.c_void_p
    ggml.ggml_backend_dev_get.argtypes = [ctypes.c_size_t]
    for fn in (ggml_base.ggml_backend_dev_name, ggml_base.ggml_backend_dev_description):
        fn.restype, fn.argtypes = ctypes.c_char_p, [ctypes.c_void_p]
    ggml_base.ggml_backend_dev_type.restype = ctypes.c_int
    ggml_base.ggml_backend_dev_type.argtypes = [ctypes.c_void_p]
    ggml_base.ggml_backend_dev_memory.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_size_t),
                                                  ctypes.POINTER(ctypes.c_size_t)]
    for fn in (ggml_base.ggml_backend_dev_buffer_type, ggml_base.ggml_backend_dev_host_buffer_type):
        fn.restype, fn.argtypes = ctypes.c_void_p, [ctypes.c_void_p]
    ggml_base.ggml_backend_buft_get_max_size.restype = ctypes.c_size_t
    ggml_base.ggml_backend_buft_get_max_size.argtypes = [ctypes.c_void_p]

    def max_size(buft: int | None) -> int | None:
        size = ggml_base.ggml_backend_buft_get_max_size(buft) if buft else None
        return size if size is not None and size < 1 << 62 else None  # SIZE_MAX: no limit
    kinds = {name: (kind, vendor, limit) for name, kind, vendor, limit in vulkan}
    devices = []
    for i in range(ggml.ggml_backend_dev_count()):
        dev = ggml.ggml_backend_dev_get(i)
        name = ggml_base.ggml_backend_dev_name(dev).decode("utf-8", "replace")
        description = ggml_base.ggml_backend_dev_description(dev).decode("utf-8", "replace")
        free, total = ctypes.c_size_t(), ctypes.c_size_t()
        ggml_base.ggml_backend_dev_memory(dev, ctypes.byref(free), ctypes.byref(total))
        kind = DEVICE_TYPES.get(ggml_base.ggml_backend_dev_type(dev), "other")
        software = False
        vendor = ""
        limit = None
        if name.startswith("Vulkan") and description in kinds:
            vk_type, pci_vendor, limit = kinds[description]
            software = vk_type == VK_TYPE_CPU
            vendor = "software" if software else PCI_VENDORS.get(pci_vendor, "")
        elif name.startswith("CUDA"):
            vendor = "nvidia"
        elif name.startswith(("ROCm", "HIP")):
            vendor = "amd"
        elif name.startswith(("Metal", "MTL")):
            vendor = "apple"
        devices.append(asdict(Device(name, description, kind, int(total.value), int(free.value), vendor, software,
                                     limit, max_size(ggml_base.ggml_backend_dev_buffer_type(dev)),
                                     max_size(ggml_base.ggml_backend_dev_host_buffer_type(dev)))))
    return {"devices": devices, "error": "", "env": env, "cpu_variant": cpu_variant}


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m app.runtimes.devices LIB_DIR", file=sys.stderr)
        return 2
    try:
        answer = _list_devices(Path(args[0]))
    except OSError as exc:  # a library that cannot be loaded: the runtime cannot start
        answer = {"devices": [], "error": str(exc).strip(), "env": {}}
    sys.stdout.write(json.dumps(answer) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
