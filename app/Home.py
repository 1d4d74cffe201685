"""Entry page of the TEV app: `streamlit run app/Home.py`."""

from __future__ import annotations

import shared_ui  # noqa: F401  (path and environment setup)
import streamlit as st

from tevcore.studio.claims import TEV_EXPANDED, bound_claim

shared_ui.page_header("Tree speculative decoding you can see",
                      "Draft trees, target flow, exact verifiers and ExitTrain — on a real small target.")

st.markdown(
    f"""
One speculative round: a **drafter** proposes, a **builder** makes a draft **tree**, the **target** scores
every node in one forward pass, and a **verifier** (such as {TEV_EXPANDED}) accepts a root path (ending at the
**exit node**) plus one **bonus token**. The target's probability mass flows down the tree: `P(v)` reaches node
`v`; `m(v)` is the share of it that goes on into one of `v`'s children (the sum of the children's target
probabilities), and the rest, `X(v) = P(v)(1 - m(v))`, leaves the tree at `v`. An exact, optimal verifier exits at
`v` with probability `X(v)`, and its mean block length is `1 + C`, where `C` is the sum of `P` over the tree.
{bound_claim()}

**Pages**
"""
)
cols = st.columns(5)
pages = [
    ("pages/1_Tree_explorer.py", "Tree explorer", "Run the target live or step one round at a time; see each tree, "
     "its flow, the accepted path and the bonus; save and replay traces."),
    ("pages/2_Verifier_comparison.py", "Verifier comparison", "Every verifier on one tree, 10⁵ draws each: exit "
     "law, block lengths, bonus law, χ² tests, latency; many fresh sampled trees at one context (rrs and block "
     "beside TEV); end-to-end benchmark files."),
    ("pages/3_ExitTrain.py", "ExitTrain", "Train a drafter on the trees it really builds, watch the curves, "
     "compare checkpoints and make one the explorer's drafter."),
    ("pages/4_Exit_law_workshop.py", "Exit-law workshop", "Edit a small tree and its target probabilities by "
     "hand; watch P, m, X and 1 + C change; step through two verifiers. No model needed."),
    ("pages/5_Lessons.py", "Lessons", "Seven short lessons on the exit law: commit a prediction, run, check it and "
     "see why. In a workshop room the host sees the room's answers. No model needed."),
]
for col, (path, label, text) in zip(cols, pages):
    with col:
        st.page_link(path, label=label)
        st.caption(text)

st.info("The target model loads once per process, on the first page that needs it "
        "(the explorer, or the verifier comparison on a live round). The workshop and trace replay need no model.")
