"""Retrieval on a real documents database, counted by the tiny model's real tokenizer: words and vectors merged,
the budget never passed, a small collection sent whole in file order, a reranker's order, and a note for each
thing the search could not use (a collection still indexing, no embedding model, an engine that failed)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import pytest

from app.datatypes import LoadSettings
from app.documents.passages import Chunk, DocumentsError
from app.documents.retrieve import MISSES, passages_block, retrieve, search
from app.documents.store import DocumentStore
from app.errors import EngineError

EMBED = "/models/words.gguf"
# what each passage says, by meaning: the test's embedder maps a text to the unit vector of the topics it names
TOPICS = {"reset": ("reset", "restart", "reboot", "factory"), "battery": ("battery", "charge", "power"),
          "water": ("water", "rinse", "wash", "clean")}


class TopicEmbedder:
    """An embedder whose vectors say which topics a text names (synonyms alike): the vector search finds a passage
    that shares no word with the question, as a real embedding model does. The real model is used end to end in
    tests/commands/test_chat_docs.py and tests/server/test_documents.py."""

    def __init__(self, model: str = EMBED, fail: bool = False) -> None:
        self.model = model
        self.fail = fail
        self.calls = 0

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls += 1
        if self.fail:
            raise EngineError("the embedding engine stopped", kind="crashed")
        out = []
        for text in texts:
            words = text.lower()
            vector = [1.0 if any(w in words for w in ws) else 0.0 for ws in TOPICS.values()] + [0.1]
            norm = math.sqrt(sum(v * v for v in vector))
            out.append([v / norm for v in vector])
        return out


class KeywordReranker:
    model = "/models/rerank.gguf"

    def __init__(self, word: str, fail: bool = False) -> None:
        self.word, self.fail = word, fail

    def rerank(self, query: str, texts: Sequence[str]) -> list[float]:
        if self.fail:
            raise EngineError("the reranker ran out of memory", kind="request")
        return [float(text.lower().count(self.word)) for text in texts]


@pytest.fixture(scope="module")
def tokens(tiny_models):
    """The tiny model's own count of a text, as the engine counts a raw prompt (BOS, special tokens parsed)."""
    from backends.llama_cpp import LlamaCppBackend

    backend = LlamaCppBackend()
    backend.load(str(tiny_models.gguf_f16), LoadSettings(n_ctx=512, threads=2, gpu_layers=0))
    yield lambda text: len(backend.tokenize(text, special=True))
    backend.unload()


@pytest.fixture
def store(tmp_path):
    with DocumentStore(tmp_path / "documents.sqlite3") as opened:
        yield opened


def _file(store: DocumentStore, name: str, path: str, texts: list[str], *, pages: bool = True) -> None:
    chunks = [Chunk(text, i, page=i + 1 if pages else None, line=None if pages else 1 + 5 * i)
              for i, text in enumerate(texts)]
    store.store_file(name, path, size=10, mtime_ns=1, sha256=path, chunks=chunks, pages=len(texts))


def _embed_all(store: DocumentStore, name: str, embedder: TopicEmbedder) -> None:
    pending = store.unembedded(name, embedder.model, 1000)
    store.put_vectors(name, embedder.model, list(zip([i for i, _ in pending],
                                                     embedder.embed([t for _, t in pending]), strict=True)))


FILLER = ("This paragraph is about the weather in the valley, the shape of the hills and the history of the old "
          "mill beside the river, written long enough to take a good part of a small budget. ") * 3


def _manual(store: DocumentStore, name: str = "manuals", embed: str | None = EMBED) -> None:
    store.create_collection(name, embed_model=embed)
    _file(store, name, "/docs/guide.pdf", [FILLER + "Chapter one.",
                                           "To reboot the device hold the button for ten seconds.",
                                           FILLER + "Chapter three."])
    _file(store, name, "/docs/care.md", ["Rinse the filter under warm water once a week.", FILLER + "More care."])
    _file(store, name, "/docs/power.txt", [FILLER + "Charge it overnight before first use."], pages=False)


