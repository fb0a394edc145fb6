"""tests/zoo_support.differences: what two runs of one model may differ in, and what they may not."""

from __future__ import annotations

import torch
from zoo_support import Run, differences


def _run(order: list[int], scores: list[float], shift: float = 0.0) -> Run:
    boxes = torch.tensor([[0.0, 0.0, 10.0, 10.0], [200.0, 50.0, 260.0, 90.0], [5.0, 5.0, 30.0, 40.0]])
    boxes[1] += shift
    labels = torch.tensor([3, 7, 3])
    index = torch.tensor(order)
    prediction = {
        "pred_instances.bboxes": boxes[index],
        "pred_instances.labels": labels[index],
        "pred_instances.scores": torch.tensor(scores)[index],
    }
    return Run(predictions=[prediction])


def test_detections_whose_scores_tie_may_come_in_either_order() -> None:
    # the first two score alike within float rounding: a sort puts them either way round
    tied = [0.5, 0.5 + 3e-7, 0.25]
    assert differences(_run([0, 1, 2], tied), _run([1, 0, 2], tied)) == []


def test_a_moved_box_or_a_changed_score_or_label_still_differs() -> None:
    tied = [0.5, 0.5 + 3e-7, 0.25]
    assert differences(_run([0, 1, 2], tied), _run([1, 0, 2], tied, shift=1.0)) != []
    assert differences(_run([0, 1, 2], tied), _run([0, 1, 2], [0.5, 0.6, 0.25])) != []
    other = _run([0, 1, 2], tied)
    other.predictions[0]["pred_instances.labels"] = torch.tensor([4, 7, 3])  # above the cut
    assert differences(_run([0, 1, 2], tied), other) != []


def test_detections_tied_at_the_cut_may_differ_but_not_above_it() -> None:
    # the last kept detection (the lowest score, max_per_img's cut) is one of several tied ones
    a, b = _run([0, 1, 2], [0.5, 0.6, 0.25]), _run([0, 1, 2], [0.5, 0.6, 0.25])
    b.predictions[0]["pred_instances.bboxes"][2] += 50.0  # another of the tied candidates kept
    assert differences(a, b) == []
    c = _run([0, 1, 2], [0.5, 0.6, 0.25])
    c.predictions[0]["pred_instances.bboxes"][1] += 50.0  # above the cut: a real difference
    assert differences(a, c) != []
