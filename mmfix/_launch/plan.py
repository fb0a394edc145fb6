"""What a translated command will do: the plan the translator returns and the executor runs."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class ParserInfo:
    """What the running script's argparse parser accepts (read from the parser, see ``parser_info``)."""

    options: dict[str, object]  # option string -> nargs (None = one value, 0 = a flag, '?', '*', '+', int)
    positionals: tuple[str, ...] = ()
    allow_abbrev: bool = True
    usage: str | None = None  # the parser's own usage line, for refusals

    @property
    def openmmlab_shaped(self) -> bool:
        return "config" in self.positionals and "--launcher" in self.options

    @property
    def tool(self) -> str | None:
        if not self.openmmlab_shaped:
            return None
        return "test" if "checkpoint" in self.positionals else "train"

    def knows(self, option: str) -> bool:
        if option in self.options:
            return True
        if self.allow_abbrev and option.startswith("--"):
            return any(o.startswith(option) for o in self.options if o.startswith("--"))
        return False


@dataclass(frozen=True)
class LaunchSpec:
    """A torchrun launch: how many processes here, and how this node joins the job."""

    nproc_per_node: int
    nnodes: int = 1
    node_rank: int = 0
    master_addr: str | None = None
    master_port: int | None = None  # None on one node: torchrun --standalone picks a free port

    def torchrun_args(self) -> list[str]:
        if self.nnodes == 1 and self.master_port is None:
            return ["--standalone", "--nproc_per_node", str(self.nproc_per_node)]
        args = [
            "--nnodes",
            str(self.nnodes),
            "--node_rank",
            str(self.node_rank),
            "--nproc_per_node",
            str(self.nproc_per_node),
        ]
        if self.master_addr is not None:
            args += ["--master_addr", self.master_addr]
        if self.master_port is not None:
            args += ["--master_port", str(self.master_port)]
        return args


@dataclass(frozen=True)
class Plan:
    argv: tuple[str, ...]
    env: dict[str, str] = field(default_factory=dict)
    launch: LaunchSpec | None = None
    notes: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    # (kind, value) facts the shell must check before running: ("port_free", 29500),
    # ("collect_dir", "D"), ("config_file", P), ("checkpoint_file", P) -- things that
    # need the machine or the file system.
    checks: tuple[tuple[str, str], ...] = ()
    rules: str = ""  # which toolbox's legacy flags applied, and why ("MMSegmentation 0.x -> 1.x (…)")

    @property
    def changed(self) -> bool:
        return bool(self.notes) or self.launch is not None or bool(self.env)
