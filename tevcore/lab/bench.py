"""End-to-end benchmark: our speculative decoding vs our AR and the HF peers, interleaved.

For every prompt, every method runs back to back (AR first, then each
speculative configuration, then HF generate and HF prompt-lookup), so the
speedup is the median of per-prompt ratios measured side by side. A
speculative configuration is a (budget, builder, verifier, trim): every valid
pairing of the `--builders` and `--verifiers` (fixed trees with the
exact-given-tree rules, sampled trees with those and the proposal-ratio
rules) at the same node budget, so tree against chain and fixed against
sampled are rows of one run. Each speculative row carries its sibling
diagnostics (`siblings.py`). Results go to stdout as tables and to a JSON
file with the run's metadata.

Under `torchrun --nproc-per-node N -m tevcore -- bench ...` the ranks share
the prompts (prompt i on rank i mod N) and rank 0 writes one table and one
JSON; every decode's seed comes from its prompt, so every figure that is not
a time (E[L], 1 + C, rounds, tree sizes) equals the one-process run's.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from dataclasses import dataclass, field, replace
from statistics import mean, median, stdev

import torch
from tqdm import tqdm

from tevcore.config import TRIM_HELP, DecodeConfig
from tevcore.engine.builder_specs import BUILDER_FAMILIES, BuilderSpec, builder_help, parse_builder_list
from tevcore.lab.datasets import fitting, load_prompts
from tevcore.lab.bench_table import format_table
from tevcore.lab.ceilings import format_ceilings, gap_by_depth, node_ceilings
from tevcore.lab.siblings import format_sibling_table, sibling_diagnostics
from tevcore.decoding.loop import generate, generate_ar, prompt_ids, reserved_positions
from tevcore.proposers.flags import add_proposer_arguments, proposer_from_args, proposer_options
from tevcore.proposers.base import HFAssistant
from tevcore.flags import add_target_arguments, count_at_least_one, seed_value, target_from_args, thread_count
from tevcore.parsing import comma_list
from tevcore.target.loading import Target
from tevcore.engine.records import STAGES
from tevcore.engine.spec_counts import counts_of_drafts
from tevcore.engine.sampling import draw_seed, seeded_torch_rng
from tevcore.results import ResultRecord, RunMeta, write_result
from tevcore.ranks import device_for_rank, from_first, gather, is_first, shard, world
from tevcore.timing import seconds_of
from tevcore.verify.registry import get_rule, skipped_pairs, valid_pairs

PROMPT_LOOKUP_TOKENS = 10


@dataclass
class MethodStats:
    """Per-prompt measurements of one method on one (dataset, temperature)."""

    method: str
    budget: int | None = None
    verifier: str | None = None
    builder: BuilderSpec | None = None
    tokens_per_s: list[float] = field(default_factory=list)
    ratio_to_ar: list[float] = field(default_factory=list)
    emitted: list[float] = field(default_factory=list)  # per round, pooled
    expected_lengths: list[float] = field(default_factory=list)  # 1 + C per round, pooled
    stage_seconds: dict[str, float] = field(default_factory=lambda: dict.fromkeys(STAGES, 0.0))
    wall_seconds: float = 0.0  # whole generate calls: the stages plus the loop around them
    trim: str | None = None
    tree_costs: tuple[float, ...] | None = None
    skipped_rounds: int = 0  # rounds that trimming turned into a plain root-only step
    scored_nodes: int = 0  # drafted nodes the target scored, over all rounds
    rounds: list = field(default_factory=list)  # the lean round records, for the sibling diagnostics
    ceilings: list = field(default_factory=list)  # per node of every round: its design's ceiling (`--ceilings`)
    drafts: list[tuple[int, int]] = field(default_factory=list)  # (draft tokens, accepted) per round, for the counts

    def empty(self) -> MethodStats:
        """The same method with no measurements: one prompt's are taken into it, then `absorb`ed in order."""
        return replace(self, tokens_per_s=[], ratio_to_ar=[], emitted=[], expected_lengths=[],
                       stage_seconds=dict.fromkeys(STAGES, 0.0), wall_seconds=0.0, skipped_rounds=0, scored_nodes=0,
                       rounds=[], ceilings=[], drafts=[])

    def absorb(self, other: MethodStats) -> None:
        """Append another prompt's measurements of this method (prompts in order give the one-process lists)."""
        self.tokens_per_s += other.tokens_per_s
        self.ratio_to_ar += other.ratio_to_ar
        self.emitted += other.emitted
        self.expected_lengths += other.expected_lengths
        for stage, seconds in other.stage_seconds.items():
            self.stage_seconds[stage] += seconds
        self.wall_seconds += other.wall_seconds
        self.skipped_rounds += other.skipped_rounds
        self.scored_nodes += other.scored_nodes
        self.rounds += other.rounds
        self.ceilings += other.ceilings
        self.drafts += other.drafts

    def length_gap(self) -> tuple[float, float] | tuple[None, None]:
        """Mean of L - (1 + C) per round and its standard error.

        Given the history, a round's L has mean 1 + C under an exact verifier,
        so the per-round gaps are martingale differences: uncorrelated, and
        the plain standard error of their mean holds across rounds and prompts.
        """
        gaps = [b - e for b, e in zip(self.emitted, self.expected_lengths)]
        if len(gaps) < 2:
            return None, None
        return mean(gaps), stdev(gaps) / math.sqrt(len(gaps))

    def stage_shares(self) -> dict[str, float] | None:
        """Each stage's share of the wall time; 'other' is the prefill and the loop's own bookkeeping."""
        if not self.wall_seconds:
            return None
        shares = {k: v / self.wall_seconds for k, v in self.stage_seconds.items()}
        return {**shares, "other": 1.0 - sum(shares.values())}

    def row(self, dataset: str, temperature: float) -> dict:
        gap, gap_se = self.length_gap()
        return {
            "dataset": dataset, "temperature": temperature, "method": self.method, "budget": self.budget,
            "verifier": self.verifier, "builder": self.builder and self.builder.name, "prompts": len(self.tokens_per_s),
            "tokens_per_s": median(self.tokens_per_s) if self.tokens_per_s else None,
            "speedup": median(self.ratio_to_ar) if self.ratio_to_ar else None,
            "mean_emitted": mean(self.emitted) if self.emitted else None,
            "mean_expected_length": mean(self.expected_lengths) if self.expected_lengths else None,
            "rounds": len(self.emitted), "length_gap": gap, "length_gap_se": gap_se,
            "stage_shares": self.stage_shares(),
            "trim": self.trim, "tree_costs": self.tree_costs,
            "skipped_share": self.skipped_rounds / len(self.emitted) if self.emitted else None,
            "mean_tree_size": self.scored_nodes / len(self.emitted) if self.emitted else None,
            "siblings": sibling_diagnostics(self.rounds) if self.rounds else None,
            "ceilings": gap_by_depth(self.ceilings) if self.ceilings else None,
            "spec_decode": counts_of_drafts(self.drafts).to_dict() if self.drafts else None,
        }


