"""Voxelization (hard and dynamic) against compiled mmcv 2.1.0's CPU kernels, and through mmcv's Voxelization."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from ops_support import assert_same_call, import_mmcv_ops, swap_ext

PILLARS = ([0.16, 0.16, 4.0], [0.0, -39.68, -3.0, 69.12, 39.68, 1.0])
SECOND = ([0.05, 0.05, 0.1], [0.0, -40.0, -3.0, 70.4, 40.0, 1.0])
COARSE = ([0.5, 0.25, 1.0], [-2.0, -3.0, -1.0, 6.0, 3.0, 2.0])


def cloud(
    n: int, settings_: tuple[list[float], list[float]], seed: int, features: int = 4, dtype=torch.float32
) -> torch.Tensor:
    """Points spread a little beyond the range, some exactly on voxel borders, some repeated."""
    g = torch.Generator().manual_seed(seed)
    size, bounds = torch.tensor(settings_[0]), torch.tensor(settings_[1])
    low, high = bounds[:3], bounds[3:]
    span = high - low
    xyz = torch.rand(n, 3, generator=g) * span * 1.1 + low - 0.05 * span
    on_border = torch.rand(n, generator=g) < 0.15
    snapped = low + torch.round((xyz - low) / size) * size
    xyz = torch.where(on_border.unsqueeze(1), snapped, xyz)
    extra = torch.rand(n, max(features - 3, 0), generator=g)
    points = torch.cat([xyz, extra], dim=1)
    if n > 4:
        points[torch.randint(0, n, (n // 5,), generator=g)] = points[torch.randint(0, n, (n // 5,), generator=g)]
    return points.to(dtype)


def hard_call(ext_a, ext_b, points, settings_, max_points, max_voxels, deterministic=True):
    size = torch.tensor(settings_[0], dtype=torch.float)
    bounds = torch.tensor(settings_[1], dtype=torch.float)
    return assert_same_call(
        ext_a,
        ext_b,
        "hard_voxelize_forward",
        points,
        size,
        bounds,
        points.new_zeros((max_voxels, max_points, points.size(1))),
        torch.zeros((max_voxels, 3), dtype=torch.int),
        torch.zeros((max_voxels,), dtype=torch.int),
        torch.zeros((), dtype=torch.long),
        max_points=max_points,
        max_voxels=max_voxels,
        NDim=3,
        deterministic=deterministic,
        rtol=0,
        atol=0,
    )


@pytest.mark.parametrize("settings_", [PILLARS, SECOND, COARSE], ids=["pillars", "second", "coarse"])
@pytest.mark.parametrize("n", [0, 1, 7, 500, 3000])
def test_dynamic_voxelize_equals_compiled(compiled_ext, mmfix_ext, settings_, n):
    points = cloud(n, settings_, seed=n)
    assert_same_call(
        mmfix_ext,
        compiled_ext,
        "dynamic_voxelize_forward",
        points,
        torch.tensor(settings_[0]),
        torch.tensor(settings_[1]),
        torch.zeros((n, 3), dtype=torch.int),
        NDim=3,
        rtol=0,
        atol=0,
    )


@pytest.mark.parametrize("dtype", [torch.float16, torch.float64])
def test_dynamic_voxelize_other_point_types_equal_compiled(compiled_ext, mmfix_ext, dtype):
    points = cloud(800, COARSE, seed=3, dtype=dtype)
    assert_same_call(
        mmfix_ext,
        compiled_ext,
        "dynamic_voxelize_forward",
        points,
        torch.tensor(COARSE[0]),
        torch.tensor(COARSE[1]),
        torch.zeros((800, 3), dtype=torch.int),
        NDim=3,
        rtol=0,
        atol=0,
    )


def test_dynamic_voxelize_two_dims_and_non_finite_points(compiled_ext, mmfix_ext):
    points = cloud(300, COARSE, seed=4)
    points[:5, 0] = float("nan")
    points[5:10, 1] = float("inf")
    points[10:15, 2] = -float("inf")
    points[15:20, 0] = 3e9  # floor() past int range
    for ndim, bounds in ((3, COARSE[1]), (2, [-2.0, -3.0, 6.0, 3.0])):
        coors = {}
        for name, ext in (("mmfix", mmfix_ext), ("compiled", compiled_ext)):
            coors[name] = torch.zeros((300, ndim), dtype=torch.int)  # (NaN inputs: compared by hand)
            ext.dynamic_voxelize_forward(
                points, torch.tensor(COARSE[0][:ndim]), torch.tensor(bounds), coors[name], NDim=ndim
            )
        assert torch.equal(coors["mmfix"], coors["compiled"])
        rejected = [*range(10), *range(15, 20)] + ([*range(10, 15)] if ndim == 3 else [])
        assert (coors["mmfix"][rejected] == -1).all()


@pytest.mark.parametrize(
    ("settings_", "max_points", "max_voxels"),
    [
        (PILLARS, 32, 16000),  # PointPillars: nothing dropped
        (PILLARS, 3, 40),  # both caps bite
        (SECOND, 5, 20000),
        (COARSE, 1, 7),
        (COARSE, 100, 5000),
        (COARSE, 0, 10),  # no point kept, voxels still numbered
    ],
)
@pytest.mark.parametrize("n", [0, 1, 400, 3000])
def test_hard_voxelize_equals_compiled(compiled_ext, mmfix_ext, settings_, max_points, max_voxels, n):
    points = cloud(n, settings_, seed=n + max_points)
    hard_call(mmfix_ext, compiled_ext, points, settings_, max_points, max_voxels)


@pytest.mark.parametrize("dtype", [torch.float16, torch.float64])
@pytest.mark.parametrize("features", [3, 5])
def test_hard_voxelize_types_and_features_equal_compiled(compiled_ext, mmfix_ext, dtype, features):
    points = cloud(1500, COARSE, seed=features, features=features, dtype=dtype)
    hard_call(mmfix_ext, compiled_ext, points, COARSE, 6, 60)


def test_hard_voxelize_leaves_unused_slots_alone(compiled_ext, mmfix_ext):
    # The kernels write only filled slots: whatever the caller put elsewhere stays.
    points = cloud(200, COARSE, seed=9)
    size, bounds = torch.tensor(COARSE[0]), torch.tensor(COARSE[1])
    args = (
        points,
        size,
        bounds,
        torch.full((50, 4, 4), 7.0),
        torch.full((50, 3), 9, dtype=torch.int),
        torch.zeros((50,), dtype=torch.int),
        torch.zeros((), dtype=torch.long),
    )
    assert_same_call(
        mmfix_ext,
        compiled_ext,
        "hard_voxelize_forward",
        *args,
        max_points=4,
        max_voxels=50,
        NDim=3,
        deterministic=True,
        rtol=0,
        atol=0,
    )


def test_non_deterministic_mode_gives_the_deterministic_voxels(compiled_ext, mmfix_ext):
    # Compiled mmcv has no CPU kernel for deterministic=False; mmfix answers with the deterministic
    # order, one of the outcomes the CUDA kernel allows. Compared with compiled deterministic output.
    points = cloud(2000, PILLARS, seed=11)
    size, bounds = torch.tensor(PILLARS[0]), torch.tensor(PILLARS[1])
    outputs = []
    for ext, deterministic in ((compiled_ext, True), (mmfix_ext, False)):
        voxels, coors = torch.zeros((30, 5, 4)), torch.zeros((30, 3), dtype=torch.int)
        count, num = torch.zeros((30,), dtype=torch.int), torch.zeros((), dtype=torch.long)
        ext.hard_voxelize_forward(
            points,
            size,
            bounds,
            voxels,
            coors,
            count,
            num,
            max_points=5,
            max_voxels=30,
            NDim=3,
            deterministic=deterministic,
        )
        outputs.append((voxels, coors, count, num))
    for mine, theirs in zip(outputs[1], outputs[0]):
        assert torch.equal(mine, theirs)
    with pytest.raises(RuntimeError, match="cpu not found"):
        compiled_ext.hard_voxelize_forward(
            points,
            size,
            bounds,
            *[t.clone() for t in outputs[0]],
            max_points=5,
            max_voxels=30,
            NDim=3,
            deterministic=False,
        )


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    n=st.integers(0, 400),
    voxel=st.tuples(*[st.sampled_from([0.05, 0.1, 0.16, 0.2, 0.25, 0.3, 0.5, 1.0, 1.5])] * 3),
    max_points=st.integers(1, 8),
    max_voxels=st.integers(1, 300),
)
def test_hard_and_dynamic_voxelize_property(compiled_ext, mmfix_ext, seed, n, voxel, max_points, max_voxels):
    settings_ = (list(voxel), [-1.0, -2.0, -0.5, 2.0, 1.2, 1.0])
    points = cloud(n, settings_, seed)
    hard_call(mmfix_ext, compiled_ext, points, settings_, max_points, max_voxels)
    assert_same_call(
        mmfix_ext,
        compiled_ext,
        "dynamic_voxelize_forward",
        points,
        torch.tensor(settings_[0]),
        torch.tensor(settings_[1]),
        torch.zeros((n, 3), dtype=torch.int),
        NDim=3,
        rtol=0,
        atol=0,
    )


@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("max_points", [5, -1])
def test_voxelization_module_through_mmcv(compiled_ext, mmfix_ext, training, max_points):
    ops = import_mmcv_ops(mmfix_ext)
    layer = ops.Voxelization(PILLARS[0], PILLARS[1], max_num_points=max_points, max_voxels=(80, 120)).train(training)
    points = cloud(4000, PILLARS, seed=21)
    with swap_ext(compiled_ext):
        expected = layer(points)
    with swap_ext(mmfix_ext):
        actual = layer(points)
    if max_points == -1:
        assert torch.equal(actual, expected)
        return
    for mine, theirs in zip(actual, expected):
        assert torch.equal(mine, theirs)
    assert actual[0].size(0) == (80 if training else 120)  # the cap of this mode, reached


def test_bad_settings_are_refused_clearly(mmfix_ext):
    points = cloud(10, COARSE, seed=1)
    coors = torch.zeros((10, 3), dtype=torch.int)
    with pytest.raises(TypeError, match="float32"):
        mmfix_ext.dynamic_voxelize_forward(
            points, torch.tensor(COARSE[0], dtype=torch.float64), torch.tensor(COARSE[1]), coors, NDim=3
        )
    with pytest.raises(ValueError, match="not a finite size"):
        mmfix_ext.dynamic_voxelize_forward(
            points, torch.tensor([0.0, 1.0, 1.0]), torch.tensor(COARSE[1]), coors, NDim=3
        )
    with pytest.raises(ValueError, match="room for 2 points"):
        mmfix_ext.hard_voxelize_forward(
            points,
            torch.tensor(COARSE[0]),
            torch.tensor(COARSE[1]),
            torch.zeros((5, 2, 4)),
            torch.zeros((5, 3), dtype=torch.int),
            torch.zeros((5,), dtype=torch.int),
            torch.zeros((), dtype=torch.long),
            max_points=4,
            max_voxels=5,
            NDim=3,
            deterministic=True,
        )
    with pytest.raises(ValueError, match="NDim=3"):
        mmfix_ext.hard_voxelize_forward(
            points, *[torch.zeros(1)] * 6, max_points=4, max_voxels=5, NDim=2, deterministic=True
        )


HUGE_GRID = """
import importlib.machinery, importlib.util, json, random, resource, signal, sys
resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30)); signal.alarm(120)
import torch
from mmfix._ops import _ext

