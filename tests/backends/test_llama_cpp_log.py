"""llama.cpp's load log read into devices, layers and buffers (backends/llama_cpp/log.py).

The log is a real one: llama-cpp-python 0.3.36's Vulkan runtime loading the tiny test model with
n_gpu_layers=2 on Mesa's lavapipe (the debug lines included, as the engine host captures them)."""

from backends.llama_cpp.log import parse

MiB = 1 << 20
VULKAN_PARTIAL = """\
ggml_vulkan: Found 1 Vulkan devices:
ggml_vulkan: 0 = llvmpipe (LLVM 15.0.6, 256 bits) (llvmpipe) | uma: 0 | fp16: 1 | bf16: 0 | fp4: 0 | warp size: 8 | shared memory: 32768 | int dot: 0 | matrix cores: none
ggml_vulkan: Warning: Device type is CPU. This is probably not the device you want.
llama_prepare_model_devices: using device Vulkan0 (llvmpipe (LLVM 15.0.6, 256 bits)) (unknown id) - 2048 MiB free
load_tensors: layer   0 assigned to device CPU, is_swa = 0
load_tensors: layer   1 assigned to device Vulkan0, is_swa = 0
load_tensors: layer   2 assigned to device Vulkan0, is_swa = 0
load_tensors: offloading output layer to GPU
load_tensors: offloading 1 repeating layers to GPU
load_tensors: offloaded 2/3 layers to GPU
load_tensors:   CPU_Mapped model buffer size =     0.56 MiB
load_tensors:      Vulkan0 model buffer size =     0.69 MiB
llama_context: Vulkan_Host  output buffer size =     0.00 MiB
llama_kv_cache:        CPU KV buffer size =     0.25 MiB
llama_kv_cache:    Vulkan0 KV buffer size =     0.25 MiB
sched_reserve:    Vulkan0 compute buffer size =     7.54 MiB
sched_reserve: Vulkan_Host compute buffer size =     2.51 MiB
~llama_context:    Vulkan0 compute buffer size is   7.5371 MiB, matches expectation of   7.5371 MiB
~llama_context: Vulkan_Host compute buffer size is   2.5098 MiB, matches expectation of   2.5098 MiB
"""
CPU_ONLY = """\
load_tensors: layer   0 assigned to device CPU, is_swa = 0
load_tensors: layer   1 assigned to device CPU, is_swa = 0
load_tensors: layer   2 assigned to device CPU, is_swa = 0
load_tensors:   CPU_Mapped model buffer size =     1.15 MiB
load_tensors:   CPU_REPACK model buffer size =     0.72 MiB
llama_context:        CPU  output buffer size =     0.00 MiB
llama_kv_cache:        CPU KV buffer size =     0.50 MiB
sched_reserve:        CPU compute buffer size =     8.01 MiB
"""


def test_a_partial_vulkan_load_splits_into_the_gpu_and_host_memory():
    log = parse(VULKAN_PARTIAL)
    assert log.offloaded == (2, 3)
    assert log.devices == {"Vulkan0": ("llvmpipe (LLVM 15.0.6, 256 bits)", 2048 * MiB)}
    gpu, host = log.device_loads(n_layer=2)
    assert (gpu.name, gpu.description, gpu.layers, gpu.free_bytes_before) == \
        ("Vulkan0", "llvmpipe (LLVM 15.0.6, 256 bits)", 1, 2048 * MiB)
    assert (gpu.model_bytes, gpu.kv_bytes, gpu.compute_bytes) == \
        (round(0.69 * MiB), round(0.25 * MiB), round(7.54 * MiB))
    # Vulkan_Host is pinned host memory: it counts for the CPU side, with CPU_Mapped and the CPU cache.
    assert (host.name, host.layers) == ("CPU", 1)
    assert (host.model_bytes, host.kv_bytes, host.compute_bytes, host.output_bytes) == \
        (round(0.56 * MiB), round(0.25 * MiB), round(2.51 * MiB), 0)


def test_the_teardown_lines_are_not_counted_twice():
    log = parse(VULKAN_PARTIAL)
    assert log.buffers["Vulkan0"]["compute"] == round(7.54 * MiB)


def test_a_cpu_only_load_adds_the_repacked_copy_to_the_host():
    log = parse(CPU_ONLY)
    assert log.offloaded is None and log.devices == {}
    [host] = log.device_loads(n_layer=2)
    assert (host.name, host.layers, host.model_bytes) == ("CPU", 2, round(1.15 * MiB) + round(0.72 * MiB))
    assert host.total_bytes == round(1.15 * MiB) + round(0.72 * MiB) + round(0.5 * MiB) + round(8.01 * MiB)
