"""Approvals: "always allow" remembered per server and tool in a file written atomically, revocable; a file that
cannot be read allows nothing."""

from __future__ import annotations

import json

from app.mcp.approvals import ALLOW_ONCE, ALWAYS_ALLOW, DENY, Approvals


def test_always_allowed_tools_are_remembered_and_revoked():
    approvals = Approvals()
    assert approvals.always() == [] and not approvals.is_always("files", "list_directory")
    approvals.record("files", "list_directory", ALWAYS_ALLOW)
    approvals.record("files", "write_file", ALLOW_ONCE)  # once: not remembered
    approvals.record("files", "move_file", DENY)
    approvals.allow_always("web", "search")
    again = Approvals()  # another process reads the same file
    assert again.always() == [("files", "list_directory"), ("web", "search")]
    assert again.is_always("files", "list_directory") and not again.is_always("files", "write_file")
    assert json.loads(again.path.read_text()) == {"always": [["files", "list_directory"], ["web", "search"]]}
    assert again.revoke("files", "list_directory") == 1 and not again.is_always("files", "list_directory")
    assert again.revoke("files") == 0
    assert again.revoke("web") == 1 and again.always() == []


def test_a_damaged_file_allows_nothing():
    approvals = Approvals()
    approvals.path.parent.mkdir(parents=True, exist_ok=True)
    approvals.path.write_text('{"always": [["files", "list_directory"], "oops", [1, 2]')
    assert approvals.always() == []
    approvals.path.write_text('{"always": [["files", "list_directory"], "oops", [1, 2], ["a", "b", "c"]]}')
    assert approvals.always() == [("files", "list_directory")]
