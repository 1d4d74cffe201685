"""The workshop's coupling preset (streamlit): a fixed guess against a draw from q verified by rrs, at depth 1.

The laws come from `appdata.coupling` (the engine's flow and rrs's law), the
empirical rates from the studio's `tevcore.studio.workshop.coupling_rounds`
(under the server's cap, in a compute-queue turn); this module lays out the
numbers and figures.
"""

from __future__ import annotations

import streamlit as st

import appdata
import figures
import room_ui

from tevcore.engine.sampling import MAX_SEED
from tevcore.studio import workshop as studio_workshop

EXPLANATION = (
    "**Why sampling can win.** A fixed tree holds one guess, the drafter's argmax *x*; the target's sample starts "
    "with *x* with probability *p(x)*, and no rule that is exact given the tree can accept *x* more often. A node "
    "drawn from *q* is another matter: recursive rejection accepts the drawn token with *min(1, p/q)*, so over the "
    "draw it is accepted with *Σ min(p, q) = 1 − TV(p, q)*, the mass where the two rows overlap. With p = q "
    "uniform over 10 tokens that is 0.1 against 1.0. With a sharp target the fixed argmax is already right most of "
    "the time and the draw only adds noise; with a poor drafter little mass overlaps: then the fixed guess wins.")


def show(ss, found: appdata.Coupling) -> None:
    """Both laws as numbers and bars, p and q side by side, and (on demand) the empirical rates over rounds."""
    m1, m2, m3 = st.columns(3)
    m1.metric("fixed guess x (drafter's argmax)", figures.short(found.vocab[found.guess], 14))
    m2.metric("fixed node accepted: p(x)", f"{found.fixed_accept:.4f}")
    m3.metric("sampled node + rrs: 1 − TV(p, q)", f"{found.sampled_accept:.4f}")
    shown = [i for i in range(1, len(found.vocab)) if found.p[i] > 0 or found.q[i] > 0]  # not the root
    st.plotly_chart(figures.coupling_figure([figures.short(found.vocab[i], 12) for i in shown],
                                            found.p[shown].tolist(), found.q[shown].tolist(),
                                            shown.index(found.guess)), key="ws_coupling_rows")
    c1, c2, c3 = st.columns([1, 1, 2])
    rounds = int(c1.number_input("rounds", 100, 20_000, 1_000, step=100, key="ws_c_rounds"))
    seed = int(c2.number_input("seed", 0, MAX_SEED, 0, key="ws_c_seed"))
    signature = (tuple(found.vocab), tuple(found.p.tolist()), tuple(found.q.tolist()), rounds, seed)
    if c3.button("▶ Draw the rounds", key="ws_c_run",
                 help="the fixed node verified by TEV, and a fresh node drawn from q by the sampled builder "
                      "(sampled:1) in every round, verified by rrs"):
        room_ui.check(room_ui.guarded.check_coupling, rounds)
        with st.spinner(f"{rounds:,} rounds of each…"), room_ui.seat() as asking:
            ss.ws_c_rates = (signature, studio_workshop.coupling_rounds(asking, found.fixed_tree, found.p, found.q,
                                                                        rounds, seed))
    stored = ss.get("ws_c_rates")
    rates = stored[1] if stored and stored[0] == signature else None
    laws = {"fixed guess + TEV": found.fixed_accept, "sampled draw + rrs": found.sampled_accept}
    st.plotly_chart(figures.acceptance_figure(laws, rates), key="ws_coupling_accept")
    if rates:
        st.caption(" · ".join(f"{name}: accepted in {rate:.4f} ± {se:.4f} of {rounds:,} rounds"
                              for name, (rate, se) in rates.items()))
    else:
        st.caption("Press **Draw the rounds** to add the engine's empirical rates to the laws.")
    st.markdown(EXPLANATION)
