"""MMEngine-level rules: schedule, runtime, hooks and dataloader basics of 2.x-era configs.

Nothing here knows about detection: the other OpenMMLab toolboxes' 2.x-era configs
(MMCV 1.x runners, hooks and ``lr_config`` policies) share these keys and can use
these functions with their own model / pipeline rules (see ``_mmdet`` for one).
Every function reads the 2.x keys it owns out of ``src`` (popping them) and writes
3.x keys into ``out``; whatever nobody owned is carried over unchanged by the caller.
"""

from __future__ import annotations

from typing import Any

from .._errors import ConfigConversionError
from ._report import Report

#: 2.x top-level keys that 3.x ignores silently; the mixed-config path looks for these.
LEGACY_SCHEDULE_RUNTIME_KEYS = (
    "optimizer",
    "optimizer_config",
    "lr_config",
    "momentum_config",
    "runner",
    "checkpoint_config",
    "log_config",
    "evaluation",
    "fp16",
    "total_epochs",
    "resume_from",
    "workflow",
    "dist_params",
    "gpu_ids",
    "cudnn_benchmark",
    "opencv_num_threads",
    "mp_start_method",
    "auto_resume",
)

#: mmcv's LR (and momentum) updater hooks by class-name prefix -> the policy names the rows below
#: test (the spelling 2.x configs mostly use)
_MMCV_HOOKS = {
    "Step": "step",
    "Fixed": "fixed",
    "CosineAnnealing": "CosineAnnealing",
    "FlatCosineAnnealing": "FlatCosineAnnealing",
    "Poly": "poly",
    "Exp": "exp",
    "CosineRestart": "CosineRestart",
    "OneCycle": "OneCycle",
    "YOLOX": "YOLOX",
    "Cyclic": "cyclic",
}


def mmcv_policy(policy: Any) -> Any:
    """The policy as mmcv read it: ``policy.title() + 'LrUpdaterHook'`` where it is all lower case,
    else the name itself, so ``'Fixed'`` and ``'fixed'`` (MMPose 0.x's mesh configs write the first)
    are one hook, and a spelling mmcv had no hook for stays itself (refused below). mmcv registered
    LR and momentum updater hooks by the same rule."""
    if not isinstance(policy, str):
        return policy
    return _MMCV_HOOKS.get(policy.title() if policy == policy.lower() else policy, policy)


_SUPPORTED_POLICIES = tuple(_MMCV_HOOKS.values())


class Loop:
    """How long training lasts, as the 2.x runner said: by epochs or by iterations."""

    def __init__(self, by_epoch: bool, length: int) -> None:
        self.by_epoch = by_epoch
        self.length = length


# ----------------------------------------------------------------------------- runner
def convert_runner(src: dict[str, Any], out: dict[str, Any], report: Report) -> Loop:
    runner = src.pop("runner", None)
    total_epochs = src.pop("total_epochs", None)
    if runner is None:
        # 2.x: no runner means EpochBasedRunner(max_epochs=total_epochs) (mmdet.apis.train_detector).
        runner = {"type": "EpochBasedRunner", "max_epochs": total_epochs if total_epochs is not None else 12}
        if total_epochs is not None:
            report.moved("total_epochs", "train_cfg.max_epochs")
        else:
            report.note("no `runner` and no `total_epochs`: 12 epochs, as 2.x's default")
    elif total_epochs is not None:
        report.drop("total_epochs", "`runner` is set and wins, as in 2.x")
    kind = runner.get("type", "EpochBasedRunner")
    if kind in ("EpochBasedRunner", "EpochBasedRunnerAmp"):
        loop = Loop(True, int(runner.get("max_epochs", 12)))
        out["train_cfg"] = {"type": "EpochBasedTrainLoop", "max_epochs": loop.length, "val_interval": 1}
        report.moved("runner", "train_cfg (EpochBasedTrainLoop)")
    elif kind == "IterBasedRunner":
        if "max_iters" not in runner:
            raise ConfigConversionError(
                "runner.max_iters",
                runner,
                "IterBasedRunner needs max_iters; 3.x "
                "writes it as train_cfg=dict(type='IterBasedTrainLoop', max_iters=N).",
            )
        loop = Loop(False, int(runner["max_iters"]))
        out["train_cfg"] = {"type": "IterBasedTrainLoop", "max_iters": loop.length, "val_interval": 1}
        report.moved("runner", "train_cfg (IterBasedTrainLoop)")
    else:
        raise ConfigConversionError(
            "runner.type",
            kind,
            "3.x offers EpochBasedTrainLoop (from EpochBasedRunner) "
            "and IterBasedTrainLoop (from IterBasedRunner) as train_cfg.type.",
        )
    out["val_cfg"] = {"type": "ValLoop"}
    out["test_cfg"] = {"type": "TestLoop"}
    workflow = src.pop("workflow", None)
    if workflow is not None:
        phases = [w[0] for w in workflow]
        if "val" in phases:
            report.drop(
                "workflow",
                "the ('val', N) phase computed validation losses in 2.x; 3.x has no such "
                "phase (validation runs the evaluator every train_cfg.val_interval)",
            )
        else:
            report.drop("workflow", "3.x trains by train_cfg; [('train', 1)] is its only meaning")
    return loop


