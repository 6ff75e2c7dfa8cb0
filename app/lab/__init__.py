"""The quant lab: compare quant levels and formats of one model on this machine — speed, memory and
quality side by side. Qt-free; the GUI page and ``quantdesk bench`` call the same functions:

- ``runner.run_bench(models, BenchSettings, reference=, on_progress=, cancel=)`` -> ``BenchResult``
- ``store.ResultStore().save / history / load / delete`` for past results
- ``export.to_json / from_json / to_csv / read_csv``
"""