def _hf_generate(target: Target, ids: list[int], max_new_tokens: int, temperature: float, lookup: bool,
                 seed: int, assistant: HFAssistant | None = None) -> tuple[int, float]:
    """Tokens produced and seconds by HF generate (optionally prompt-lookup decoding, or transformers' own
    assisted decoding with a proposer's drafter: a draft LM's assisted generation, DFlash's chain)."""
    kwargs = {"do_sample": temperature > 0, "max_new_tokens": max_new_tokens, "min_new_tokens": 1,
              "pad_token_id": target.tokenizer.eos_token_id if target.tokenizer is not None else 0}
    if temperature > 0:
        kwargs.update(temperature=temperature, top_k=0, top_p=1.0)
    if lookup:
        kwargs["prompt_lookup_num_tokens"] = PROMPT_LOOKUP_TOKENS
    if assistant is not None:
        kwargs.update(assistant_model=assistant.model, **assistant.generate_kwargs)
    inputs = torch.tensor([ids], device=target.device)
    with torch.inference_mode(), seeded_torch_rng(seed, target.device):  # generate draws from torch's global RNG
        out, seconds = seconds_of(lambda: target.model.generate(inputs, attention_mask=torch.ones_like(inputs),
                                                                **kwargs), target.device)
    return out.shape[1] - inputs.shape[1], seconds