# ----------------------------------------------------------------------------- optimizer
def convert_optimizer(src: dict[str, Any], out: dict[str, Any], report: Report) -> None:
    optimizer = src.pop("optimizer", None)
    hook = src.pop("optimizer_config", None)
    fp16 = src.pop("fp16", None)
    if optimizer is None and hook is None and fp16 is None:
        return
    wrapper: dict[str, Any] = {"type": "OptimWrapper"}
    if optimizer is not None:
        optimizer = dict(optimizer)
        for key in ("paramwise_cfg", "constructor"):
            if key in optimizer:
                wrapper[key] = optimizer.pop(key)
                report.moved(f"optimizer.{key}", f"optim_wrapper.{key}")
        wrapper["optimizer"] = optimizer
        report.moved("optimizer", "optim_wrapper.optimizer")
    if hook is not None:
        hook = dict(hook)
        hook_type = hook.pop("type", "OptimizerHook")
        grad_clip = hook.pop("grad_clip", None)
        if grad_clip is not None:
            wrapper["clip_grad"] = dict(grad_clip)
            report.moved("optimizer_config.grad_clip", "optim_wrapper.clip_grad")
        if hook_type in ("GradientCumulativeOptimizerHook", "GradientCumulativeFp16OptimizerHook"):
            wrapper["accumulative_counts"] = hook.pop("cumulative_iters", 1)
            report.moved("optimizer_config.cumulative_iters", "optim_wrapper.accumulative_counts")
        if hook_type in ("Fp16OptimizerHook", "GradientCumulativeFp16OptimizerHook"):
            wrapper["type"] = "AmpOptimWrapper"
            if "loss_scale" in hook:
                wrapper["loss_scale"] = hook.pop("loss_scale")
            hook.pop("distributed", None)
            report.moved("optimizer_config (fp16)", "optim_wrapper (AmpOptimWrapper)")
        elif hook_type not in ("OptimizerHook", "GradientCumulativeOptimizerHook"):
            raise ConfigConversionError(
                "optimizer_config.type",
                hook_type,
                "3.x offers OptimWrapper (OptimizerHook), "
                "clip_grad (grad_clip), accumulative_counts (GradientCumulativeOptimizerHook) "
                "and AmpOptimWrapper (Fp16OptimizerHook); a custom optimizer hook must be "
                "rewritten as a custom OptimWrapper.",
            )
        if hook.pop("detect_anomalous_params", False):
            report.drop(
                "optimizer_config.detect_anomalous_params",
                "3.x has no such check; set find_unused_parameters=True to debug",
            )
        for key in hook:
            report.drop(f"optimizer_config.{key}", "no 3.x equivalent")
        report.moved("optimizer_config", "optim_wrapper")
    if fp16 is not None:
        wrapper["type"] = "AmpOptimWrapper"
        if "loss_scale" in fp16:
            wrapper["loss_scale"] = fp16["loss_scale"]
        report.moved("fp16", "optim_wrapper.type=AmpOptimWrapper")
    out["optim_wrapper"] = wrapper


# ----------------------------------------------------------------------------- lr_config
#: mmcv policies whose arguments count the run's steps (step's ``step``, CosineRestart's ``periods``):
#: with by_epoch=False, iterations, which MMEngine would multiply by the epoch's length if the
#: scheduler were an epoch-based one converted to iterations
COUNTED_IN_STEPS = ("step", "CosineRestart")


