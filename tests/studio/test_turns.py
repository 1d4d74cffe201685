"""Every heavy service of the studio takes a compute-queue turn, and a page that is gone frees its slot.

The services are found, not listed: every public function of a `tevcore.studio` module whose first parameter is a
`Seat`. Each is run while another participant holds the queue's only slot: it must wait its place in line
before doing any work (the example arguments are too poor for the work itself, so a service that skips its turn
fails here either way). A new service with no example fails until one is written for it.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import threading
from types import SimpleNamespace

import pytest
import torch

import tevcore.studio
from tevcore.config import DecodeConfig
from tevcore.engine.builder_specs import parse_builder
from tevcore.engine.builders import chain
from tevcore.engine.flow import target_flow
from tevcore.engine.records import RoundRecord
from tevcore.lab.context_rounds import RescoredRounds, SampledRounds, rows_fingerprint
from tevcore.room.limits import ROOM, CapExceeded
from tevcore.room.queue import ComputeQueue
from tevcore.studio.comparison import DrawRequest
from tevcore.studio.coupling import COUPLING_PRESET, coupling, coupling_presets
from tevcore.studio.drafter_compare import EvalRequest, PairedRequest
from tevcore.studio.explorer import LiveRequest
from tevcore.studio.reader import read_upload
from tevcore.studio.workshop import TreeLesson
from tevcore.studio.workshop_tables import MIXED_PRESET, mixed_presets, workshop_presets, workshop_tree
from tevcore.studio.turns import Left, Seat


def heavy_services() -> dict[str, object]:
    found = {}
    for info in pkgutil.iter_modules(tevcore.studio.__path__):
        module = importlib.import_module(f"tevcore.studio.{info.name}")
        for name, function in inspect.getmembers(module, inspect.isfunction):
            if function.__module__ != module.__name__ or name.startswith("_") or name == "queue_turn":
                continue
            first = next(iter(inspect.signature(function).parameters.values()), None)
            if first is not None and first.annotation in ("Seat", Seat):
                found[f"{info.name}.{name}"] = function
    return found


def _tree():
    logits = torch.randn(3, 6, generator=torch.Generator().manual_seed(0))
    tree = chain(0, torch.log_softmax(logits, -1), 2)
    return tree, logits


def _no_model(*spec):
    raise AssertionError("a model was loaded before the turn")


def _lesson() -> TreeLesson:
    table = workshop_tree(workshop_presets()["chain"])
    return TreeLesson(table, target_flow(table.tree, table.node_logits, 1.0), torch.zeros(0))


def _no_forward(trees):
    raise AssertionError("a tree was scored before the turn")


def _rescored(tree, logits) -> SampledRounds:
    """Two rounds that let their rows go, the first one's rows held (as a draw leaves them)."""
    rounds = RescoredRounds([tree, tree], [rows_fingerprint(logits)] * 2, _no_forward, first_rows=logits)
    return SampledRounds(parse_builder("sampled:2,1", 4), 1.0, rounds, (tree, logits))


def _examples() -> dict[str, dict]:
    tree, logits = _tree()
    sampled = SampledRounds(parse_builder("sampled:2,1", 4), 1.0, [(tree, logits)], (tree, logits))
    return {
        "traces.open_trace": dict(upload=read_upload(ROOM, b"not read before the turn", "t.jsonl")),
        "comparison.compare_verifiers": dict(request=DrawRequest(("tev",), 1.0, 10, 0), tree=tree,
                                             node_logits=logits),
        "comparison.study_tree": dict(tree=tree, node_logits=logits, temperature=1.0),
        "comparison.toy_rounds": dict(builder=parse_builder("sampled:2,1", 4), rounds=5, budget=4, temperature=1.0,
                                      seed=0),
        "comparison.context_rounds": dict(target=SimpleNamespace(vocab_size=6), proposer=SimpleNamespace(depth=2),
                                          context=[1, 2], builder=parse_builder(
            "sampled:2,1", 4), budget=4, temperature=1.0, rounds=5, seed=0),
        "comparison.across_rounds": dict(names=["tev"], sampled=sampled, seed=0),
        "comparison.picked_round": dict(sampled=_rescored(tree, logits), index=1),
        "comparison.read_result_files": dict(uploads=[read_upload(ROOM, b"not read before the turn", "r.json")],
                                             folder=None),
        "explorer.decode": dict(models=None, request=LiveRequest("default", "hi", False, "rollout", DecodeConfig(
            budget=4, max_new_tokens=4)), running=None, limit=1),
        "explorer.rescore_round": dict(models=None, target_spec="default", prompt_ids=[1, 2], index=0, records=[
            RoundRecord(0, "rollout", "chain", 2, 1.0, 2, tree, target_flow(tree, logits, 1.0), [], [])]),
        "workshop.coupling_rounds": dict(fixed_tree=tree, p=torch.full((6,), 1 / 6), q=torch.full((6,), 1 / 6),
                                         rounds=10, seed=0),
        "drafter_compare.evaluate_drafters": dict(
            request=EvalRequest(("a", "b"), ("alone",), (4,), 1, 1.0, 8), load_target=_no_model,
            load_proposer=_no_model),
        "drafter_compare.compare_paired": dict(request=PairedRequest("a", "b", (4,), 2, 1.0, 8, lookup=False),
                                               load_target=_no_model, load_proposer=_no_model),
        "workshop.explain_tree": dict(table=workshop_presets()["chain"]),
        "workshop.walk_tree": dict(lesson=_lesson(), seed=0),
        "workshop.explain_coupling": dict(table=coupling_presets()[COUPLING_PRESET]),
        "workshop.explain_orders": dict(found=coupling(mixed_presets()[MIXED_PRESET]), seed=0),
    }


