"""The Responses API's store on real SQLite: a response and its conversation kept and read back whole, the retention
period (out of date is never handed out, and purged when the store opens or stores), delete, the default place and
retention from the app's settings, and threads sharing it (the server reaches it from worker threads)."""

from __future__ import annotations

import threading

import pytest

from app import paths, settings
from app.datatypes import Message
from app.server.response_store import DB_FILENAME, ResponseStore

DAY = 86_400.0
TURNS = [Message("user", "Weather?", images=("aGk=",)),
         Message("assistant", "", tool_calls=({"id": "call_1", "type": "function",
                                               "function": {"name": "get_weather", "arguments": {"city": "Paris"}}},),
                 reasoning="Look it up."),
         Message("tool", "22 degrees", tool_call_id="call_1", name="get_weather")]


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def test_a_response_and_its_conversation_come_back_whole(tmp_path):
    store = ResponseStore(tmp_path / "r.sqlite3")
    store.put("resp_1", {"id": "resp_1", "output": [{"type": "message"}]}, TURNS)
    found = store.get("resp_1")
    assert found is not None
    assert found.response == {"id": "resp_1", "output": [{"type": "message"}]}
    assert found.conversation == tuple(TURNS)
    assert store.get("resp_2") is None
    store.close()
    again = ResponseStore(tmp_path / "r.sqlite3")  # kept on disk
    assert again.get("resp_1") == found
    again.close()


def test_responses_past_the_retention_period_are_never_handed_out_and_are_purged(tmp_path):
    clock = Clock()
    store = ResponseStore(tmp_path / "r.sqlite3", retention_days=2, clock=clock)
    store.put("resp_old", {"id": "resp_old"}, TURNS)
    clock.now += DAY
    store.put("resp_new", {"id": "resp_new"}, TURNS)
    clock.now += 1.5 * DAY  # the old one is 2.5 days old, the new one 1.5
    assert store.get("resp_old") is None and store.get("resp_new") is not None
    store.put("resp_newest", {"id": "resp_newest"}, TURNS)  # storing purges
    rows = store._db.execute("SELECT id FROM responses ORDER BY id").fetchall()
    assert rows == [("resp_new",), ("resp_newest",)]
    store.close()
    clock.now += 1.0 * DAY
    reopened = ResponseStore(tmp_path / "r.sqlite3", retention_days=2, clock=clock)  # opening purges
    assert reopened._db.execute("SELECT id FROM responses").fetchall() == [("resp_newest",)]
    reopened.close()


def test_delete_says_whether_there_was_one(tmp_path):
    store = ResponseStore(tmp_path / "r.sqlite3")
    store.put("resp_1", {"id": "resp_1"}, TURNS)
    assert store.delete("resp_1") is True
    assert store.delete("resp_1") is False and store.get("resp_1") is None
    store.close()


def test_the_default_place_and_the_retention_setting():
    store = ResponseStore()
    assert store.path == paths.data_dir() / DB_FILENAME and store.path.is_file()
    assert store.retention_s == settings.RESPONSES_RETENTION_DEFAULT * DAY
    store.close()
    assert settings.parse("responses_retention_days", "7") == 7
    for bad in ("0", "-1", "x", "100000"):
        with pytest.raises(settings.SettingError, match="a whole number from 1 to 3650"):
            settings.parse("responses_retention_days", bad)
    assert settings.Settings(responses_retention_days=0).normalised().responses_retention_days == 1
    with pytest.raises(ValueError, match="above 0 days"):
        ResponseStore(retention_days=0)


def test_threads_share_one_store(tmp_path):
    store = ResponseStore(tmp_path / "r.sqlite3")
    failures: list[BaseException] = []

    def work(n: int) -> None:
        try:
            for i in range(20):
                store.put(f"resp_{n}_{i}", {"n": n, "i": i}, TURNS[:1])
                assert store.get(f"resp_{n}_{i}") is not None
        except BaseException as exc:  # noqa: BLE001 - handed to the test's thread
            failures.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures
    assert store._db.execute("SELECT count(*) FROM responses").fetchone() == (80,)
    store.close()
