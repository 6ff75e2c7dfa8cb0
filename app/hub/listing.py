"""One Hub repo as QuantDesk sees it, fetched once per request and shared by everything that asks about it:
Search's and Discover's details, ``show``, ``pull`` (through ``plan_download``), ``recommend``, ``inspect`` and the
lab.

``RepoListing.fetch(repo_id)`` makes one ``model_info`` call (files with sizes and hashes, tags, card) and one refs
call (the branches), then sorts the files and branches into quants by one rule for every format:

- GGUF: files grouped by the quant their names carry, the shards of a split model together. Vision projectors
  (``mmproj-*.gguf``) are no quant: they are kept apart in ``projectors``, and each quant group lists the ones
  in its folder (``QuantGroup.projectors``, the default first: F16, as llama.cpp's converter writes it), the
  pair a pull fetches together (app.hub.plan checks the two headers before any byte moves).
- MLX, plain safetensors: the listed revision is one model folder.
- EXL2 / EXL3: a branch holds one bit rate when its name says so (``4.0bpw``, ``6_5bpw-h8``); a branch named by a
  bare number (``6_5``, as bartowski names them) does where the repo is known to be EXL (its tags, its name, EXL2's
  measurement.json, or the config of a ``…bpw`` branch), and elsewhere only when its own config.json says EXL
  (a ``1_0`` branch of a plain repo is a version). The listed revision counts too when it holds EXL weights itself.
  The repo's format is its tags', else its own config's, else the first bit-rate branch's config's, else what its
  name says (EXL3 when it says so, else EXL2, the older convention).

A branch's files cost one more ``model_info`` (at that branch), fetched when first needed and then kept. Every call
goes through app.hub.config (endpoint and token at call time); header bytes are read by Range (app.hub.remote) and
parsed by app.models.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
import functools
from functools import cached_property
from typing import TYPE_CHECKING, Any, TypeVar

from app.errors import QuantDeskError
from app.hub import config
from app.hub.errors import HubError
from app.hub.formats import (EXL_FORMATS, exl_branches, exl_format_hint, exl_quant_of, format_of_repo,
                             is_bare_bit_rate, quant_from_name)
from app.models.detect import folder_format
from app.models.quants import QuantInfo, parse_exl_config, parse_exl_name, parse_gguf_filename

if TYPE_CHECKING:  # the header readers load on first use: the GUI imports this module at start
    from app.models.metadata import ModelMetadata

README = "README.md"
T = TypeVar("T")


@dataclass(frozen=True)
class RemoteFile:
    path: str
    size: int
    sha256: str | None = None  # LFS files
    blob_id: str | None = None  # git blob sha1: how small (non-LFS) files are checked


@dataclass(frozen=True)
class Branch:
    name: str
    commit: str


@dataclass
class QuantGroup:
    quant: str
    files: list[str]
    size: int  # GGUF: its files; EXL: its weights (the safetensors), as a GGUF quant's size is
    revision: str | None = None  # the branch holding it (EXL2/EXL3); None: the revision listed
    projectors: list[str] = field(default_factory=list)  # vision projectors beside it, the default first


@dataclass(frozen=True)
class ListedModel:
    """One model a repo offers: a GGUF (its first shard names it), the listed revision's folder, or a bit-rate
    branch. ``label`` is how the recommender and the CLI name it: ``owner/repo/file.gguf``, ``owner/repo`` (or
    ``owner/repo@revision``) and ``owner/repo@branch``."""

    label: str
    kind: str  # gguf | folder | branch
    files: tuple[str, ...]  # what a download of it fetches (a branch: empty until its files are fetched)
    revision: str | None = None  # the branch, for kind "branch"; else the listed revision
    size: int = 0  # bytes a download of it fetches


@dataclass(frozen=True)
class _Sorted:
    format: str
    config: dict[str, Any] | None
    bit_rates: dict[str, QuantInfo]
    own_bit_rate: QuantInfo | None


def _rows(info: Any) -> list[RemoteFile]:
    return [RemoteFile(path=s.rfilename, size=int(s.size or 0), sha256=s.lfs.sha256 if s.lfs else None,
                       blob_id=s.blob_id) for s in info.siblings or []]


def is_projector(path: str) -> bool:
    return path.lower().endswith(".gguf") and "mmproj" in path.lower()


def _folder(path: str) -> str:
    return path.rpartition("/")[0]


_PROJECTOR_PRECISIONS = ("f16", "bf16", "f32")  # preferred in this order; then quantized ones, largest first


def projector_rank(path: str, size: int = 0) -> tuple[int, int, str]:
    """Sort key for projectors: F16 first (llama.cpp's converter default; a quantized vision encoder loses more
    than it saves), then BF16, F32, then quantized ones, larger (more precise) first."""
    name = path.rpartition("/")[2].lower().removesuffix(".gguf")
    tokens = set(name.replace("_", "-").replace(".", "-").split("-")) | {name.rpartition("-")[2]}
    rank = next((i for i, p in enumerate(_PROJECTOR_PRECISIONS) if p in tokens), len(_PROJECTOR_PRECISIONS))
    return rank, -size, path


def _holds_weights(files: list[RemoteFile]) -> bool:
    return any(f.path.endswith((".safetensors", ".gguf")) for f in files)


@contextmanager
def _hub_errors(repo_id: str, revision: str | None) -> Iterator[None]:
    try:
        yield
    except config.api_errors() as exc:
        raise config.hub_error(exc, repo_id, revision or "main") from None


@dataclass
class RepoListing:
    """One repo at one revision, as one request fetched it (see the module); ``fetch`` makes one."""

    repo_id: str
    revision: str | None  # as asked; None: the default branch
    commit: str
    last_modified: str | None
    license: str | None
    gated: bool
    tags: list[str]
    files: list[RemoteFile]
    branches: list[Branch]
    _branch_files: dict[str, list[RemoteFile]] = field(default_factory=dict, repr=False)
    _summary: str | None = field(default=None, repr=False)
    _projector_infos: dict[str, Any] = field(default_factory=dict, repr=False)

    # -- fetching ------------------------------------------------------------------------------------------
    @classmethod
    def fetch(cls, repo_id: str, revision: str | None = None, branches: bool = True) -> RepoListing:
        """The repo at ``revision``: one model_info and one refs call (``branches=False``: the model_info alone,
        and the listing knows no other branch). The files and branches are sorted into quants when first asked (a
        config.json or two read where the tags do not tell the format)."""
        config.require_online(f"look up {repo_id}")
        api = config.api()
        with _hub_errors(repo_id, revision):
            info = api.model_info(repo_id, revision=revision, files_metadata=True)
            refs = api.list_repo_refs(repo_id).branches if branches else []
        # huggingface_hub's CardData.to_dict() carries no annotations; it returns the card's YAML header as a dict
        card: dict[str, Any] = info.card_data.to_dict() if info.card_data is not None else {}  # type: ignore[no-untyped-call]
        listing = cls(repo_id=info.id, revision=revision, commit=info.sha or "",
                      last_modified=info.last_modified.isoformat() if info.last_modified else None,
                      license=card.get("license"), gated=bool(info.gated), tags=list(info.tags or []),
                      files=_rows(info), branches=[Branch(b.name, b.target_commit) for b in refs])
        if not listing.commit:
            raise HubError(f"The Hub did not say which commit {repo_id}@{revision or 'main'} is.")
        return listing

    @property
    def paths(self) -> list[str]:
        return [f.path for f in self.files]

    def branch_commit(self, branch: str) -> str:
        return next(b.commit for b in self.branches if b.name == branch)

    def branch_files(self, branch: str) -> list[RemoteFile]:
        """The files of another branch (one model_info, fetched once)."""
        if branch not in self._branch_files:
            self.fetch_branches([branch])
        return self._branch_files[branch]

    def fetch_branches(self, branches: list[str]) -> None:
        """Fetch the files of several branches side by side (repos keep up to a dozen bit rates)."""
        wanted = [b for b in branches if b not in self._branch_files]
        if not wanted:
            return
        from concurrent.futures import ThreadPoolExecutor

        api = config.api()

        def files_of(branch: str) -> list[RemoteFile]:
            with _hub_errors(self.repo_id, branch):
                return _rows(api.model_info(self.repo_id, revision=self.branch_commit(branch), files_metadata=True))

        with ThreadPoolExecutor(max_workers=min(8, len(wanted))) as pool:
            self._branch_files |= dict(zip(wanted, pool.map(files_of, wanted), strict=True))

    def _read_config(self, commit: str) -> dict[str, Any] | None:
        """config.json of a revision (a few kB, one request); None when it cannot be read: the format then stays
        what the tags and names say."""
        from app.hub import remote

        try:
            return remote.read_remote_json(self.repo_id, "config.json", commit)
        except QuantDeskError:
            return None

    # -- the one rule: worked out when first asked (it may read a config.json or two), then kept ---------------
    @property
    def format(self) -> str:
        """gguf | mlx | safetensors | exl2 | exl3."""
        return self._sorted.format

    @property
    def revision_config(self) -> dict[str, Any] | None:
        """The listed revision's config.json, where it was read."""
        return self._sorted.config

    @property
    def bit_rates(self) -> dict[str, QuantInfo]:
        """Branch -> the bit rate it holds (EXL2/EXL3), lowest first."""
        return self._sorted.bit_rates

    @property
    def own_bit_rate(self) -> QuantInfo | None:
        """The listed revision's bit rate, when it holds EXL weights itself."""
        return self._sorted.own_bit_rate

    @cached_property
    def _sorted(self) -> _Sorted:
        fmt = format_of_repo(self.tags, self.paths)
        own_config = None
        if fmt == "safetensors" and "config.json" in self.paths:  # the tags did not tell: one small read settles it
            own_config = self._read_config(self.commit)
            fmt = format_of_repo(self.tags, self.paths, own_config)
        bit_rates: dict[str, QuantInfo] = {}
        if fmt in EXL_FORMATS or fmt == "safetensors":
            fmt, bit_rates = self._bit_rate_branches(fmt)
        own = None
        if fmt in EXL_FORMATS and any(f.path.endswith(".safetensors") for f in self.files):
            if own_config is None and "config.json" in self.paths:
                own_config = self._read_config(self.commit)
            named = exl_quant_of(self.revision, fmt, bare_numbers=True) if self.revision else None
            own = (parse_exl_config(own_config, self.repo_id) if own_config else None) or named or \
                parse_exl_name(self.repo_id, fmt)
        return _Sorted(fmt, own_config, bit_rates, own)

    def _bit_rate_branches(self, fmt: str) -> tuple[str, dict[str, QuantInfo]]:
        """The repo's format, and which other branches hold one bit rate each (see the module)."""
        others = [b.name for b in self.branches if b.commit != self.commit]  # the listed revision is itself
        known = fmt if fmt in EXL_FORMATS else exl_format_hint(self.repo_id, self.tags, self.paths)
        found = exl_branches(self.repo_id, others, known, bare_numbers=bool(known))
        repo_is_exl = True  # once it is known, every bit-rate name counts, bare numbers too
        if fmt not in EXL_FORMATS and found:  # untagged: the first bit-rate branch's config, else the name, tells
            first = next(iter(found))
            branch_config = self._read_config(self.branch_commit(first))
            fmt = folder_format(branch_config) if branch_config else ""
            fmt = fmt if fmt in EXL_FORMATS else found[first].format
        elif fmt not in EXL_FORMATS:  # nothing says EXL: a bare-number branch counts if its own config says so
            repo_is_exl = False
            for name in (b for b in others if is_bare_bit_rate(b)):
                branch_config = self._read_config(self.branch_commit(name))
                if branch_config and folder_format(branch_config) in EXL_FORMATS:
                    fmt = folder_format(branch_config)
                    found[name] = QuantInfo(fmt, "", None)  # named properly just below
        if fmt in EXL_FORMATS:
            found = exl_branches(self.repo_id, others if repo_is_exl else found, fmt, bare_numbers=True)
        return fmt, found

    # -- what the repo offers --------------------------------------------------------------------------------
    @property
    def projectors(self) -> list[RemoteFile]:
        """Vision projectors (``mmproj-*.gguf``): not models of their own; they go with a GGUF model."""
        return [f for f in self.files if is_projector(f.path)]

    def projectors_for(self, model_path: str) -> list[RemoteFile]:
        """The projectors that go with a GGUF: those in its folder of the repo, the default first."""
        return sorted((f for f in self.projectors if _folder(f.path) == _folder(model_path)),
                      key=lambda f: projector_rank(f.path, f.size))

    def gguf_groups(self) -> list[QuantGroup]:
        groups: dict[str, QuantGroup] = {}
        for f in self.files:
            quant = quant_from_name(f.path) if f.path.endswith(".gguf") and not is_projector(f.path) else None
            if quant:
                group = groups.setdefault(quant, QuantGroup(quant=quant, files=[], size=0))
                group.files.append(f.path)
                group.size += f.size
        for group in groups.values():
            group.projectors = [f.path for f in self.projectors_for(group.files[0])]
        return list(groups.values())

    def quants(self) -> list[QuantGroup]:
        """Every quant, smallest first: GGUF groups, or a group per bit-rate branch (their files fetched side by
        side) and the listed revision's own."""
        groups = self.gguf_groups()
        if self.bit_rates:
            self.fetch_branches(list(self.bit_rates))
            groups += [_exl_group(q.quant, b, self._branch_files[b]) for b, q in self.bit_rates.items()]
        if self.own_bit_rate is not None:
            own_revision = next((b.name for b in self.branches if b.commit == self.commit), self.commit)
            groups.append(_exl_group(self.own_bit_rate.quant, own_revision, self.files))
        return sorted(groups, key=lambda g: g.size)

    def models(self) -> list[ListedModel]:
        """The models to size and choose from: each GGUF (not a projector, not a later shard); else the listed
        revision's folder when it holds weights or no branch does, and each bit-rate branch (only when no
        revision was named: a named revision is sized alone)."""
        sizes = {f.path: f.size for f in self.files}
        groups = {name: g for g in self.gguf_groups() for name in g.files}
        out = []
        for name in sorted(p for p in self.paths if p.lower().endswith(".gguf") and not is_projector(p)):
            info = parse_gguf_filename(name)
            if info and not info.is_first_shard:
                continue
            files = tuple(groups[name].files) if name in groups else (name,)
            out.append(ListedModel(f"{self.repo_id}/{name}", "gguf", files, self.revision,
                                   sum(sizes.get(f, 0) for f in files)))
        if out:
            return out
        branches = self.bit_rates if self.revision is None else {}
        if "config.json" in self.paths and (_holds_weights(self.files) or not branches):
            label = f"{self.repo_id}@{self.revision}" if self.revision else self.repo_id
            whole = tuple(f.path for f in self.files if f.path != ".gitattributes")
            out.append(ListedModel(label, "folder", whole, self.revision, sum(sizes[f] for f in whole)))
        out += [ListedModel(f"{self.repo_id}@{branch}", "branch", (), branch) for branch in branches]
        return out

    def read_metadata(self, model: ListedModel) -> ModelMetadata:
        """The header of one model, read by Range requests (a GGUF's first bytes; a folder's config.json and
        safetensors headers)."""
        from app.hub import remote

        if model.kind == "gguf":
            meta = remote.read_remote_gguf(self.repo_id, model.files[0], self.commit)
            projectors = self.projectors_for(model.files[0])
            if projectors:  # sized with the projector a pull fetches with it (the first: see app.hub.plan)
                try:
                    meta.projector = self._projector_info(projectors[0].path)
                except QuantDeskError as exc:  # the model is still sized; the note says what was left out
                    meta.notes.append(f"the vision projector {projectors[0].path} could not be read ({exc}); "
                                      "not counted")
            return meta
        if model.kind == "folder":
            meta = remote.read_remote_folder(self.repo_id, model.files, self.commit, source=model.label,
                                             name=self.revision or self.repo_id, folder_config=self.revision_config)
            bit_rate = self.own_bit_rate
        else:
            branch = model.revision or ""
            meta = remote.read_remote_folder(self.repo_id, [f.path for f in self.branch_files(branch)],
                                             self.branch_commit(branch), source=model.label, name=branch)
            bit_rate = self.bit_rates[branch]
        if bit_rate is not None and meta.format not in EXL_FORMATS:  # an EXL2 from before quantization_config
            meta.format, meta.quant = bit_rate.format, bit_rate
        return meta

    def candidates(self, models: list[ListedModel] | None = None) -> list[tuple[str, ModelMetadata | Exception]]:
        """(label, metadata or the error that stopped it) for each model, as the recommender takes them."""
        models = self.models() if models is None else models
        try:
            self.fetch_branches([m.revision or "" for m in models if m.kind == "branch"])  # side by side, once
        except QuantDeskError:
            pass  # a branch the Hub would not list: its own read below says so, beside the others
        return [(m.label, _or_error(functools.partial(self.read_metadata, m))) for m in models]

    def _projector_info(self, path: str) -> Any:
        """A projector's header, read by Range once per listing (every quant of the repo shares it)."""
        if path not in self._projector_infos:
            from app.hub import remote

            self._projector_infos[path] = remote.read_remote_projector(self.repo_id, path, self.commit)
        return self._projector_infos[path]

    def download_size(self, model: ListedModel) -> int:
        """Bytes a download of ``model`` fetches: its files; a branch's weights, as ``quants`` sizes it."""
        if model.kind != "branch":
            return model.size
        return _exl_group("", model.revision or "", self.branch_files(model.revision or "")).size

    def summary(self, limit: int = 400) -> str:
        """The first paragraph of the model card after its YAML front matter ("" without one)."""
        if self._summary is None:
            self._summary = ""
            if README in self.paths:
                from app.hub import remote

                try:
                    text = remote.read_remote_text(self.repo_id, README, self.commit)
                except QuantDeskError:  # a card we cannot read leaves the summary empty, never the listing
                    text = ""
                self._summary = _first_paragraph(text, limit)
        return self._summary

    def to_json(self, with_summary: bool = True) -> dict[str, Any]:
        """What ``quantdesk show --json`` prints."""
        return {"repo_id": self.repo_id, "commit": self.commit, "last_modified": self.last_modified,
                "license": self.license, "gated": self.gated, "format": self.format,
                "files": [{"path": f.path, "size": f.size, "sha256": f.sha256} for f in self.files],
                "quants": [asdict(g) for g in self.quants()], "branches": [b.name for b in self.branches],
                "projectors": [f.path for f in self.projectors],
                "summary": self.summary() if with_summary else ""}


def _exl_group(quant: str, revision: str, files: list[RemoteFile]) -> QuantGroup:
    """A branch is downloaded as a whole; its size is its weights (the safetensors), as a GGUF quant's is."""
    kept = [f for f in files if f.path != ".gitattributes"]
    return QuantGroup(quant=quant, files=[f.path for f in kept], revision=revision,
                      size=sum(f.size for f in kept if f.path.endswith(".safetensors")))


def _or_error(read: Callable[[], T]) -> T | QuantDeskError:
    try:
        return read()
    except QuantDeskError as exc:
        return exc


def _first_paragraph(text: str, limit: int) -> str:
    if text.startswith("---"):
        end = text.find("\n---", 3)
        text = text[end + 4:] if end != -1 else text
    paragraphs = [p.strip() for p in text.split("\n\n") if p.strip() and not p.strip().startswith("#")]
    return paragraphs[0][:limit] if paragraphs else ""
