"""``quantdesk runtime ls | build NAME | use NAME | rm NAME | forget``: the llama.cpp runtimes (app/runtimes), and what
the crash guard learned about them (app/engine/guard.py)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import TYPE_CHECKING, TextIO

from app.commands import add_command
from app.errors import QuantDeskError

if TYPE_CHECKING:
    from app.runtimes.build import Plan, Progress

GIB = 1 << 30


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = add_command(
        subparsers, "runtime",
        description="A runtime is one build of llama.cpp for one kind of device. QuantDesk picks one per load "
                    "(NVIDIA: CUDA, else Vulkan; AMD: ROCm, else Vulkan; Intel: Vulkan; Apple: Metal; else CPU) "
                    "unless one is pinned with `use`.")
    sub = parser.add_subparsers(dest="runtime_command", metavar="ACTION", required=True,
                                help="ls, build NAME, use NAME, rm NAME, rollback NAME or forget")
    ls = sub.add_parser("ls", help="the runtimes, the devices each sees, and which one loads use")
    ls.add_argument("--json", action="store_true", help="print JSON")
    ls.set_defaults(func=run_ls)
    build = sub.add_parser("build", help="compile a runtime (vulkan, cuda, rocm, metal, cpu) from source",
                           description="Compile the app's llama-cpp-python version for one backend into "
                                       "the user data folder. Says first what is missing, if anything.")
    build.add_argument("name", choices=["cpu", "vulkan", "cuda", "rocm", "metal"], help="the backend to build for")
    build.add_argument("--vulkan-sdk", metavar="DIR", help="a folder with include/vulkan (and include/spirv, "
                       "share/cmake/SPIRV-Headers): the LunarG SDK or unpacked newer headers (default: VULKAN_SDK)")
    build.add_argument("--sdist", metavar="FILE", help="the llama-cpp-python source archive, when offline")
    build.add_argument("--rebuild", action="store_true", help="compile again even if a wheel of this build is cached")
    build.add_argument("--jobs", type=int, help="parallel compile jobs (default: every CPU core)")
    build.add_argument("--check", action="store_true", help="only say what the build needs and what is missing")
    build.add_argument("--as", dest="as_name", metavar="NAME",
                       help="name the runtime NAME instead of the backend's name (a CPU runtime beside the app "
                            "environment's own, which is named cpu)")
    build.add_argument("--version", metavar="V", help="build llama-cpp-python V from its source package instead of the "
                       "app's own version; models use it only after their trial load on it succeeded")
    build.set_defaults(func=run_build)
    use = sub.add_parser("use", help="pin a runtime for every load, or for one model (auto: choose again)")
    use.add_argument("name", help="a runtime name from `quantdesk runtime ls`, or auto")
    use.add_argument("--model", metavar="FILE", help="pin it for this model only")
    use.set_defaults(func=run_use)
    rm = sub.add_parser("rm", help="remove a runtime built on this machine")
    rm.add_argument("name", help="the runtime to remove")
    rm.set_defaults(func=run_rm)
    forget = sub.add_parser("forget", help="forget the configurations learned after engine crashes",
                            description="After a native crash of llama.cpp, QuantDesk loads that CPU, runtime and "
                                        "quant in a safer configuration from then on (quantdesk hw lists them). "
                                        "This forgets them: the next loads try llama.cpp's defaults again.")
    forget.set_defaults(func=run_forget)
    rollback = sub.add_parser("rollback", help="put a runtime's previous build back in place",
                              description="A rebuilt runtime keeps the build it replaced; models load on that one "
                                          "until their trial on the new build succeeded. This puts the previous "
                                          "build back for every model (and keeps the newer one as the previous).")
    rollback.add_argument("name", help="the runtime")
    rollback.set_defaults(func=run_rollback)


def run_ls(args: argparse.Namespace) -> int:
    from app import machine
    from app.runtimes import overview

    rows = machine.runtime_overview()
    if args.json:
        print(json.dumps(overview.to_json(rows), indent=2))
        return 0
    print(overview.table(rows))
    return 0


class _Bar:
    """A one-line progress bar on a terminal, a line per 10 % elsewhere (logs, CI)."""

    def __init__(self, stream: TextIO = sys.stderr) -> None:
        self.stream = stream
        self.tty = stream.isatty()
        self.last_decile = -1
        self.total = 0
        self.phase = ""

    def __call__(self, progress: Progress) -> None:
        from app.runtimes.build import Progress

        assert isinstance(progress, Progress)
        if progress.phase != "compiling":
            if progress.phase not in (self.phase, "done"):
                self._line(f"{progress.phase}…", final=True)
            self.phase = progress.phase
            return
        self.phase = progress.phase
        if progress.total != self.total:  # a new counter starts its bar over
            self.total, self.last_decile = progress.total, -1
        fraction = progress.fraction or 0.0
        left = f", about {_minutes(progress.remaining_s)} left" if progress.remaining_s is not None else ""
        text = f"compiling [{'#' * int(fraction * 30):<30}] {progress.step}/{progress.total}{left}"
        if self.tty:
            self._line(text, final=False)
        elif int(fraction * 10) > self.last_decile:
            self.last_decile = int(fraction * 10)
            self._line(text, final=True)

    def _line(self, text: str, final: bool) -> None:
        if self.tty:
            self.stream.write("\r\033[K" + text + ("\n" if final else ""))
        else:
            self.stream.write(text + "\n")
        self.stream.flush()


def _minutes(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    return f"{seconds / 60:.0f} min" if seconds >= 90 else f"{seconds:.0f} s"


def run_build(args: argparse.Namespace) -> int:
    from app.runtimes import build

    if args.check:
        plan = build.plan_build(args.name, vulkan_sdk=args.vulkan_sdk, jobs=args.jobs)
        for line in plan.found:
            print(f"found {line}")
        for line in plan.missing:
            print(f"missing: {line}")
        print(f"CMAKE_ARGS: {' '.join(plan.cmake_args)}")
        print(plan.estimate_text() if not plan.missing else "cannot build until the missing parts are there")
        return 0 if not plan.missing else 1

    def on_plan(plan: Plan) -> None:
        if not plan.missing:
            print(f"building the {args.name} runtime (llama-cpp-python {plan.version}); {plan.estimate_text()}",
                  file=sys.stderr)

    start = time.monotonic()
    runtime = build.build(args.name, vulkan_sdk=args.vulkan_sdk, sdist=args.sdist, rebuild=args.rebuild,
                          jobs=args.jobs, on_progress=_Bar(), on_plan=on_plan, name=args.as_name,
                          version=args.version)
    print(f"built the {runtime.name} runtime in {_minutes(time.monotonic() - start)}: {runtime.folder}"
          f" (log: {runtime.log})")
    return 0


def run_use(args: argparse.Namespace) -> int:
    from app.runtimes import catalog, pins

    if args.name != pins.AUTO and catalog.find(args.name) is None:
        names = ", ".join(r.name for r in catalog.discover()) or "none"
        raise QuantDeskError(f"there is no runtime named {args.name} (installed: {names})",
                             f"build it: quantdesk runtime build {args.name}" if args.name in catalog.BACKENDS else "")
    pins.pin(args.name, args.model)
    where = f"for {args.model}" if args.model else "for every model"
    print(f"automatic choice {where}" if args.name == pins.AUTO else f"{args.name} is pinned {where}")
    return 0


def run_rm(args: argparse.Namespace) -> int:
    from app.runtimes import build

    folder = build.remove(args.name)
    print(f"removed the {args.name} runtime ({folder})")
    return 0


def run_forget(args: argparse.Namespace) -> int:
    from app.engine import guard

    count = guard.forget()
    print(f"forgot {count} configuration{'s' if count != 1 else ''} learned after engine crashes" if count
          else "nothing was learned after engine crashes")
    return 0


def run_rollback(args: argparse.Namespace) -> int:
    from app.runtimes import trials

    try:
        runtime = trials.rollback(args.name)
    except trials.RollbackError as exc:
        raise QuantDeskError(str(exc), "quantdesk runtime ls lists the runtimes") from None
    print(f"the {runtime.name} runtime is its previous build again (llama-cpp-python {runtime.version or '?'}, built "
          f"{runtime.built_at[:10] or '?'})")
    return 0
