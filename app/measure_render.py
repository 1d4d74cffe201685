"""Measure what the explorer spends after a round: figure building and a whole page run (budget 64).

    python app/measure_render.py [--budget 64] [--rounds 20] [--repeats 5]

Figures are built from synthetic rounds of the given budget (the cost depends
on the tree size, not on the model); the page run is the explorer script under
streamlit's AppTest with those rounds in its session, i.e. everything the
page does after a round completes, without the browser's own drawing.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tevcore.studio.synthetic import synthetic_records  # noqa: E402
import figures  # noqa: E402


def build_all(records, node: int) -> None:
    record = records[-1]
    figures.record_tree_figure(record, selected=node).to_plotly_json()
    figures.next_token_figure(figures.node_distribution(record, node)).to_plotly_json()
    figures.timings_figure(record).to_plotly_json()
    figures.node_table(record)
    figures.text_by_round_html(records)
    figures.emitted_figure(records).to_plotly_json()
    figures.exit_depth_figure(records).to_plotly_json()
    figures.speed_figure(records).to_plotly_json()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    records = synthetic_records(rounds=args.rounds, budget=args.budget)
    print(f"{args.rounds} rounds, last tree {records[-1].tree.size} nodes, depth {records[-1].tree.max_depth}")
    build_all(records, 0)  # warm-up (imports, plotly validators)
    times = []
    for i in range(args.repeats):
        start = time.perf_counter()
        build_all(records, i % records[-1].tree.num_nodes)
        times.append(time.perf_counter() - start)
    print(f"figure build (all explorer figures): median {1000 * statistics.median(times):.0f} ms, "
          f"max {1000 * max(times):.0f} ms")
    start = time.perf_counter()
    figures.record_tree_figure(records[-1]).to_plotly_json()
    print(f"tree figure alone: {1000 * (time.perf_counter() - start):.0f} ms")

    from streamlit.testing.v1 import AppTest

    from explorer_state import SESSION_KEY, ExplorerSession

    at = AppTest.from_file(str(Path(__file__).resolve().parent / "pages" / "1_Tree_explorer.py"), default_timeout=60)
    session = ExplorerSession(records=records, done=True, source="measure")
    at.session_state[SESSION_KEY] = session
    at.run()
    page_times = []
    for _ in range(args.repeats):
        session.view.seen = 0  # as if a round had just arrived
        start = time.perf_counter()
        at.run()
        page_times.append(time.perf_counter() - start)
        if at.exception:
            print("page raised:", at.exception)
            return 1
    print(f"explorer page run after a round (AppTest, no browser): median "
          f"{1000 * statistics.median(page_times):.0f} ms, max {1000 * max(page_times):.0f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
