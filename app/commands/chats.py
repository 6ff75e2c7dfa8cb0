"""``quantdesk chats ls | show ID | export ID | rm ID``: the saved conversations (app/chats/store), the CLI twin of the
Chat page's list, Export… and Delete. ``show`` and ``export --format md`` print what the Chat page's Markdown export
writes, ``export --format json`` its JSON (one code for both: ``ChatStore.export_markdown`` / ``export_json``)."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import TYPE_CHECKING

from app.chats import export as chat_export
from app.commands import add_command

if TYPE_CHECKING:
    from app.chats.store import ChatStore


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = add_command(
        subparsers, "chats",
        description="The conversations the Chat page keeps: list them, print one, export one as Markdown or JSON, "
                    "delete one.")
    sub = parser.add_subparsers(dest="chats_command", metavar="ACTION", required=True,
                                help="ls, show, export or rm")

    ls = sub.add_parser("ls", help="list the chats, newest first", description="List the chats, newest first.")
    ls.add_argument("--search", metavar="TEXT", default="",
                    help="only the chats whose title or messages hold every word of TEXT")
    ls.add_argument("--json", action="store_true", help="print the chats as JSON")
    ls.set_defaults(func=run_ls)

    show = sub.add_parser("show", help="print one chat as Markdown",
                          description="Print one chat, the branch on show, as the Chat page's Markdown export.")
    show.add_argument("id", type=int, help="the chat's id, as `quantdesk chats ls` lists it")
    show.set_defaults(func=run_show)

    export = sub.add_parser("export", help="export one chat as Markdown or JSON",
                            description="Export one chat as the Chat page's Export… does: Markdown (the branch on "
                                        "show) or JSON (every message and branch).")
    export.add_argument("id", type=int, help="the chat's id, as `quantdesk chats ls` lists it")
    export.add_argument("--format", choices=("md", "json"), default="md", help="md (default) or json")
    export.add_argument("-o", "--output", metavar="FILE", help="write to FILE instead of standard output")
    export.set_defaults(func=run_export)

    rm = sub.add_parser("rm", help="delete one chat and its messages",
                        description="Delete one chat, its messages and the images no other chat keeps.")
    rm.add_argument("id", type=int, help="the chat's id, as `quantdesk chats ls` lists it")
    rm.set_defaults(func=run_rm)


def _store() -> ChatStore:
    from app.chats.store import ChatStore

    return ChatStore()


def run_ls(args: argparse.Namespace) -> int:
    store = _store()
    try:
        chats = store.search(args.search) if args.search else store.conversations()
        if args.json:
            print(json.dumps([{"id": c.id, "title": c.title, "created": c.created, "updated": c.updated,
                               "model_path": c.model_path} for c in chats], indent=1, ensure_ascii=False))
            return 0
        if not chats:
            print("no chats match" if args.search else "no chats yet; start one in the app or with: quantdesk chat")
        for c in chats:
            model = f"\t{Path(c.model_path).name}" if c.model_path else ""
            print(f"{c.id}\t{time.strftime('%Y-%m-%d %H:%M', time.localtime(c.updated))}\t{c.title}{model}")
    finally:
        store.close()
    return 0


def run_show(args: argparse.Namespace) -> int:
    store = _store()
    try:
        print(chat_export.to_markdown(store, args.id), end="")
    finally:
        store.close()
    return 0


def run_export(args: argparse.Namespace) -> int:
    from app.files import write_text_atomic

    store = _store()
    try:
        text = chat_export.to_json(store, args.id) if args.format == "json" else chat_export.to_markdown(store, args.id)
    finally:
        store.close()
    if args.output:  # the file the Chat page's Export… writes
        write_text_atomic(Path(args.output), text)
        print(f"wrote {args.output}")
    else:
        print(text)
    return 0


def run_rm(args: argparse.Namespace) -> int:
    store = _store()
    try:
        deleted = store.delete_conversation(args.id)
        store.purge_attachments()  # no undo here, unlike the Chat page: its images go now
    finally:
        store.close()
    print(f"deleted chat {deleted.id} “{deleted.title}”")
    return 0
