"""``quantdesk remote add | ls | test | rm``: connections to OpenAI-compatible servers (llama-server, vLLM, another
QuantDesk ...). A remote model is then ``remote:NAME/MODEL`` wherever a model is taken (chat, serve, bench)."""

from __future__ import annotations

import argparse
import getpass
import json
import os
import sys
from typing import TYPE_CHECKING

from app.commands import add_command
from app.errors import QuantDeskError

if TYPE_CHECKING:
    from app.remote.connections import ConnectionProbe


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = add_command(
        subparsers, "remote",
        description="Manage connections to remote OpenAI-compatible servers. A remote model is then used as "
                    "remote:NAME/MODEL by chat, serve and bench. API keys go to the system keychain (or, where there "
                    "is none, to a file only you can read); they are never taken on the command line.")
    sub = parser.add_subparsers(dest="remote_command", metavar="ACTION", required=True,
                                help="add, ls, test or rm")

    add = sub.add_parser("add", help="add or change a connection, then test it",
                         description="Add (or replace) a connection and list what it serves.")
    add.add_argument("name", help="a short name: letters, digits, '.', '_', '-'")
    add.add_argument("url", help="the server's OpenAI base address, e.g. http://192.168.1.20:8080/v1")
    key = add.add_mutually_exclusive_group()
    key.add_argument("--api-key-stdin", action="store_true",
                     help="read the API key from standard input (asked for without echo on a terminal)")
    key.add_argument("--api-key-env", metavar="VAR", help="take the API key from this environment variable")
    key.add_argument("--no-api-key", action="store_true", help="remove a key stored for this connection")
    add.add_argument("--ca-file", default="", help="a PEM CA bundle to trust for this server (TLS is always verified)")
    add.add_argument("--timeout", type=float, default=None,
                     help="seconds to wait to connect and for answers that are not streams (default 10)")
    add.add_argument("--stall-timeout", type=float, default=None,
                     help="seconds a reply may send nothing before it is given up (default 60)")
    add.add_argument("--no-test", action="store_true", help="save without contacting the server")
    add.add_argument("--json", action="store_true", help="print the connection and the test as JSON")
    add.set_defaults(func=run_add)

    ls = sub.add_parser("ls", help="list the connections", description="List connections and where keys are kept.")
    ls.add_argument("--json", action="store_true", help="print the connections as JSON")
    ls.set_defaults(func=run_ls)

    test = sub.add_parser("test", help="list a connection's models and measure its latency",
                          description="Ask the server for its models and time the answer.")
    test.add_argument("name", help="the connection's name")
    test.add_argument("--json", action="store_true", help="print the result as JSON")
    test.set_defaults(func=run_test)

    rm = sub.add_parser("rm", help="remove a connection and its stored key",
                        description="Remove a connection and forget its API key.")
    rm.add_argument("name", help="the connection's name")
    rm.set_defaults(func=run_rm)


def _read_key(args: argparse.Namespace) -> str | None:
    if args.no_api_key:
        return ""
    if args.api_key_env:
        value = os.environ.get(args.api_key_env)
        if not value:
            raise QuantDeskError(f"the environment variable {args.api_key_env} is not set or empty")
        return value
    if args.api_key_stdin:
        value = getpass.getpass("API key: ") if sys.stdin.isatty() else sys.stdin.readline()
        if not value.strip():
            raise QuantDeskError("no API key was given on standard input")
        return value.strip()
    return None


def _print_test(result: ConnectionProbe) -> None:
    models = result["models"]
    print(f"{result['name']}: {result['kind']} server, answered in {result['latency_ms']:.0f} ms, "
          f"{len(models)} model{'s' if len(models) != 1 else ''}")
    for m in models:
        ctx = f" · context {m['n_ctx']}" if m["n_ctx"] else ""
        print(f"  remote:{result['name']}/{m['id']}{ctx}")


def run_add(args: argparse.Namespace) -> int:
    from app.remote.connections import Connection, Connections

    store = Connections()
    previous = next((c for c in store.all() if c.name == args.name), None)
    connection = Connection(args.name, args.url, ca_file=args.ca_file,
                            timeout_s=args.timeout or (previous.timeout_s if previous else Connection.timeout_s),
                            stall_s=args.stall_timeout or (previous.stall_s if previous else Connection.stall_s))
    connection = store.save(connection, api_key=_read_key(args))
    result = None if args.no_test else store.probe(connection)
    if args.json:
        print(json.dumps({"connection": connection.to_json(), "test": result}, indent=1))
    else:
        print(f"saved {connection.name} → {connection.base_url}"
              + (f" (API key in the {'system keychain' if connection.key_store == 'keychain' else 'key file'})"
                 if connection.has_key else ""))
        for warning in connection.warnings():
            print(f"note: {warning}", file=sys.stderr)
        if result:
            _print_test(result)
    return 0


def run_ls(args: argparse.Namespace) -> int:
    from app.remote.connections import Connections, key_storage_sentence

    connections = Connections().all()
    if args.json:
        print(json.dumps([{**c.to_json(), "warnings": c.warnings()} for c in connections], indent=1))
        return 0
    if not connections:
        print("no remote connections; add one with: quantdesk remote add NAME URL")
    for c in connections:
        key = {"keychain": "key in the keychain", "file": "key in the key file", "": "no key"}[c.key_store]
        print(f"{c.name}\t{c.base_url}\t{key}")
        for warning in c.warnings():
            print(f"  note: {warning}")
    print(key_storage_sentence(), file=sys.stderr)
    return 0


def run_test(args: argparse.Namespace) -> int:
    from app.remote.connections import Connections

    store = Connections()
    result = store.probe(store.get(args.name))
    print(json.dumps(result, indent=1)) if args.json else _print_test(result)
    return 0


def run_rm(args: argparse.Namespace) -> int:
    from app.remote.connections import Connections

    Connections().remove(args.name)
    print(f"removed {args.name}")
    return 0