path = sys.argv[1]
loader = importlib.machinery.ExtensionFileLoader("mmcv._ext", path)
compiled = importlib.util.module_from_spec(importlib.util.spec_from_file_location("mmcv._ext", path, loader=loader))
loader.exec_module(compiled)
mine = _ext.build()

# 2^22 cells a side (2^66 in all): the flat index z * 2^44 + y * 2^22 + x wraps at z = 2^20.
side = float(1 << 22)
size, bounds = torch.tensor([1.0, 1.0, 1.0]), torch.tensor([0.0, 0.0, 0.0, side, side, side])
rng = random.Random(5)
rows = []
for i in range(60):
    x, y = rng.choice([0.5, 3.5]), rng.choice([0.5, 7.5])
    z = rng.choice([0.5, 0.5 + (1 << 20), 0.5 + (2 << 20), 2.5, 2.5 + (1 << 20), side + 9.0])  # the last one outside
    rows.append([x, y, z, float(i)])
points = torch.tensor(rows)
report = {}
coors = torch.zeros((60, 3), dtype=torch.int)
compiled.dynamic_voxelize_forward(points, size, bounds, coors, NDim=3)
truth = coors.clone()
mine.dynamic_voxelize_forward(points, size, bounds, coors, NDim=3)
report["dynamic_equal"] = torch.equal(coors, truth)

