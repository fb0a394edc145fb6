"""The zip-level guards of the pre-load cost check (issue 28): the archive torch's reader (miniz)
reads is the archive the check read (zipfile), and torch inflates nothing. Cheap, in-process; the
loaders' refusals are tested in tests/integration/test_bounded_cost.py."""

from __future__ import annotations

import zipfile
from pathlib import Path

import torch
from cost_payloads import pickle_for, storages_pickle

import zip_crafting
from checkpoint_payloads import NONE
from mmfix._checkpoint import files
from zip_crafting import Tensor, checkpoint


def _records(path: Path) -> str | None:
    with zipfile.ZipFile(path) as archive:
        return files.records_problem(archive.infolist(), str(path))


def test_what_torch_save_writes_passes(tmp_path: Path) -> None:
    torch.save({"a": torch.randn(5), "b": torch.arange(3)}, tmp_path / "t.pth")
    checkpoint(tmp_path / "z64.pth", {"a": Tensor("0", 10)}, {"0": bytes(40)}, zip64=True)
    for name in ("t.pth", "z64.pth"):
        assert files.raw_directory_problem(tmp_path / name) is None
        assert _records(tmp_path / name) is None


def test_a_directory_away_from_its_declared_offset_is_two_archives(tmp_path: Path) -> None:
    two = zip_crafting.two_directories(tmp_path / "two.pth", pickle_for(NONE), pickle_for(NONE))
    assert "not where its end record places it" in (files.raw_directory_problem(two) or "")
    checkpoint(tmp_path / "z64.pth", {"a": Tensor("0", 10)}, {"0": bytes(40)}, zip64=True)
    data = bytearray((tmp_path / "z64.pth").read_bytes())
    locator = data.rfind(b"PK\x06\x07")
    moved = bytearray(data)
    moved[locator + 8] ^= 1  # the locator points elsewhere than the zip64 record zipfile reads
    (tmp_path / "moved.pth").write_bytes(moved)
    assert "not where its end record places it" in (files.raw_directory_problem(tmp_path / "moved.pth") or "")
    disagreeing = bytearray(data)
    end = disagreeing.rfind(b"PK\x05\x06")
    disagreeing[end + 16 : end + 20] = (0).to_bytes(4, "little")  # a 32-bit offset other than zip64's
    (tmp_path / "disagree.pth").write_bytes(disagreeing)
    assert "not where its end record places it" in (files.raw_directory_problem(tmp_path / "disagree.pth") or "")


def test_names_one_to_torch_compressed_and_shared_records(tmp_path: Path) -> None:
    twins = zip_crafting.case_twins(tmp_path / "twins.pth", pickle_for(NONE), pickle_for(NONE))
    assert "ignores case" in (_records(twins) or "")
    with zipfile.ZipFile(tmp_path / "nul.pth", "w") as archive:
        archive.writestr("archive/data.pkl", pickle_for(NONE))
        archive.writestr("archive/data.pklXx", pickle_for(NONE))
    # zipfile's writer cuts a name at NUL: put it in by hand (zipfile reads it as data.pkl, miniz not)
    (tmp_path / "nul.pth").write_bytes((tmp_path / "nul.pth").read_bytes().replace(b"pklXx", b"pkl\0x"))
    assert "NUL byte" in (_records(tmp_path / "nul.pth") or "")
    checkpoint(tmp_path / "deflated.pth", {"a": Tensor("0", 10)}, {"0": bytes(40)}, deflate=("0",))
    assert "is compressed" in (_records(tmp_path / "deflated.pth") or "")
    shared = zip_crafting.shared_deflated_record(tmp_path / "shared.pth", storages_pickle, 1 << 10, 2)
    assert "is compressed" in (_records(shared) or "")
    plain = {"a": Tensor("0", 10), "b": Tensor("1", 10)}
    checkpoint(tmp_path / "aliased.pth", plain, {"0": bytes(40)}, aliases={"1": "0"})
    assert "share bytes" in (_records(tmp_path / "aliased.pth") or "")
    assert "share bytes" in (files.container_problem(tmp_path / "aliased.pth") or "")  # the diagnosis agrees
    assert "ignores case" in (files.container_problem(twins) or "")