class Waited(Exception):
    """The service stood in line (raised from its seat's `on_wait`, which takes it out of line)."""


class HeldQueue:
    """A one-slot queue whose slot another participant holds until `release()`."""

    def __init__(self) -> None:
        self.queue = ComputeQueue(1)
        self._release, holding = threading.Event(), threading.Event()

        def hold() -> None:
            with self.queue.turn("another participant"):
                holding.set()
                self._release.wait(30)

        self._thread = threading.Thread(target=hold, daemon=True)
        self._thread.start()
        holding.wait(10)

    def release(self) -> None:
        self._release.set()
        self._thread.join(10)


def test_the_studio_has_heavy_services_and_an_example_for_each():
    assert set(heavy_services()) == set(_examples())


@pytest.mark.parametrize("name", sorted(_examples()))
def test_every_heavy_service_waits_for_its_turn_in_the_compute_queue(name):
    service = heavy_services()[name]
    held = HeldQueue()
    places = []

    def on_wait(place) -> None:
        places.append(place)
        raise Waited

    try:
        with pytest.raises(Waited):
            service(Seat(ROOM, held.queue, "me", on_wait=on_wait), **_examples()[name])
    finally:
        held.release()
    assert places and places[0].position == 1 and places[0].waiting == 1
    assert held.queue.running == 0 and held.queue.waiting == 0  # out of line, nothing held


def test_the_round_a_draw_left_at_hand_is_read_without_waiting_behind_others():
    """Right after a participant's draw its first round's rows are held: showing it computes nothing, so it must
    not queue behind the room's other draws (in a room of 20 that wait was the whole room's draws)."""
    tree, logits = _tree()
    held = HeldQueue()
    try:
        seat = Seat(ROOM, held.queue, "me", on_wait=lambda place: pytest.fail("a held round waited in line"))
        shown_tree, rows = heavy_services()["comparison.picked_round"](seat, _rescored(tree, logits), 0)
    finally:
        held.release()
    assert shown_tree is tree and torch.equal(rows, logits)


def test_a_request_past_a_cap_is_refused_before_it_waits_in_line():
    held = HeldQueue()
    try:
        seat = Seat(ROOM, held.queue, "me", on_wait=lambda place: pytest.fail("a refused request waited"))
        services = heavy_services()
        with pytest.raises(CapExceeded, match=r"toy sampled rounds 1001 is over this server's cap of 1000"):
            services["comparison.toy_rounds"](seat, **{**_examples()["comparison.toy_rounds"], "rounds": 1001})
        with pytest.raises(CapExceeded, match=r"draws per verifier 200001"):
            services["comparison.compare_verifiers"](seat, **{**_examples()["comparison.compare_verifiers"],
                                                             "request": DrawRequest(("tev",), 1.0, 200_001, 0)})
        with pytest.raises(CapExceeded, match=r"coupling rounds 5001"):
            services["workshop.coupling_rounds"](seat, **{**_examples()["workshop.coupling_rounds"], "rounds": 5001})
    finally:
        held.release()


def test_a_page_closed_mid_computation_stops_the_work_and_frees_its_slot():
    """The page's check raises `Left` once its tab is gone; the work stops there and the slot is free at once."""
    queue = ComputeQueue(1)
    checks = []

    def still_here() -> None:
        checks.append(1)
        if len(checks) > 3:  # the tab closes while the fourth tree is due
            raise Left("the page that asked was closed")

    seat = Seat(ROOM, queue, "me", still_here=still_here)
    with pytest.raises(Left):
        heavy_services()["comparison.toy_rounds"](seat, **{**_examples()["comparison.toy_rounds"], "rounds": 1000})
    assert len(checks) == 4 and queue.running == 0
    with queue.turn("the next participant", on_wait=lambda place: pytest.fail("the slot was still held")):
        pass
