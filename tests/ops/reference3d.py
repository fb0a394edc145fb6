"""Independent references for mmcv's CUDA-only 3D point ops, written from the CUDA kernels.

Each function follows one kernel of mmcv 2.1.0 (``mmcv/ops/csrc/common/cuda/*_cuda_kernel.cuh``)
loop by loop, in numpy float32 scalars where the kernel computes in float (so every
product and sum is rounded as there, in the same order), on small inputs. They share
no code with mmfix: where mmfix vectorises (a scan order for ties, a replayed heap,
first-k by ``topk``), these loop as the GPU threads do. Gradients are accumulated in
float64 (the kernels' ``atomicAdd`` order is not defined).
"""

from __future__ import annotations

import math

import numpy as np
import torch

F32 = np.float32


def _rows(t: torch.Tensor) -> np.ndarray:
    return t.detach().cpu().numpy()


# --- furthest point sampling (furthest_point_sample_cuda_kernel.cuh) -------------------------


def fps_threads(n: int) -> int:
    power = int(math.log(float(n)) / math.log(2.0))
    return max(min(1 << power, 1024), 1)


def furthest_point_sample(points: torch.Tensor, m: int, dist_matrix: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """(idx (B, m), temp after the call (B, n)) with temp starting at 1e10, thread by thread."""
    data = _rows(points).astype(F32)
    batch, n = data.shape[0], data.shape[1]
    block = fps_threads(n)
    idx = np.zeros((batch, m), dtype=np.int32)
    temps = np.full((batch, n), F32(1e10), dtype=F32)
    for b in range(batch):
        temp = temps[b]
        old = 0
        for j in range(1, m):
            dists = np.full(block, F32(-1), dtype=F32)
            dists_i = np.zeros(block, dtype=np.int64)
            for tid in range(block):
                best, besti = F32(-1), 0
                for k in range(tid, n, block):
                    if dist_matrix:
                        d = data[b, old, k]
                    else:
                        x1, y1, z1 = data[b, old]
                        x2, y2, z2 = data[b, k]
                        d = (x2 - x1) * (x2 - x1) + (y2 - y1) * (y2 - y1) + (z2 - z1) * (z2 - z1)
                    d2 = F32(np.fmin(d, temp[k]))
                    temp[k] = d2
                    besti = k if d2 > best else besti
                    best = d2 if d2 > best else best
                dists[tid], dists_i[tid] = best, besti
            size = 1024
            while size >= 2:  # the kernel's __update tree
                half = size // 2
                if block >= size:
                    for tid in range(half):
                        v1, v2 = dists[tid], dists[tid + half]
                        i1, i2 = dists_i[tid], dists_i[tid + half]
                        dists[tid] = max(v1, v2)
                        dists_i[tid] = i2 if v2 > v1 else i1
                size //= 2
            old = int(dists_i[0])
            idx[b, j] = old
    return idx, temps


# --- ball query (ball_query_cuda_kernel.cuh, stack_ball_query_cuda_kernel.cuh) ---------------


def _d2(a: np.ndarray, b: np.ndarray) -> np.floating:
    dx, dy, dz = a[0] - b[0], a[1] - b[1], a[2] - b[2]
    return dx * dx + dy * dy + dz * dz


def ball_query(
    centres: torch.Tensor, points: torch.Tensor, min_radius: float, max_radius: float, nsample: int
) -> np.ndarray:
    new_xyz, xyz = _rows(centres), _rows(points)
    dtype = new_xyz.dtype.type
    max_r2, min_r2 = F32(max_radius) * F32(max_radius), F32(min_radius) * F32(min_radius)
    out = np.zeros((new_xyz.shape[0], new_xyz.shape[1], nsample), dtype=np.int32)
    for b in range(new_xyz.shape[0]):
        for p in range(new_xyz.shape[1]):
            cnt = 0
            for k in range(xyz.shape[1]):
                d2 = dtype(_d2(new_xyz[b, p], xyz[b, k]))
                if d2 == 0 or (d2 >= min_r2 and d2 < max_r2):
                    if cnt == 0:
                        out[b, p, :] = k
                    out[b, p, cnt] = k
                    cnt += 1
                    if cnt >= nsample:
                        break
    return out


def stack_ball_query(
    centres: torch.Tensor,
    centre_counts: list[int],
    points: torch.Tensor,
    point_counts: list[int],
    radius: float,
    nsample: int,
    fill: int = 0,
) -> np.ndarray:
    """``fill``: what the caller's index tensor held (slots the kernel never writes keep it)."""
    new_xyz, xyz = _rows(centres), _rows(points)
    dtype = new_xyz.dtype.type
    r2 = F32(radius) * F32(radius)
    out = np.full((new_xyz.shape[0], nsample), fill, dtype=np.int32)
    for pt in range(new_xyz.shape[0]):
        bs, total = 0, 0
        while bs < len(centre_counts):
            total += centre_counts[bs]
            if pt < total:
                break
            bs += 1
        start = sum(point_counts[:bs])
        cnt = 0
        for k in range(point_counts[bs]):
            d2 = dtype(_d2(new_xyz[pt], xyz[start + k]))
            if d2 < r2:
                if cnt == 0:
                    out[pt, :] = k
                out[pt, cnt] = k
                cnt += 1
                if cnt >= nsample:
                    break
        if cnt == 0:
            out[pt, 0] = -1
    return out


# --- three_nn (three_nn_cuda_kernel.cuh) ------------------------------------------------------


def three_nn(unknown: torch.Tensor, known: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
    u, kn = _rows(unknown), _rows(known)
    dtype = u.dtype.type
    dist = np.zeros((u.shape[0], u.shape[1], 3), dtype=u.dtype)
    idx = np.zeros((u.shape[0], u.shape[1], 3), dtype=np.int32)
    for b in range(u.shape[0]):
        for p in range(u.shape[1]):
            best = [1e40, 1e40, 1e40]
            besti = [0, 0, 0]
            for k in range(kn.shape[1]):
                d = float(dtype(_d2(u[b, p], kn[b, k])))
                if d < best[0]:
                    best = [d, best[0], best[1]]
                    besti = [k, besti[0], besti[1]]
                elif d < best[1]:
                    best = [best[0], d, best[1]]
                    besti = [besti[0], k, besti[1]]
                elif d < best[2]:
                    best[2], besti[2] = d, k
            dist[b, p] = best  # a double stored into the tensor's type (1e40 -> inf in float)
            idx[b, p] = besti
    return dist, idx


# --- knn (knn_cuda_kernel.cuh): the heap, as written ----------------------------------------


def _reheap(dist: list[np.float32], idx: list[int], k: int) -> None:
    root, child = 0, 1
    while child < k:
        if child + 1 < k and dist[child + 1] > dist[child]:
            child += 1
        if dist[root] > dist[child]:
            return
        dist[root], dist[child] = dist[child], dist[root]
        idx[root], idx[child] = idx[child], idx[root]
        root = child
        child = root * 2 + 1


def knn(points: torch.Tensor, centres: torch.Tensor, k: int) -> tuple[np.ndarray, np.ndarray]:
    xyz, new_xyz = _rows(points), _rows(centres)
    dtype = xyz.dtype.type
    out_idx = np.zeros((new_xyz.shape[0], new_xyz.shape[1], k), dtype=np.int32)
    out_dist = np.zeros((new_xyz.shape[0], new_xyz.shape[1], k), dtype=F32)
    for b in range(new_xyz.shape[0]):
        for p in range(new_xyz.shape[1]):
            best_dist = [F32(1e10)] * k
            best_idx = [0] * k
            for i in range(xyz.shape[1]):
                d2 = dtype(_d2(new_xyz[b, p], xyz[b, i]))
                if float(d2) < float(best_dist[0]):
                    best_dist[0] = F32(d2)
                    best_idx[0] = i
                    _reheap(best_dist, best_idx, k)
            for i in range(k - 1, 0, -1):  # heap_sort
                best_dist[0], best_dist[i] = best_dist[i], best_dist[0]
                best_idx[0], best_idx[i] = best_idx[i], best_idx[0]
                _reheap(best_dist, best_idx, i)
            out_idx[b, p] = best_idx
            out_dist[b, p] = best_dist
    return out_idx, out_dist


# --- points in boxes (the CPU kernel's check_pt_in_box3d; CUDA's is the same) ---------------


def in_box(pt: np.ndarray, box: np.ndarray) -> tuple[bool, np.float32, np.float32]:
    x, y, z = (F32(v) for v in pt)
    cx, cy, cz, xs, ys, zs, rz = (F32(v) for v in box)
    cz = F32(float(cz) + float(zs) / 2.0)
    if abs(F32(z - cz)) > float(zs) / 2.0:
        return False, F32(0), F32(0)
    cosa, sina = F32(math.cos(-float(rz))), F32(math.sin(-float(rz)))
    sx, sy = F32(x - cx), F32(y - cy)
    lx = sx * cosa + sy * (-sina)
    ly = sx * sina + sy * cosa
    inside = lx > -float(xs) / 2.0 and lx < float(xs) / 2.0 and ly > -float(ys) / 2.0 and ly < float(ys) / 2.0
    return bool(inside), lx, ly


# --- RoI-aware pooling (roiaware_pool3d_cuda_kernel.cuh) --------------------------------------


def roiaware_pool3d(
    rois: torch.Tensor, pts: torch.Tensor, feats: torch.Tensor, out: tuple[int, int, int], max_pts: int, method: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    r, p, f = _rows(rois), _rows(pts), _rows(feats)
    ox, oy, oz = out
    channels = f.shape[1]
    idx_of_voxels = np.zeros((r.shape[0], ox, oy, oz, max_pts), dtype=np.int32)
    pooled = np.zeros((r.shape[0], ox, oy, oz, channels), dtype=F32)
    argmax = np.zeros((r.shape[0], ox, oy, oz, channels), dtype=np.int32)
    for b in range(r.shape[0]):
        for k in range(p.shape[0]):
            inside, lx, ly = in_box(p[k], r[b])
            if not inside:
                continue
            xs, ys, zs = F32(r[b, 3]), F32(r[b, 4]), F32(r[b, 5])
            lz = F32(p[k, 2]) - F32(r[b, 2])
            xi = int((lx + xs / F32(2)) / (xs / F32(ox)))
            yi = int((ly + ys / F32(2)) / (ys / F32(oy)))
            zi = int(lz / (zs / F32(oz)))
            xi, yi, zi = min(max(xi, 0), ox - 1), min(max(yi, 0), oy - 1), min(max(zi, 0), oz - 1)
            cell = idx_of_voxels[b, xi, yi, zi]
            if cell[0] < max_pts - 1:
                cell[cell[0] + 1] = k
                cell[0] += 1
    for b, xi, yi, zi in np.ndindex(r.shape[0], ox, oy, oz):
        cell = idx_of_voxels[b, xi, yi, zi]
        members = cell[1 : cell[0] + 1]
        for c in range(channels):
            if method == 0:
                best, arg = -math.inf, -1
                for k in members:
                    if f[k, c] > best:
                        best, arg = f[k, c], int(k)
                if arg != -1:
                    pooled[b, xi, yi, zi, c] = best
                argmax[b, xi, yi, zi, c] = arg
            elif len(members):
                pooled[b, xi, yi, zi, c] = float(np.sum(f[members, c], dtype=np.float64)) / len(members)
    return pooled, argmax, idx_of_voxels


# --- RoI point pooling (roipoint_pool3d_cuda_kernel.cuh) --------------------------------------


def roipoint_pool3d(
    xyz: torch.Tensor, boxes: torch.Tensor, feats: torch.Tensor, samples: int
) -> tuple[np.ndarray, np.ndarray]:
    p, bx, f = _rows(xyz), _rows(boxes), _rows(feats)
    batch, boxes_num = bx.shape[0], bx.shape[1]
    pooled = np.zeros((batch, boxes_num, samples, 3 + f.shape[2]), dtype=F32)
    empty = np.zeros((batch, boxes_num), dtype=np.int32)
    for b in range(batch):
        for m in range(boxes_num):
            chosen = [k for k in range(p.shape[1]) if in_box(p[b, k], bx[b, m])[0]][:samples]
            if not chosen:
                empty[b, m] = 1
                continue
            for s in range(samples):
                k = chosen[s % len(chosen)]
                pooled[b, m, s, :3] = p[b, k]
                pooled[b, m, s, 3:] = f[b, k]
    return pooled, empty


# --- dynamic scatter (scatter_points_cuda_kernel.cuh) -----------------------------------------


def dynamic_scatter(
    feats: torch.Tensor, coors: torch.Tensor, reduce: str
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    f, c = _rows(feats), _rows(coors)
    groups: dict[tuple[int, ...], list[int]] = {}
    for i, row in enumerate(c):
        if (row < 0).any():
            continue
        groups.setdefault(tuple(int(v) for v in row), []).append(i)
    keys = sorted(groups)
    reduced = np.zeros((len(keys), f.shape[1]), dtype=f.dtype)
    mapping = np.full(f.shape[0], -1, dtype=np.int32)
    counts = np.zeros(len(keys), dtype=np.int32)
    for v, key in enumerate(keys):
        members = groups[key]
        mapping[members] = v
        counts[v] = len(members)
        if reduce == "max":
            reduced[v] = np.max(f[members], axis=0)
        else:
            total = np.sum(f[members].astype(np.float64), axis=0)
            reduced[v] = total / len(members) if reduce == "mean" else total
    return reduced, np.array(keys, dtype=c.dtype).reshape(-1, c.shape[1]), mapping, counts


def dynamic_scatter_backward(
    grad_reduced: torch.Tensor,
    feats: torch.Tensor,
    reduced: torch.Tensor,
    mapping: torch.Tensor,
    counts: torch.Tensor,
    reduce: str,
) -> np.ndarray:
    g, f, r, mp, cnt = _rows(grad_reduced), _rows(feats), _rows(reduced), _rows(mapping), _rows(counts)
    out = np.zeros_like(f)
    if reduce != "max":
        for i, v in enumerate(mp):
            if v >= 0:
                out[i] = g[v] / cnt[v] if reduce == "mean" else g[v]
        return out
    for v in range(r.shape[0]):
        for c in range(f.shape[1]):
            for i in range(f.shape[0]):  # the lowest index whose value is the maximum
                if mp[i] == v and f[i, c] == r[v, c]:
                    out[i, c] = g[v, c]
                    break
    return out
