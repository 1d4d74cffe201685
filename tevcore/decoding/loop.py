"""The one speculative decoding loop, and the autoregressive baseline.

`rounds` is a generator that yields a `RoundRecord` per round; `generate`,
the CLI, the benchmark and the app all consume it, so streaming and batch
decoding cannot drift apart. `generate_ar` decodes one token per target
forward on the same target session and the same sampler.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterator

import torch

from tevcore.engine.builder_specs import BuilderSpec
from tevcore.engine.draft_rows import DraftRows
from tevcore.config import DecodeConfig
from tevcore.proposer_protocol import Proposer
from tevcore.engine.flow import draft_path_probs, target_flow
from tevcore.target.loading import Target, encode_prompt
from tevcore.target.token_text import run_text, token_texts
from tevcore.engine.records import RoundRecord
from tevcore.engine.sampling import make_generator, warp_logits
from tevcore.decoding.skip_gate import SkipGate
from tevcore.target.walker import score_root, walk
from tevcore.target.session import TargetSession
from tevcore.timing import StageTimer, seconds_of
from tevcore.engine.tree import DraftTree
from tevcore.decoding.trim import ForecastCalibration, best_prefix_size
from tevcore.verify.verifiers import get_verifier


def prompt_ids(target: Target, prompt: str | list[int], chat: bool = True) -> list[int]:
    """Token ids of a prompt given as text (chat template optional) or as ids."""
    if isinstance(prompt, str):
        return encode_prompt(target, prompt, chat=chat)
    ids = [int(t) for t in prompt]
    if not ids:
        raise ValueError("the prompt is empty")
    if min(ids) < 0 or max(ids) >= target.vocab_size:
        raise ValueError(f"prompt token ids must lie in [0, {target.vocab_size})")
    return ids


def _add_texts(target: Target, record: RoundRecord) -> None:
    """Record level "full": decode every node's token, its missing tokens and the bonus (each alone: a byte piece
    of a character is marked as bytes), and the emitted block as one run (its bytes join into characters)."""
    tree, flow = record.tree, record.flow
    texts = token_texts(target.tokenizer, tree.tokens.tolist() + flow.missing_tokens.flatten().tolist()
                        + [int(record.bonus_token)])
    n, k = tree.num_nodes, flow.missing_tokens.shape[1]
    record.token_texts = texts[:n]
    record.missing_texts = [texts[n + i * k: n + (i + 1) * k] for i in range(n)]
    record.emitted_text = run_text(target.tokenizer, record.emitted_tokens)
    record.bonus_text = texts[-1]


def reserved_positions(max_new_tokens: int, depth: int) -> int:
    """Positions a decode needs beyond its prompt: every new token, and one more round's tree path."""
    return max_new_tokens + depth + 1


def _start(target: Target, prompt: str | list[int], config: DecodeConfig, depth: int,
           hidden_layers: tuple[int, ...]) -> tuple[TargetSession, set[int]]:
    """Validate the prompt against the context and prefill a session."""
    ids = prompt_ids(target, prompt, chat=config.chat)
    session = TargetSession(target, hidden_layers=hidden_layers)
    session.prefill(ids, reserve=reserved_positions(config.max_new_tokens, depth))
    stops = set(config.stop_tokens) if config.stop_tokens is not None else target.stop_token_ids()
    return session, stops


def _cut_at_stop(tokens: list[int], stops: set[int], room: int) -> tuple[list[int], bool]:
    """Emitted tokens up to the first stop token (kept) or the remaining room."""
    for i, token in enumerate(tokens[:room]):
        if token in stops:
            return tokens[: i + 1], True
    return tokens[:room], len(tokens) >= room


def propose(proposer: Proposer, session: TargetSession, builder: BuilderSpec, budget: int, temperature: float,
            generator: torch.Generator) -> torch.Tensor | DraftRows | DraftTree:
    """Per-depth rows for the builder, or the whole tree from a proposer whose rows depend on the path."""
    tree = proposer.propose_tree(session, builder, budget, temperature, generator)
    return proposer.propose(session) if tree is None else tree


def build_tree(builder: BuilderSpec, root: int, proposal: torch.Tensor | DraftRows | DraftTree, budget: int,
               temperature: float, generator: torch.Generator) -> DraftTree:
    """The round's tree from what `propose` gave: a proposer that grows its own tree (a draft LM) gives it whole."""
    return proposal if isinstance(proposal, DraftTree) else builder(root, proposal, budget, temperature, generator)


RoundObserver = Callable[[RoundRecord, torch.Tensor], None]


