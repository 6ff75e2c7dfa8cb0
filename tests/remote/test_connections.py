"""Connections: saved without their keys, keys in the system keychain or a 0600 file, and refusals in words."""

from __future__ import annotations

import json
import stat

import pytest

from app import paths
from app.remote.connections import (Connection, Connections, RemoteConnectionError, is_remote_ref, key_file,
                                    key_storage_sentence, keychain, model_ref, parse_ref)

KEY = "sk-test-3f9c2a7e51"


@pytest.fixture
def real_keychain(monkeypatch, tmp_path):
    """A real keyring backend the user chose on purpose (PYTHON_KEYRING_BACKEND), storing outside our folders."""
    monkeypatch.setenv("PYTHON_KEYRING_BACKEND", "keyrings.alt.file.PlaintextKeyring")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "keyring-home"))  # where that backend keeps its file
    import keyring.core

    keyring.core.init_backend()
    yield
    monkeypatch.delenv("PYTHON_KEYRING_BACKEND")
    keyring.core.init_backend()


def our_files() -> str:
    """Everything QuantDesk wrote under its own folders, as one string."""
    text = []
    for folder in (paths.config_dir(), paths.data_dir(), paths.cache_dir()):
        if folder.exists():
            text += [p.read_text(errors="replace") for p in folder.rglob("*") if p.is_file()]
    return "\n".join(text)


def test_without_a_keychain_the_key_goes_to_a_file_only_the_user_can_read():
    assert keychain() is None  # keyrings.alt's plain files and keyring's fail backend are no keychain
    store = Connections()
    saved = store.save(Connection("box", "http://127.0.0.1:8080/v1/"), api_key=KEY)
    assert saved.key_store == "file" and saved.base_url == "http://127.0.0.1:8080/v1"
    assert stat.S_IMODE(key_file().stat().st_mode) == 0o600
    assert KEY not in store.path.read_text()  # the connections file never holds a key
    assert store.api_key(store.get("box")) == KEY
    assert str(key_file()) in key_storage_sentence() and "0600" in key_storage_sentence()
    store.remove("box")
    assert KEY not in our_files() and store.all() == []


def test_with_a_keychain_the_key_never_touches_our_folders(real_keychain):
    assert keychain() is not None
    store = Connections()
    store.save(Connection("box", "https://gpu.example:8443/v1"), api_key=KEY)
    assert store.get("box").key_store == "keychain"
    assert store.endpoint_for("remote:box/Qwen/Qwen3-8B").api_key == KEY
    assert KEY not in our_files()
    store.save(Connection("box", "https://gpu.example:8443/v1"), api_key="")  # "" removes the key
    assert store.get("box").key_store == "" and store.endpoint_for("remote:box/m").api_key == ""


def test_saving_again_keeps_the_key_unless_told(real_keychain):
    store = Connections()
    store.save(Connection("box", "http://127.0.0.1:1/v1"), api_key=KEY)
    store.save(Connection("box", "http://127.0.0.1:2/v1", timeout_s=3))  # api_key=None: keep it
    assert store.get("box").timeout_s == 3 and store.api_key(store.get("box")) == KEY


@pytest.mark.parametrize(("name", "url", "words"), [
    ("box", "ftp://h/v1", "is not an http:// or https:// address"),
    ("box", "http:///v1", "is not an http:// or https:// address"),
    ("box", "http://user:pw@h/v1", "put the API key in the key field, not in the address"),
    ("box", "http://h/v1?key=1", "has a query or fragment"),
    ("../x", "http://h/v1", "cannot name a connection"),
    ("", "http://h/v1", "cannot name a connection"),
])
def test_a_bad_connection_is_refused_in_words(name, url, words):
    with pytest.raises(RemoteConnectionError) as caught:
        Connections().save(Connection(name, url))
    assert words in str(caught.value)
    assert not Connections().path.exists()


def test_an_unknown_connection_names_the_known_ones():
    Connections().save(Connection("box", "http://127.0.0.1:8080/v1"))
    with pytest.raises(RemoteConnectionError, match=r"no remote connection named 'gpu' \(known: box\)"):
        Connections().endpoint_for("remote:gpu/m")


def test_a_damaged_connections_file_is_a_sentence_not_a_traceback():
    Connections().path.parent.mkdir(parents=True, exist_ok=True)
    Connections().path.write_text("{not json")
    with pytest.raises(RemoteConnectionError, match="cannot be read"):
        Connections().all()


def test_plain_http_to_another_machine_with_a_key_is_pointed_out():
    store = Connections()
    store.save(Connection("lan", "http://192.168.1.20:8080/v1"), api_key=KEY)
    store.save(Connection("local", "http://127.0.0.1:8080/v1"), api_key=KEY)
    store.save(Connection("nokey", "http://192.168.1.20:8080/v1"))
    warnings = {c.name: c.warnings() for c in store.all()}
    assert "travel unencrypted" in warnings["lan"][0]
    assert warnings["local"] == [] and warnings["nokey"] == []


def test_model_references():
    ref = model_ref("box", "Qwen/Qwen3-8B")
    assert ref == "remote:box/Qwen/Qwen3-8B" and is_remote_ref(ref) and parse_ref(ref) == ("box", "Qwen/Qwen3-8B")
    assert not is_remote_ref("/models/remote:x.gguf")
    with pytest.raises(RemoteConnectionError, match="remote:CONNECTION/MODEL"):
        parse_ref("remote:box")


def test_the_file_lists_connections_as_json():
    Connections().save(Connection("box", "http://127.0.0.1:8080/v1", ca_file=""))
    data = json.loads(Connections().path.read_text())
    assert data == {"connections": [{"name": "box", "base_url": "http://127.0.0.1:8080/v1", "ca_file": "",
                                     "timeout_s": 10.0, "stall_s": 60.0, "key_store": ""}]}
