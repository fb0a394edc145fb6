"""mmcv's ``nms``, ``softnms`` and ``nms_match`` (ops/csrc/pytorch/cpu/nms.cpp, the CUDA nms kernel).

The keep lists are those of the compiled kernels, element for element:

* the score order is ``scores.sort(0, descending=True)``, the very call the kernels make
  (torch's sort is not stable: ties fall as torch orders them, the same here as there);
* each pair is decided with the kernel's float32 operations in its order: on the CPU
  ``inter / (area_i + area_j - inter) > iou_threshold``, in CUDA
  ``inter > iou_threshold * (area_i + area_j - inter)`` (``_greedy.RULES``), with the
  threshold rounded to float32 as the kernels' ``float`` parameter rounds it, ``offset``
  added to widths and heights, and ``>=`` where nms_match uses it;
* the greedy pass itself is ``_greedy.solve``.

Soft-NMS is sequential by nature (each pick rescales the scores the next pick compares).
Rounds of tensor operations take every pick whose place in the kernel's order is certain
(``_soft_nms_in_batches``); where equal scores tie for the best, the kernel's arrangement of
the boxes (it drops a box by moving the last one into its place) decides, and the kernel's
loop is replayed pick by pick, arrangement included (``_soft_nms_step_by_step``).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch
from torch import Tensor

from . import _greedy, _torchvision

#: Up to this many boxes, nms on the CPU goes to torchvision's kernel where it loads
#: (benchmarks/ops_torchvision.py).
TORCHVISION_NMS_MAX_BOXES = 2000
#: For `mmfix doctor`: this family uses torchvision's kernels where they load (nms, on the CPU).
TORCHVISION_FAST_PATH = True
#: Soft-NMS precomputes all pairwise overlaps up to this many boxes (else rows as needed).
SOFT_NMS_MATRIX_LIMIT = 2048
#: Soft-NMS considers this many of the best boxes for one round of picks.
SOFT_NMS_BATCH = 64


def _float32(value: float) -> float:
    """A Python float holding the float32 the C++ ``float`` parameter receives."""
    return float(np.float32(value))


def _check_boxes(name: str, boxes: Tensor, columns: int, what: str) -> None:
    if not isinstance(boxes, Tensor) or boxes.dim() != 2 or boxes.shape[1] < columns:
        shape = tuple(boxes.shape) if isinstance(boxes, Tensor) else type(boxes).__name__
        raise ValueError(
            f"mmcv op `{name}` takes {what} as a tensor of shape (N, {columns}), got {shape}. "
            f"Pass a 2-D float tensor with one row per box."
        )
    if boxes.dtype not in (torch.float32, torch.float64):
        raise TypeError(
            f"mmcv op `{name}` takes float32 boxes (mmcv's kernel reads them as C floats), got {boxes.dtype}. "
            "Convert them with `.float()` before the call."
        )


def _check_scores(name: str, boxes: Tensor, scores: Tensor) -> None:
    if not isinstance(scores, Tensor) or scores.dim() != 1 or scores.shape[0] != boxes.shape[0]:
        shape = tuple(scores.shape) if isinstance(scores, Tensor) else type(scores).__name__
        raise ValueError(
            f"mmcv op `{name}` takes one score per box: {boxes.shape[0]} boxes but scores of shape {shape}. "
            "Pass a 1-D tensor of N scores."
        )


def _check_offset(name: str, offset: int) -> None:
    if int(offset) not in (0, 1):
        raise ValueError(f"mmcv op `{name}`: offset must be 0 or 1 (added to box widths and heights), got {offset!r}.")


# --- nms ------------------------------------------------------------------------------------


def nms(boxes: Tensor, scores: Tensor, iou_threshold: float, offset: int) -> Tensor:
    """Indices of the boxes kept by greedy NMS, in descending score order (int64)."""
    _check_boxes("nms", boxes, 4, "boxes")
    _check_scores("nms", boxes, scores)
    _check_offset("nms", offset)
    if boxes.numel() == 0:
        return torch.empty(0, dtype=torch.long, device=boxes.device)
    threshold = _float32(iou_threshold)
    order = scores.sort(0, descending=True)[1]
    fast = _torchvision_nms(boxes, order, threshold, int(offset))
    if fast is not None:
        return fast
    cols = _greedy.columns(boxes[:, :4], int(offset))[:, order]
    problem = _greedy.Problem(
        cols,
        torch.tensor(threshold, dtype=boxes.dtype, device=boxes.device),
        int(offset),
        inclusive=False,
        rule=_greedy.rule_for(boxes.device),
    )
    return order[_greedy.solve(problem).kept]


def _torchvision_nms(boxes: Tensor, order: Tensor, threshold: float, offset: int) -> Tensor | None:
    """torchvision's CPU kernel, where it decides exactly as mmcv's: offset 0, the same
    division, a double threshold equal to mmcv's float one. It sorts by its own call, so it
    gets boxes already in mmcv's order, with strictly decreasing stand-in scores. Its loop
    (mmcv's, in C++) is the faster one for up to TORCHVISION_NMS_MAX_BOXES boxes; beyond,
    the work it spends on boxes far apart (other classes, other levels) outgrows mmfix's."""
    if offset != 0 or boxes.shape[0] > TORCHVISION_NMS_MAX_BOXES or not _torchvision.use_for("nms", boxes.device):
        return None
    ranked = boxes[order, :4].contiguous()
    stand_in = -torch.arange(boxes.shape[0], dtype=boxes.dtype)
    kept = torch.ops.torchvision.nms(ranked, stand_in, threshold)
    return order[kept.sort().values]


# --- soft-nms -------------------------------------------------------------------------------


def softnms(
    boxes: Tensor,
    scores: Tensor,
    dets: Tensor,
    iou_threshold: float,
    sigma: float,
    min_score: float,
    method: int,
    offset: int,
) -> Tensor:
    """Soft-NMS: indices in pick order; rows 0..k-1 of ``dets`` get (box, rescaled score)."""
    _check_boxes("softnms", boxes, 4, "boxes")
    _check_scores("softnms", boxes, scores)
    _check_offset("softnms", offset)
    n = boxes.shape[0]
    if boxes.numel() == 0:
        return torch.empty(0, dtype=torch.long, device=boxes.device)
    if dets.dim() != 2 or dets.shape[0] < n or dets.shape[1] != 5 or dets.dtype != boxes.dtype:
        raise ValueError(
            f"mmcv op `softnms` writes its results into `dets`, which must be a {boxes.dtype} tensor of shape "
            f"({n}, 5); got {tuple(dets.shape)} {dets.dtype}."
        )
    offset = int(offset)
    cols = _greedy.columns(boxes[:, :4], offset)
    dtype, device = boxes.dtype, boxes.device
    threshold = torch.tensor(_float32(iou_threshold), dtype=dtype, device=device)
    sigma_t = torch.tensor(_float32(sigma), dtype=dtype, device=device)
    floor = torch.tensor(_float32(min_score), dtype=dtype, device=device)
    rule = _SoftRule(cols, None, offset, threshold, sigma_t, int(method))
    start = scores.to(dtype)
    result = _soft_nms_in_batches(rule, start, floor)
    if result is None:
        # One pick per pass: then all overlaps at once are cheaper than a row per pass.
        overlaps = _pairwise_overlaps(cols, offset) if n <= SOFT_NMS_MATRIX_LIMIT else None
        result = _soft_nms_step_by_step(rule._replace(overlaps=overlaps), start, floor)
    picked, picked_scores = result
    count = picked.numel()
    dets[:count, :4] = cols[:4, picked].T
    dets[:count, 4] = picked_scores
    return picked


class _SoftRule(NamedTuple):
    """How a picked box rescales the others: the kernel's overlap, then its weight by method."""

    cols: Tensor
    overlaps: Tensor | None  # all pairs, when small enough
    offset: int
    threshold: Tensor
    sigma: Tensor
    method: int

    def weights(self, picked: Tensor, others: Tensor) -> Tensor:
        """(len(picked), len(others)) factors for the others' scores."""
        if self.overlaps is not None:
            ovr = self.overlaps[picked[:, None], others[None, :]]
        else:
            a = _greedy.Boxes(*(c[:, None] for c in self.cols.index_select(1, picked)))
            b = _greedy.Boxes(*(c[None, :] for c in self.cols.index_select(1, others)))
            inter = _greedy._intersection(a, b, self.offset)
            ovr = inter.div_((a.area + b.area).sub_(inter))
        return _soft_weight(ovr, self.threshold, self.sigma, self.method)


def _soft_nms_in_batches(rule: _SoftRule, scores: Tensor, floor: Tensor) -> tuple[Tensor, Tensor] | None:
    """Several picks per round where the kernel's order is certain; None where it is not.

    The kernel picks the highest score, rescales the others (by factors <= 1) and drops those
    below min_score. So the best scores in order, each strictly above the next, are picked one
    after the other when none of them rescales a later one (its factor on it is exactly 1):
    their scores do not move and nothing else can rise past them. A round takes the longest
    such run among the SOFT_NMS_BATCH best, then applies their factors in pick order (the
    same float multiplications). The kernel's own arrangement of the boxes only breaks ties
    between equal best scores; at such a tie (or a factor above 1, or NaN) this gives up and
    the step-by-step version, which keeps that arrangement, answers instead."""
    if bool(torch.isnan(scores).any()):
        return None
    device = scores.device
    alive = torch.arange(scores.numel(), device=device)
    current = scores.clone()
    picks: list[Tensor] = []
    picked_scores: list[Tensor] = []
    first_round = True
    while alive.numel():
        m = alive.numel()
        size = min(SOFT_NMS_BATCH, m)
        top_scores, top = torch.topk(current, min(size + 1, m))
        candidates = alive[top[:size]]
        # Candidate b is the next pick when it is strictly above the next score and, from the
        # second on, no earlier candidate rescales it (and it is not below min_score yet).
        strict = (
            top_scores[:size] > top_scores[1:]
            if m > size
            else torch.cat([top_scores[:-1] > top_scores[1:], torch.ones(1, dtype=torch.bool, device=device)])
        )
        among = rule.weights(candidates, candidates)
        rescaled = (torch.triu(among != 1, diagonal=1)).any(0)
        ready = strict & ~rescaled
        if first_round:
            ready &= ~(top_scores[:size] < floor)
        ready[0] = strict[0]
        blocked = (~ready).nonzero()
        run = int(blocked[0, 0]) if blocked.numel() else size
        if run == 0:
            return None  # a tie for the best score: the kernel's arrangement decides
        chosen = candidates[:run]
        factors = rule.weights(chosen, alive)
        if bool((factors > 1).any()) or bool(torch.isnan(factors).any()):
            return None
        current = _rescale_in_order(current, factors)
        picks.append(chosen)
        picked_scores.append(top_scores[:run])
        stays = ~(current < floor)
        stays[top[:run]] = False
        alive, current = alive[stays], current[stays]
        first_round = False
    return torch.cat(picks), torch.cat(picked_scores)


def _rescale_in_order(scores: Tensor, factors: Tensor) -> Tensor:
    """scores * factors[0] * factors[1] * …, multiplied in that order as the kernel does.

    Multiplying by 1 is exact, so where at most one factor differs from 1 one multiplication
    by the smallest factor gives the same float; only the other scores go row by row."""
    differs = factors != 1
    result = scores * factors.amin(0)
    several = differs.sum(0) > 1
    if bool(several.any()):
        columns = several.nonzero().squeeze(1)
        part = scores[columns]
        for row in differs[:, columns].any(1).nonzero().squeeze(1).tolist():
            part = part * factors[row, columns]
        result[columns] = part
    return result


def _soft_nms_step_by_step(rule: _SoftRule, scores: Tensor, floor: Tensor) -> tuple[Tensor, Tensor]:
    """The kernel's loop, one pick per pass, keeping its arrangement of the boxes."""
    n = scores.numel()
    device = scores.device
    # The kernel's arrays, in its current arrangement: which box sits at each position, its score.
    where = torch.arange(n, device=device)
    score = scores.clone()
    count = n
    i = 0
    while i < count:
        window = score[i:count]
        pick = i + _first_max(window)
        if pick != i:
            where[[i, pick]] = where[[pick, i]]
            score[[i, pick]] = score[[pick, i]]
        rest = where[i + 1 : count]
        if rest.numel():
            rescaled = score[i + 1 : count] * rule.weights(where[i : i + 1], rest)[0]
            score[i + 1 : count] = rescaled
            stays = ~(rescaled < floor)
            if not bool(stays.all()):
                arrangement = _drop_by_swapping_with_last(stays)
                where[i + 1 : i + 1 + arrangement.numel()] = rest[arrangement]
                score[i + 1 : i + 1 + arrangement.numel()] = rescaled[arrangement]
                count = i + 1 + arrangement.numel()
        i += 1
    return where[:count], score[:count]


def _first_max(values: Tensor) -> int:
    """Position of the kernel's maximum: the first one; NaN never wins unless it comes first
    (``if (max_score < sc[pos])`` never holds for a NaN on either side)."""
    if bool(torch.isnan(values[0])):
        return 0
    finite = torch.where(torch.isnan(values), float("-inf"), values)
    return int(torch.argmax(finite))


def _naive_weight(ovr: Tensor, threshold: Tensor, sigma: Tensor) -> Tensor:
    return torch.where(ovr >= threshold, 0.0, 1.0).to(ovr.dtype)  # drop what overlaps the threshold or more


def _linear_weight(ovr: Tensor, threshold: Tensor, sigma: Tensor) -> Tensor:
    return torch.where(ovr >= threshold, 1 - ovr, torch.ones_like(ovr))


def _gaussian_weight(ovr: Tensor, threshold: Tensor, sigma: Tensor) -> Tensor:
    # exp(-ovr² / sigma): the exponent in float32 as the kernel computes it; exp in float64
    # rounded once, which is what glibc's expf gives but for rare last-bit differences.
    exponent = (-(ovr * ovr)) / sigma
    return exponent.double().exp().to(ovr.dtype)


#: Soft-NMS methods as mmcv numbers them (mmcv.ops.soft_nms: naive, linear, gaussian); the
#: kernel leaves the scores unchanged for any other number.
SOFT_NMS_WEIGHTS = {0: _naive_weight, 1: _linear_weight, 2: _gaussian_weight}


def _soft_weight(ovr: Tensor, threshold: Tensor, sigma: Tensor, method: int) -> Tensor:
    weight = SOFT_NMS_WEIGHTS.get(method)
    return weight(ovr, threshold, sigma) if weight is not None else torch.ones_like(ovr)


def _drop_by_swapping_with_last(stays: Tensor) -> Tensor:
    """The kernel's order after dropping: scanning forward, a dropped box is replaced by the
    last box (which is then examined in its place) and the count shrinks. The result: boxes
    that stay before the new end keep their places, and the holes among them are filled by
    the staying boxes from beyond the new end, last first. Returns source positions."""
    length = stays.numel()
    remaining = int(stays.sum())
    positions = torch.arange(length, device=stays.device)
    arrangement = positions[:remaining].clone()
    holes = (~stays[:remaining]).nonzero().squeeze(1)
    movers = (stays & (positions >= remaining)).nonzero().squeeze(1).flip(0)
    arrangement[holes] = movers
    return arrangement


def _pairwise_overlaps(cols: Tensor, offset: int) -> Tensor:
    a = _greedy.Boxes(*(c[:, None] for c in cols))
    b = _greedy.Boxes(*(c[None, :] for c in cols))
    inter = _greedy._intersection(a, b, offset)
    return inter.div_((a.area + b.area).sub_(inter))


# --- nms_match ------------------------------------------------------------------------------


def nms_match(dets: Tensor, iou_threshold: float) -> list[list[int]]:
    """Groups of box indices: each kept box first, then the boxes it suppressed, in score order."""
    _check_boxes("nms_match", dets, 5, "dets (x1, y1, x2, y2, score)")
    if dets.shape[0] == 0:
        return []
    order = dets[:, 4].sort(0, descending=True)[1]
    cols = _greedy.columns(dets[:, :4], 0)[:, order]
    problem = _greedy.Problem(
        cols,
        torch.tensor(_float32(iou_threshold), dtype=dets.dtype, device=dets.device),
        0,
        inclusive=True,
        rule=_greedy._ratio_rule,  # the kernel exists for the CPU only (mmcv moves dets there)
    )
    result = _greedy.solve(problem, want_owner=True)
    assert result.owner is not None
    n = order.numel()
    positions = torch.arange(n, device=dets.device)
    group = torch.where(result.owner >= 0, result.owner, positions)
    # Group by the kept box's position; within a group, score order (the kept box is first).
    arranged = torch.argsort(group * n + positions)
    sizes = torch.bincount(group, minlength=n)[result.kept].tolist()
    flat = order[arranged].tolist()
    groups: list[list[int]] = []
    start = 0
    for size in sizes:
        groups.append(flat[start : start + size])
        start += size
    return groups