def _span(loop: Loop, by_epoch: bool, policy: Any = None) -> dict[str, Any]:
    """begin/end and by_epoch of a main scheduler covering the whole run."""
    if loop.by_epoch and not by_epoch and policy in COUNTED_IN_STEPS:
        # mmcv's hook counted them in iterations of the epoch-based run (runner.iter): counted per
        # iteration from the start to the run's end (no end given: the Runner's)
        return {"begin": 0, "by_epoch": False}
    if loop.by_epoch:
        span = {"begin": 0, "end": loop.length, "by_epoch": True}
        if not by_epoch:
            # 2.x updated this policy every iteration of an epoch-based run.
            span["convert_to_iter_based"] = True
        return span
    return {"begin": 0, "end": loop.length, "by_epoch": False}


def warmup(lr: dict[str, Any], report: Report) -> list[dict[str, Any]]:
    kind = lr.pop("warmup", None)
    iters = lr.pop("warmup_iters", 0)
    ratio = lr.pop("warmup_ratio", 0.1)
    by_epoch = lr.pop("warmup_by_epoch", False)
    if kind is None:
        return []
    span: dict[str, Any] = {"by_epoch": bool(by_epoch), "begin": 0, "end": iters}
    if by_epoch:
        span["convert_to_iter_based"] = True  # 2.x warmed up every iteration of those epochs
    if kind == "linear":
        return [{"type": "LinearLR", "start_factor": ratio, **span}]
    if kind == "constant":
        return [{"type": "ConstantLR", "factor": ratio, **span}]
    if kind == "exp":
        if not iters:
            return []  # 2.x warmed up while cur_iter < warmup_iters: never
        if by_epoch:
            # ExponentialLR keeps its per-step gamma when converted from epochs, and the number of
            # iterations per epoch is unknown here, so the growth rate cannot be written down.
            raise ConfigConversionError(
                "lr_config.warmup",
                "exp (with warmup_by_epoch=True)",
                "3.x writes an "
                "exponential warm-up per iteration (ConstantLR + ExponentialLR over "
                "warmup_iters iterations); give warmup_iters in iterations "
                "(warmup_by_epoch=False), or use warmup='linear'.",
            )
        # 2.x: lr * ratio ** (1 - t / T) for t < T, then lr. MMEngine's schedulers multiply: a ConstantLR
        # that never ends sets the start (ratio), an ExponentialLR with gamma = ratio ** (-1 / T) grows it
        # for T steps, ending at ratio * gamma ** T == 1.
        report.note(
            f"lr_config.warmup='exp': written as ConstantLR(factor={ratio}) (for the whole run) and "
            f"ExponentialLR(gamma=ratio ** (-1 / {iters})) over the first {iters} iterations"
        )
        return [
            {"type": "ConstantLR", "factor": ratio, "by_epoch": False, "begin": 0},
            {
                "type": "ExponentialLR",
                "gamma": float(ratio) ** (-1.0 / iters),
                "by_epoch": False,
                "begin": 0,
                "end": iters + 1,
            },
        ]
    raise ConfigConversionError(
        "lr_config.warmup",
        kind,
        "3.x offers 'linear' (LinearLR), 'constant' (ConstantLR) and 'exp' (ConstantLR + ExponentialLR) warm-ups.",
    )


def convert_lr_config(
    src: dict[str, Any], out: dict[str, Any], report: Report, loop: Loop, base_lr: float | None
) -> None:
    lr = src.pop("lr_config", None)
    momentum = src.pop("momentum_config", None)
    if lr is None and momentum is None:
        return
    schedulers: list[dict[str, Any]] = []
    if lr is not None:
        lr = dict(lr)
        policy = mmcv_policy(lr.pop("policy", None))
        # mmcv's cyclic and one-cycle hooks defaulted to by_epoch=False, the others to True.
        by_epoch = lr.pop("by_epoch", policy not in ("cyclic", "OneCycle"))
        if policy == "YOLOX":
            schedulers = _yolox(lr, loop, base_lr, report)
        elif policy == "cyclic":
            schedulers = warmup(lr, report) + _cyclic(lr, loop, by_epoch, "lr_config", "LR")
        else:
            schedulers.extend(warmup(lr, report))
            main = _main_policy(policy, lr, loop, by_epoch, base_lr)
            if main is not None:
                schedulers.append(main)
        for key in lr:
            report.drop(f"lr_config.{key}", f"not used by 3.x's scheduler for policy {policy!r}")
        report.moved("lr_config", "param_scheduler")
    if momentum is not None:
        schedulers.extend(_momentum(dict(momentum), loop))
        report.moved("momentum_config", "param_scheduler")
    out["param_scheduler"] = schedulers


