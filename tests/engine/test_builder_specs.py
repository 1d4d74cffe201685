"""Builder requests: the one parser of builder names, the families' help, and a spec that travels by name."""

import pickle

import pytest
import torch

from tevcore.engine.builder_specs import (BUILDER_FAMILIES, BuilderSpec, builder_help, builder_patterns, parse_builder,
                                          parse_builder_list, sampled_builder_help)
from tevcore.engine.builders import best_first, chain, fixed_width

ROOT = 9


def rows(seed, depth=3, vocab=5):
    generator = torch.Generator().manual_seed(seed)
    return torch.log_softmax(2 * torch.randn(depth, vocab, generator=generator), -1)


def test_parse_builder():
    logq = rows(2)
    assert parse_builder("best_first")(ROOT, logq, 5).to_dict() == best_first(ROOT, logq, 5).to_dict()
    assert parse_builder("chain")(ROOT, logq, None).to_dict() == chain(ROOT, logq).to_dict()
    assert not parse_builder("chain").sampled and parse_builder("width:2,1").depth == 2
    width = parse_builder("width:2,1")
    assert width(ROOT, logq, 10).to_dict() == fixed_width(ROOT, logq, [2, 1], 10).to_dict()
    for name in ("beam", "", "Best_First", "chain:2", "width"):
        with pytest.raises(ValueError, match="unknown builder"):
            parse_builder(name)
    with pytest.raises(ValueError, match="expected comma-separated widths"):
        parse_builder("width:4,x")
    with pytest.raises(ValueError, match="more than the budget 5"):
        parse_builder("width:4,2", budget=5)
    with pytest.raises(TypeError, match="already a parsed spec"):
        parse_builder(parse_builder("chain"))


def test_builder_lists_keep_their_shapes_together():
    assert [b.name for b in parse_builder_list("best_first,sampled:3,2,1,chain,sampled-wor:2,2,width:2,1")] == [
        "best_first", "sampled:3,2,1", "chain", "sampled-wor:2,2", "width:2,1"]
    with pytest.raises(ValueError, match="unknown builder"):
        parse_builder_list("best_first,4")


def test_help_and_menus_name_every_family():
    assert builder_patterns() == [family.pattern for family in BUILDER_FAMILIES.values()]
    assert all(pattern in builder_help() for pattern in builder_patterns())
    drawn = [f.pattern for f in BUILDER_FAMILIES.values() if f.draws]
    assert drawn and all(p in sampled_builder_help() for p in drawn)
    assert "best_first =" not in sampled_builder_help()


@pytest.mark.parametrize("name", ["best_first", "width:2,1", "sampled:3,2,1", "mixed-wor:2,1"])
def test_a_spec_pickles_as_its_name(name):
    """torchrun ranks gather results that carry a spec; its family holds lambdas, which pickle cannot carry."""
    spec = parse_builder(name)
    again = pickle.loads(pickle.dumps(spec))
    assert isinstance(again, BuilderSpec) and again == spec and again.family is BUILDER_FAMILIES[spec.kind]
    with pytest.raises((pickle.PicklingError, AttributeError, TypeError)):
        pickle.dumps(spec.family)  # what a plain dataclass pickle of the spec would have to carry
