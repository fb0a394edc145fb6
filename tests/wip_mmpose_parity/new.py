import json, sys, numpy as np
sys.path.insert(0, '/work/wip-mmpose')
from mmfix._legacy_models.mmpose import TopDownGetRandomScaleRotation0x, TopDownHalfBodyTransform0x, TopDownRandomShiftBboxCenter0x
upper = list(range(11))
out = []
shift, half, sr = TopDownRandomShiftBboxCenter0x(0.16, 0.3), TopDownHalfBodyTransform0x(8, 0.3, image_size=(192, 256)), TopDownGetRandomScaleRotation0x(40, 0.5, 0.6)
for seed in range(200):
    rng = np.random.default_rng(1000 + seed)
    joints = rng.uniform(0, 300, (17, 2)).astype(np.float32)
    vis = (rng.random(17) < 0.8).astype(np.float32)
    center = rng.uniform(50, 250, 2).astype(np.float32); scale = rng.uniform(0.3, 1.5, 2).astype(np.float32)
    r = dict(keypoints=joints[None], keypoints_visible=vis[None], bbox_center=center[None].copy(), bbox_scale=(scale * 200)[None],
             upper_body_ids=upper)
    np.random.seed(seed)
    r = sr.transform(half.transform(shift.transform(r)))
    out.append([list(map(float, r['bbox_center'][0])), list(map(float, r['bbox_scale'][0])), float(r['bbox_rotation'][0])])
print(json.dumps(out))
