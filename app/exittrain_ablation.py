"""The ExitTrain page's Ablation tab: open an ablation.json (scripts/exit_train_ablation.sh; the committed ones are
offered) and draw each arm's paired gain against the training step, each arm in its one colour, with what the
result found in words (`tevcore.train.ablation_finding`, read off the same rows). The figures are the file's own;
the page only picks which to draw."""

from __future__ import annotations

from pathlib import Path

import figures
import pandas as pd
import room_ui
import streamlit as st

from tevcore.results import ResultRecord, read_result
from tevcore.studio.training import ablation_finding, committed_ablations
from tevcore.studio.training_state import AblationView, kept_choice

OWN_FILE = "another ablation.json (type its path)"
COMMAND = "exit-train-ablation"  # what scripts/exit_train_ablation_report.py writes
ROW_KEYS = ("arm", "step", "against", "temperature", "budget", "prompts", "positions", "baseline_length",
            "other_length", "gain_pct", "gain_se_pct")


def ablation_rows(record: ResultRecord, path: Path) -> list[dict]:
    """The rows of an ablation result; another command's result, or rows without the figures drawn here, are a
    ValueError naming the file."""
    if record.command != COMMAND:
        raise ValueError(f"{path} is a {record.command} result, not an ablation (scripts/exit_train_ablation.sh)")
    for number, row in enumerate(record.rows):
        missing = [key for key in ROW_KEYS if key not in row]
        if missing:
            raise ValueError(f"{path}, row {number}: no {', '.join(missing)}")
    return record.rows


def ablation_tab(runs_root: Path, view: AblationView) -> None:
    """Open an ablation result and draw the slice of it `view` keeps (the page's state: kept across pages)."""
    st.caption("What ExitTrain's gain is made of: anchor loss soft or hard x tree term lambda 0 or 0.1 (from a "
               "naive start also arms on the target's T = 1 responses, `t1-`), every checkpoint scored paired "
               "against the starting drafter and against its lambda-0 twin; a reference drafter scored against the "
               "start is written in the chart's corner (`bash scripts/exit_train_ablation.sh` writes "
               "ablation.json).")
    offered = [str(p) for p in (*committed_ablations(), *sorted(Path(runs_root).glob("*/ablation.json")))]
    if room_ui.in_room():  # no server path is typed in a room: the committed results, or one in the host's runs
        view.path = st.selectbox("ablation.json", offered, index=kept_choice(offered, view.path),
                                 key="et_ablation_path")
    else:
        choices = [*offered, OWN_FILE]
        picked = st.selectbox("ablation result", choices, index=kept_choice(
            choices, view.path if view.path in offered or view.path is None else OWN_FILE), key="et_ablation_pick")
        view.path = picked if picked != OWN_FILE else st.text_input(
            "ablation.json", value=view.path if view.path not in offered else "", key="et_ablation_path")
    path = Path(view.path)
    try:
        record = read_result(path)
        rows = ablation_rows(record, path)
    except ValueError as err:
        st.info(f"No ablation result to show: {err}. Run the script, then give its ablation.json here.")
        return
    if not rows:
        st.info(f"{path} holds no evaluated checkpoint yet.")
        return
    starts = sorted({str(arm.get("config", {}).get("init")) for arm in (record.settings.get("arms") or {}).values()})
    st.markdown(f"**What it found** (from {', '.join(starts) if starts else 'its start'}; a gain counts beyond two "
                "standard errors, clustered by prompt):\n" + "\n".join(f"- {s}" for s in ablation_finding(rows)))
    c1, c2, c3 = st.columns(3)
    choices = {name: sorted({r[name] for r in rows}) for name in ("against", "temperature", "budget")}
    against = view.against = c1.selectbox("gain over", choices["against"],
                                          index=kept_choice(choices["against"], view.against),
                                          key="et_ablation_against")
    temperature = view.temperature = c2.selectbox("T", choices["temperature"],
                                                  index=kept_choice(choices["temperature"], view.temperature),
                                                  key="et_ablation_t")
    budget = view.budget = c3.selectbox("budget", choices["budget"], index=kept_choice(choices["budget"], view.budget),
                                        key="et_ablation_b")
    st.plotly_chart(figures.ablation_figure(rows, against, temperature, budget), key="et_ablation_chart")
    table = pd.DataFrame([r for r in rows if (r["against"], r["temperature"], r["budget"]) == (against, temperature, budget)])
    shown = table[["arm", "step", "prompts", "positions", "baseline_length", "other_length", "gain_pct", "gain_se_pct"]]
    st.dataframe(shown.style.map(lambda arm: f"color: {figures.arm_colour(arm)}", subset=["arm"]), hide_index=True)
