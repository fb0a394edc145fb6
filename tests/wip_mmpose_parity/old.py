import json, sys, numpy as np
from mmpose.datasets.pipelines import TopDownGetRandomScaleRotation, TopDownHalfBodyTransform, TopDownRandomShiftBboxCenter
upper = list(range(11))
out = []
for seed in range(200):
    rng = np.random.default_rng(1000 + seed)
    joints = np.zeros((17, 3), np.float32); joints[:, :2] = rng.uniform(0, 300, (17, 2))
    vis = np.zeros((17, 3), np.float32); vis[:, :2] = (rng.random(17) < 0.8)[:, None]
    center = rng.uniform(50, 250, 2).astype(np.float32); scale = rng.uniform(0.3, 1.5, 2).astype(np.float32)
    r = dict(joints_3d=joints, joints_3d_visible=vis, center=center.copy(), scale=scale.copy(),
             ann_info=dict(num_joints=17, upper_body_ids=upper, image_size=np.array([192, 256])))
    np.random.seed(seed)
    r = TopDownRandomShiftBboxCenter(0.16, 0.3)(r)
    r = TopDownHalfBodyTransform(8, 0.3)(r)
    r = TopDownGetRandomScaleRotation(40, 0.5, 0.6)(r)
    out.append([list(map(float, r['center'])), [float(x) * 200 for x in r['scale']], float(r['rotation'])])
print(json.dumps(out))