def test_a_phrase_finds_its_page_and_the_passages_fit_the_budget(store, tokens):
    _manual(store, embed=None)
    got = retrieve(store, ["manuals"], "how long to hold the button?", budget_tokens=400, count_tokens=tokens)
    assert not got.whole and got.citations
    first = got.citations[0]
    assert (first.number, first.passage.where) == (1, "guide.pdf, page 2")
    assert "hold the button" in first.passage.text
    assert got.tokens == tokens(passages_block([c.passage for c in got.citations])) <= 400
    assert "manuals has no embedding model: searched by its words only" in got.notes


def test_vectors_find_a_passage_that_shares_no_word_with_the_question_and_both_lists_merge(store, tokens):
    _manual(store)
    embedder = TopicEmbedder()
    _embed_all(store, "manuals", embedder)
    question = "How do I restart?"  # no word of any passage
    words_only = retrieve(store, ["manuals"], question, budget_tokens=300, count_tokens=tokens)
    assert all("reboot" not in c.passage.text for c in words_only.citations)
    assert any("embedding model cannot be used here" in note for note in words_only.notes)
    merged = retrieve(store, ["manuals"], question, budget_tokens=300, count_tokens=tokens, embedder=embedder)
    assert "reboot" in merged.citations[0].passage.text and merged.notes == ()
    assert merged.tokens <= 300


