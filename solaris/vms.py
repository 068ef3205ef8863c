"""The vertical models SOLARIS trains, declared once: each names what it predicts and where.

Every VM reads the same feature-store table (one embedding version, whatever the number of consumers) and is
its own registered model, ``solaris-vm-<name>``, with its own ``champion`` and ``challenger``. The default is a
click model and a conversion model; a ``vms.toml`` file (``SOLARIS_VMS_FILE``) replaces it, so adding a model
is configuration, not code::

    [vm.ctr]
    label = "click"

    [vm.ctr_top]            # a click model for the first three positions only
    label = "click"
    positions = [0, 2]

The first VM listed leads: its champion pins the embedding version the hourly precompute writes and scores
the verifier's candidates, and it answers a ranker request that names no VM. Every other VM's champion reads
the same version (the gate moves a new FM and AE for all VMs at once, or for none); one that reads another
would find only that version's rows, which the precompute no longer writes. This module imports nothing
heavy, so settings, the CLI and the DAG files can read it.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

LABELS = ("click", "conversion")  # what a VM can predict: the FM's heads, in their order
LABEL_COUNTS = {"click": "clicks", "conversion": "conversions"}  # each label's total in an event log's meta
REGISTERED_PREFIX = "solaris-vm-"
ALL_VMS = "all"  # a training run's choice of a new FM and AE with every configured VM (else one VM's name)
_NAME = re.compile(r"^[a-z][a-z0-9_]{0,31}$")
_KEYS = {"label", "positions"}


class VMConfigError(ValueError):
    """A VM declaration we cannot use."""


@dataclass(frozen=True)
class VMSpec:
    name: str
    label: str = "click"
    positions: tuple[int, int] | None = None  # first and last position served (inclusive); None: every position

    def __post_init__(self) -> None:
        if not _NAME.match(self.name):
            raise VMConfigError(f"VM name {self.name!r}: expected lower-case letters, digits and _ (at most 32)")
        if self.label not in LABELS:
            raise VMConfigError(f"VM {self.name}: label {self.label!r} is not one of {', '.join(LABELS)}")
        if self.positions is not None:
            lo, hi = self.positions
            if not (isinstance(lo, int) and isinstance(hi, int) and 0 <= lo <= hi):
                raise VMConfigError(
                    f"VM {self.name}: positions {list(self.positions)} must be [first, last], 0 <= first <= last"
                )

    @property
    def registered_name(self) -> str:
        return registered_name(self.name)

    @property
    def head(self) -> int:
        """The FM head this VM's label matches: its distillation target and its transfer-ratio reference."""
        return LABELS.index(self.label)

    def describe(self) -> str:
        where = "" if self.positions is None else f" at positions {self.positions[0]}-{self.positions[1]}"
        return f"{self.name} ({self.label}{where})"


DEFAULT_VMS = (VMSpec("ctr", "click"), VMSpec("cvr", "conversion"))


def registered_name(vm: str) -> str:
    return f"{REGISTERED_PREFIX}{vm}"


def load_vms(path: Path) -> tuple[VMSpec, ...]:
    """The VMs ``path`` declares, in its order; :data:`DEFAULT_VMS` when there is no such file."""
    if not path.is_file():
        return DEFAULT_VMS
    try:
        declared = tomllib.loads(path.read_text()).get("vm")
    except tomllib.TOMLDecodeError as exc:
        raise VMConfigError(f"{path}: not valid TOML ({exc})") from exc
    if not isinstance(declared, dict) or not declared:
        raise VMConfigError(f"{path}: declares no [vm.<name>] table")
    specs = []
    for name, fields in declared.items():
        unknown = set(fields) - _KEYS if isinstance(fields, dict) else {"(not a table)"}
        if unknown:
            raise VMConfigError(f"{path}: [vm.{name}] has unknown keys {sorted(unknown)}; known: {sorted(_KEYS)}")
        positions = fields.get("positions")
        if positions is not None and (not isinstance(positions, list) or len(positions) != 2):
            raise VMConfigError(f"{path}: [vm.{name}] positions = {positions!r}: expected [first, last]")
        try:
            specs.append(VMSpec(name, fields.get("label", "click"), None if positions is None else tuple(positions)))
        except VMConfigError as exc:
            raise VMConfigError(f"{path}: {exc}") from exc
    return tuple(specs)


def choose(specs: tuple[VMSpec, ...], names: Iterable[str]) -> tuple[VMSpec, ...]:
    """The declared VMs of ``names``, in declaration order; an undeclared name is an error naming the known."""
    wanted = set(names)
    unknown = wanted - {s.name for s in specs}
    if unknown:
        raise VMConfigError(f"unknown VM {', '.join(sorted(unknown))}; configured: {', '.join(s.name for s in specs)}")
    return tuple(s for s in specs if s.name in wanted)


def dump_vms(specs: Iterable[VMSpec]) -> str:
    """``specs`` as the TOML :func:`load_vms` reads back, in their order."""
    lines = []
    for spec in specs:
        lines += [f"[vm.{spec.name}]", f'label = "{spec.label}"']
        if spec.positions is not None:
            lines.append(f"positions = [{spec.positions[0]}, {spec.positions[1]}]")
        lines.append("")
    return "\n".join(lines)


def learnable(specs: tuple[VMSpec, ...], counts: dict[str, int]) -> tuple[tuple[VMSpec, ...], dict[str, str]]:
    """The VMs whose label occurs in a log with these totals (its meta's ``counts``), and why each other is
    left out: a label never positive (MovieLens has no conversion) can be neither learned nor scored."""
    kept, left = [], {}
    for spec in specs:
        if counts.get(LABEL_COUNTS[spec.label], 0) > 0:
            kept.append(spec)
        else:
            left[spec.name] = f"the log holds no {spec.label}"
    if specs and specs[0] not in kept:
        raise VMConfigError(f"the lead VM {specs[0].describe()} cannot be learned: {left[specs[0].name]}")
    return tuple(kept), left
