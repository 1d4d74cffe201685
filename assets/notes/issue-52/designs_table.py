"""The README's table of `compare-designs` results: per (T, B, prompt set), each design's E[L] and its paired
difference from the first design (± s.e. clustered by prompt), and whether the best design other than the
first two (the two schools) and the old order (rrs-fixed-first) reaches 1.05 x the better of them beyond 2 s.e.
(at T = 0: whether the per-node policy is within 1 s.e. of the first, best-first). Where the results hold the
pairs (`compare-designs --all-pairs`), the best new design is set against the other school with their own paired
s.e.; else through the first design.

    python assets/notes/issue-52/designs_table.py assets/notes/issue-52/designs-T1.json [...]
"""

from __future__ import annotations

import sys
from collections import defaultdict
from pathlib import Path

from tevcore.results import read_result


def main(paths: list[str]) -> None:
    cells = defaultdict(dict)  # (T, B, prompt set) -> design -> its row against the first design
    pairs = {}  # (T, B, prompt set, design, other) -> the row of design minus other (--all-pairs)
    firsts: dict[tuple, str] = {}
    designs: list[str] = []
    for path in paths:
        for row in read_result(Path(path)).rows:
            key = (row["temperature"], row["budget"], row["prompt_set"])
            if row["baseline"] == firsts.setdefault(key, row["baseline"]):
                cells[key][row["design"]] = row
            else:
                pairs[key + (row["design"], row["baseline"])] = row
            if row["design"] not in designs:
                designs.append(row["design"])
    print("| T | B | prompts (n, positions) | " + " | ".join(designs) + " | best new / better school |")
    print("|---|---|---|" + "---|" * (len(designs) + 1))
    for (t, b, name), found in sorted(cells.items(), key=lambda kv: (-kv[0][0], kv[0][1], kv[0][2] != "all", kv[0][2])):
        first = next(iter(found.values()))
        shown = []
        for design in designs:
            row = found.get(design)
            if row is None:
                shown.append("")
            elif design == first["baseline"]:
                shown.append(f"{row['length']:.3f} (± {row['length_se']:.3f})")
            else:
                shown.append(f"{row['length']:.3f} ({row['difference']:+.3f} ± {row['difference_se']:.3f})")
        schools = [found[d] for d in designs[:2] if d in found]
        new = [found[d] for d in designs[2:] if d in found and not d.endswith("rrs-fixed-first")]  # the old order
        verdict = ""
        policy = next((found[d] for d in designs if d.startswith("policy") and d in found), None)
        if t == 0 and policy is not None:  # the goal at T = 0: the policy within 1 s.e. of best-first
            within = abs(policy["difference"]) <= policy["difference_se"]
            verdict = f"policy {policy['difference']:+.3f} ± {policy['difference_se']:.3f}: " \
                      f"{'within' if within else 'not within'} 1 s.e."
        elif len(schools) == 2 and new:
            better = max(schools, key=lambda r: r["length"])
            best = max(new, key=lambda r: r["length"])
            ratio = best["length"] / better["length"]
            pair = pairs.get((t, b, name, best["design"], better["design"]))
            gap = best["difference"] - better["difference"]  # paired through the baseline
            if better["design"] == first["baseline"]:
                se = best["difference_se"]
            elif pair is not None:  # their own paired s.e.
                se = pair["difference_se"]
            else:  # the sum of the two paired s.e. through the baseline (an upper bound whatever their correlation)
                se = best["difference_se"] + better["difference_se"]
            beyond = best["length"] - 1.05 * better["length"] > 2 * se
            verdict = f"{ratio:.3f} ({best['design']}; {'goal met' if beyond else 'goal not met'}" \
                      f", gap {gap:+.3f} ± {se:.3f})"
        print(f"| {t:g} | {b} | {name} ({first['prompts']}, {first['positions']}) | " + " | ".join(shown)
              + f" | {verdict} |")


if __name__ == "__main__":
    main(sys.argv[1:])
