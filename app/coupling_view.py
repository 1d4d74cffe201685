"""The workshop's coupling preset (streamlit): a fixed guess against a draw from q verified by rrs, at depth 1.

The laws come from the studio (`tevcore.studio.coupling`, the engine's flow and rrs's law), the empirical rates
from `tevcore.studio.workshop.coupling_rounds` (under the server's cap, in a compute-queue turn); this module lays
out the numbers and figures, the rates kept in the workshop's state with the settings they were drawn with.
"""

from __future__ import annotations

import streamlit as st

import figures
import room_ui
from comparison_state import Made, changes
from kept_widgets import within
from tevcore.studio import workshop as studio_workshop
from tevcore.studio.coupling import Coupling
from tevcore.studio.rules import MAX_SEED
from workshop_state import WorkshopSession

EXPLANATION = (
    "**Why sampling can win.** A fixed tree holds one guess, the drafter's argmax *x*; the target's sample starts "
    "with *x* with probability *p(x)*, and no rule that is exact given the tree can accept *x* more often. A node "
    "drawn from *q* is another matter: recursive rejection accepts the drawn token with *min(1, p/q)*, so over the "
    "draw it is accepted with *Σ min(p, q) = 1 − TV(p, q)*, the mass where the two rows overlap. With p = q "
    "uniform over 10 tokens that is 0.1 against 1.0. With a sharp target the fixed argmax is already right most of "
    "the time and the draw only adds noise; with a poor drafter little mass overlaps: then the fixed guess wins.")


def show(state: WorkshopSession, found: Coupling, table: str) -> None:
    """Both laws as numbers and bars, p and q side by side, and (on demand) the empirical rates over rounds."""
    m1, m2, m3 = st.columns(3)
    m1.metric("fixed guess x (drafter's argmax)", figures.short(found.vocab[found.guess], 14))
    m2.metric("fixed node accepted: p(x)", f"{found.fixed_accept:.4f}")
    m3.metric("sampled node + rrs: 1 − TV(p, q)", f"{found.sampled_accept:.4f}")
    shown = [i for i in range(1, len(found.vocab)) if found.p[i] > 0 or found.q[i] > 0]  # not the root
    st.plotly_chart(figures.coupling_figure([figures.short(found.vocab[i], 12) for i in shown],
                                            found.p[shown].tolist(), found.q[shown].tolist(),
                                            shown.index(found.guess)), key="ws_coupling_rows")
    w = state.widgets
    c1, c2, c3 = st.columns([1, 1, 2])
    rounds = int(w.kept("ws_c_rounds", c1.number_input("rounds", 100, 20_000, step=100, **w.args(
        "ws_c_rounds", 1_000, within(100, 20_000)))))
    seed = int(w.kept("ws_c_seed", c2.number_input("seed", 0, MAX_SEED, **w.args("ws_c_seed", 0,
                                                                                     within(0, MAX_SEED)))))
    key = (table, rounds, seed)
    words = {"table": "the table as it was", "rounds": f"{rounds:,}", "seed": str(seed)}
    if c3.button("▶ Draw the rounds", key="ws_c_run",
                 help="the fixed node verified by TEV, and a fresh node drawn from q by the sampled builder "
                      "(sampled:1) in every round, verified by rrs"):
        room_ui.check(room_ui.guarded.check_coupling, rounds)
        with st.spinner(f"{rounds:,} rounds of each…"), room_ui.seat() as asking:
            state.rates = Made(key, words, studio_workshop.coupling_rounds(asking, found.fixed_tree, found.p,
                                                                           found.q, rounds, seed))
    made = state.rates if state.rates is not None and state.rates.key[0] == table else None
    rates = made.value if made is not None else None
    laws = {"fixed guess + TEV": found.fixed_accept, "sampled draw + rrs": found.sampled_accept}
    st.plotly_chart(figures.acceptance_figure(laws, rates), key="ws_coupling_accept")
    if made is not None:
        if made.key != key:
            st.warning("The rates shown were drawn with other settings: " + "; ".join(changes(made, words))
                       + ". Press **Draw the rounds** to draw them with the settings above.")
        st.caption(" · ".join(f"{name}: accepted in {rate:.4f} ± {se:.4f} of {made.settings['rounds']} rounds"
                              for name, (rate, se) in rates.items()))
    else:
        st.caption("Press **Draw the rounds** to add the engine's empirical rates to the laws.")
    st.markdown(EXPLANATION)
