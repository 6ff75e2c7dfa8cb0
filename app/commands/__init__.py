"""The CLI faces: one module per home (``chat`` in engine.py, ``search``/``show``/``pull``… in hub.py, ``hw``,
``inspect``/``fit``/``recommend`` in models.py, ``serve``, ``bench``), each exposing ``register(subparsers)``.
They sit on top of the homes they call and nothing imports them but app/cli.py, so no home points up to a
command-line face."""
