_base_ = ["../../examples/configs/toy_det.py"]
custom_imports = dict(imports=["tinydet", "ddp_probe"], allow_failed_imports=False)
custom_hooks = [dict(type="RankProbeHook")]
train_cfg = dict(by_epoch=True, max_epochs=2, val_interval=1)
randomness = dict(seed=0)