def run_bench(target: Target, proposer, datasets: list[str], n: int, max_new_tokens: int,
              temperatures: list[float], budgets: list[int], verifiers: list[str], seed: int = 0,
              peers: bool = True, trims: dict[str, dict[int, tuple[float, ...] | None]] | None = None,
              builders: list[BuilderSpec] | None = None, rows: list[dict] | None = None,
              ceilings: bool = False) -> list[dict]:
    """Measure every method on every prompt, interleaved; return one row per configuration.

    `trims` maps a `--trim` spec to each budget's `DecodeConfig.tree_costs`
    (default: 'off' alone, no trimming); every spec is its own configuration.
    `builders` (default best-first) pair with every verifier the registry lets
    run on their trees (`valid_pairs`); a pair the config refuses (a trimmed
    sampled tree) is refused here, before any decode. The rows of each (set, temperature) are
    appended to `rows` as soon as its prompts are done, so a caller keeps them
    when the run is cut short. Under torchrun each rank measures its share of
    the prompts and every rank returns the rows of all of them. `ceilings`:
    every round of an exact rule also sets each node against its design's
    ceiling (`lab.ceilings`, from the round's node logits); that work's time
    is taken out of the decode's seconds, so the speeds stay the decode's.
    """
    trims = trims or {"off": {}}
    pairs = valid_pairs(builders or [BUILDER_FAMILIES["best_first"].spec()], verifiers)
    check_configs(pairs, budgets, list(trims))
    rows = [] if rows is None else rows
    for dataset in datasets:
        room = reserved_positions(max_new_tokens, proposer.depth)
        prompts = [fitting(p, prompt_ids(target, p.text), room, target.max_context)
                   for p in load_prompts(dataset, "heldout", n)]
        for temperature in temperatures:
            stats = {("ar",): MethodStats("ours AR")}
            for budget in budgets:
                for builder, verifier in pairs:
                    for trim, costs in trims.items():
                        stats[("spec", budget, builder, verifier, trim)] = MethodStats(
                            "ours speculative", budget, verifier, builder, trim=trim, tree_costs=costs.get(budget))
            if peers:
                stats[("hf",)] = MethodStats("HF generate")
                stats[("hf-lookup",)] = MethodStats(f"HF prompt lookup ({PROMPT_LOOKUP_TOKENS})")
                assistant = getattr(proposer, "hf_assistant", None)  # the same drafter, decoded by transformers
                if assistant is not None:
                    stats[("hf-assistant",)] = MethodStats(assistant.method)
            measured = []  # (prompt index, that prompt's measurements of every method)
            for index, ids in tqdm(shard(prompts), desc=f"{dataset} T={temperature}", leave=False,
                                   disable=not is_first()):
                prompt_stats = {key: entry.empty() for key, entry in stats.items()}
                measured.append((index, prompt_stats))
                base = DecodeConfig(max_new_tokens=max_new_tokens, temperature=temperature,
                                    seed=draw_seed(seed, dataset, temperature, index, "ar"))
                ar = generate_ar(target, ids, base)
                ar_speed = len(ar.tokens) / ar.seconds
                prompt_stats[("ar",)].tokens_per_s.append(ar_speed)
                prompt_stats[("ar",)].ratio_to_ar.append(1.0)
                for key, entry in prompt_stats.items():
                    kind, cell_seed = key[0], draw_seed(seed, dataset, temperature, index, *key)
                    if kind == "spec":
                        config = DecodeConfig(max_new_tokens=max_new_tokens, temperature=temperature,
                                              budget=entry.budget, builder=entry.builder, verifier=entry.verifier,
                                              seed=cell_seed, trim=entry.trim, tree_costs=entry.tree_costs,
                                              record="lean")
                        observe, spent = _ceiling_observer(entry, temperature) if ceilings else (None, [0.0])
                        result = generate(target, proposer, ids, config, observe)
                        seconds = result.seconds - spent[0]
                        speed = len(result.tokens) / seconds
                        entry.wall_seconds += seconds
                        entry.emitted += [r.emitted for r in result.rounds]
                        entry.expected_lengths += [r.expected_length for r in result.rounds]
                        entry.skipped_rounds += sum(r.tree.size == 0 for r in result.rounds)
                        entry.scored_nodes += sum(r.tree.size for r in result.rounds)
                        entry.rounds += result.rounds
                        entry.drafts += [(r.tree.size, len(r.path) - 1) for r in result.rounds]
                        for record in result.rounds:
                            for stage in STAGES:
                                entry.stage_seconds[stage] += getattr(record.timings, stage)
                    elif kind.startswith("hf"):
                        produced, seconds = _hf_generate(target, ids, max_new_tokens, temperature,
                                                         kind == "hf-lookup", cell_seed,
                                                         assistant if kind == "hf-assistant" else None)
                        speed = produced / seconds
                    else:
                        continue
                    entry.tokens_per_s.append(speed)
                    entry.ratio_to_ar.append(speed / ar_speed)
            for _, prompt_stats in sorted(gather(measured), key=lambda item: item[0]):
                for key, entry in stats.items():
                    entry.absorb(prompt_stats[key])
            rows += [entry.row(dataset, temperature) for entry in stats.values()]
    return rows


