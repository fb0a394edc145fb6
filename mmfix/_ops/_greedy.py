"""Greedy suppression over boxes in score order: the part of NMS that is sequential in C++.

mmcv's kernels walk the boxes in score order; each box not yet suppressed is kept and
suppresses every later box it overlaps too much. The answer is a fixed function of the
pairwise "suppresses" relation, so it is computed here from that relation in tensor
operations, in one of two ways, whichever costs fewer pair evaluations:

* **dense blocks**: the next ``BLOCK`` surviving boxes are resolved among themselves
  (a fixed-point iteration over their B×B relation, exact on a DAG), then the kept ones
  strike every later survivor. Dense clusters of boxes (one object, hundreds of
  proposals) vanish after the first block, as they do in the C++ loop.
* **sparse pairs**: when the overlap threshold is not negative, only boxes that
  intersect can suppress each other. Sorting by ``x1`` gives, for each box, the run of
  boxes that start before it ends; only those pairs are evaluated (in bounded chunks),
  and the greedy rule is solved over the resulting edges. Boxes of different classes
  (batched_nms shifts each class far away) or far apart never meet.

Memory stays bounded (``PAIR_BUDGET`` pair evaluations at a time) whatever the number of
boxes. Every pair is decided with the same float operations, in the same order, as the
kernel of the device the tensors are on (``RULES``), so the keep list is identical.
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import torch
from torch import Tensor

#: Boxes resolved together in one dense step.
BLOCK = 256
#: Most box pairs evaluated in one tensor operation (bounds the intermediates: ~15 floats each).
PAIR_BUDGET = 1 << 21
#: The sparse path is taken when its candidate pairs are at most this many dense-step pairs.
SPARSE_PREFERENCE = 0.25
#: Most edges the sparse path keeps at once (beyond it, dense steps thin the boxes out first).
EDGE_CAP = 1 << 23
#: Rounds of the vectorised fixed point over edges before the rest is walked box by box.
ROUNDS_BEFORE_WALK = 16


class Boxes(NamedTuple):
    """Columns of boxes (each a 1-D tensor, or broadcastable views of them)."""

    x1: Tensor
    y1: Tensor
    x2: Tensor
    y2: Tensor
    area: Tensor


def columns(boxes: Tensor, offset: int) -> Tensor:
    """(5, n): x1, y1, x2, y2 and the area as the C++ computes it, ``(x2-x1+offset)*(y2-y1+offset)``."""
    x1, y1, x2, y2 = (boxes[:, i] for i in range(4))
    area = (x2 - x1 + offset) * (y2 - y1 + offset)
    return torch.stack([x1, y1, x2, y2, area])


def _intersection(a: Boxes, b: Boxes, offset: int) -> Tensor:
    # The C++ order: w = max(0, (min(x2) - max(x1)) + offset), the same for h, inter = w * h.
    # (std::max(0, NaN) is 0 where clamp keeps NaN; a NaN there implies a NaN area, so the
    # pair's decision is "no" either way.)
    w = torch.minimum(a.x2, b.x2).sub_(torch.maximum(a.x1, b.x1))
    h = torch.minimum(a.y2, b.y2).sub_(torch.maximum(a.y1, b.y1))
    if offset:
        w.add_(offset)
        h.add_(offset)
    return w.clamp_(min=0).mul_(h.clamp_(min=0))


def _ratio_rule(a: Boxes, b: Boxes, threshold: Tensor, offset: int, inclusive: bool) -> Tensor:
    """mmcv's CPU kernels: ``inter / (area_a + area_b - inter) > threshold`` (``>=`` for nms_match)."""
    inter = _intersection(a, b, offset)
    union = (a.area + b.area).sub_(inter)
    ovr = inter.div_(union)
    return ovr >= threshold if inclusive else ovr > threshold


def _product_rule(a: Boxes, b: Boxes, threshold: Tensor, offset: int, inclusive: bool) -> Tensor:
    """mmcv's CUDA kernel: ``inter > threshold * (area_a + area_b - inter)`` (no division)."""
    inter = _intersection(a, b, offset)
    bound = (a.area + b.area).sub_(inter).mul_(threshold)
    return inter >= bound if inclusive else inter > bound