def hard(ext, max_points, max_voxels):
    out = (torch.zeros((max_voxels, max_points, 4)), torch.zeros((max_voxels, 3), dtype=torch.int),
           torch.zeros((max_voxels,), dtype=torch.int), torch.zeros((), dtype=torch.long))
    ext.hard_voxelize_forward(points, size, bounds, *out, max_points=max_points, max_voxels=max_voxels, NDim=3, deterministic=True)
    return out

try:
    hard(compiled, 4, 20)
except RuntimeError as exc:
    report["compiled_hard"] = str(exc).splitlines()[0]

# What the kernel does, written out over compiled mmcv's own per-point voxels: voxels numbered
# in the order their first point appears, the first max_points points of each kept voxel.
for max_points, max_voxels in ((4, 30), (3, 5)):
    voxels, coor, count, num = hard(mine, max_points, max_voxels)
    order = {}
    expected_points = {}
    for i, voxel in enumerate(map(tuple, truth.tolist())):
        if voxel[0] == -1 or (voxel not in order and len(order) >= max_voxels):
            continue
        slot = order.setdefault(voxel, len(order))
        expected_points.setdefault(slot, []).append(i)
    n = len(order)
    ok = int(num) == n and coor[:n].tolist() == [list(v) for v in order]
    ok = ok and count[:n].tolist() == [min(len(expected_points[s]), max_points) for s in range(n)]
    for s in range(n):
        kept = expected_points[s][:max_points]
        ok = ok and torch.equal(voxels[s, : len(kept)], points[kept])
    report[f"hard_{max_points}_{max_voxels}"] = {"ok": ok, "voxels": n}
