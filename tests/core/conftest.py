"""Shared by the core's tests: this folder is on ``sys.path`` (pytest puts a conftest's folder there), so the tests in
``paper/``, ``peers/`` and ``ours/`` import the :mod:`selector_driver` helper as the ones here do."""
