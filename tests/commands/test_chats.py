"""``quantdesk chats ls | show | export | rm`` over the real chat database (SQLite under the test's own data folder,
app.chats.store.default_path), the CLI twin of the Chat page's list, Export… and Delete."""

from __future__ import annotations

import json

import pytest

from app.chats import export as chat_export
from app.chats.store import ChatStore, default_path
from app.cli import main
from tests.fixtures.models import write_test_png


@pytest.fixture
def store():
    db = ChatStore(default_path())
    yield db
    db.close()


def chat(store: ChatStore, title: str, *turns: str, images: tuple[bytes, ...] = ()) -> int:
    """A chat as the Chat page saves one: each message with its reply's row, the first with ``images``."""
    conv = store.create_conversation(title, model_path="/models/qwen-0.5b-q4_k_m.gguf")
    for i in range(0, len(turns), 2):
        writer = store.begin_reply(conv.id, prompt=turns[i], images=images if i == 0 else ())
        writer.finish(text=turns[i + 1])
    return conv.id


def test_ls_lists_the_chats_newest_first_with_their_ids(store, capsys):
    first = chat(store, "Paris trip", "Where to eat?", "Try the Marais.")
    second = chat(store, "Python help", "What is a generator?", "A function that yields.")
    assert main(["chats", "ls"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split("\t")[0] for line in lines] == [str(second), str(first)]
    assert lines[0].split("\t")[2:] == ["Python help", "qwen-0.5b-q4_k_m.gguf"]
    assert main(["chats", "ls", "--search", "marais"]) == 0
    assert [line.split("\t")[0] for line in capsys.readouterr().out.splitlines()] == [str(first)]
    assert main(["chats", "ls", "--json"]) == 0
    assert [c["title"] for c in json.loads(capsys.readouterr().out)] == ["Python help", "Paris trip"]


def test_ls_without_chats_says_so(capsys):
    assert main(["chats", "ls"]) == 0
    assert capsys.readouterr().out.startswith("no chats yet")


def test_show_and_export_print_what_the_chat_pages_export_writes(store, capsys, tmp_path):
    conv = chat(store, "Paris trip", "Where to eat?", "Try the Marais.")
    assert main(["chats", "show", str(conv)]) == 0
    assert capsys.readouterr().out == chat_export.to_markdown(store, conv)
    assert main(["chats", "export", str(conv)]) == 0
    assert capsys.readouterr().out == chat_export.to_markdown(store, conv) + "\n"
    assert main(["chats", "export", str(conv), "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data == json.loads(chat_export.to_json(store, conv))
    assert [m["content"] for m in data["messages"]] == ["Where to eat?", "Try the Marais."]
    out = tmp_path / "trip.json"
    assert main(["chats", "export", str(conv), "--format", "json", "-o", str(out)]) == 0
    assert out.read_text(encoding="utf-8") == chat_export.to_json(store, conv)


def test_rm_deletes_the_chat_and_its_images(store, capsys, tmp_path):
    keep = chat(store, "Keep", "hello", "hi")
    picture = write_test_png(tmp_path / "square.png", 8, 8).read_bytes()
    gone = chat(store, "Gone", "what is this?", "a gradient", images=(picture,))
    image = store.messages(gone)[0].images[0].path
    assert image.is_file()
    assert main(["chats", "rm", str(gone)]) == 0
    assert capsys.readouterr().out == f"deleted chat {gone} “Gone”\n"
    assert [c.id for c in store.conversations()] == [keep]
    assert not image.exists()


@pytest.mark.parametrize("action", ["show", "export", "rm"])
def test_a_chat_that_does_not_exist_is_refused_in_words(store, capsys, action):
    assert main(["chats", action, "42"]) == 1
    captured = capsys.readouterr()
    assert captured.err == "quantdesk: conversation 42 does not exist\n" and captured.out == ""
