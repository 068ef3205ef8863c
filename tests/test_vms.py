"""The VM declarations: the default pair, a ``vms.toml`` that adds a model, and what a bad one is told."""

from __future__ import annotations

from pathlib import Path

import pytest

from solaris.config import Settings
from solaris.vms import DEFAULT_VMS, VMConfigError, VMSpec, choose, dump_vms, learnable, load_vms


def test_without_a_file_the_default_is_a_click_and_a_conversion_model(tmp_path: Path) -> None:
    settings = Settings.from_env({"SOLARIS_HOME": str(tmp_path)})
    assert settings.vms_file == tmp_path / "vms.toml"
    assert settings.vms() == DEFAULT_VMS
    assert [(s.name, s.label, s.head, s.registered_name) for s in DEFAULT_VMS] == [
        ("ctr", "click", 0, "solaris-vm-ctr"),
        ("cvr", "conversion", 1, "solaris-vm-cvr"),
    ]


def test_a_file_declares_the_models_in_its_order_the_first_leading(tmp_path: Path) -> None:
    path = tmp_path / "vms.toml"
    path.write_text(
        '[vm.ctr]\nlabel = "click"\n\n[vm.cvr]\nlabel = "conversion"\n\n'
        '[vm.ctr_top]\nlabel = "click"\npositions = [0, 2]\n'
    )
    settings = Settings.from_env({"SOLARIS_HOME": str(tmp_path)})
    assert settings.vms() == (*DEFAULT_VMS, VMSpec("ctr_top", "click", (0, 2)))
    assert Settings.from_env(settings.as_env()).vms() == settings.vms()  # child processes read the same file
    assert choose(settings.vms(), ["ctr_top", "ctr"]) == (DEFAULT_VMS[0], settings.vms()[2])


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[vm.ctr]\nlabel = "revenue"\n', "VM ctr: label 'revenue' is not one of click, conversion"),
        ('[vm.Top]\nlabel = "click"\n', "VM name 'Top': expected lower-case letters"),
        ("[vm.top]\npositions = [3, 1]\n", r"VM top: positions \[3, 1\] must be \[first, last\]"),
        ("[vm.top]\npositions = [3]\n", r"\[vm.top\] positions = \[3\]: expected \[first, last\]"),
        ('[vm.top]\nlable = "click"\n', r"\[vm.top\] has unknown keys \['lable'\]"),
        ('[model.ctr]\nlabel = "click"\n', r"declares no \[vm.<name>\] table"),
        ("[vm.ctr\n", "not valid TOML"),
    ],
)
def test_a_bad_declaration_names_the_file_and_the_problem(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "vms.toml"
    path.write_text(text)
    with pytest.raises(VMConfigError, match=message) as raised:
        load_vms(path)
    assert str(raised.value).startswith(f"{path}: ")


def test_an_unknown_vm_name_lists_the_configured_ones() -> None:
    with pytest.raises(VMConfigError, match="unknown VM ctx; configured: ctr, cvr"):
        choose(DEFAULT_VMS, ["ctx"])


def test_a_declaration_written_out_reads_back_the_same(tmp_path: Path) -> None:
    specs = (*DEFAULT_VMS, VMSpec("ctr_top", "click", (0, 2)))
    path = tmp_path / "vms.toml"
    path.write_text(dump_vms(specs))
    assert load_vms(path) == specs


def test_a_vm_whose_label_the_log_never_has_is_left_out_with_why() -> None:
    """MovieLens has ratings (clicks) and no conversion: its replay judges the click model only."""
    assert learnable(DEFAULT_VMS, {"clicks": 5, "conversions": 3}) == (DEFAULT_VMS, {})
    assert learnable(DEFAULT_VMS, {"clicks": 5, "conversions": 0}) == (
        DEFAULT_VMS[:1],
        {"cvr": "the log holds no conversion"},
    )
    with pytest.raises(VMConfigError, match=r"the lead VM ctr \(click\) cannot be learned: the log holds no click"):
        learnable(DEFAULT_VMS, {"conversions": 3})
