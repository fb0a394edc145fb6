"""``mmfix image-metas``: the image-size files 3.x's OpenImages datasets need (``meta_file``).

2.x's OpenImagesDataset read a training image's size from the image as it was loaded; 3.x's reads
every size up front from ``meta_file``, a pickle of ``dict(filename, ori_shape)`` in annotation
order. MMDetection's own maker (tools/misc/get_image_metas.py) cannot read a converted 2.x config
(it joins paths with a ``data_root`` that 2.x configs baked into each path) nor a wrapped training
set, so the converter's note points here instead. Sizes are read as 2.x's LoadImageFromFile read
them: by decoding the image with mmcv (EXIF orientation applied), as MMDetection's tool does too.
"""

from __future__ import annotations

import csv
import os
import pickle
from collections.abc import Iterator
from typing import Any

from .._errors import MmfixUsageError

OPEN_IMAGES = ("OpenImagesDataset", "OpenImagesChallengeDataset")


def is_url(path: Any) -> bool:
    return isinstance(path, str) and "://" in path


def _join(root: Any, path: Any) -> Any:
    # As mmengine's BaseDataset joins data_root with ann_file / data_prefix / meta_file (a URL is absolute).
    if isinstance(path, str) and root and not os.path.isabs(path) and not is_url(path):
        return os.path.join(str(root), path)
    return path


def raw_sets(ds: Any, where: str = "dataset") -> Iterator[tuple[str, dict[str, Any]]]:
    """(where, the dataset dict itself) for every Open Images set in a (possibly wrapped) dataset config."""
    if not isinstance(ds, dict):
        return
    if ds.get("type") in OPEN_IMAGES:
        yield where, ds
    if isinstance(ds.get("dataset"), dict):
        yield from raw_sets(ds["dataset"], f"{where}.dataset")
    for i, part in enumerate(ds.get("datasets") or []):
        yield from raw_sets(part, f"{where}.datasets[{i}]")


def open_images_sets(cfg: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(where, dataset dict with data_root applied) for every OpenImages set the dataloaders name."""
    for name in ("train", "val", "test"):
        loader = cfg.get(f"{name}_dataloader")
        if not isinstance(loader, dict):
            continue
        for where, ds in raw_sets(loader.get("dataset"), f"{name}_dataloader.dataset"):
            root = ds.get("data_root")
            prefix = (ds.get("data_prefix") or {}).get("img", "")
            yield (
                where,
                {
                    "type": ds["type"],
                    "ann_file": _join(root, ds.get("ann_file")),
                    "meta_file": _join(root, ds.get("meta_file")),
                    "img_prefix": _join(root, prefix) if prefix else (root or ""),
                },
            )


def missing_meta_files(cfg: dict[str, Any]) -> list[tuple[str, str | None]]:
    """(where, path) of each OpenImages meta_file the config names that is not on disk; path None
    where a set names none."""
    missing: list[tuple[str, str | None]] = []
    for where, ds in open_images_sets(cfg):
        meta = ds["meta_file"]
        if not meta:
            missing.append((where, None))
        elif isinstance(meta, str) and not is_url(meta) and not os.path.exists(meta):
            missing.append((where, meta))
    return missing


def image_names(ann_file: str, kind: str = "OpenImagesDataset") -> list[str]:
    """Image file names in the order 3.x's dataset of ``kind`` lists them, read the way it reads
    them: OpenImagesDataset a V6 box CSV (one entry per run of rows with one ImageID),
    OpenImagesChallengeDataset the challenge text format (name, size line, box count, boxes)."""
    where = f"mmfix image-metas: {ann_file}"
    names: list[str] = []
    try:
        if kind == "OpenImagesChallengeDataset":
            with open(ann_file, encoding="utf-8") as fh:
                lines = fh.readlines()  # as 3.x reads it: universal newlines, split on "\n" only
            i = 0
            while i < len(lines):
                names.append(lines[i].rstrip())
                boxes = int(lines[i + 2])
                if boxes < 0 or i + 3 + boxes > len(lines):  # stepping back or past the end: not this format
                    raise ValueError(boxes)
                i += boxes + 3
        else:
            with open(ann_file, encoding="utf-8", newline="") as fh:
                rows = csv.reader(fh)
                next(rows, None)  # the header
                for row in rows:
                    if row and (not names or names[-1] != f"{row[0]}.jpg"):
                        names.append(f"{row[0]}.jpg")
    except OSError as exc:
        raise MmfixUsageError(
            f"{where}: cannot read this annotation file ({exc.strerror}); the sizes are listed in its "
            "order, so it must exist first (check data_root / ann_file in the config)."
        ) from None
    except UnicodeDecodeError:
        raise MmfixUsageError(f"{where}: not UTF-8 text, so not an Open Images annotation file.") from None
    except csv.Error as exc:
        raise MmfixUsageError(f"{where}: not a readable CSV file ({exc}).") from None
    except (IndexError, ValueError):
        raise MmfixUsageError(
            f"{where}: not in the challenge format (an image name, a line, the number of boxes, then one "
            "line per box), which OpenImagesChallengeDataset reads."
        ) from None
    if not names:
        raise MmfixUsageError(
            f"{where}: lists no image; 3.x's {kind} cannot load an empty set (check ann_file in the config)."
        )
    return names


class _ImageError(Exception):
    """An image that cannot be read (an Exception, so a worker process hands it back to the parent)."""


def image_meta(path: str) -> dict[str, Any]:
    import mmcv

    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError as exc:
        raise _ImageError(
            f"mmfix image-metas: cannot read the image {path} ({exc.strerror}); the annotation file "
            "lists it, so the image folder (data_prefix.img) must hold it."
        ) from None
    try:
        img = mmcv.imfrombytes(data, flag="color")
    except Exception:  # cv2.error for empty or truncated files, among others
        img = None
    if img is None:
        raise _ImageError(
            f"mmfix image-metas: {path} is not an image mmcv can decode ({len(data)} bytes); "
            "replace the file (a truncated download?), as training would fail on it too."
        )
    return {"filename": path, "ori_shape": tuple(img.shape)}


def write_meta_file(ann_file: str, img_prefix: str, meta_file: str, kind: str, nproc: int = 1) -> int:
    """Write the sizes of every image ann_file lists; the number of images."""
    paths = [os.path.join(img_prefix, name) for name in image_names(ann_file, kind)]
    try:
        if nproc > 1 and len(paths) > nproc:
            from multiprocessing import Pool

            with Pool(nproc) as pool:
                metas = pool.map(image_meta, paths, chunksize=64)
        else:
            metas = [image_meta(p) for p in paths]
    except _ImageError as exc:
        raise MmfixUsageError(str(exc)) from None
    folder = os.path.dirname(meta_file)
    if folder:
        os.makedirs(folder, exist_ok=True)
    tmp = f"{meta_file}.tmp{os.getpid()}"
    try:
        with open(tmp, "wb") as fh:
            pickle.dump(metas, fh, protocol=4)  # what MMDetection's tool writes
        os.replace(tmp, meta_file)  # a reader never sees half a file
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return len(metas)
