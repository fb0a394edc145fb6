import numpy as np, torch
from mmcv import Config
from mmpose.models import build_posenet
import sys
cfg = Config.fromfile(sys.argv[1])
cfg.model.pretrained = None
torch.manual_seed(0)
model = build_posenet(cfg.model)
with torch.no_grad():
    for p in model.parameters():
        p.copy_(torch.randn_like(p) * 0.05)
    for name, b in model.named_buffers():
        if name.endswith('running_var'):
            b.copy_(torch.rand_like(b) + 0.5)
        elif name.endswith('running_mean'):
            b.copy_(torch.randn_like(b) * 0.1)
model.eval()
torch.save({'state_dict': model.state_dict(), 'meta': {'mmpose_version': '0.29.0'}}, '/tmp/pose-parity/res50_0x.pth')
x = torch.from_numpy(np.random.default_rng(0).standard_normal((1, 3, 256, 192)).astype(np.float32))
with torch.no_grad():
    heat = model.keypoint_head(model.backbone(x))
np.save('/tmp/pose-parity/x.npy', x.numpy()); np.save('/tmp/pose-parity/heat_0x.npy', heat.numpy())
print('0x', heat.shape, float(heat.abs().mean()))
