"""Fixtures the suite's own tests share."""

from __future__ import annotations

import pytest

import adapters
from bench.setup.installs import NotInstalled, ensure_installed


@pytest.fixture(scope="session")
def llama_server() -> str:
    """The cached llama-server binary (`make test` builds it first on a fresh machine)."""
    try:
        return ensure_installed(adapters.get("llamacpp").recipe, allow_install=False).executable("llama-server")
    except NotInstalled as exc:
        pytest.fail(f"integration tests need llama-server: {exc}")
