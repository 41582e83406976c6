"""Fixtures of the API and page tests: one kvplan web server for the session, and a client."""

from __future__ import annotations

import pytest
from web_client import Client, start


@pytest.fixture(scope="session")
def web_server():
    """One server for the session (no local paths, a 60 s limit for child commands)."""
    from kvplan.cli.web.api import Policy

    server = start(Policy(timeout_s=60))
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture()
def client(web_server):
    return Client(web_server.url)
