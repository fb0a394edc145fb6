"""The 2.x → 3.x state-dict rename table (mmfix/_configs/_layouts2x.py): what upgrade() renames, and what it never does."""

from __future__ import annotations

import re
from collections import OrderedDict

import pytest

from mmfix._configs._layouts2x import LAYOUTS, YOLACT, Layout, mismatch_message, upgrade

SEGM_2X = OrderedDict(
    [
        ("backbone.conv1.weight", 1),
        ("segm_head.segm_conv.weight", 2),
        ("segm_head.segm_conv.bias", 3),
        ("mask_head.protonet.0.weight", 4),
    ]
)
TARGET_3X = ["backbone.conv1.weight", "mask_head.segm_branch.segm_conv.weight", "mask_head.segm_branch.segm_conv.bias"]


def test_yolact_2x_keys_take_the_3x_names_in_place_and_values_are_untouched() -> None:
    done = upgrade(SEGM_2X, [*TARGET_3X, "mask_head.protonet.0.weight"])
    assert list(done.state_dict.items()) == [
        ("backbone.conv1.weight", 1),
        ("mask_head.segm_branch.segm_conv.weight", 2),
        ("mask_head.segm_branch.segm_conv.bias", 3),
        ("mask_head.protonet.0.weight", 4),
    ]
    assert [(layout.name, n) for layout, n in done.applied] == [(YOLACT.name, 2)]
    assert done.changed
    # a converted state dict is not taken for a 2.x one again
    assert not upgrade(done.state_dict, [*TARGET_3X, "mask_head.protonet.0.weight"]).changed
    assert not YOLACT.matches(done.state_dict)


def test_nothing_is_renamed_towards_a_key_the_model_lacks_or_away_from_one_it_has() -> None:
    # The model has no segm branch (a guess of the family that does not fit): keys stay as they are.
    done = upgrade(SEGM_2X, ["backbone.conv1.weight"])
    assert list(done.state_dict) == list(SEGM_2X) and not done.changed
    # A model that kept the 2.x name keeps it.
    done = upgrade(SEGM_2X, [*SEGM_2X, "mask_head.segm_branch.segm_conv.weight"])
    assert list(done.state_dict) == list(SEGM_2X) and not done.changed


def test_without_a_model_every_rename_of_a_matching_layout_applies() -> None:
    done = upgrade(SEGM_2X)
    assert "mask_head.segm_branch.segm_conv.weight" in done.state_dict
    assert "segm_head.segm_conv.weight" not in done.state_dict


def test_a_state_dict_without_any_2x_marker_is_returned_equal() -> None:
    plain = OrderedDict([("backbone.conv1.weight", 1), ("roi_head.bbox_head.fc_cls.weight", 2)])
    done = upgrade(plain)
    assert done.state_dict == plain and done.applied == [] and not done.changed


def test_torch_metadata_follows_the_renamed_modules() -> None:
    state = OrderedDict(SEGM_2X)
    state._metadata = OrderedDict([("", {"version": 1}), ("segm_head.segm_conv", {"version": 2})])  # type: ignore[attr-defined]
    done = upgrade(state, TARGET_3X + ["mask_head.protonet.0.weight"])
    assert done.state_dict._metadata == OrderedDict(
        [("", {"version": 1}), ("mask_head.segm_branch.segm_conv", {"version": 2})]
    )


def test_every_layout_row_is_well_formed() -> None:
    names = [layout.name for layout in LAYOUTS]
    assert len(names) == len(set(names))
    for layout in LAYOUTS:
        re.compile(layout.marker)
        assert layout.renames or layout.reshape is not None, layout.name
        for pattern, _ in layout.renames:
            re.compile(pattern)


def test_a_reshape_runs_after_the_renames() -> None:
    seen = {}

    def split(state: dict) -> dict:
        seen.update(state)
        out = {k: v for k, v in state.items() if k != "new.qkv"}
        out["new.q"], out["new.k"] = state["new.qkv"]
        return out

    layout = Layout(name="toy", marker=r"^old\.", renames=((r"^old\.", "new."),), reshape=split)
    done = upgrade({"old.qkv": (1, 2)}, layouts=(layout,))
    assert "new.qkv" in seen
    assert done.state_dict == {"new.q": 1, "new.k": 2}


