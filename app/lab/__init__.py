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
"""
