# A config shaped like MMDetection 3.x ones; trains in seconds on CPU.
custom_imports = dict(imports=["tinydet"], allow_failed_imports=False)

model = dict(type="ToyDetector", in_dim=8, hidden=16)

train_dataloader = dict(
    batch_size=8,
    num_workers=0,
    collate_fn=dict(type="default_collate"),
    sampler=dict(type="DefaultSampler", shuffle=True),
    dataset=dict(type="ToyBoxDataset", num_samples=64, seed=0),
)
val_dataloader = dict(
    batch_size=8,
    num_workers=0,
    collate_fn=dict(type="default_collate"),
    sampler=dict(type="DefaultSampler", shuffle=False),
    dataset=dict(type="ToyBoxDataset", num_samples=32, seed=1),
)
test_dataloader = val_dataloader
val_evaluator = dict(type="ToyBoxMetric", metric=["mse", "acc"])
test_evaluator = val_evaluator

train_cfg = dict(by_epoch=True, max_epochs=3, val_interval=1)
val_cfg = dict()
test_cfg = dict()

optim_wrapper = dict(optimizer=dict(type="SGD", lr=0.05, momentum=0.9))
param_scheduler = [dict(type="MultiStepLR", by_epoch=True, milestones=[2], gamma=0.1)]

default_scope = None
default_hooks = dict(
    timer=dict(type="IterTimerHook"),
    logger=dict(type="LoggerHook", interval=2),
    param_scheduler=dict(type="ParamSchedulerHook"),
    checkpoint=dict(type="CheckpointHook", interval=1, save_best="auto"),
    sampler_seed=dict(type="DistSamplerSeedHook"),
)
# As in MMDetection's default_runtime.py: nccl, which mmfix turns into gloo on CPU-only hosts.
env_cfg = dict(
    cudnn_benchmark=False, mp_cfg=dict(mp_start_method="fork", opencv_num_threads=0), dist_cfg=dict(backend="nccl")
)
log_level = "INFO"
load_from = None
resume = False
randomness = dict(seed=None)
