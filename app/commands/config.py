"""``quantdesk config ls | get KEY | set KEY VALUE``: the app's settings (app/settings), the CLI twin of the Settings
page. A value is typed by the setting it goes to: a key that is no setting, or a value of the wrong type or out of
range, is refused in words (``settings.parse``), never clamped silently."""

from __future__ import annotations

import argparse
import json

from app.commands import add_command


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = add_command(
        subparsers, "config",
        description="Show or change the settings the app keeps (the Settings page's): models folder, offline mode, "
                    "default context, theme, language, update checks, the loaded models' budget, count and idle "
                    "unload.")
    sub = parser.add_subparsers(dest="config_command", metavar="ACTION", required=True, help="ls, get or set")

    ls = sub.add_parser("ls", help="list every setting with its value", description="List every setting, its "
                                                                                      "value and what it takes.")
    ls.add_argument("--json", action="store_true", help="print the settings as JSON")
    ls.set_defaults(func=run_ls)

    get = sub.add_parser("get", help="print one setting's value", description="Print one setting's value.")
    get.add_argument("key", help="the setting, as `quantdesk config ls` names it")
    get.add_argument("--json", action="store_true", help="print the value as JSON")
    get.set_defaults(func=run_get)

    set_ = sub.add_parser("set", help="change one setting", description="Change one setting; a value of the wrong "
                                                                        "type or out of range is refused.")
    set_.add_argument("key", help="the setting, as `quantdesk config ls` names it")
    set_.add_argument("value", help="its new value (none: the default, where the setting has one)")
    set_.set_defaults(func=run_set)


def run_ls(args: argparse.Namespace) -> int:
    from app import settings

    current = settings.load()
    values = current.to_json()
    if args.json:
        print(json.dumps(values, indent=1))
        return 0
    if current.problem:
        print(f"note: {current.problem}")
    width = max(len(k) for k in values)
    for key, value in values.items():
        about, takes = settings.ABOUT[key]
        print(f"{key:<{width}}  {settings.shown(value):<10}  {about} ({takes})")
    return 0


def run_get(args: argparse.Namespace) -> int:
    from app import settings

    settings.check_key(args.key)
    value = settings.load().to_json()[args.key]
    print(json.dumps(value) if args.json else settings.shown(value))
    return 0


def run_set(args: argparse.Namespace) -> int:
    from app import settings

    value = settings.parse(args.key, args.value)
    saved = settings.update(**{args.key: value})
    print(f"{args.key} = {settings.shown(getattr(saved, args.key))}")
    return 0
