"""Memory bandwidth of chips whose driver does not report it, from the vendors' spec sheets (GB/s)."""

from __future__ import annotations

# Apple Silicon unified memory, by chip; a chip sold with fewer CPU cores and a narrower memory bus
# has its own entry keyed by (chip, performance+efficiency cores). Source: Apple's product pages /
# tech specs ("memory bandwidth") for each chip.
APPLE_BANDWIDTH_GBPS: dict[str, float] = {
    "M1": 68.25, "M1 Pro": 200, "M1 Max": 400, "M1 Ultra": 800,
    "M2": 100, "M2 Pro": 200, "M2 Max": 400, "M2 Ultra": 800,
    "M3": 100, "M3 Pro": 150, "M3 Max": 400, "M3 Ultra": 819,
    "M4": 120, "M4 Pro": 273, "M4 Max": 546,
    "M5": 153,
}
# The binned Max chips: M3 Max with a 14-core CPU has a 384-bit bus (300 GB/s), M4 Max 14-core 410 GB/s.
APPLE_BINNED_GBPS: dict[tuple[str, int], float] = {("M3 Max", 14): 300, ("M4 Max", 14): 410}

# AMD GPUs by PCI device id (sysfs ``device``). One id often covers several boards that differ in
# memory size (Navi 31 0x744c: 7900 XTX 24 GB, XT 20 GB, GRE 16 GB), so each variant carries its VRAM
# in GiB and the nearest one to the card's mem_info_vram_total is picked; APUs carry None (their
# carve-out is a BIOS setting). Entries: (VRAM GiB, name, GB/s, is an APU). Sources: AMD's product
# spec pages (bus width x effective memory speed) and the PCI ID database (pci-ids.ucw.cz).
AMD_DEVICES: dict[int, list[tuple[int | None, str, float | None, bool]]] = {
    0x744C: [(24, "Radeon RX 7900 XTX", 960, False), (20, "Radeon RX 7900 XT", 800, False),
             (16, "Radeon RX 7900 GRE", 576, False)],
    0x7448: [(48, "Radeon PRO W7900", 864, False)],
    0x747E: [(16, "Radeon RX 7800 XT", 624, False), (12, "Radeon RX 7700 XT", 432, False)],
    0x7480: [(8, "Radeon RX 7600", 288, False), (16, "Radeon RX 7600 XT", 288, False)],
    0x7550: [(16, "Radeon RX 9070 XT / 9070", 640, False)],
    0x73BF: [(16, "Radeon RX 6800 XT / 6900 XT", 512, False)],
    0x73DF: [(12, "Radeon RX 6700 XT / 6750 XT", 384, False), (10, "Radeon RX 6700", 320, False)],
    0x73FF: [(8, "Radeon RX 6600 / 6600 XT", 224, False)],
    0x731F: [(8, "Radeon RX 5700 / 5700 XT", 448, False)],
    0x74A1: [(192, "Instinct MI300X", 5300, False)],
    0x15BF: [(None, "Radeon 780M (Phoenix APU)", None, True)],
    0x1681: [(None, "Radeon 680M (Rembrandt APU)", None, True)],
    0x164E: [(None, "Radeon Graphics (Raphael APU)", None, True)],
    0x150E: [(None, "Radeon 890M (Strix Point APU)", None, True)],
    0x1586: [(None, "Radeon 8060S (Strix Halo APU)", 256, True)],
    0x1638: [(None, "Radeon Graphics (Cezanne APU)", None, True)],
    0x1636: [(None, "Radeon Graphics (Renoir APU)", None, True)],
    0x163F: [(None, "Steam Deck APU (Van Gogh)", 88, True)],
}


def amd_device(device_id: int, vram_bytes: int) -> tuple[str | None, float | None, bool]:
    """(name, GB/s, is an APU) of an AMD GPU, or (None, None, False) when the id is unknown."""
    variants = AMD_DEVICES.get(device_id)
    if not variants:
        return None, None, False
    gib = vram_bytes / 1024**3
    _, name, gbps, apu = min(variants, key=lambda v: abs((v[0] or 0) - gib))
    return name, gbps, apu


# NVIDIA chips whose NVML memory clock/bus width are unusable (e.g. unified-memory parts report none).
NVIDIA_BANDWIDTH_GBPS: dict[str, float] = {"GB10": 273, "Jetson AGX Orin": 204.8, "Jetson Orin Nano": 102}


def apple_chip(brand: str) -> str:
    """"Apple M3 Max" -> "M3 Max"."""
    return brand.removeprefix("Apple").strip()


def apple_bandwidth(chip: str, physical_cores: int | None) -> float | None:
    if physical_cores is not None and (chip, physical_cores) in APPLE_BINNED_GBPS:
        return APPLE_BINNED_GBPS[(chip, physical_cores)]
    return APPLE_BANDWIDTH_GBPS.get(chip)
