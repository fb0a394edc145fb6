"""The `runner_randomness` patch: a `randomness` config without a seed fixes none.

The legacy `--deterministic` / `--diff-seed` become `randomness.*` cfg-options; on a config that sets
no `randomness` (most current ones) and without `--seed`, stock MMEngine's Runner stops in
`set_randomness` (which `Runner.__init__` calls with the config's dict). Each case runs in its own
process (mmfix active there; the test process stays stock). The whole path — MMPose 1.3.2's
`tools/train.py CFG --gpus 2 --deterministic --diff_seed` on a 0.x config — is
tests/integration/test_legacy_toolboxes.py's MMPose training.
"""

from __future__ import annotations

import json

import pytest

from conftest import clean_env, run_python

# What Runner.__init__ does with the config's `randomness` (Runner.__init__ itself needs a model,
# loaders …; set_randomness is the step that fails), then what it fixed.
CODE = """
import json
{prelude}
from mmengine.runner import Runner
runner = Runner.__new__(Runner)
randomness = {randomness!r}
try:
    runner.set_randomness(**randomness)
except TypeError as exc:
    print(json.dumps({{"error": str(exc)}}))
else:
    print(json.dumps({{"seed": runner.seed, "deterministic": runner.deterministic}}))
"""


def outcome(randomness: dict, prelude: str = "import mmfix", **env: str) -> dict:
    proc = run_python(CODE.format(prelude=prelude, randomness=randomness), env=clean_env(**env), warm=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize(
    "randomness", [{"deterministic": True}, {"diff_rank_seed": True}, {"deterministic": True, "diff_rank_seed": True}]
)
def test_randomness_without_a_seed_fixes_none_where_stock_stops(randomness: dict) -> None:
    found = outcome(randomness)
    assert "error" not in found, found
    assert isinstance(found["seed"], int)  # MMEngine draws one, as for its default dict(seed=None)
    assert found["deterministic"] == randomness.get("deterministic", False)
    # stock, and mmfix with this patch switched off: the TypeError
    for env in ({"MMFIX_DISABLE": "1"}, {"MMFIX_DISABLED_PATCHES": "runner_randomness"}):
        assert "missing 1 required positional argument: 'seed'" in outcome(randomness, **env).get("error", ""), env


def test_a_given_seed_is_used_as_stock_uses_it() -> None:
    assert outcome({"seed": 7, "deterministic": True}) == {"seed": 7, "deterministic": True}
    assert outcome({"seed": 7}, prelude="") == outcome({"seed": 7})
