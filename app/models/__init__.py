"""Models: quant names, metadata readers (GGUF local and remote, safetensors/config.json), the fit
estimator and the quant recommender. Pure Python: nothing here loads a model."""
