"""The quant lab: compare quant levels and formats of one model on this machine — speed, memory and
quality (llama-perplexity's KL-divergence statistics) side by side. Qt-free; the GUI page and ``quantdesk bench``
call the same functions:

- ``runner.run_bench(models, BenchSettings, reference=, reference_file=, corpus_text=, on_progress=, cancel=)``
  -> ``BenchResult``
- ``store.ResultStore().save / history / load / delete`` for past results
- ``export.to_json / from_json / to_csv / read_csv``; ``card.write_card`` (Markdown and JSON); ``report`` (the
  statistics in llama-perplexity's layout, the ranking)
- ``references`` (the KL reference files), ``corpus`` (what is scored), ``measured`` (for the recommender and
  Discover), ``uploaders`` (one quant from every uploader of a base model: ``find``, ``fetch``, ``clean_up``)

In detail (each module's job, read with docs/architecture.md's module map):

the quant lab: ``runner`` (speed runs; the quality pass: the reference's file, then each variant scored against it
in its own host), ``metrics`` (llama-perplexity's statistics from per-position figures), ``references`` (the KL
reference files: kept per model, text and windows; exported, imported, llama-perplexity's converted), ``corpus``
(the bundled sets: prose, code, conversations, German; a user's file or folder; conversations and the user's chats
rendered through the reference's chat format, ``backends/chat_format``), ``results`` (a sweep's rows carry their
KV-cache type and context length), ``report`` (the statistics in llama-perplexity's layout, the ranking with KLD×GB
and "not significantly different"), ``card`` (the quant card, Markdown and JSON), ``measured`` (what the lab
measured here, for the reasons of ``quantdesk recommend`` and the Discover page: a Hub quant answered only by its
own download, ``VariantResult.origin``), ``uploaders`` (one quant from every uploader of a base model: found through
``hub/search``, headers checked by Range through ``hub/remote``, fetched through ``hub/download`` into the lab's own
cache and removed after unless kept), ``export``, ``store``
"""
