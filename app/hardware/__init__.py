"""Hardware detection: ``detect()`` gives a HardwareProfile of this machine.

Commands that plan for hardware take ``--hardware FILE.json`` (a saved ``quantdesk hw --json``):
call ``add_hardware_argument(parser)`` when registering and ``profile_from_args(args)`` when running.
"""

from __future__ import annotations

import argparse

from app.hardware.profile import (BackendSupport, CpuInfo, GpuInfo, HardwareProfile, HardwareProfileError,
                                  load_profile)


def detect(**kwargs) -> HardwareProfile:
    """This machine's profile (see app.hardware.detect.detect for the options)."""
    from app.hardware.detect import detect as _detect  # threads and probes load only when asked for

    return _detect(**kwargs)


def add_hardware_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--hardware", metavar="FILE.json",
                        help="plan for the machine in FILE (saved with: quantdesk hw --json > FILE) instead of this one")


def profile_from_args(args: argparse.Namespace) -> HardwareProfile:
    """The profile named by ``--hardware``, or this machine's."""
    path = getattr(args, "hardware", None)
    return load_profile(path) if path else detect()


__all__ = ["BackendSupport", "CpuInfo", "GpuInfo", "HardwareProfile", "HardwareProfileError", "load_profile",
           "detect", "add_hardware_argument", "profile_from_args"]
