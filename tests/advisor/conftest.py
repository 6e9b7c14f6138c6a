"""The advisor's tests: one folder per layer of ``advisor/specserver_advisor`` (``ground``,
``sglang``, ``policy``, ``perf``, ``loaders``, ``launch``, ``lint``, ``replay``, ``cli``,
``schema``), plus the shared inputs they read: ``corpus/`` (published-shape configs),
``fixtures/`` (model configs and one file per mistake), ``multinode/``, the fuzz helpers
``fuzzinputs.py`` and ``fuzzcli.py``, and ``planon.py`` (a plan on a card, for the tests that
compare cards), all importable from every layer's tests because pytest puts this folder on
``sys.path`` with this conftest. Nothing here starts a control plane: a test
that needs one lives under ``tests/cluster``.
"""
