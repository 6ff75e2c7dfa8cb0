"""Hardware detection: ``detect()`` gives a HardwareProfile of this machine.

Commands that plan for hardware take ``--hardware FILE.json`` (a saved ``quantdesk hw --json``):
call ``add_hardware_argument(parser)`` when registering and ``profile_from_args(args)`` when running.
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


def profile_from_args(args: argparse.Namespace) -> HardwareProfile:
    """The profile named by ``--hardware``, or this machine's."""
    path = getattr(args, "hardware", None)
    return load_profile(path) if path else detect()


__all__ = ["BackendSupport", "CpuInfo", "GpuInfo", "HardwareProfile", "HardwareProfileError", "load_profile",
           "detect", "add_hardware_argument", "profile_from_args"]
