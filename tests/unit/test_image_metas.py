"""`mmfix image-metas`' readers: the image order 3.x's Open Images datasets use, and bad files."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from mmdet_support import OPEN_IMAGES_HEADER as HEADER
from mmfix._configs._image_metas import image_names, open_images_sets
from mmfix._errors import MmfixUsageError
from ops_support import require_mmcv


def test_csv_lists_each_run_of_an_image_once_in_file_order(tmp_path: Path) -> None:
    # 3.x's OpenImagesDataset starts a new entry whenever the ImageID changes (consecutive rows).
    row = "{},xclick,/m/0box,1,0.1,0.2,0.1,0.2,0,0,0,0,0"
    ann = tmp_path / "boxes.csv"
    ann.write_text("\n".join([HEADER, row.format("b"), row.format("b"), row.format("a"), row.format("b")]) + "\n")
    assert image_names(str(ann)) == ["b.jpg", "a.jpg", "b.jpg"]


CHALLENGE = "OpenImagesChallengeDataset"


def test_challenge_txt_skips_each_image_s_boxes(tmp_path: Path) -> None:
    ann = tmp_path / "challenge.txt"
    ann.write_text("train/x.jpg\n640 480\n2\n1 0 0 1 1 0\n2 0 0 1 1 0\ntrain/y.jpg\r\n640 480\n0\n")
    assert image_names(str(ann), CHALLENGE) == ["train/x.jpg", "train/y.jpg"]


@pytest.mark.parametrize("text", ["x.jpg\n1 1\n5\n", "x.jpg\n1 1\nmany\n", "x.jpg\n1 1\n"])
def test_a_malformed_challenge_file_is_one_clear_error(tmp_path: Path, text: str) -> None:
    ann = tmp_path / "bad.txt"
    ann.write_text(text)
    with pytest.raises(MmfixUsageError, match="not in the challenge format"):
        image_names(str(ann), CHALLENGE)


def test_a_negative_box_count_is_refused_instead_of_looping(tmp_path: Path) -> None:
    # A count of -3 steps back to the same line (3.x's own reader loops forever on it): in a child
    # process with a time limit, so a regression fails here instead of hanging the suite.
    ann = tmp_path / "bad.txt"
    ann.write_text("x.jpg\n1 1\n-3\n")
    code = (
        "import sys; from mmfix._configs._image_metas import image_names\n"
        "try:\n    image_names(sys.argv[1], 'OpenImagesChallengeDataset')\n"
        "except SystemExit as exc:\n    print(exc.message)"
    )
    proc = subprocess.run([sys.executable, "-c", code, str(ann)], capture_output=True, text=True, timeout=60)
    assert "not in the challenge format" in proc.stdout, proc.stderr


def test_empty_undecodable_and_missing_files_are_clear_errors(tmp_path: Path) -> None:
    (tmp_path / "header.csv").write_text(HEADER + "\n")
    with pytest.raises(MmfixUsageError, match="lists no image"):  # 3.x fails on it with UnboundLocalError
        image_names(str(tmp_path / "header.csv"))
    (tmp_path / "latin.csv").write_bytes(b"\xff\xfe\x00junk")
    with pytest.raises(MmfixUsageError, match="not UTF-8"):
        image_names(str(tmp_path / "latin.csv"))
    with pytest.raises(MmfixUsageError, match="cannot read this annotation file"):
        image_names(str(tmp_path / "missing.csv"))


def test_an_empty_or_truncated_image_is_one_clear_error(tmp_path: Path) -> None:
    from mmfix._configs._image_metas import _ImageError, image_meta

    require_mmcv()  # image_meta decodes with mmcv, as 3.x's datasets do

    (tmp_path / "empty.jpg").write_bytes(b"")
    (tmp_path / "cut.jpg").write_bytes(b"\xff\xd8\xff\xe0" + b"\x00" * 20)
    for name in ("empty.jpg", "cut.jpg"):
        with pytest.raises(_ImageError, match="not an image mmcv can decode"):
            image_meta(str(tmp_path / name))


def test_sets_are_found_inside_wrappers_with_data_root_applied() -> None:
    oi = {"type": "OpenImagesDataset", "ann_file": "a.csv", "meta_file": "m.pkl", "data_prefix": {"img": "imgs/"}}
    cfg = {
        "train_dataloader": {"dataset": {"type": "RepeatDataset", "dataset": dict(oi, data_root="/d")}},
        "val_dataloader": {"dataset": {"type": "ConcatDataset", "datasets": [{"type": "CocoDataset"}, oi]}},
    }
    found = dict(open_images_sets(cfg))
    assert found["train_dataloader.dataset.dataset"] == {
        "type": "OpenImagesDataset",
        "ann_file": "/d/a.csv",
        "meta_file": "/d/m.pkl",
        "img_prefix": "/d/imgs/",
    }
    assert found["val_dataloader.dataset.datasets[1]"]["ann_file"] == "a.csv"
    assert len(found) == 2
