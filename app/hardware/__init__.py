"""Hardware detection: ``detect()`` gives a HardwareProfile of this machine.

Commands that plan for hardware take ``--hardware FILE.json`` (a saved ``quantdesk hw --json``):
call ``add_hardware_argument(parser)`` when registering and ``app.machine.profile_from_args(args)`` when running.
This package reads the hardware only: this machine with its llama.cpp runtimes and engines, probed once per
process, is app/machine.py's.
"""

from __future__ import annotations

import argparse

# Imported here, eagerly, so ``app.hardware.detect`` is the function even after something imports the
# submodule of the same name (importing a submodule rebinds the package attribute, but only on first load).
# The probe modules import only the standard library at module level.
from app.hardware.detect import detect
from app.hardware.profile import (BackendSupport, CpuInfo, GpuInfo, HardwareProfile, HardwareProfileError,
                                  load_profile)


def add_hardware_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--hardware", metavar="FILE.json",
                        help="plan for the machine in FILE (saved with: quantdesk hw --json > FILE) instead of "
                             "this one")


__all__ = ["BackendSupport", "CpuInfo", "GpuInfo", "HardwareProfile", "HardwareProfileError", "load_profile",
           "detect", "add_hardware_argument"]
