"""Vision repos on the Hub stand-in: real GGUF quants of the tiny model and two real projectors (F16, F32). The
listing pairs each quant with its projectors, a pull fetches the F16 one with the model (or the one asked for),
verified like every file, after checking the pair from the two headers; a pair that cannot work is refused
before any byte of either file moves."""

from __future__ import annotations

import json

import pytest

from app.cli import main
from app.hub.download import download
from app.hub.errors import IntegrityError
from app.hub.library import Library
from app.hub.listing import RepoListing
from app.hub.plan import DownloadRequest
from app.models import vision
from tests.hub.conftest import sha256

REPO = "acme/TinyVision-GGUF"


@pytest.fixture
def vision_repo(hub_env, tiny_vision):
    text = tiny_vision.text
    files = {"tiny-Q8_0.gguf": text.gguf_q8_0, "tiny-Q4_K_M.gguf": text.gguf_q4_k_m, "tiny-F16.gguf": text.gguf_f16,
             "mmproj-tiny-F32.gguf": tiny_vision.mmproj_f32, "mmproj-tiny-F16.gguf": tiny_vision.mmproj_f16,
             "README.md": b"# tiny vision\n"}
    hub_env.add_repo(REPO, files, tags=["gguf", "image-text-to-text"])
    return hub_env


def _content_gets(server, name: str):
    return [r for r in server.requests_for(name) if r.path.startswith("/lfs/") or r.status in (200, 206)]


def test_each_quant_lists_its_projectors_f16_first(vision_repo, capsys):
    listing = RepoListing.fetch(REPO)
    groups = {g.quant: g for g in listing.quants()}
    assert set(groups) == {"Q8_0", "Q4_K_M", "F16"}  # the projectors are no quant of their own
    assert all(g.projectors == ["mmproj-tiny-F16.gguf", "mmproj-tiny-F32.gguf"] for g in groups.values())
    assert main(["show", REPO]) == 0
    out = capsys.readouterr().out
    assert out.count("sees images with mmproj-tiny-F16.gguf or mmproj-tiny-F32.gguf") == 3


def test_a_pull_fetches_the_f16_projector_with_the_model_verified(vision_repo, tiny_vision, fast):
    result = download(DownloadRequest(REPO, quant="Q8_0"), settings=fast)
    assert result.projector == "mmproj-tiny-F16.gguf" and result.other_projectors == ("mmproj-tiny-F32.gguf",)
    assert result.path.name == "tiny-Q8_0.gguf"  # the model, not the projector, is what loads
    projector = result.path.with_name("mmproj-tiny-F16.gguf")
    assert sha256(projector) == sha256(tiny_vision.mmproj_f16)
    entry = Library().find(f"{REPO}:Q8_0")
    assert {f["path"] for f in entry.files} == {"tiny-Q8_0.gguf", "mmproj-tiny-F16.gguf"}
    assert all(f["sha256"] for f in entry.files)
    assert vision.find_projector(result.path) == projector  # and the chat finds it beside the model
    assert not _content_gets(vision_repo, "mmproj-tiny-F32.gguf")