def _ceiling_observer(entry: MethodStats, temperature: float):
    """A round observer adding each node's ceiling to `entry` (exact rules only: the foil has no law of its own),
    and a one-item list holding the seconds it spent."""
    spent = [0.0]
    if not get_rule(entry.verifier).exact:
        return None, spent

    def observe(record, logits) -> None:
        start = time.perf_counter()
        entry.ceilings += node_ceilings(record.tree, logits.detach().cpu(), temperature, entry.verifier)
        spent[0] += time.perf_counter() - start

    return observe, spent


def check_configs(pairs: list[tuple[BuilderSpec, str]], budgets: list[int], trims: list[str]) -> None:
    """Every configuration the run would decode, built once: what the config refuses (a trim of a sampled tree)
    is refused in its one line before any model work, as `round` refuses it."""
    for budget in budgets:
        for builder, verifier in pairs:
            for trim in trims:
                DecodeConfig(budget=budget, builder=builder, verifier=verifier, trim=trim)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dataset", default="humaneval,mt-bench,gsm8k,spec-bench",
                        help="comma-separated prompt sets (held-out split) or .jsonl paths")
    parser.add_argument("--n", type=count_at_least_one, default=20, help="prompts per set")
    parser.add_argument("--max-new-tokens", type=count_at_least_one, default=DecodeConfig.default("max_new_tokens"),
                        help=DecodeConfig.help()["max_new_tokens"])
    parser.add_argument("--temperatures", default="0,1")
    parser.add_argument("--budgets", default="4,8,16", help="comma-separated node budgets, or 'auto'")
    parser.add_argument("--budget", dest="budgets", help="alias of --budgets (e.g. --budget auto)")
    parser.add_argument("--verifiers", default="tev,residual",
                        help="comma-separated verifiers; each runs with every --builders entry the rule registry "
                             "lets it run on")
    parser.add_argument("--builders", default="best_first",
                        help="comma-separated builders at the same budget, e.g. best_first,sampled:4,2,1,"
                             "sampled:1,1,1,1,chain (fixed and sampled trees side by side): " + builder_help())
    parser.add_argument("--trim", default="off", help=TRIM_HELP + "; comma-separated specs are measured side by side")
    parser.add_argument("--refresh-curve", action="store_true",
                        help="measure this machine's forward-cost curve again instead of reading the cached one "
                             "(it drifts with load; --trim auto and --budget auto use it)")
    add_proposer_arguments(parser, spec_help=" (a proposer that offers an HF assistant, as a draft LM and DFlash "
                                             "do, also runs transformers' own assisted decoding with it as a peer)")
    parser.add_argument("--seed", type=seed_value, default=DecodeConfig.default("seed"), help=DecodeConfig.help()["seed"])
    parser.add_argument("--no-peers", action="store_true", help="skip HF generate and prompt lookup")
    parser.add_argument("--ceilings", action="store_true",
                        help="also set every node of every round against its design's ceiling (fixed children: sum "
                             "of p; a mixed node: p(fixed) + the best acceptance of its drawn siblings; k <= 3 "
                             "draws: the optimal coupling's LP) beside what the rule reached, per depth")
    parser.add_argument("--threads", type=thread_count, default=None, help="torch threads (default: torch's choice)")
    add_target_arguments(parser)
    parser.add_argument("--out", default="results/bench.json")


