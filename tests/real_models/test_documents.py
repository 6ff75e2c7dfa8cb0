"""A question on a PDF, answered by SmolLM2 through ``quantdesk chat --docs`` with the right page cited: the guide
added and indexed by ``quantdesk docs`` (real processes, the real documents database), its four pages too many for
the documents' share of a 1k context, so retrieval must pick the page that answers. No embedding model ships in a
package the tests can fetch, so the collection is searched by its words (FTS5's bm25), as the CLI says."""

from __future__ import annotations

import json
import subprocess

import pytest

from app.documents.passages import Citation
from tests.commands.test_engine import quantdesk
from tests.fixtures.documents import write_text_pdf
from tests.real_models.conftest import THREADS

pytestmark = pytest.mark.real_model
PAGES = [
    "About the museum. The Quillon Lighthouse Museum stands on the northern cliffs of the island. It tells the story "
    "of the keepers who lived in the lighthouse for two hundred years, their families and the ships they guided home. "
    "The old lamp room at the top of the tower can be visited on a guided tour. The museum was opened in 1972 by the "
    "island's historical society, which still runs it with the help of volunteers.",
    "Opening hours. The museum opens at nine in the morning and closes at five in the evening, every day except "
    "Monday. In July and August it stays open until seven. The last entry is one hour before closing time. On public "
    "holidays the museum keeps its Sunday hours. Guided tours of the tower start every hour on the hour and last about "
    "forty minutes; they are limited to fifteen visitors each.",
    "Tickets and prices. An adult ticket costs 14 euros. Children under twelve enter for free, and students pay 9 "
    "euros with a valid card. A family pass for two adults and their children costs 30 euros. Tickets are sold at the "
    "desk by the entrance and include the guided tour of the tower. The ticket desk takes cards and cash.",
    "Getting there. The number 7 bus from the harbour stops at the museum gate every twenty minutes. There is a small "
    "car park beside the visitor centre, free for visitors. The coastal footpath from the village takes about an hour "
    "on foot and passes two beaches. Bicycles can be left in the racks by the gate.",
]
QUESTION = "How much does an adult ticket cost?"


def _run(*args: str) -> subprocess.CompletedProcess:
    result = quantdesk(*args)
    assert result.returncode == 0, result.stderr[-2000:]
    return result


def test_smollm2_answers_from_the_right_page_of_a_pdf(tmp_path, smollm2_gguf):
    folder = tmp_path / "museum"
    write_text_pdf(folder / "guide.pdf", PAGES)
    _run("docs", "add", "museum", str(folder))
    indexed = _run("docs", "index", "museum")
    assert "museum: 1 files (1 new" in indexed.stdout and "4 passages stored, 0 embedded" in indexed.stdout

    result = _run("chat", str(smollm2_gguf), "--docs", "museum", "--prompt", QUESTION, "--temperature", "0",
                  "--ctx", "1024", "--max-tokens", "24", "--threads", str(THREADS), "--json")
    out = json.loads(result.stdout)
    cited = [Citation.from_dict(c) for c in out["citations"]]
    assert out["documents"]["whole"] is False and len(cited) < len(PAGES)  # retrieval chose
    assert out["documents"]["notes"] == ["museum has no embedding model: searched by its words only"]
    assert (cited[0].number, cited[0].passage.where) == (1, "guide.pdf, page 3")
    assert "14 euros" in out["text"], out["text"]