def min_lr(lr: dict[str, Any], target: dict[str, Any]) -> None:
    if "min_lr" in lr:
        target["eta_min"] = lr.pop("min_lr")
    elif "min_lr_ratio" in lr:
        target["eta_min_ratio"] = lr.pop("min_lr_ratio")


def _main_policy(
    policy: Any, lr: dict[str, Any], loop: Loop, by_epoch: bool, base_lr: float | None
) -> dict[str, Any] | None:
    span = _span(loop, by_epoch, policy)
    if policy == "step":
        step = lr.pop("step")
        gamma = lr.pop("gamma", 0.1)
        if lr.pop("min_lr", None) is not None:
            # MultiStepLR has no floor; a floor above the decayed lr would change meaning silently.
            raise ConfigConversionError(
                "lr_config.min_lr",
                "(with policy='step')",
                "3.x's MultiStepLR/StepLR have no minimum lr; remove min_lr or write param_scheduler by hand.",
            )
        if isinstance(step, int):
            return {"type": "StepLR", "step_size": step, "gamma": gamma, **span}
        return {"type": "MultiStepLR", **span, "milestones": list(step), "gamma": gamma}
    if policy == "fixed":
        return None
    if policy == "CosineAnnealing":
        target = {"type": "CosineAnnealingLR", "T_max": loop.length, **span}
        min_lr(lr, target)
        return target
    if policy == "FlatCosineAnnealing":
        start = lr.pop("start_percent", 0.75)
        begin = round(loop.length * start)
        target = {"type": "CosineAnnealingLR", "T_max": loop.length - begin, **span, "begin": begin}
        min_lr(lr, target)
        return target
    if policy == "poly":
        target = {"type": "PolyLR", "power": lr.pop("power", 1.0), "eta_min": lr.pop("min_lr", 0.0), **span}
        return target
    if policy == "exp":
        return {"type": "ExponentialLR", "gamma": lr.pop("gamma"), **span}
    if policy == "CosineRestart":
        target = {
            "type": "CosineRestartLR",
            "periods": list(lr.pop("periods")),
            "restart_weights": list(lr.pop("restart_weights", [1] * len(lr.get("periods", [1])))),
            **span,
        }
        min_lr(lr, target)
        return target
    if policy == "OneCycle":
        target = {
            "type": "OneCycleLR",
            "eta_max": lr.pop("max_lr"),
            "by_epoch": False,
            "total_steps": lr.pop("total_steps", None),
            "pct_start": lr.pop("pct_start", 0.3),
            "anneal_strategy": lr.pop("anneal_strategy", "cos"),
            "div_factor": lr.pop("div_factor", 25),
            "final_div_factor": lr.pop("final_div_factor", 1e4),
            "three_phase": lr.pop("three_phase", False),
        }
        if target["total_steps"] is None:
            target.pop("total_steps")
            if not loop.by_epoch:
                target["total_steps"] = loop.length
            else:
                target.update(by_epoch=True, convert_to_iter_based=True, begin=0, end=loop.length)
        return target
    raise ConfigConversionError(
        "lr_config.policy",
        policy,
        "3.x's param_scheduler offers these 2.x policies: "
        + ", ".join(repr(p) for p in _SUPPORTED_POLICIES)
        + " (as MultiStepLR/StepLR, CosineAnnealingLR, PolyLR, ExponentialLR, "
        "CosineRestartLR, OneCycleLR, ...); write param_scheduler=[...] by hand for others.",
    )