print("REPORT", json.dumps(report))
"""


def test_a_grid_past_2_to_the_63_cells_never_pools_different_voxels(tmp_path):
    """Issue 28, finding 5: the flat voxel index wraps past 2^63 cells. Compiled mmcv's CPU hard
    kernel refuses such a grid (its cell table's size overflows); its dynamic kernel answers,
    and mmfix's hard voxelization must group exactly by those voxels (as mmcv's CUDA kernel,
    which compares coordinates, does). In its own process under a memory and a time limit."""
    import json
    import sys

    from conftest import clean_env, run
    from ops_support import extract_compiled_ext

    # the file for the subprocess, its own copy (a loaded module's __file__ may name a gone file)
    so = extract_compiled_ext(tmp_path)
    proc = run([sys.executable, "-c", HUGE_GRID, str(so)], env=clean_env(), timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    report = json.loads(proc.stdout.split("REPORT ", 1)[1].splitlines()[0])
    assert report["dynamic_equal"]
    assert report["compiled_hard"].startswith("Storage size calculation overflowed")
    # 20 voxels among the points (2 x, 2 y, 5 z inside the grid, three of them one flat index)
    assert report["hard_4_30"] == {"ok": True, "voxels": 20}
    assert report["hard_3_5"] == {"ok": True, "voxels": 5}