@pytest.mark.parametrize("n", [1, 30])
def test_mismatch_message_names_the_keys_and_says_how_many(n: int) -> None:
    missing = [f"head.layer{i}.weight" for i in range(n)]
    text = mismatch_message("the YOLACT model", missing, ["extra.key"], "Nothing was written.")
    assert f"{n} parameter(s) of the model are not in the checkpoint" in text
    assert "head.layer0.weight" in text and "extra.key" in text and "Nothing was written." in text
    assert ("more" in text) == (n > 12)


# --- a rename never overwrites (issue 28, finding 4) -------------------------------------------

STALE = OrderedDict(
    [
        ("mask_head.segm_branch.segm_conv.weight", "3x"),  # a 3.x key ...
        ("segm_head.segm_conv.weight", "2x"),  # ... and its stale 2.x twin, in either order
        ("segm_head.segm_conv.bias", "bias"),
    ]
)


@pytest.mark.parametrize("order", [1, -1])
@pytest.mark.parametrize("target", [None, TARGET_3X])
def test_a_3x_key_is_never_overwritten_by_its_2x_twin(order: int, target: list[str] | None) -> None:
    state = OrderedDict(list(STALE.items())[::order])
    done = upgrade(state, target)
    # every tensor is still there: the 3.x one under its name, the 2.x one under its old name
    assert sorted(done.state_dict.values()) == sorted(state.values())
    assert done.state_dict["mask_head.segm_branch.segm_conv.weight"] == "3x"
    assert done.state_dict["segm_head.segm_conv.weight"] == "2x"
    assert done.state_dict["mask_head.segm_branch.segm_conv.bias"] == "bias"  # a free name is still renamed
    assert [(c.target, c.sources, c.held) for c in done.collisions] == [
        ("mask_head.segm_branch.segm_conv.weight", ("segm_head.segm_conv.weight",), True)
    ]
    assert [n for _, n in done.applied] == [1]


def test_two_2x_keys_renaming_onto_one_free_name_both_keep_their_names() -> None:
    two = Layout(name="toy", marker=r"^old\.", renames=((r"^old\.(a|b)\.", "new."),))
    done = upgrade(OrderedDict([("old.a.w", 1), ("old.b.w", 2), ("old.c.w", 3)]), layouts=[two])
    assert done.state_dict == {"old.a.w": 1, "old.b.w": 2, "old.c.w": 3}
    assert [(c.target, c.sources, c.held) for c in done.collisions] == [("new.w", ("old.a.w", "old.b.w"), False)]
    assert not done.changed


def test_a_blocked_rename_keeps_its_name_from_a_rename_onto_it_in_turn() -> None:
    # a.w -> b.w is blocked (b.w is held); c.w -> a.w would have taken the name a.w was leaving.
    chain = Layout(name="toy", marker=r"^a\.", renames=((r"^a\.", "b."), (r"^c\.", "a.")))
    done = upgrade(OrderedDict([("a.w", 1), ("b.w", 2), ("c.w", 3)]), layouts=[chain])
    assert done.state_dict == {"a.w": 1, "b.w": 2, "c.w": 3}
    assert {c.target for c in done.collisions} == {"b.w", "a.w"}
    # a chain without a clash still renames: a.w -> b.w while b.w -> ... is free
    free = Layout(name="toy", marker=r"^a\.", renames=((r"^a\.", "b."), (r"^b\.", "d.")))
    done = upgrade(OrderedDict([("a.w", 1), ("b.w", 2)]), layouts=[free])
    assert done.state_dict == {"b.w": 1, "d.w": 2} and not done.collisions


def test_the_collision_message_names_both_keys_and_what_to_do() -> None:
    from mmfix._configs._layouts2x import collision_message

    text = collision_message(upgrade(STALE).collisions, "Nothing was written.")
    assert "mask_head.segm_branch.segm_conv.weight and segm_head.segm_conv.weight" in text
    assert "Nothing was written." in text and "Delete the stale key(s)" in text
