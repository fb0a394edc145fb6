"""2.x state-dict layouts that MMDetection 3.x changed, as data, and the one function that applies them.

A 2.x checkpoint of a family 3.x rebuilt (YOLACT's semantic branch moved; DETR, Deformable DETR,
MaskFormer and Mask2Former were restructured) does not fit the 3.x model's parameter names, and
MMEngine would load it with a warning and leave the unmatched layers at random. Each ``Layout``
below is one family's rename table: a ``marker`` (a key only that family's 2.x state dicts have)
and ``renames``, ordered ``(2.x key pattern, 3.x replacement)`` rows for ``re.sub`` — the first row
whose pattern matches a key renames it; keys no row matches are kept. A family whose tensors must
be reshaped or split (not only renamed) adds a ``reshape`` function, applied after the renames.

Pure: no torch import, no I/O; the state dict's values are passed through untouched (a reshape
gets them and returns new ones). The loaders' patch (``_patches/legacy_checkpoint.py``) and
``mmfix convert-checkpoint`` call ``upgrade``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping

Reshape = Callable[[dict[str, Any]], dict[str, Any]]


@dataclass(frozen=True)
class Layout:
    """One family's 2.x → 3.x parameter layout."""

    name: str  # shown to users: "YOLACT (MMDetection 2.x)"
    marker: str  # regex: a key that only this family's 2.x state dicts have (re.search)
    renames: tuple[tuple[str, str], ...]  # (2.x key regex, 3.x replacement), first match wins
    reshape: Reshape | None = None  # after the renames, for tensors 3.x stores differently
    note: str = ""  # what else differs, said once when the layout is applied
    _marker: re.Pattern[str] = field(default=re.compile(""), init=False, repr=False, compare=False)
    _compiled: tuple[tuple[re.Pattern[str], str], ...] = field(default=(), init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # compiled once: ``matches`` runs over every key of every state dict MMEngine loads
        object.__setattr__(self, "_marker", re.compile(self.marker))
        object.__setattr__(self, "_compiled", tuple((re.compile(p), r) for p, r in self.renames))

    def matches(self, keys: Iterable[str]) -> bool:
        return any(self._marker.search(k) for k in keys)

    def rename(self, key: str) -> str:
        for pattern, replacement in self._compiled:
            if pattern.search(key):
                return pattern.sub(replacement, key, count=1)
        return key


# --- the table: one row per family ---------------------------------------------------------------

# YOLACT: 2.x's YOLACTSegmHead was a head of its own (``segm_head``); 3.x's YOLACTProtonet holds it
# as ``mask_head.segm_branch``. Nothing else moved (checked key for key against MMDetection 2.28.2's
# yolact_r50_1x8_coco state dict).
YOLACT = Layout(
    name="YOLACT (MMDetection 2.x)",
    marker=r"^segm_head\.segm_conv\.",
    renames=((r"^segm_head\.", "mask_head.segm_branch."),),
)

# DETR and Deformable DETR: 2.x kept the transformer, the queries and (DETR) the input projection
# inside the head, with mmcv's generic layers (``attentions.i`` in operation order, ``ffns.0``); 3.x
# holds them on the detector with named layers (``self_attn``, ``cross_attn``, ``ffn``; the norms keep
# their indices). The tensors are the same (nn.MultiheadAttention's packed in_proj in both, the same
# Linear shapes), so renames suffice; checked key for key, and prediction for prediction, against
# MMDetection 2.28.2's state dicts of the official configs (tests/integration/test_rebuilt_families_detr.py).
_DETR_TRANSFORMER: tuple[tuple[str, str], ...] = (
    (r"^bbox_head\.transformer\.(encoder|decoder)\.layers\.(\d+)\.attentions\.0\.", r"\1.layers.\2.self_attn."),
    (r"^bbox_head\.transformer\.decoder\.layers\.(\d+)\.attentions\.1\.", r"decoder.layers.\1.cross_attn."),
    (r"^bbox_head\.transformer\.(encoder|decoder)\.layers\.(\d+)\.ffns\.0\.", r"\1.layers.\2.ffn."),
    (r"^bbox_head\.transformer\.(encoder|decoder)\.", r"\1."),  # the norms, DETR's decoder post_norm
    (r"^bbox_head\.query_embedding\.", "query_embedding."),
)

DETR = Layout(
    name="DETR (MMDetection 2.x)",
    marker=r"^bbox_head\.input_proj\.",  # only 2.x's DETRHead projected inside the head
    renames=(
        # 2.x's 1x1 input projection (a Conv2d with bias) is 3.x's ChannelMapper neck.
        (r"^bbox_head\.input_proj\.", "neck.convs.0.conv."),
        *_DETR_TRANSFORMER,
    ),
)

DEFORMABLE_DETR = Layout(
    name="Deformable DETR (MMDetection 2.x)",
    marker=r"^bbox_head\.transformer\.level_embeds$",
    renames=(
        *_DETR_TRANSFORMER,
        (r"^bbox_head\.transformer\.level_embeds$", "level_embed"),
        (r"^bbox_head\.transformer\.reference_points\.", "reference_points_fc."),  # one-stage
        (r"^bbox_head\.transformer\.enc_output\.", "memory_trans_fc."),  # two-stage from here on
        (r"^bbox_head\.transformer\.enc_output_norm\.", "memory_trans_norm."),
        (r"^bbox_head\.transformer\.pos_trans\.", "pos_trans_fc."),
        (r"^bbox_head\.transformer\.pos_trans_norm\.", "pos_trans_norm."),
    ),
)


# MaskFormer and Mask2Former: 2.x built every transformer layer as mmcv's BaseTransformerLayer, which
# holds its attentions as ``attentions.<i>`` in ``operation_order`` and its FFN as ``ffns.0``; 3.x's
# fixed layers name them ``self_attn`` / ``cross_attn`` / ``ffn``. The norms keep their names and
# order (``norms.<i>`` in the order the layer applies them, in both). The pixel decoder's encoder
# layers run self_attn → ffn in both families; the head's decoder layers differ: MaskFormer's run
# self_attn → cross_attn → ffn (as DETR's), Mask2Former's cross_attn → self_attn → ffn, so the same
# 2.x key ``attentions.0`` is the self-attention of one and the cross-attention of the other.
# Checked key for key (and prediction for prediction) against MMDetection 2.28.2's R50 models.
_FORMER_SHARED_RENAMES = (
    (r"^(panoptic_head\.pixel_decoder\.encoder\.layers\.\d+\.)attentions\.0\.", r"\1self_attn."),
    (r"^(panoptic_head\.(?:pixel_decoder\.encoder|transformer_decoder)\.layers\.\d+\.)ffns\.0\.", r"\1ffn."),
)
MASKFORMER = Layout(
    name="MaskFormer (MMDetection 2.x)",
    # Its pixel decoder is a TransformerEncoderPixelDecoder (whose encoder's 2.x attention keys only
    # 2.x has) or a PixelDecoder (``last_feat_conv``, which no Mask2Former has; a 3.x state dict then
    # matches too, and no rename applies to it). A 2.x Mask2Former's decoder keys look the same as
    # MaskFormer's, so the marker must not be a decoder key.
    marker=r"^panoptic_head\.pixel_decoder\.(?:encoder\.layers\.\d+\.attentions\.0\.attn\.|last_feat_conv\.)",
    renames=(
        (r"^(panoptic_head\.transformer_decoder\.layers\.\d+\.)attentions\.0\.", r"\1self_attn."),
        (r"^(panoptic_head\.transformer_decoder\.layers\.\d+\.)attentions\.1\.", r"\1cross_attn."),
        *_FORMER_SHARED_RENAMES,
    ),
)
MASK2FORMER = Layout(
    name="Mask2Former (MMDetection 2.x)",
    # The multi-scale deformable attention of its pixel decoder's encoder, under 2.x's name.
    marker=r"^panoptic_head\.pixel_decoder\.encoder\.layers\.\d+\.attentions\.0\.sampling_offsets\.",
    renames=(
        (r"^(panoptic_head\.transformer_decoder\.layers\.\d+\.)attentions\.0\.", r"\1cross_attn."),
        (r"^(panoptic_head\.transformer_decoder\.layers\.\d+\.)attentions\.1\.", r"\1self_attn."),
        *_FORMER_SHARED_RENAMES,
    ),
)


LAYOUTS: tuple[Layout, ...] = (YOLACT, DETR, DEFORMABLE_DETR, MASKFORMER, MASK2FORMER)


@dataclass(frozen=True)
class Collision:
    """Two tensors for one 3.x name: ``sources`` (2.x keys) rename onto ``target``, which the state
    dict already holds under that name (``held``) or which more than one of them renames onto."""

    target: str
    sources: tuple[str, ...]
    held: bool

    def describe(self) -> str:
        stale = " and ".join(self.sources)
        if self.held:
            return f"{self.target} and {stale}, its 2.x name"
        return f"{stale}, which all rename to {self.target}"


@dataclass
class Upgrade:
    """What ``upgrade`` did: the new state dict, per layout applied how many keys it renamed, and
    the renames it did not make because their new name was not free (``collisions``)."""

    state_dict: dict[str, Any]
    applied: list[tuple[Layout, int]]
    collisions: list[Collision] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return any(n for _, n in self.applied)


def upgrade(
    state_dict: Mapping[str, Any],
    target_keys: Iterable[str] | None = None,
    layouts: Iterable[Layout] = LAYOUTS,
) -> Upgrade:
    """Rename a 2.x state dict's keys to the 3.x layout of every family whose marker it carries.

    ``target_keys``: the keys of the model it will be loaded into, when there is one. Then a key
    is renamed only where the new name is one the model has and the old one is not (a model that
    kept a 2.x name keeps it; nothing is renamed towards a key the model lacks), so a wrong guess
    of the family can never make a load worse. Without a model (``mmfix convert-checkpoint``),
    every rename of each matching layout applies.

    A rename never overwrites: a new name the state dict already holds (a 3.x key next to its
    stale 2.x twin), or one that two keys rename onto, is left as it is and the renaming keys keep
    their old names -- what stock MMEngine does with such a file (it loads the 3.x tensor, and the
    2.x key is an unexpected key it warns about, which mmfix's strict mode for 2.x runs refuses).
    Which of two tensors is the right one cannot be known from the file, so neither is chosen
    silently: each such case is returned in ``collisions`` for the caller to report.

    The result keeps the input's key order (renamed keys take their old key's place) and its
    ``_metadata`` attribute, with the metadata's module prefixes renamed alike.
    """
    target = None if target_keys is None else set(target_keys)
    applied: list[tuple[Layout, int]] = []
    collisions: list[Collision] = []
    current: dict[str, Any] = dict(state_dict)
    for layout in layouts:
        if not layout.matches(current):
            continue
        proposed = {}
        for key in current:
            new = layout.rename(key)
            if new != key and (target is None or (new in target and key not in target)):
                proposed[key] = new
        blocked = _collisions(current, proposed)
        collisions.extend(blocked)
        renamed: dict[str, Any] = {proposed.get(key, key): value for key, value in current.items()}
        count = len(proposed)
        if layout.reshape is not None:
            renamed = layout.reshape(renamed)
            count = max(count, sum(1 for k in renamed if k not in current))
        if count:
            applied.append((layout, count))
            current = renamed
    out: Any = current
    metadata = getattr(state_dict, "_metadata", None)
    if metadata is not None:
        out = _with_metadata(out, metadata, [layout for layout, _ in applied])
    return Upgrade(out, applied, collisions)


def _collisions(keys: Mapping[str, Any], proposed: dict[str, str]) -> list[Collision]:
    """Drop from ``proposed`` (old key -> new key) every rename whose new name is not free; return them.

    A name is free when no key keeps it and exactly one key renames onto it. A dropped rename
    keeps its key under the old name, which may take that name from another rename in turn:
    repeated until nothing changes (each round only drops renames, so it ends).
    """
    found: dict[str, Collision] = {}
    while True:
        kept = {key for key in keys if key not in proposed}
        onto: dict[str, list[str]] = {}
        for old, new in proposed.items():
            onto.setdefault(new, []).append(old)
        clashing = {new: olds for new, olds in onto.items() if new in kept or len(olds) > 1}
        if not clashing:
            return list(found.values())
        for new, olds in clashing.items():
            for old in olds:
                del proposed[old]
            previous = found.get(new)
            sources = tuple(olds) if previous is None else (*previous.sources, *olds)
            found[new] = Collision(new, sources, new in kept or (previous is not None and previous.held))


def _with_metadata(state_dict: dict[str, Any], metadata: Mapping[str, Any], applied: list[Layout]) -> Any:
    # torch's ``_metadata`` maps module prefixes ("segm_head.segm_conv") to versions, which some
    # modules' _load_from_state_dict read: keep each under its module's new name.
    from collections import OrderedDict

    out: Any = OrderedDict(state_dict)
    meta: Any = OrderedDict()
    for prefix, value in metadata.items():
        # a module's prefix takes the name its parameters took ("" is the root: never renamed)
        renamed = (layout.rename(prefix + ".")[:-1] for layout in applied) if prefix else ()
        meta[next((new for new in renamed if new != prefix), prefix)] = value
    out._metadata = meta
    return out


def describe(applied: list[tuple[Layout, int]]) -> str:
    """One line: which 2.x layouts were converted, and how many keys each renamed."""
    return "; ".join(f"{layout.name}: {n} key(s) renamed to the 3.x layout" for layout, n in applied)


_SHOWN = 12  # keys named in a mismatch message, of each kind


def _names(keys: list[str]) -> str:
    shown = ", ".join(keys[:_SHOWN])
    return shown + (f" … and {len(keys) - _SHOWN} more" if len(keys) > _SHOWN else "")


def collision_message(collisions: list[Collision], consequence: str) -> str:
    """One paragraph: which keys of a checkpoint are two tensors for one 3.x name, and ``consequence``."""
    shown = "; ".join(c.describe() for c in collisions[:_SHOWN])
    more = f" … and {len(collisions) - _SHOWN} more" if len(collisions) > _SHOWN else ""
    return (
        f"the checkpoint holds two or more tensors for {len(collisions)} parameter name(s) of the "
        f"MMDetection 3.x layout ({shown}{more}); which tensor is right cannot be told from the file. "
        f"{consequence} Delete the stale key(s) from the checkpoint's state dict (`mmfix inspect CKPT` "
        "lists its keys) and load or convert it again."
    )


def mismatch_message(model: str, missing: list[str], unexpected: list[str], consequence: str) -> str:
    """One paragraph: which keys of a state dict and a model do not meet, and ``consequence``."""
    parts = []
    if missing:
        parts.append(f"{len(missing)} parameter(s) of the model are not in the checkpoint ({_names(missing)})")
    if unexpected:
        parts.append(f"{len(unexpected)} key(s) of the checkpoint are not in the model ({_names(unexpected)})")
    return (
        f"mmfix: the checkpoint does not fit {model}: {'; '.join(parts)}. {consequence} Check that the "
        "checkpoint belongs to this config (the same model); `mmfix inspect CKPT` lists its keys."
    )