def _cyclic(cfg: dict[str, Any], loop: Loop, by_epoch: bool, key: str, kind: str) -> list[dict[str, Any]]:
    """2.x's cyclic policy (mmcv CyclicLrUpdaterHook / CyclicMomentumUpdaterHook), one cycle of an
    iteration-based run, as two MMEngine phases.

    2.x: up = int(step_ratio_up * max_iters); for t < up anneal base -> base * r0, then
    base * r0 -> base * r1 over the rest. MMEngine's chained schedulers start each phase from the
    current value, so the first phase runs one step longer (to t == up, where it reaches r0 exactly)
    and the second starts there.
    """
    default_ratio = (10, 1e-4) if kind == "LR" else (0.85 / 0.95, 1)
    ratio = cfg.pop("target_ratio", default_ratio)
    if isinstance(ratio, (int, float)):
        ratio = (ratio, ratio / 1e5)
    elif len(ratio) == 1:
        ratio = (ratio[0], ratio[0] / 1e5)
    times = cfg.pop("cyclic_times", 1)
    up_ratio = cfg.pop("step_ratio_up", 0.4)
    strategy = cfg.pop("anneal_strategy", "cos")
    cfg.pop("gamma", None)  # scales cycles after the first; there is one
    offered = (
        f"3.x has no cyclic {kind.lower()} scheduler; mmfix writes one cycle of an IterBasedRunner run exactly "
        f"(CosineAnnealing{kind} / Linear{kind} phases). Write "
        "param_scheduler by hand (e.g. OneCycleLR for policy='OneCycle'), or use an IterBasedRunner "
        "with cyclic_times=1."
    )
    if times != 1:
        raise ConfigConversionError(f"{key}.cyclic_times", times, offered)
    r0, r1 = float(ratio[0]), float(ratio[1])
    if strategy == "linear" and not (0 < r0 <= 1 and 0 <= r1 <= r0):
        # Linear{kind} multiplies by factors in [0, 1]; a rising linear phase has no 3.x spelling.
        raise ConfigConversionError(
            f"{key}.anneal_strategy",
            "linear (with a rising phase)",
            f"3.x's Linear{kind} only lowers a value; anneal_strategy='cos' converts exactly. " + offered,
        )
    if loop.by_epoch or by_epoch:
        raise ConfigConversionError(
            f"{key}.policy",
            "cyclic (in an epoch-based run)",
            "its phase lengths are whole iterations of the run, unknown before the dataset is read: " + offered,
        )
    up = int(up_ratio * loop.length)
    if up < 1 or up >= loop.length or strategy not in ("cos", "linear"):
        raise ConfigConversionError(
            f"{key}.step_ratio_up / anneal_strategy",
            (up_ratio, strategy),
            "needs a first phase of at least one iteration and 'cos' or 'linear': " + offered,
        )
    span = {"by_epoch": False}
    if strategy == "cos":
        # eta_min_ratio is relative to each group's initial value, as 2.x's ratios were.
        return [
            {"type": f"CosineAnnealing{kind}", "T_max": up, "eta_min_ratio": r0, "begin": 0, "end": up + 1, **span},
            {
                "type": f"CosineAnnealing{kind}",
                "T_max": loop.length - up,
                "eta_min_ratio": r1,
                "begin": up,
                "end": loop.length,
                **span,
            },
        ]
    return [
        {"type": f"Linear{kind}", "start_factor": 1.0, "end_factor": r0, "begin": 0, "end": up + 1, **span},
        {
            "type": f"Linear{kind}",
            "start_factor": 1.0,
            "end_factor": r1 / r0,
            "begin": up,
            "end": loop.length + 1,
            **span,
        },
    ]


def _yolox(lr: dict[str, Any], loop: Loop, base_lr: float | None, report: Report) -> list[dict[str, Any]]:
    """YOLOX's 2.x hook: quadratic warm-up (warmup='exp'), cosine, then a flat tail."""
    warm = lr.pop("warmup_iters", 5)
    warm_by_epoch = lr.pop("warmup_by_epoch", True)
    lr.pop("warmup", None)
    lr.pop("warmup_ratio", None)
    last = lr.pop("num_last_epochs", 15)
    ratio = lr.pop("min_lr_ratio", 0.05)
    if not (loop.by_epoch and warm_by_epoch):
        raise ConfigConversionError(
            "lr_config.policy",
            "YOLOX",
            "3.x writes YOLOX's schedule by epochs "
            "(QuadraticWarmupLR, CosineAnnealingLR, ConstantLR); this config is not "
            "epoch-based. Write param_scheduler by hand.",
        )
    end = loop.length - last
    cosine: dict[str, Any] = {
        "type": "CosineAnnealingLR",
        "begin": warm,
        "T_max": end - warm,
        "end": end,
        "by_epoch": True,
        "convert_to_iter_based": True,
    }
    if base_lr is not None:
        cosine["eta_min"] = base_lr * ratio
    else:
        cosine["eta_min_ratio"] = ratio
    return [
        {"type": "mmdet.QuadraticWarmupLR", "by_epoch": True, "begin": 0, "end": warm, "convert_to_iter_based": True},
        cosine,
        {"type": "ConstantLR", "by_epoch": True, "factor": 1, "begin": end, "end": loop.length},
    ]


