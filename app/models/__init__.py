"""Models: quant names, metadata parsers (GGUF and safetensors header bytes, config.json; local files read),
the fit estimator and the quant recommender. Pure Python: nothing here loads a model or touches the network
(app.hub reads remote bytes and hands them here); tests/test_import_boundaries.py keeps it so."""