def run(args: argparse.Namespace) -> int:
    from tevcore.decoding.autobudget import AUTO_BUDGETS, BudgetChoice, choose_budget, curve_sizes, forward_cost_curve, trim_costs

    options = proposer_options(args)
    if args.threads:
        torch.set_num_threads(args.threads)
    temperatures = comma_list(args.temperatures, float, "temperatures")
    for t in temperatures:
        DecodeConfig(temperature=t)  # validate before loading anything
    trim_specs = comma_list(args.trim, str, "trim specs")
    if args.budgets == "auto" and len(trim_specs) != 1:
        raise ValueError("--budget auto chooses for one --trim spec; give one")
    datasets = comma_list(args.dataset, str, "prompt sets")
    for dataset in datasets:
        load_prompts(dataset, "heldout", args.n)  # an unknown, missing or empty set is refused before the model loads
    verifiers = comma_list(args.verifiers, str, "verifiers")
    builders = parse_builder_list(args.builders)
    pairs = valid_pairs(builders, verifiers)
    for line in skipped_pairs(builders, verifiers) if is_first() else []:
        print(line, file=sys.stderr)  # a report; stdout keeps the table
    # every configuration before the model loads ('auto' chooses among AUTO_BUDGETS: checked at the largest)
    check_configs(pairs, [max(AUTO_BUDGETS)] if args.budgets == "auto" else comma_list(args.budgets, int, "budgets"),
                  trim_specs)
    target = target_from_args(args, device=device_for_rank(args.device))
    # taken now: the code that runs, even if the checkout moves on during a long bench
    meta = RunMeta.now(args.command_line, device=str(target.device), seed=args.seed)
    proposer = proposer_from_args(args, target, options)
    for builder, _ in pairs:
        builder.check_depth(proposer.depth)  # a shape deeper than the drafter, before any prompt
    if args.refresh_curve and is_first():
        wanted = AUTO_BUDGETS if args.budgets == "auto" else comma_list(args.budgets, int, "budgets")
        forward_cost_curve(target, sizes=curve_sizes(wanted), refresh=True)
    auto: dict[float, BudgetChoice] = {}
    if args.budgets == "auto":  # one choice per temperature: E(B) depends on it
        calibration = [prompt_ids(target, p.text) for d in datasets for p in load_prompts(d, "train", 2)]
        for t in temperatures:  # measured on a clock: rank 0 chooses for every rank
            auto[t] = from_first(choose_budget(target, proposer, calibration, t, trim=trim_specs[0])
                                 if is_first() else None)
            if is_first():
                print(f"T={t:g}: {auto[t].explain()}", file=sys.stderr)  # a report; stdout keeps the table
        plan = [([t], [auto[t].budget] if auto[t].budget > 0 else []) for t in temperatures]
    else:
        plan = [(temperatures, comma_list(args.budgets, int, "budgets"))]
    for _, budgets in plan:
        check_configs(pairs, budgets, trim_specs)
    all_budgets = sorted({b for _, budgets in plan for b in budgets})
    trims = from_first({spec: trim_costs(target, all_budgets, spec) for spec in trim_specs} if is_first() else None)
    for spec, costs in trims.items():
        for b, tree_costs in costs.items():
            DecodeConfig(budget=b, trim=spec, tree_costs=tree_costs)
    rows: list[dict] = []
    try:
        for temps, budgets in plan:
            run_bench(target, proposer, datasets, args.n, args.max_new_tokens, temps, budgets, verifiers, args.seed,
                      peers=not args.no_peers, trims=trims, builders=builders, rows=rows, ceilings=args.ceilings)
    except KeyboardInterrupt:  # keep the finished (set, temperature) cells, marked partial
        if rows and is_first():
            print(format_table(rows))
            _write(args, rows, meta, _settings(args, target, proposer, datasets, trim_specs, None, auto), partial=True)
        raise
    if not is_first():
        return 0
    print(format_table(rows))
    for row in rows:
        if row.get("siblings"):
            print()
            print(format_sibling_table(f"{row['dataset']} T={row['temperature']:g} B={row['budget']} "
                                       f"{row['builder']} + {row['verifier']}", row["siblings"]))
        if row.get("ceilings"):
            print(f"\n{row['dataset']} T={row['temperature']:g} B={row['budget']} {row['builder']} + "
                  f"{row['verifier']}: each node against its design's ceiling")
            print(format_ceilings(row["ceilings"]))
    uses_curve = "auto" in trim_specs or bool(auto)
    curve = forward_cost_curve(target, sizes=curve_sizes(all_budgets)) if uses_curve and all_budgets else None
    _write(args, rows, meta, _settings(args, target, proposer, datasets, trim_specs, curve, auto))
    return 0


def _settings(args: argparse.Namespace, target: Target, proposer, datasets: list[str], trim_specs: list[str],
              curve: dict | None, auto: dict) -> dict:
    return {"model": target.name, "proposer": proposer.name, "datasets": datasets, "n": args.n,
            "max_new_tokens": args.max_new_tokens, "processes": world()[1], "trim": trim_specs, "cost_curve_s": curve,
            "auto_budget": {str(t): choice.to_dict() for t, choice in auto.items()} or None}


def _write(args: argparse.Namespace, rows: list[dict], meta: RunMeta, settings: dict, partial: bool = False) -> None:
    """The rows and their settings at --out; `partial` marks a run cut short (its finished cells only)."""
    if not rows:
        raise ValueError("the run measured nothing: no result written")
    record = ResultRecord("bench", meta, rows, settings=settings,
                          partial=f"interrupted after {len(rows)} rows" if partial else None)
    write_result(args.out, record, force=args.force)