Rule = Callable[[Boxes, Boxes, Tensor, int, bool], Tensor]

#: How the compiled kernel on each device decides that box a suppresses box b.
RULES: dict[str, Rule] = {
    "cpu": _ratio_rule,
    "cuda": _product_rule,
}


def rule_for(device: torch.device) -> Rule:
    return RULES.get(device.type, _ratio_rule)


class Problem(NamedTuple):
    """Boxes in score order (``cols[:, k]`` is the k-th best) and how pairs are decided."""

    cols: Tensor
    threshold: Tensor
    offset: int
    inclusive: bool
    rule: Rule

    def boxes(self, index: Tensor | slice) -> Boxes:
        if isinstance(index, Tensor):
            return Boxes(*self.cols.index_select(1, index).unbind(0))
        return Boxes(*self.cols[:, index].unbind(0))

    def suppresses(self, a: Boxes, b: Boxes) -> Tensor:
        return self.rule(a, b, self.threshold, self.offset, self.inclusive)

    def prunable(self) -> bool:
        """Whether boxes that do not intersect can never suppress each other.

        Then an overlap of 0 never passes the threshold: ``0 > t`` needs t < 0 (``0 >= t``
        needs t <= 0), and the CUDA rule's ``0 > t * union`` also needs a negative union,
        which only boxes with a negative area (x2 < x1) have."""
        t = float(self.threshold)
        if t < 0 or (self.inclusive and t <= 0) or t != t:
            return False
        if self.rule is _product_rule:
            return not bool((self.cols[4] < 0).any())
        return True


class Result(NamedTuple):
    """Positions (in score order) of the kept boxes, ascending, and of each suppressed
    box's suppressor when asked for (``owner[k]`` = the kept position that struck box k)."""

    kept: Tensor
    owner: Tensor | None


def solve(problem: Problem, want_owner: bool = False) -> Result:
    """The greedy NMS answer for boxes already in score order."""
    cols = problem.cols
    n = cols.shape[1]
    device = cols.device
    owner = torch.full((n,), -1, dtype=torch.long, device=device) if want_owner else None
    alive = torch.arange(n, device=device)
    kept_parts: list[Tensor] = []
    prunable = n > BLOCK and problem.prunable()
    while alive.numel():
        if prunable and alive.numel() > BLOCK:
            pairs = _CandidatePairs.find(problem, alive)
            if pairs.total <= SPARSE_PREFERENCE * BLOCK * alive.numel() and pairs.total <= EDGE_CAP:
                kept_parts.append(_solve_sparse(problem, alive, pairs, owner))
                break
        alive = _dense_step(problem, alive, kept_parts, owner)
    kept = torch.cat(kept_parts) if kept_parts else alive
    return Result(kept.sort().values, owner)


# --- dense blocks -----------------------------------------------------------------------------


