import numpy as np, torch
import mmfix  # active: the 0.x config converts in memory
from mmpose.apis import init_model
import sys
cfg_path = sys.argv[1]
model = init_model(cfg_path, '/tmp/pose-parity/res50_0x.pth', device='cpu')
model.eval()
x = torch.from_numpy(np.load('/tmp/pose-parity/x.npy'))
with torch.no_grad():
    heat = model.head.forward(model.extract_feat(x))
ref = np.load('/tmp/pose-parity/heat_0x.npy')
print(type(model).__name__, type(model.head).__name__, heat.shape, 'max abs diff', float(np.abs(heat.numpy() - ref).max()), 'ref mean', float(np.abs(ref).mean()))
