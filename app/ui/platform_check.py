"""Can Qt open a window here? Asked before QtGui is imported or a QApplication exists, because when it cannot,
Qt aborts the process with its own message ("could not load the Qt platform plugin "xcb" …") that tells a user
neither what is missing nor how to install it.

On Linux the xcb (X11) and wayland platform plugins link system libraries that minimal and headless installs
lack (libxcb-cursor0 above all, needed since Qt 6.5). ``ldd`` on the plugin lists every one that does not resolve;
the paragraph names them and gives the install command for the user's distribution (/etc/os-release). Without any
display (a server, SSH without X forwarding) the paragraph says so, and that the command line works.
Other systems, and platforms without a display server (offscreen, minimal, vnc …), are not checked.
"""

from __future__ import annotations

import ctypes
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

# The shared libraries Qt's xcb and wayland plugins (and QtGui under them) need from the system, and the package
# that provides each: (Debian/Ubuntu, Fedora, Arch).
PACKAGES: dict[str, tuple[str, str, str]] = {
    "libxcb-cursor.so.0": ("libxcb-cursor0", "xcb-util-cursor", "xcb-util-cursor"),
    "libxcb-icccm.so.4": ("libxcb-icccm4", "xcb-util-wm", "xcb-util-wm"),
    "libxcb-util.so.1": ("libxcb-util1", "xcb-util", "xcb-util"),
    "libxcb-image.so.0": ("libxcb-image0", "xcb-util-image", "xcb-util-image"),
    "libxcb-keysyms.so.1": ("libxcb-keysyms1", "xcb-util-keysyms", "xcb-util-keysyms"),
    "libxcb-render-util.so.0": ("libxcb-render-util0", "xcb-util-renderutil", "xcb-util-renderutil"),
    "libxcb-randr.so.0": ("libxcb-randr0", "libxcb", "libxcb"),
    "libxcb-shm.so.0": ("libxcb-shm0", "libxcb", "libxcb"),
    "libxcb-sync.so.1": ("libxcb-sync1", "libxcb", "libxcb"),
    "libxcb-xfixes.so.0": ("libxcb-xfixes0", "libxcb", "libxcb"),
    "libxcb-render.so.0": ("libxcb-render0", "libxcb", "libxcb"),
    "libxcb-shape.so.0": ("libxcb-shape0", "libxcb", "libxcb"),
    "libxcb-xkb.so.1": ("libxcb-xkb1", "libxcb", "libxcb"),
    "libxcb-xinput.so.0": ("libxcb-xinput0", "libxcb", "libxcb"),
    "libxcb.so.1": ("libxcb1", "libxcb", "libxcb"),
    "libxkbcommon.so.0": ("libxkbcommon0", "libxkbcommon", "libxkbcommon"),
    "libxkbcommon-x11.so.0": ("libxkbcommon-x11-0", "libxkbcommon-x11", "libxkbcommon-x11"),
    "libX11-xcb.so.1": ("libx11-xcb1", "libX11-xcb", "libx11"),
    "libX11.so.6": ("libx11-6", "libX11", "libx11"),
    "libGL.so.1": ("libgl1", "libglvnd-glx", "libglvnd"),
    "libEGL.so.1": ("libegl1", "libglvnd-egl", "libglvnd"),
    "libOpenGL.so.0": ("libopengl0", "libglvnd-opengl", "libglvnd"),
    "libfontconfig.so.1": ("libfontconfig1", "fontconfig", "fontconfig"),
    "libfreetype.so.6": ("libfreetype6", "freetype", "freetype2"),
    "libglib-2.0.so.0": ("libglib2.0-0", "glib2", "glib2"),
    "libgthread-2.0.so.0": ("libglib2.0-0", "glib2", "glib2"),
    "libdbus-1.so.3": ("libdbus-1-3", "dbus-libs", "dbus"),
    "libwayland-client.so.0": ("libwayland-client0", "libwayland-client", "wayland"),
    "libwayland-cursor.so.0": ("libwayland-cursor0", "libwayland-cursor", "wayland"),
    "libwayland-egl.so.1": ("libwayland-egl1", "libwayland-egl", "wayland"),
}
# (command, which column of PACKAGES) per distribution family, matched against ID and ID_LIKE of /etc/os-release.
INSTALLERS: dict[str, tuple[str, int]] = {
    "debian": ("sudo apt install", 0), "ubuntu": ("sudo apt install", 0),
    "fedora": ("sudo dnf install", 1), "rhel": ("sudo dnf install", 1), "centos": ("sudo dnf install", 1),
    "arch": ("sudo pacman -S", 2),
}
# Platforms that draw without a display server: nothing to check.
_NO_DISPLAY_NEEDED = {"offscreen", "minimal", "minimalegl", "vnc", "eglfs", "linuxfb", "vkkhrdisplay"}
_NOT_FOUND = re.compile(r"^\s*(\S+) => not found", re.MULTILINE)
_DLOPEN_MISSING = re.compile(r"(\S+\.so[.\d]*): cannot open shared object file")
_CLI_WORKS = "The command line works without a window: `quantdesk --help` lists its commands."


