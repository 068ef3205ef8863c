"""The embedding-version contract: an embedding is valid only with the FM and AE versions that made it.

The id ``fm{fm}-ae{ae}-d{code_dim}`` is what the feature store keys rows by, what a VM records at training
time and what the ranker asks the store for. Light on purpose: the store and the ranker import it without
torch or MLflow.
"""

from __future__ import annotations

import re

_PATTERN = re.compile(r"^fm(?P<fm>[^-]+)-ae(?P<ae>[^-]+)-d(?P<dim>\d+)$")


class VersionMismatch(ValueError):
    """Two artefacts that must come from the same FM/AE pair do not."""


def embedding_version(fm_version: str | int, ae_version: str | int, code_dim: int) -> str:
    return f"fm{fm_version}-ae{ae_version}-d{int(code_dim)}"


def parse_embedding_version(version: str) -> tuple[str, str, int]:
    """(fm version, ae version, code dimension) of an embedding version id."""
    match = _PATTERN.match(version)
    if match is None:
        raise ValueError(f"{version!r} is not an embedding version (expected fm<FM>-ae<AE>-d<dim>)")
    return match["fm"], match["ae"], int(match["dim"])


def check_embedding_version(expected: str, got: str, what: str) -> None:
    if expected != got:
        raise VersionMismatch(f"{what}: expects embedding version {expected}, got embeddings of version {got}")


def check_ae_fm(ae_version: str | int, ae_fm_version: str | int, fm_version: str | int) -> None:
    if str(ae_fm_version) != str(fm_version):
        raise VersionMismatch(
            f"AE version {ae_version} compresses FM version {ae_fm_version}, not FM version {fm_version}"
        )