def _momentum(momentum: dict[str, Any], loop: Loop) -> list[dict[str, Any]]:
    policy = mmcv_policy(momentum.pop("policy", None))
    by_epoch = momentum.pop("by_epoch", policy not in ("cyclic", "OneCycle"))
    span = _span(loop, by_epoch, policy)
    if policy == "step":
        return [
            {
                "type": "MultiStepMomentum",
                **span,
                "milestones": list(momentum.pop("step")),
                "gamma": momentum.pop("gamma", 0.1),
            }
        ]
    if policy == "CosineAnnealing":
        target = {"type": "CosineAnnealingMomentum", "T_max": loop.length, **span}
        if "min_momentum" in momentum:
            target["eta_min"] = momentum.pop("min_momentum")
        elif "min_momentum_ratio" in momentum:
            target["eta_min_ratio"] = momentum.pop("min_momentum_ratio")
        return [target]
    if policy == "cyclic":
        return _cyclic(momentum, loop, by_epoch, "momentum_config", "Momentum")
    raise ConfigConversionError(
        "momentum_config.policy",
        policy,
        "3.x offers MultiStepMomentum (policy='step'), "
        "CosineAnnealingMomentum (policy='CosineAnnealing') and, for one cycle of an "
        "iteration-based run, policy='cyclic'. Write param_scheduler by hand for others.",
    )


# ----------------------------------------------------------------------------- runtime
_VIS_BACKENDS = {
    "TextLoggerHook": None,  # the LoggerHook itself
    "TensorboardLoggerHook": "TensorboardVisBackend",
    "WandbLoggerHook": "WandbVisBackend",
    "MMDetWandbHook": "WandbVisBackend",
    "MlflowLoggerHook": "MLflowVisBackend",
}