def rounds(target: Target, proposer: Proposer | None, prompt: str | list[int],
           config: DecodeConfig, observe: RoundObserver | None = None) -> Iterator[RoundRecord]:
    """Speculative decoding, one yielded `RoundRecord` per draft-verify-commit round.

    `observe(record, node_logits)`, where given, sees each round with the
    target's logits at its tree's nodes (which the record does not keep)
    before it is yielded: a measurement that needs the target's rows.
    At T > 0 with `config.top_k` / `config.top_p` the scored rows are warped
    (`sampling.warp_logits`) before the flow and the verdict read them, so the
    round verifies against the warped target law and records its flow.
    """
    if config.budget > 0 and proposer is None:
        raise ValueError("a budget > 0 needs a proposer")
    depth = proposer.depth if (proposer is not None and config.budget > 0) else 0
    builder = config.builder
    if depth:
        builder.check_depth(depth)
    if config.trimmed and config.tree_costs is None:
        raise ValueError(f"trim {config.trim} needs its tree costs: resolve them on the target first "
                         "(tevcore.decoding.autobudget.trim_costs)")
    verify = get_verifier(config.verifier)
    session, stops = _start(target, prompt, config, depth, proposer.hidden_layers if depth else ())
    generator = make_generator(config.seed, session.device)
    proposer_name = proposer.name if proposer is not None and depth else "none (autoregressive)"
    trimming = config.trimmed
    full = config.record == "full"
    gate = SkipGate(enabled=trimming)
    calibration = ForecastCalibration()
    produced, index = 0, 0
    while produced < config.max_new_tokens:
        timer = StageTimer(session.device)
        root = session.root_token
        context_length = len(session.committed)
        with timer.stage("draft"):
            evidence = bool(depth) and trimming and proposer.has_cheap_evidence(session)
            drafting = bool(depth) and gate.should_draft(evidence)
            proposal = propose(proposer, session, builder, config.budget, config.temperature,
                               generator) if drafting else None
        with timer.stage("tree_build"):
            tree = build_tree(builder, root, proposal, config.budget, config.temperature, generator) if drafting \
                else DraftTree.root_only(root)
            draft_probs = draft_path_probs(tree)[1:] if trimming else None
            drafted_size = tree.size if drafting and trimming else None
            if drafting and trimming:
                kept = best_prefix_size(draft_probs, config.tree_costs, calibration.scale)
                gate.observe(evidence, kept > 0)
                tree, draft_probs = tree.first(kept), draft_probs[:kept]
        with timer.stage("tree_forward"):
            logits = warp_logits(session.score_tree(tree).logits, config.temperature, config.top_k, config.top_p)
        with timer.stage("flow"):
            flow = target_flow(tree, logits, config.temperature, config.missing_k if full else 0)
            if trimming:
                calibration.observe(draft_probs, flow.path_prob[1:])
        with timer.stage("verify_decision"):
            verdict = verify(tree, logits, config.temperature, generator, flow=flow)
        drafted = tree.tokens[verdict.path[1:]].tolist() + [int(verdict.bonus_token)]
        emitted, done = _cut_at_stop(drafted, stops, config.max_new_tokens - produced)
        if not done:
            with timer.stage("commit"):
                session.commit(list(verdict.path), int(verdict.bonus_token))
        with timer.stage("record"):
            record = RoundRecord(
                index=index, proposer=proposer_name, builder=builder.name, budget=config.budget,
                temperature=config.temperature, context_length=context_length, tree=tree, flow=flow,
                token_texts=[], missing_texts=[], verifier=config.verifier, path=list(verdict.path),
                exit_node=int(verdict.exit_node), bonus_token=int(verdict.bonus_token), emitted_tokens=emitted,
                timings=timer.timings, drafted_size=drafted_size)
            if full:
                _add_texts(target, record)
        if depth:
            proposer.observe_round(session, record)
        if observe is not None:
            observe(record, logits)
        yield record
        produced += len(emitted)
        index += 1
        if done:
            return


@dataclass
class Generation:
    """A finished generation: its tokens, text and the rounds that made it."""

    tokens: list[int]
    text: str
    rounds: list[RoundRecord] = field(default_factory=list)
    seconds: float = 0.0


def _decode_text(target: Target, tokens: list[int]) -> str:
    return target.tokenizer.decode(tokens) if target.tokenizer is not None else " ".join(map(str, tokens))


def generate(target: Target, proposer: Proposer | None, prompt: str | list[int], config: DecodeConfig,
             observe: RoundObserver | None = None) -> Generation:
    """Run `rounds` to the end and collect its output (`observe`: see `rounds`; its time is inside `seconds`)."""
    records, seconds = seconds_of(lambda: list(rounds(target, proposer, prompt, config, observe)), target.device)
    tokens = [t for record in records for t in record.emitted_tokens]
    return Generation(tokens=tokens, text=_decode_text(target, tokens), rounds=records, seconds=seconds)


def generate_ar(target: Target, prompt: str | list[int], config: DecodeConfig) -> Generation:
    """Autoregressive baseline: one target forward and one draw per token (`walk`)."""
    def decode() -> list[int]:
        session, stops = _start(target, prompt, config, 0, ())
        def warped_root(session: TargetSession) -> torch.Tensor:
            return warp_logits(score_root(session), config.temperature, config.top_k, config.top_p)

        return walk(session, config.max_new_tokens, config.temperature, make_generator(config.seed, session.device),
                    stops, measure=warped_root)

    tokens, seconds = seconds_of(decode, target.device)
    return Generation(tokens=tokens, text=_decode_text(target, tokens), seconds=seconds)
