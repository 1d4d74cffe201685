"""The one speedup figure the proof gives, labelled predicted: the embedded SmolLM2 pair on this device.

E[L](B), the mean tokens per round of the embedded target with its default
proposer (the committed drafter + context lookup), does not depend on the
machine: it is measured once on a CPU with the real weights
(`expected-lengths`, written to `EXPECTED_LENGTHS`, committed) and read here.
The device gives the costs: the tree forward of B nodes at SmolLM2's geometry
(step `cost_curve`) and one draft (the same proposer's propose + best-first
build, on a random-weight target of that geometry). Then

    predicted speedup(B) = E[L](B) * t(one-token forward) / (t(draft, B) + t(tree forward, B)),

which leaves out the flow, verification and commit (step `round_shares`
measures their share) and assumes the loop adds nothing else.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from statistics import median

import torch

from tevcore.decoding.autobudget import expected_length_by_budget, random_context
from tevcore.engine.builders import best_first
from tevcore.lab.gpu_proof.models import build_target
from tevcore.lab.gpu_proof.plans import SMOLLM2, Plan
from tevcore.lab.gpu_proof.schema import read_step
from tevcore.results import ResultRecord, RunMeta, read_result, write_result
from tevcore.target.loading import Target
from tevcore.target.session import TargetSession
from tevcore.timing import event_seconds_of

EXPECTED_LENGTHS = Path(__file__).with_name("smollm2_expected_lengths.json")
E_BUDGETS = (1, 8, 16, 32, 64, 128, 256)
E_TEMPERATURES = (0.0, 1.0)
FORMULA = "E[L](B) * t(one-token forward) / (t(draft + build, B) + t(tree forward, B))"


def measure_expected_lengths(out: Path, command: str, prompts: int = 4, rounds_per_prompt: int = 8,
                             budgets: tuple[int, ...] = E_BUDGETS,
                             temperatures: tuple[float, ...] = E_TEMPERATURES, force: bool = False) -> ResultRecord:
    """E[L] = mean 1 + C of the default proposer's best-first trees cut to each budget, over real decoding rounds
    of held-out MT-Bench prompts with the embedded target (CPU, float32); written to `out`."""
    from tevcore.lab.datasets import load_prompts
    from tevcore.proposers import resolve_proposer
    from tevcore.target.loading import encode_prompt, load_target

    target = load_target(device="cpu", dtype="float32")
    meta = RunMeta.now(command, device="cpu", seed=None)  # the decodes seed themselves from their prompts
    proposer = resolve_proposer("default", target)
    ids = [encode_prompt(target, p.text) for p in load_prompts("mt-bench", "heldout", prompts)]
    rows = []
    for temperature in temperatures:
        lengths = expected_length_by_budget(target, proposer, ids, budgets, temperature, rounds_per_prompt)
        rows.extend({"temperature": temperature, "budget": b, "expected_length": lengths[b]} for b in budgets)
    settings = {"model": target.name, "proposer": proposer.name, "prompts": f"mt-bench heldout, first {prompts}",
                "rounds_per_prompt": rounds_per_prompt, "dtype": "float32"}
    record = ResultRecord("gpu-proof expected-lengths", meta, rows, settings=settings)
    write_result(out, record, force=force)
    return record


def committed_pair_proposer(target: Target):
    """The embedded pair's proposer (the committed drafter, its real weights, + the context lookup) on a
    random-weight target of SmolLM2's geometry. The drafter's record names the real target's weights, which a
    random target does not have; a copy of its config without that fingerprint lets the project's own loader
    attach it by shape alone, so the draft cost timed is the real drafter's."""
    from tevcore.proposers.block import CONFIG_FILE, WEIGHTS_FILE, BlockProposer, default_drafter_path, load_drafter
    from tevcore.proposers.lookup import ContextLookupProposer

    committed = default_drafter_path()
    config = json.loads((committed / CONFIG_FILE).read_text())
    config.get("target", {}).pop("fingerprint", None)
    with tempfile.TemporaryDirectory(prefix="gpu-proof-drafter-") as folder:
        (Path(folder) / CONFIG_FILE).write_text(json.dumps(config))
        (Path(folder) / WEIGHTS_FILE).symlink_to(committed / WEIGHTS_FILE)
        drafter = load_drafter(Path(folder), target)
    return ContextLookupProposer(BlockProposer(drafter, name=f"block drafter (assets/drafter, K={drafter.depth})"))


def prediction(plan: Plan, device: torch.device, out_dir: Path) -> tuple[dict, list[dict], str]:
    """Predicted speedup per temperature and budget from the measured curve, draft times and CPU E[L]."""
    curve = {row["nodes"]: row["forward_ms"] for row in read_step(out_dir, "cost_curve").rows
             if row["geometry"] == SMOLLM2 and row["context"] == plan.prediction_context}
    table = read_result(EXPECTED_LENGTHS)
    budgets = sorted({row["budget"] for row in table.rows} & set(curve) - {0})
    target = build_target(plan, SMOLLM2, device)
    proposer = committed_pair_proposer(target)
    session = TargetSession(target, hidden_layers=proposer.hidden_layers)
    session.prefill(random_context(target, plan.prediction_context), reserve=max(budgets) + 2)
    draft_ms = {}
    for budget in budgets:
        def draft():
            return best_first(session.root_token, proposer.propose(session), budget)
        draft()  # warm-up
        draft_ms[budget] = 1e3 * median(event_seconds_of(draft, device)[1] for _ in range(plan.draft_repeats))
    rows = [{"temperature": row["temperature"], "budget": row["budget"], "expected_length": row["expected_length"],
             "tree_forward_ms": curve[row["budget"]], "draft_ms": draft_ms[row["budget"]], "one_token_ms": curve[0],
             "predicted_speedup": row["expected_length"] * curve[0] / (draft_ms[row["budget"]] + curve[row["budget"]])}
            for row in table.rows if row["budget"] in draft_ms]
    summary = {"label": "predicted", "geometry": SMOLLM2, "context": plan.prediction_context, "formula": FORMULA,
               "expected_lengths_from": f"{EXPECTED_LENGTHS.name}: {table.meta.command_line} "
                                        f"(commit {table.meta.commit}, {table.meta.device})"}
    return summary, rows, (f"PREDICTED, not measured: E[L] from the real pair on a CPU, costs from random weights of "
                           f"its geometry here; draft by {proposer.name}")