def test_the_cli_shows_the_choice_and_takes_another_or_none(vision_repo, capsys):
    assert main(["pull", REPO, "--quant", "Q4_K_M"]) == 0
    out = capsys.readouterr().out
    assert "sees images: with the vision projector mmproj-tiny-F16.gguf; also in the repo: mmproj-tiny-F32.gguf" in out
    assert main(["pull", REPO, "--quant", "F16", "--mmproj", "mmproj-tiny-F32.gguf", "--json"]) == 0
    pulled = json.loads(capsys.readouterr().out)
    assert pulled["projector"] == "mmproj-tiny-F32.gguf" and "mmproj-tiny-F32.gguf" in pulled["files"]
    assert main(["pull", REPO, "--quant", "Q8_0", "--no-mmproj", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["files"] == ["tiny-Q8_0.gguf"]


def test_a_projector_of_another_width_is_refused_before_any_byte_moves(hub_env, tiny_vision, fast):
    hub_env.add_repo("acme/Mismatched-GGUF", {"tiny-Q8_0.gguf": tiny_vision.text.gguf_q8_0,
                                             "mmproj-wide-F16.gguf": tiny_vision.mmproj_wide}, tags=["gguf"])
    with pytest.raises(vision.ProjectorError) as caught:
        download(DownloadRequest("acme/Mismatched-GGUF", quant="Q8_0"), settings=fast)
    assert "mmproj-wide-F16.gguf does not fit tiny-Q8_0.gguf" in caught.value.message
    assert Library().entries(refresh=False) == []
    for name in ("tiny-Q8_0.gguf", "mmproj-wide-F16.gguf"):  # only the headers were read, by Range
        ranges = [{k.lower(): v for k, v in r.headers.items()}.get("range", "") for r in _content_gets(hub_env, name)]
        assert ranges and all(r.startswith("bytes=0-") for r in ranges)


def test_a_damaged_projector_fails_verification_and_nothing_is_installed(vision_repo, tiny_vision, fast):
    size = tiny_vision.mmproj_f16.stat().st_size
    vision_repo.faults.add("mmproj-tiny-F16.gguf", "wrong_byte", times=-1, offset=size - 10)  # in the weights
    with pytest.raises(IntegrityError, match="mmproj-tiny-F16.gguf .* failed verification"):
        download(DownloadRequest(REPO, quant="Q8_0"), settings=fast)
    assert Library().entries(refresh=False) == []


def test_import_and_watched_folders_pair_a_model_with_the_projector_beside_it(tiny_vision, tmp_path, capsys):
    import shutil

    folder = tmp_path / "usb"
    folder.mkdir()
    for source in (tiny_vision.text.gguf_q8_0, tiny_vision.mmproj_f16, tiny_vision.mmproj_wide):
        shutil.copy(source, folder)
    library = Library()
    (imported,) = library.import_path(folder / tiny_vision.text.gguf_q8_0.name)
    assert imported.projector == tiny_vision.mmproj_f16.name  # the one that pairs, copied in with the model
    assert (tmp_path / "usb" / imported.projector).exists() and \
        (library.root / "local" / "tiny-llama-Q8_0" / imported.projector).exists()
    (watched,) = library.add_folder(folder)  # the projectors are no models of their own
    assert watched.projector == tiny_vision.mmproj_f16.name and watched.path.endswith("tiny-llama-Q8_0.gguf")
    assert main(["ls"]) == 0
    assert capsys.readouterr().out.count(f"sees images ({tiny_vision.mmproj_f16.name})") == 2


def test_discover_says_sees_images_and_its_download_brings_the_projector(vision_repo, tiny_vision, fast):
    from app.hub.discover import model_choices
    from tests.ui.tiny_hub import cpu_only

    choices = model_choices(REPO, cpu_only())
    assert {c.quant for c in choices.choices} == {"Q8_0", "Q4_K_M", "F16"}
    assert all(c.projector == "mmproj-tiny-F16.gguf" for c in choices.choices)
    q8 = next(c for c in choices.choices if c.quant == "Q8_0")
    assert q8.download_bytes == tiny_vision.text.gguf_q8_0.stat().st_size + tiny_vision.mmproj_f16.stat().st_size
    result = download(q8.request, settings=fast)
    assert result.projector == "mmproj-tiny-F16.gguf" and result.path.with_name(result.projector).exists()
    vision_repo.add_repo("acme/TinyText-GGUF", {"tiny-Q8_0.gguf": tiny_vision.text.gguf_q8_0}, tags=["gguf"])
    (text_only,) = model_choices("acme/TinyText-GGUF", cpu_only()).choices
    projector = vision.read_projector(tiny_vision.mmproj_f16)  # the fit counts what the projector needs
    assert q8.memory_bytes - text_only.memory_bytes == \
        projector.weights_bytes + projector.compute_bytes() + projector.embeddings_bytes()
