"""``solaris store init|stats|expire`` against the store SOLARIS_STORE_URL names."""

from __future__ import annotations

import json

import numpy as np
import pytest
from store_helpers import HOUR, T0, vecs

from solaris.cli import main
from solaris.config import Settings
from solaris.store import open_store


def test_init_stats_expire(settings: Settings, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["store", "init"]) == 0
    assert settings.store_url in capsys.readouterr().out
    with open_store(settings.store_url) as store:
        v = store.register_embedding_version("3", "2", 8, created_at=T0)
        store.write_pair_embeddings("r", v, np.arange(3), np.arange(3), vecs(3), np.ones(3), T0, T0 + HOUR)
    assert main(["store", "stats", "--version", v, "--at", "2026-03-01T12:30:00"]) == 0
    pairs = json.loads(capsys.readouterr().out)["tables"]["pair_embeddings"]
    assert (pairs["rows"], pairs["fresh"], pairs["expiring_within_hour"], pairs["fresh_share"]) == (3, 3, 3, 1.0)
    assert main(["store", "expire", "--at", "2026-03-01T13:00:00+00:00"]) == 0
    assert json.loads(capsys.readouterr().out)["deleted"]["pair_embeddings"] == 3


def test_unknown_version_is_a_clear_error(settings: Settings, capsys: pytest.CaptureFixture[str]) -> None:
    main(["store", "init"])
    assert main(["store", "stats", "--version", "fm1-ae1-d8", "--at", "2026-03-01T12:00:00Z"]) == 2
    assert "unknown embedding version 'fm1-ae1-d8'" in capsys.readouterr().err


def test_expire_needs_a_logical_time(settings: Settings) -> None:
    with pytest.raises(SystemExit):
        main(["store", "expire"])


def test_a_store_without_tables_is_a_clear_error_not_a_traceback(
    settings: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["store", "stats", "--version", "fm1-ae1-d8", "--at", "2026-03-01T12:00:00Z"]) == 2
    err = capsys.readouterr().err
    assert "has no tables yet" in err and "solaris store init" in err and "Traceback" not in err
    assert main(["store", "expire", "--at", "2026-03-01T13:00:00+00:00"]) == 2
    assert "solaris store init" in capsys.readouterr().err
