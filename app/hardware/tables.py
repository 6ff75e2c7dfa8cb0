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

# AMD GPUs by PCI device id (sysfs ``device``): name, GB/s, whether it is an APU (memory shared with the CPU).
# Source: AMD's product spec pages (memory bus width x effective memory speed) and the PCI id database.
AMD_DEVICES: dict[int, tuple[str, float | None, bool]] = {
    0x744C: ("Radeon RX 7900 XTX / XT", 960, False),  # the XT (0x744c too) has 800 GB/s; XTX is the common one
    0x7448: ("Radeon PRO W7900", 864, False),
    0x7470: ("Radeon RX 7800 XT / 7700 XT", 624, False),
    0x7480: ("Radeon RX 7600 / 7600 XT", 288, False),
    0x7550: ("Radeon RX 9070 XT / 9070", 640, False),
    0x73BF: ("Radeon RX 6800 / 6800 XT / 6900 XT", 512, False),
    0x73AF: ("Radeon RX 6900 XT", 512, False),
    0x73DF: ("Radeon RX 6700 XT / 6750 XT", 384, False),
    0x73FF: ("Radeon RX 6600 / 6600 XT", 224, False),
    0x731F: ("Radeon RX 5700 / 5700 XT", 448, False),
    0x740C: ("Instinct MI250X / MI250", 3277, False),
    0x74A1: ("Instinct MI300X", 5300, False),
    0x15BF: ("Radeon 780M (Phoenix APU)", None, True),
    0x15C8: ("Radeon 740M (Phoenix2 APU)", None, True),
    0x1681: ("Radeon 680M (Rembrandt APU)", None, True),
    0x164E: ("Radeon Graphics (Raphael APU)", None, True),
    0x150E: ("Radeon 890M (Strix Point APU)", None, True),
    0x1586: ("Radeon 8060S (Strix Halo APU)", 256, True),
    0x1638: ("Radeon Graphics (Cezanne APU)", None, True),
    0x1636: ("Radeon Graphics (Renoir APU)", None, True),
    0x163F: ("Steam Deck APU (Van Gogh)", 88, True),
}

# NVIDIA chips whose NVML memory clock/bus width are unusable (e.g. unified-memory parts report none).
NVIDIA_BANDWIDTH_GBPS: dict[str, float] = {"GB10": 273, "Jetson AGX Orin": 204.8, "Jetson Orin Nano": 102}


def apple_chip(brand: str) -> str:
    """"Apple M3 Max" -> "M3 Max"."""
    return brand.removeprefix("Apple").strip()


def apple_bandwidth(chip: str, physical_cores: int | None) -> float | None:
    if physical_cores is not None and (chip, physical_cores) in APPLE_BINNED_GBPS:
        return APPLE_BINNED_GBPS[(chip, physical_cores)]
    return APPLE_BANDWIDTH_GBPS.get(chip)