def problem(env: Mapping[str, str] | None = None, os_release: Path = Path("/etc/os-release")) -> str | None:
    """None when Qt can open a window here (or this is not Linux); otherwise the paragraph saying why not."""
    env = os.environ if env is None else env
    if not sys.platform.startswith("linux"):
        return None
    names = [p.split(":", 1)[0] for p in env.get("QT_QPA_PLATFORM", "").split(";") if p.strip()]
    if not names:  # Qt's own choice: wayland first in a Wayland session, else xcb
        wayland_session = env.get("WAYLAND_DISPLAY") or env.get("XDG_SESSION_TYPE") == "wayland"
        names = ["wayland", "xcb"] if wayland_session else ["xcb"]
    if any(n in _NO_DISPLAY_NEEDED or n not in ("xcb", "wayland") for n in names):
        return None
    with_display = [n for n in names if _has_display(n, env)]
    if not with_display:
        return ("QuantDesk cannot open its window: there is no display here (neither DISPLAY nor WAYLAND_DISPLAY "
                "is set), as on a server or over SSH without X forwarding. " + _CLI_WORKS)
    missing: list[str] = []
    for name in with_display:
        plugin = plugin_file(name, env)
        if plugin is None:
            return None  # no plugin file we can find: Qt's own message says more than we could
        libraries = missing_libraries(plugin)
        if not libraries:
            return None
        missing += [lib for lib in libraries if lib not in missing]
    plugins = f"Qt's {with_display[0]} display plugin" if len(with_display) == 1 else \
        f"each of Qt's display plugins ({', '.join(with_display)})"
    return missing_libraries_paragraph(missing, os_release, what=plugins)


def import_problem(error: ImportError, os_release: Path = Path("/etc/os-release")) -> str | None:
    """The paragraph for a Qt module that failed to import for want of a system library, or None."""
    match = _DLOPEN_MISSING.search(str(error))
    return missing_libraries_paragraph([match[1]], os_release, what="Qt") if match else None


def _has_display(name: str, env: Mapping[str, str]) -> bool:
    if name == "xcb":
        return bool(env.get("DISPLAY"))
    runtime = env.get("XDG_RUNTIME_DIR", "")
    return bool(env.get("WAYLAND_DISPLAY")) or bool(runtime and (Path(runtime) / "wayland-0").exists())


def plugin_file(name: str, env: Mapping[str, str]) -> Path | None:
    """Where Qt will look for the platform plugin ``name``: QT_QPA_PLATFORM_PLUGIN_PATH, QT_PLUGIN_PATH's
    platforms folders, then the plugins folder of the Qt build PySide6 brings."""
    folders = [Path(env["QT_QPA_PLATFORM_PLUGIN_PATH"])] if env.get("QT_QPA_PLATFORM_PLUGIN_PATH") else []
    folders += [Path(p) / "platforms" for p in env.get("QT_PLUGIN_PATH", "").split(os.pathsep) if p]
    try:
        from PySide6.QtCore import QLibraryInfo  # QtCore needs no display libraries

        folders.append(Path(QLibraryInfo.path(QLibraryInfo.LibraryPath.PluginsPath)) / "platforms")
    except ImportError:
        pass
    return next((f / f"libq{name}.so" for f in folders if (f / f"libq{name}.so").is_file()), None)


def missing_libraries(plugin: Path) -> list[str]:
    """The shared libraries ``plugin`` needs that do not resolve: every one, from ldd; without ldd, the first
    one, from loading the plugin (a failed load changes nothing; a successful one is the load Qt makes next)."""
    ldd = shutil.which("ldd")
    if ldd:
        try:
            listing = subprocess.run([ldd, str(plugin)], capture_output=True, text=True, timeout=20).stdout
        except (OSError, subprocess.SubprocessError):
            listing = None
        if listing is not None:
            return sorted(set(_NOT_FOUND.findall(listing)))
    try:
        ctypes.CDLL(str(plugin))
    except OSError as exc:
        match = _DLOPEN_MISSING.search(str(exc))
        return [match[1]] if match else []
    return []


def distribution(os_release: Path) -> tuple[str, str, int] | None:
    """(pretty name, install command, PACKAGES column) for this distribution, or None when we do not know it."""
    try:
        fields = dict(re.findall(r'^(\w+)="?([^"\n]*)"?$', os_release.read_text(errors="replace"), re.MULTILINE))
    except OSError:
        return None
    for family in [fields.get("ID", ""), *fields.get("ID_LIKE", "").split()]:
        if family in INSTALLERS:
            command, column = INSTALLERS[family]
            return fields.get("PRETTY_NAME") or family, command, column
    return None


def missing_libraries_paragraph(libraries: list[str], os_release: Path, what: str) -> str:
    known = distribution(os_release)
    listed = ", ".join(libraries)
    opening = (f"QuantDesk cannot open its window: {what} needs system libraries that are not installed "
               f"({listed}).")
    if known and all(lib in PACKAGES for lib in libraries):
        name, command, column = known
        packages = " ".join(dict.fromkeys(PACKAGES[lib][column] for lib in libraries))
        advice = f"On {name}, install them with: {command} {packages}"
    else:
        advice = "Install the packages of your distribution that provide them"
    return f"{opening} {advice} — then start quantdesk again. {_CLI_WORKS}"
