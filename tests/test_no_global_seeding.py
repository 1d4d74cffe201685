"""No module of the package seeds a process-wide random generator, except the one scoped use in sampling.

Seeding torch's, Python's or numpy's global generator changes the random
state of whoever draws next (a test, the app, a caller's own sampling); the
package draws from explicit generators, and code that can only draw from the
global one runs inside `engine.sampling.seeded_torch_rng`, which forks it.
"""

from __future__ import annotations

import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "tevcore"
GLOBAL_SEEDING = re.compile(
    r"\b(torch\.(cuda\.)?manual_seed(_all)?|random\.seed|np\.random\.seed|numpy\.random\.seed)\(")
SCOPED_USE = PACKAGE / "engine" / "sampling.py"


def global_seedings() -> list[str]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if GLOBAL_SEEDING.search(line):
                found.append(f"{path.relative_to(PACKAGE.parent)}:{number}: {line.strip()}")
    return found


def test_only_the_sampling_module_seeds_a_global_generator_and_only_inside_its_forked_scope():
    found = global_seedings()
    outside = [line for line in found if not line.startswith(str(SCOPED_USE.relative_to(PACKAGE.parent)))]
    assert not outside, "global seeding outside engine/sampling.py:\n" + "\n".join(outside)
    assert len(found) == 1, found  # the one inside seeded_torch_rng's fork_rng
    source = SCOPED_USE.read_text()
    assert source.index("fork_rng(") < source.index("torch.manual_seed(")


def test_the_pattern_finds_what_it_looks_for():
    assert GLOBAL_SEEDING.search("    torch.manual_seed(seed)")
    assert GLOBAL_SEEDING.search("np.random.seed(0)") and GLOBAL_SEEDING.search("random.seed(1)")
    assert not GLOBAL_SEEDING.search("generator.manual_seed(seed)")
