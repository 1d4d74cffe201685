"""The names a page shows and chooses among: the verification rules with their standing, the tree builders' specs,
and the largest seed a page may take.

The registry and the spec parser stay the one source (`tevcore.verify.registry`, `tevcore.engine.builder_specs`);
this module is the door the app reads them through, so a page never reaches the verifiers or the engine.
"""

from tevcore.engine.builder_specs import (BUILDER_FAMILIES, BuilderSpec, builder_help, parse_builder,
                                          sampled_builder_help)
from tevcore.engine.sampling import MAX_SEED
from tevcore.verify.laws import FOIL, OPTIMAL, OVER_DRAWS, OWN_LAW, T0_ONLY
from tevcore.verify.registry import (RULES, check_pairing, get_rule, held_to_x, law_name, laws_held_to_text,
                                     rules_for, rules_on, standing, standing_text, verifier_label, x_law_label)

__all__ = ["BUILDER_FAMILIES", "BuilderSpec", "builder_help", "parse_builder", "sampled_builder_help", "MAX_SEED",
           "FOIL", "OPTIMAL", "OVER_DRAWS", "OWN_LAW", "T0_ONLY", "RULES", "check_pairing", "get_rule", "law_name",
           "rules_for", "rules_on", "standing", "standing_text", "verifier_label", "held_to_x", "laws_held_to_text",
           "x_law_label"]