def convert_runtime(
    src: dict[str, Any],
    out: dict[str, Any],
    report: Report,
    loop: Loop,
    visualizer_type: str,
    visualization_hook: str | None,
) -> None:
    hooks: dict[str, Any] = {
        "timer": {"type": "IterTimerHook"},
        "logger": {"type": "LoggerHook", "interval": 50},
        "param_scheduler": {"type": "ParamSchedulerHook"},
        "checkpoint": {"type": "CheckpointHook", "interval": 1},
        "sampler_seed": {"type": "DistSamplerSeedHook"},
    }
    if visualization_hook:
        hooks["visualization"] = {"type": visualization_hook}
    checkpoint = src.pop("checkpoint_config", None)
    if checkpoint is not None:
        checkpoint = dict(checkpoint)
        checkpoint.pop("type", None)
        hook = {"type": "CheckpointHook", "interval": checkpoint.pop("interval", -1)}
        if not loop.by_epoch or "by_epoch" in checkpoint:
            hook["by_epoch"] = checkpoint.pop("by_epoch", True)
        for key in ("max_keep_ckpts", "out_dir", "save_optimizer", "save_last", "filename_tmpl", "file_client_args"):
            if key in checkpoint:
                hook[key] = checkpoint.pop(key)
        if "create_symlink" in checkpoint:
            checkpoint.pop("create_symlink")
            report.drop("checkpoint_config.create_symlink", "3.x writes `last_checkpoint` instead of a symlink")
        for key in checkpoint:
            hook[key] = checkpoint[key]
        if loop.by_epoch and hook.get("by_epoch") is False:
            report.note("checkpoint_config.by_epoch=False in an epoch-based run: intervals are iterations, as in 2.x")
        hooks["checkpoint"] = hook
        report.moved("checkpoint_config", "default_hooks.checkpoint")
    vis_backends: list[dict[str, Any]] = [{"type": "LocalVisBackend"}]
    log = src.pop("log_config", None)
    if log is not None:
        hooks["logger"] = {"type": "LoggerHook", "interval": log.get("interval", 50)}
        for entry in log.get("hooks", []):
            kind = entry.get("type")
            if kind not in _VIS_BACKENDS:
                raise ConfigConversionError(
                    "log_config.hooks",
                    kind,
                    "3.x logs through LoggerHook and visualizer "
                    "backends: TextLoggerHook, TensorboardLoggerHook (TensorboardVisBackend), "
                    "WandbLoggerHook (WandbVisBackend) and MlflowLoggerHook "
                    "(MLflowVisBackend) convert.",
                )
            backend = _VIS_BACKENDS[kind]
            if backend is None:
                continue
            target: dict[str, Any] = {"type": backend}
            if backend == "WandbVisBackend" and entry.get("init_kwargs"):
                target["init_kwargs"] = entry["init_kwargs"]
            if backend == "MLflowVisBackend" and entry.get("exp_name"):
                target["exp_name"] = entry["exp_name"]
            vis_backends.append(target)
        report.moved("log_config", "default_hooks.logger" + (" and vis_backends" if len(vis_backends) > 1 else ""))
    out["default_hooks"] = hooks
    out["vis_backends"] = vis_backends
    out["visualizer"] = {"type": visualizer_type, "vis_backends": vis_backends, "name": "visualizer"}
    out["log_processor"] = {"type": "LogProcessor", "window_size": 50, "by_epoch": loop.by_epoch}

    env: dict[str, Any] = {
        "cudnn_benchmark": src.pop("cudnn_benchmark", False),
        "mp_cfg": {
            "mp_start_method": src.pop("mp_start_method", "fork"),
            "opencv_num_threads": src.pop("opencv_num_threads", 0),
        },
        "dist_cfg": dict(src.pop("dist_params", {"backend": "nccl"})),
    }
    report.moved("dist_params / cudnn_benchmark / mp_start_method / opencv_num_threads", "env_cfg")
    out["env_cfg"] = env
    resume_from = src.pop("resume_from", None)
    auto_resume = src.pop("auto_resume", None)
    out["load_from"] = src.pop("load_from", None)
    out["resume"] = False
    if resume_from:
        out["load_from"] = resume_from
        out["resume"] = True
        report.moved("resume_from", "load_from + resume=True")
    elif auto_resume:
        out["resume"] = True
        report.moved("auto_resume", "resume=True")
    if src.pop("gpu_ids", None) is not None:
        report.drop("gpu_ids", "3.x takes devices from the launcher / CUDA_VISIBLE_DEVICES")
    out["log_level"] = src.pop("log_level", "INFO")
    if "auto_scale_lr" in src:
        out["auto_scale_lr"] = src.pop("auto_scale_lr")


def convert_custom_hooks(src: dict[str, Any], out: dict[str, Any], report: Report, renames: dict[str, Any]) -> None:
    hooks = src.pop("custom_hooks", None)
    if hooks is None:
        return
    converted = []
    for hook in hooks:
        hook = dict(hook)
        rule = renames.get(str(hook.get("type")))
        if rule is None:
            converted.append(hook)
        elif rule is False:
            report.drop(f"custom_hooks[{hook['type']}]", "no 3.x equivalent needed")
        else:
            converted.append(rule(hook, report))
    if converted:
        out["custom_hooks"] = converted


def ema_hook(hook: dict[str, Any], report: Report) -> dict[str, Any]:
    """2.x ExpMomentumEMAHook / LinearMomentumEMAHook -> 3.x EMAHook with the matching EMA model."""
    kind = hook.pop("type")
    target: dict[str, Any] = {
        "type": "EMAHook",
        "ema_type": "ExpMomentumEMA" if kind.startswith("Exp") else "LinearMomentumEMA",
    }
    for key in ("momentum", "gamma", "interval", "priority", "resume_from"):
        if key in hook:
            target[key] = hook.pop(key)
    target.pop("resume_from", None)
    target["update_buffers"] = True
    report.moved(f"custom_hooks[{kind}]", "custom_hooks[EMAHook]")
    return target


def add_custom_import(out: dict[str, Any], module: str) -> None:
    """``module`` in the converted config's ``custom_imports`` (once): it registers mmfix's copies."""
    imports = out.setdefault("custom_imports", {"imports": [], "allow_failed_imports": False})
    names = [imports["imports"]] if isinstance(imports.get("imports"), str) else list(imports.get("imports", []))
    if module not in names:
        imports["imports"] = names + [module]


