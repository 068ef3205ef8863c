"""The embedding-version contract: an embedding is valid only with the FM and AE versions that made it.

The id ``fm{fm}-ae{ae}-d{code_dim}`` (with ``-{dtype}`` appended when the stored vectors are not float16) is
what the feature store keys rows by, what a VM records at training time and what the ranker asks the store
for. This module alone builds, parses and checks it. It sits below models, store, training and serving and
imports nothing of theirs (nor torch or MLflow), so any of them can use it without an import cycle.
"""

from __future__ import annotations

import re
from typing import NamedTuple

DEFAULT_DTYPE = "float16"
VECTOR_DTYPES = (DEFAULT_DTYPE, "float32")
_PATTERN = re.compile(r"^fm(?P<fm>[^-]+)-ae(?P<ae>[^-]+)-d(?P<dim>\d+)(?:-(?P<dtype>float32))?$")


class VersionMismatch(ValueError):
    """Two artefacts that must come from the same FM/AE pair do not."""


class EmbeddingVersionParts(NamedTuple):
    fm: str
    ae: str
    dim: int
    dtype: str


def embedding_version(fm_version: str | int, ae_version: str | int, code_dim: int, dtype: str = DEFAULT_DTYPE) -> str:
    """The id of the embeddings an FM/AE pair makes; each part is checked, so every id parses back."""
    for name, value in (("fm_version", str(fm_version)), ("ae_version", str(ae_version))):
        if not value or not value.replace(".", "").replace("_", "").isalnum():
            raise ValueError(f"{name}={value!r}: expected a non-empty alphanumeric version")
    if isinstance(code_dim, bool) or not hasattr(code_dim, "__index__") or int(code_dim) <= 0:
        raise ValueError(f"dim={code_dim!r}: expected a positive integer")
    if dtype not in VECTOR_DTYPES:
        raise ValueError(f"dtype={dtype!r}: expected one of {', '.join(VECTOR_DTYPES)}")
    suffix = "" if dtype == DEFAULT_DTYPE else f"-{dtype}"
    return f"fm{fm_version}-ae{ae_version}-d{int(code_dim)}{suffix}"


def parse_embedding_version(version: str) -> EmbeddingVersionParts:
    """(fm version, ae version, code dimension, dtype) of an embedding version id."""
    match = _PATTERN.match(version)
    if match is None:
        raise ValueError(f"{version!r} is not an embedding version (expected fm<FM>-ae<AE>-d<dim>)")
    return EmbeddingVersionParts(match["fm"], match["ae"], int(match["dim"]), match["dtype"] or DEFAULT_DTYPE)


def check_embedding_version(expected: str, got: str, what: str) -> None:
    if expected != got:
        raise VersionMismatch(f"{what}: expects embedding version {expected}, got embeddings of version {got}")


def check_ae_fm(ae_version: str | int, ae_fm_version: str | int, fm_version: str | int) -> None:
    if str(ae_fm_version) != str(fm_version):
        raise VersionMismatch(
            f"AE version {ae_version} compresses FM version {ae_fm_version}, not FM version {fm_version}"
        )
