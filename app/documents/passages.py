"""The shapes the documents home passes around: a file's ``Section``s as extracted, the ``Chunk``s stored, the
``Passage``s a search returns and the ``Citation``s a reply keeps (stored with the message as dicts, read back by
``app.records``' rule so another version's keys are no harm)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from collections.abc import Sequence
from typing import Any, Protocol

from app.errors import QuantDeskError
from app.records import from_known


class Embedder(Protocol):
    """Embeddings of texts by one embedding model (``embedder.pool_embedder``: through the engine host)."""

    model: str  # the embedding model's library path: the vectors of one model are only compared with its own

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Each text's vector, unit length, in order; an engine failure raises in words."""
        ...


class Reranker(Protocol):
    """Scores of passages for a question by a reranker model (``rerank.pool_reranker``: llama.cpp's rank pooling)."""

    model: str

    def rerank(self, query: str, texts: Sequence[str]) -> list[float]:
        """Each text's relevance to ``query``, in order (higher is more relevant)."""
        ...


class DocumentsError(QuantDeskError):
    """A collection, a file or the documents database cannot be used as asked; the message says why."""


@dataclass(frozen=True)
class Section:
    """A run of a file's text with where it stands: ``page`` (1-based; PDF), ``heading`` (the headings above it,
    joined with " › "; Markdown, HTML, DOCX), ``line`` (1-based line of its start; text and code)."""

    text: str
    page: int | None = None
    heading: str = ""
    line: int | None = None


@dataclass(frozen=True)
class Chunk:
    """One passage of a file as it is stored and searched: its text and where it starts, its order in the file."""

    text: str
    ordinal: int
    page: int | None = None
    heading: str = ""
    line: int | None = None


@dataclass(frozen=True)
class Passage:
    """A stored chunk as a search returns it: which collection and file it came from, where in the file."""

    chunk_id: int
    collection: str
    path: str
    text: str
    page: int | None = None
    heading: str = ""
    line: int | None = None

    @property
    def where(self) -> str:
        """The file's name and the passage's place in it, as a citation says it: "guide.pdf, page 3"."""
        name = self.path.replace("\\", "/").rsplit("/", 1)[-1]
        place = (f"page {self.page}" if self.page is not None else
                 self.heading or (f"line {self.line}" if self.line is not None else ""))
        return f"{name}, {place}" if place else name


@dataclass(frozen=True)
class Citation:
    """A passage a reply was given, under the number the prompt showed it with ([1], [2], …)."""

    number: int
    passage: Passage
    score: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"number": self.number, "score": self.score, **asdict(self.passage)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Citation:
        return cls(int(data["number"]), from_known(Passage, data), float(data.get("score", 0.0)))