def test_the_budget_is_never_passed_and_k_bounds_the_passages(store, tokens):
    store.create_collection("big")
    _file(store, "big", "/big.txt", [f"Passage {i} tells of the pump and its valve, part {i}. " * 4
                                     for i in range(60)], pages=False)
    base = tokens(passages_block([]))  # the instruction and the question's label
    one = tokens(passages_block(store.collection_passages(["big"], 1))) - base
    for budget in (base + 10, base + one, base + 2 * one + 5, base + 3 * one - 5, base + 40 * one):
        got = retrieve(store, ["big"], "pump valve", budget_tokens=budget, count_tokens=tokens, k=5)
        assert not got.whole and len(got.citations) <= 5
        if got.citations:
            assert got.tokens == tokens(passages_block([c.passage for c in got.citations]))
        assert got.tokens <= budget
        # as many as fit: a passage more would not (each about ``one`` tokens)
        assert len(got.citations) == min(5, (budget - base) // one) or \
            len(got.citations) == min(5, (budget - base) // one) - 1
    none = retrieve(store, ["big"], "pump", budget_tokens=base + 10, count_tokens=tokens)
    assert none.citations == () and "no passage found fits the room left in the context" in none.notes
    zero = retrieve(store, ["big"], "pump", budget_tokens=0, count_tokens=tokens)
    assert zero.citations == () and zero.notes[-1] == "no room is left in the context for passages from the documents"


def test_a_small_collection_is_sent_whole_in_file_order_and_a_large_one_never(store, tokens):
    store.create_collection("notes")
    _file(store, "notes", "/n/b.txt", ["Second file, first part.", "Second file, second part."], pages=False)
    _file(store, "notes", "/n/a.txt", ["First file."], pages=False)
    got = retrieve(store, ["notes"], "anything at all", budget_tokens=300, count_tokens=tokens)
    assert got.whole
    assert [c.passage.text for c in got.citations] == ["First file.", "Second file, first part.",
                                                       "Second file, second part."]
    assert [c.number for c in got.citations] == [1, 2, 3]
    assert got.tokens == tokens(passages_block([c.passage for c in got.citations])) <= 300
    # the same collection with less room: ranked passages, not the whole
    tight = retrieve(store, ["notes"], "second part", budget_tokens=got.tokens - 1, count_tokens=tokens)
    assert not tight.whole and tight.tokens <= got.tokens - 1
    assert "Second file, second part." in [c.passage.text for c in tight.citations]


def test_each_thing_the_search_could_not_use_is_a_note(store, tokens):
    _manual(store)
    store.put_pending("manuals", [("/docs/later.pdf", 1, 1), ("/docs/later2.pdf", 1, 1)])
    got = retrieve(store, ["manuals"], "rinse the filter", budget_tokens=200, count_tokens=tokens)
    assert "manuals is still indexing: 3 of 5 files indexed" in got.notes
    assert "manuals is still embedding: 0 of 6 passages can be found by meaning" in got.notes
    assert "Rinse the filter" in got.citations[0].passage.text  # the words still find it
    store.set_paused("manuals", True)
    assert "manuals is paused: 3 of 5 files indexed" in \
        retrieve(store, ["manuals"], "filter", budget_tokens=200, count_tokens=tokens).notes

    _embed_all(store, "manuals", TopicEmbedder())
    failing = retrieve(store, ["manuals"], "rinse the filter", budget_tokens=200, count_tokens=tokens,
                       embedder=TopicEmbedder(fail=True))
    assert any(n.startswith("the question could not be embedded (the embedding engine stopped)")
               for n in failing.notes)
    assert "Rinse the filter" in failing.citations[0].passage.text
    other = TopicEmbedder("/models/other.gguf")
    got = retrieve(store, ["manuals"], "rinse", budget_tokens=200, count_tokens=tokens, embedder=other)
    assert other.calls == 0 and "manuals: embedded by another model than other.gguf, so searched by words only" \
        in got.notes
    nothing = retrieve(store, ["manuals"], "zebra", budget_tokens=200, count_tokens=tokens)
    assert nothing.citations == () and "nothing in manuals matches the question" in nothing.notes


def test_an_unknown_collection_is_a_sentence_naming_it(store, tokens):
    _manual(store)
    with pytest.raises(DocumentsError, match="no collection named “handbook”"):
        retrieve(store, ["manuals", "handbook"], "reset", budget_tokens=200, count_tokens=tokens)


def test_a_reranker_orders_the_merged_passages_and_one_that_fails_leaves_the_search_order(store, tokens):
    _manual(store, embed=None)
    question = "the button and the filter"
    plain = retrieve(store, ["manuals"], question, budget_tokens=400, count_tokens=tokens)
    first = "button" if "button" in plain.citations[0].passage.text else "filter"
    other = {"button": "filter", "filter": "button"}[first]
    assert any(other in c.passage.text for c in plain.citations[1:])
    ranked = retrieve(store, ["manuals"], question, budget_tokens=400, count_tokens=tokens,
                      reranker=KeywordReranker(other))
    assert other in ranked.citations[0].passage.text and ranked.citations[0].score == 1.0
    failed = retrieve(store, ["manuals"], question, budget_tokens=400, count_tokens=tokens,
                      reranker=KeywordReranker(other, fail=True))
    assert [c.passage for c in failed.citations] == [c.passage for c in plain.citations]
    assert failed.notes[-1].startswith("the reranker could not be used (the reranker ran out of memory)")


def test_any_text_is_a_safe_question(store, tokens):
    _manual(store)
    for question in ("", "   ", '"', "NEAR(", "<|im_start|>system", "\x00", "ü" * 5000):
        got = retrieve(store, ["manuals"], question, budget_tokens=200, count_tokens=tokens,
                       embedder=TopicEmbedder())
        assert got.tokens <= 200


def test_search_ranks_without_a_budget_as_retrieve_does(store, tokens):
    _manual(store)
    embedder = TopicEmbedder()
    _embed_all(store, "manuals", embedder)
    found = search(store, ["manuals"], "How do I restart?", embedder=embedder, limit=3)
    assert len(found.passages) == 3 and "reboot" in found.passages[0][0].text
    scores = [score for _, score in found.passages]
    assert scores == sorted(scores, reverse=True) and found.notes == ()
    got = retrieve(store, ["manuals"], "How do I restart?", budget_tokens=300, count_tokens=tokens,
                   embedder=embedder)
    assert got.citations[0].passage == found.passages[0][0]
    both = search(store, ["manuals"], "reboot", embedder=embedder).passages[0]  # first in both lists
    assert "reboot" in both[0].text and both[1] == 2 / 61
    assert search(store, ["manuals"], "zebra").passages == ()
    with pytest.raises(DocumentsError, match="handbook"):
        search(store, ["handbook"], "x")


def test_passages_too_long_for_the_room_left_are_not_all_counted(store, tokens):
    store.create_collection("big")
    _file(store, "big", "/big.txt", [f"Passage {i} tells of the pump and its valve. " * 30 for i in range(60)],
          pages=False)
    calls = []

    def counted(text: str) -> int:
        calls.append(text)
        return tokens(text)

    got = retrieve(store, ["big"], "pump valve", budget_tokens=tokens(passages_block([])) + 20, count_tokens=counted)
    assert got.citations == ()
    assert len(calls) == 1 + MISSES  # the instruction, then MISSES passages that did not fit: no more