def legacy_component(
    node: dict[str, Any], out: dict[str, Any], report: Report, where: str, new: str, module: str
) -> None:
    """Name mmfix's copy ``new`` (registered by ``module``, added to ``custom_imports``) for a legacy
    component whose current namesake computes something else (mmfix/_legacy_models)."""
    old = node["type"]
    node["type"] = new
    add_custom_import(out, module)
    report.moved(
        f"{where}: {old}", f"{new} (mmfix's copy of the legacy {old}: the current {old} computes another result)"
    )


def dataloader(
    batch_size: int, num_workers: int, shuffle: bool, dataset: dict[str, Any], **extra: Any
) -> dict[str, Any]:
    """A 3.x dataloader dict from the 2.x per-GPU batch size and workers."""
    loader: dict[str, Any] = {
        "batch_size": batch_size,
        "num_workers": num_workers,
        "persistent_workers": num_workers > 0,
    }
    if not shuffle:
        loader["drop_last"] = False
    loader["sampler"] = {"type": "DefaultSampler", "shuffle": shuffle}
    loader.update(extra)
    loader["dataset"] = dataset
    return loader


# ----------------------------------------------------------------------------- the family's data
# MMCV 1.x-era toolboxes (MMSegmentation 0.x, MMClassification 0.x) share these data and evaluation
# keys; each toolbox's module passes its own wrappers, table of dropped keys and wording.


def innermost(ds: dict[str, Any], wrappers: tuple[str, ...]) -> dict[str, Any]:
    """The dataset a chain of wrappers (RepeatDataset, ConcatDataset's first part ...) ends in."""
    while ds.get("type") in wrappers and ("dataset" in ds or "datasets" in ds):
        ds = ds["dataset"] if "dataset" in ds else ds["datasets"][0]
    return ds


def separate_eval(ds: dict[str, Any], where: str, test: bool, report: Report, toolbox: str, parts: str = "") -> None:
    """0.x evaluated a concatenated val/test set per part (ConcatDataset's separate_eval=True by
    default); the 1.x evaluators see one set. Refused unless the config asked for one merged result."""
    separate = ds.pop("separate_eval", True)
    if test and separate:
        raise ConfigConversionError(
            f"{where}: separate_eval",
            separate,
            f"0.x evaluated each part of a concatenated val/test set on its own{parts}; {toolbox} 1.x computes "
            "one metric over the concatenation. Set separate_eval=False on it to accept one merged result, or "
            "evaluate each set with a config of its own.",
        )
    if not test and "separate_eval" in ds:
        report.drop(f"{where}.separate_eval", "training does not evaluate")


def loader_options(loader: dict[str, Any], options: dict[str, Any], where: str, report: Report) -> None:
    """0.x's ``data.<split>_dataloader`` options onto the 1.x dataloader; the others dropped, said."""
    for key, value in options.items():
        if key == "shuffle":
            loader["sampler"]["shuffle"] = value
        elif key in ("persistent_workers", "pin_memory", "drop_last"):
            loader[key] = value
        else:
            report.drop(f"{where}.{key}", "no 1.x dataloader equivalent")


def evaluation_schedule(
    evaluation: dict[str, Any], out: dict[str, Any], report: Report, dropped: dict[str, str], takes: str
) -> None:
    """The rest of 0.x's ``evaluation`` (EvalHook's arguments, once the metrics are read):
    interval -> train_cfg.val_interval, save_best / rule -> the checkpoint hook; a key in
    ``dropped`` is dropped with its reason, any other refused (``takes``: what 1.x takes)."""
    interval = evaluation.pop("interval", 1)
    if "train_cfg" in out:
        out["train_cfg"]["val_interval"] = interval
        report.moved("evaluation.interval", "train_cfg.val_interval")
    save_best = evaluation.pop("save_best", None)
    rule = evaluation.pop("rule", None)
    if save_best is not None:
        hooks = out.setdefault("default_hooks", {})
        hooks.setdefault("checkpoint", {"type": "CheckpointHook"})["save_best"] = save_best
        if rule is not None:
            hooks["checkpoint"]["rule"] = rule
        report.moved("evaluation.save_best", "default_hooks.checkpoint.save_best")
    for key in list(evaluation):
        why = dropped.get(key)
        if why is None:
            raise ConfigConversionError(
                f"evaluation.{key}",
                evaluation[key],
                f"{takes}; set other options on val_evaluator in a 1.x config.",
            )
        report.drop(f"evaluation.{key}", why)
