"""``solaris train`` refuses bad arguments before touching data or MLflow."""

from __future__ import annotations

import pytest

from solaris.cli import main
from solaris.config import Settings


def test_unknown_variant_is_a_clear_error(settings: Settings, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["train", "vm", "--variant", "bogus"]) == 2
    assert "--variant 'bogus': choose one of base, distilled, solaris, solaris_distilled" in capsys.readouterr().err


def test_missing_world_names_the_folder(settings: Settings, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["train", "fm", "--name", "nowhere"]) == 2
    assert "nowhere" in capsys.readouterr().err