def _dense_step(problem: Problem, alive: Tensor, kept_parts: list[Tensor], owner: Tensor | None) -> Tensor:
    """Resolve the first BLOCK survivors, strike what they suppress; the survivors after them."""
    head, rest = alive[:BLOCK], alive[BLOCK:]
    a = problem.boxes(head)
    k = head.numel()
    upper = torch.ones(k, k, dtype=torch.bool, device=head.device).triu_(1)
    relation = problem.suppresses(Boxes(*(c[:, None] for c in a)), Boxes(*(c[None, :] for c in a))) & upper
    keep = _fixed_point(relation)
    kept = head[keep]
    kept_parts.append(kept)
    if owner is not None:
        _record_owner(owner, head, relation, keep, kept_positions=head)
    if not rest.numel():
        return rest
    kb = problem.boxes(kept)
    struck = torch.zeros(rest.numel(), dtype=torch.bool, device=rest.device)
    if kept.numel():
        step = max(1, PAIR_BUDGET // kept.numel())
        for start in range(0, rest.numel(), step):
            part = rest[start : start + step]
            b = problem.boxes(part)
            hit = problem.suppresses(Boxes(*(c[:, None] for c in kb)), Boxes(*(c[None, :] for c in b)))
            struck[start : start + step] = hit.any(0)
            if owner is not None:
                first = _first_true(hit)
                hit_any = hit.any(0)
                owner[part[hit_any]] = kept[first[hit_any]]
    return rest[~struck]


def _fixed_point(relation: Tensor) -> Tensor:
    """Which boxes of a block survive, given relation[i, j] = "i suppresses j" for i < j.

    kept[j] = no kept i < j suppresses j. Iterating that map from "all kept" reaches its
    unique fixed point (the relation is acyclic), usually in two or three rounds."""
    k = relation.shape[0]
    weights = relation.to(torch.float32)
    kept = torch.ones(k, dtype=torch.bool, device=relation.device)
    while True:
        nxt = (kept.to(torch.float32) @ weights) == 0
        if torch.equal(nxt, kept):
            return kept
        kept = nxt


def _first_true(matrix: Tensor) -> Tensor:
    """Per column, the first row index holding True (rows beyond for none)."""
    rows = torch.arange(matrix.shape[0], device=matrix.device)[:, None]
    return torch.where(matrix, rows, matrix.shape[0]).amin(0)


def _record_owner(owner: Tensor, block: Tensor, relation: Tensor, keep: Tensor, kept_positions: Tensor) -> None:
    # Inside a block, a suppressed box belongs to the first kept box that strikes it.
    struck_by_kept = relation & keep[:, None]
    hit_any = struck_by_kept.any(0)
    first = _first_true(struck_by_kept)
    owner[block[hit_any]] = kept_positions[first[hit_any]]


# --- sparse pairs -----------------------------------------------------------------------------


class _CandidatePairs(NamedTuple):
    """Pairs of boxes whose x ranges meet, as runs in ``x1`` order: box ``by_x[p]`` and
    boxes ``by_x[p+1 : end[p]]``."""

    by_x: Tensor  # alive positions sorted by x1
    end: Tensor
    counts: Tensor
    total: int

    @classmethod
    def find(cls, problem: Problem, alive: Tensor) -> _CandidatePairs:
        x1 = problem.cols[0, alive]
        x1_sorted, order = x1.sort()
        by_x = alive[order]
        # Boxes p before q (x1[p] <= x1[q]) intersect only if fl(fl(min(x2) - x1[q]) + offset) > 0,
        # which implies x1[q] < x2[p] + offset in real numbers, hence x1[q] <= fl(x2[p] + offset):
        # the run found here holds every pair that can intersect (and some that cannot).
        reach = problem.cols[2, by_x] + problem.offset
        end = torch.searchsorted(x1_sorted, reach, right=True)
        start = torch.arange(1, by_x.numel() + 1, device=alive.device)
        counts = (end - start).clamp_(min=0)
        return cls(by_x, end, counts, int(counts.sum()))


def _solve_sparse(problem: Problem, alive: Tensor, pairs: _CandidatePairs, owner: Tensor | None) -> Tensor:
    src, dst = _edges(problem, pairs)
    # Relabel the alive positions 0..m-1 (ascending positions = score order).
    m = alive.numel()
    local = torch.full((problem.cols.shape[1],), -1, dtype=torch.long, device=alive.device)
    local[alive] = torch.arange(m, device=alive.device)
    src, dst = local[src], local[dst]
    keep = _fixed_point_edges(src, dst, m)
    if owner is not None and src.numel():
        live = keep[src]
        first = torch.full((m,), m, dtype=torch.long, device=alive.device)
        first.scatter_reduce_(0, dst[live], src[live], reduce="amin")
        hit = first < m
        owner[alive[hit]] = alive[first[hit]]
    return alive[keep]


def _edges(problem: Problem, pairs: _CandidatePairs) -> tuple[Tensor, Tensor]:
    """(earlier, later) positions of every candidate pair where the earlier suppresses the later.

    The decision is symmetric (max, min, a sum of the two areas), so pairs are evaluated in
    x order and only the hits are put in score order."""
    device = pairs.by_x.device
    in_x_order = problem.cols.index_select(1, pairs.by_x)
    cumulative = pairs.counts.cumsum(0)
    srcs: list[Tensor] = []
    dsts: list[Tensor] = []
    n = pairs.by_x.numel()
    lo = 0
    while lo < n:
        # Rows lo..hi-1 holding at most PAIR_BUDGET pairs (at least one row).
        base = int(cumulative[lo - 1]) if lo else 0
        hi = int(torch.searchsorted(cumulative, base + PAIR_BUDGET, right=True))
        hi = min(max(hi, lo + 1), n)
        counts = pairs.counts[lo:hi]
        total = int(cumulative[hi - 1]) - base
        if total:
            row_ids = torch.arange(lo, hi, device=device)
            # Row p pairs with p+1, p+2, …: the k-th pair overall is (p, k + p + 1 - first pair of p).
            shift = row_ids + 1 - (cumulative[lo:hi] - counts - base)
            rows = row_ids.repeat_interleave(counts, output_size=total)
            partners = torch.arange(total, device=device).add_(shift.repeat_interleave(counts, output_size=total))
            hit = problem.suppresses(
                Boxes(*in_x_order.index_select(1, rows).unbind(0)),
                Boxes(*in_x_order.index_select(1, partners).unbind(0)),
            )
            p, q = pairs.by_x[rows[hit]], pairs.by_x[partners[hit]]
            srcs.append(torch.minimum(p, q))
            dsts.append(torch.maximum(p, q))
        lo = hi
    if not srcs:
        empty = torch.empty(0, dtype=torch.long, device=device)
        return empty, empty
    return torch.cat(srcs), torch.cat(dsts)


def _fixed_point_edges(src: Tensor, dst: Tensor, m: int) -> Tensor:
    """kept[j] = no kept src suppresses j, over edges src -> dst (src < dst); see _fixed_point.

    A box's next value depends only on boxes before it, so once the first box that changed
    in a round is known, it and every box before it keep their values from then on: only
    the boxes after it (and the edges into them) are carried to the next round. Detections
    settle in a handful of rounds; a long chain (box 1 strikes 2, which would strike 3, …)
    needs one round per link, so past ``ROUNDS_BEFORE_WALK`` rounds the rest is walked in
    score order instead, as the C++ loop does."""
    kept = torch.ones(m, dtype=torch.bool, device=src.device)
    if not src.numel():
        return kept
    order = torch.argsort(dst)
    src, dst = src[order], dst[order]
    settled = 0  # boxes before this position are final
    for _ in range(ROUNDS_BEFORE_WALK):
        struck = torch.zeros(m - settled, dtype=torch.bool, device=src.device)
        struck[dst[kept[src]] - settled] = True
        nxt = ~struck
        changed = (nxt != kept[settled:]).nonzero()
        if not changed.numel():
            return kept
        kept[settled:] = nxt
        settled += int(changed[0, 0]) + 1
        cut = torch.searchsorted(dst, torch.tensor(settled, device=dst.device))
        src, dst = src[cut:], dst[cut:]
        if not src.numel():
            return kept
    return _walk(kept, src, dst, settled)


def _walk(kept: Tensor, src: Tensor, dst: Tensor, settled: int) -> Tensor:
    """Finish the greedy pass box by box over the edges into boxes from ``settled`` on."""
    m = kept.numel()
    struck = bytearray(m)
    # Boxes before `settled` are final: the kept ones strike what they reach.
    early = src < settled
    for j in dst[early & kept[src]].tolist():
        struck[j] = 1
    late_src, late_dst = src[~early], dst[~early]
    order = torch.argsort(late_src, stable=True)
    sources, targets = late_src[order].tolist(), late_dst[order].tolist()
    result = kept.tolist()
    k = 0
    for i in range(settled, m):
        result[i] = not struck[i]
        while k < len(sources) and sources[k] == i:
            if result[i]:
                struck[targets[k]] = 1
            k += 1
    return torch.tensor(result, dtype=torch.bool, device=kept.device)
