"""The explorer's sidebar (streamlit): prompt, target, decoding settings and drafter, read into one
`ExplorerSettings`, and the refusals of the numbers out of range.

The widget keys (`ex_*`) live here and in `explorer_state.SETTING_KEYS`, which
carries their values across pages; nothing else reads them.
"""

from __future__ import annotations

import streamlit as st

import explorer_sampled
import inputs
import room_ui
import shared_ui
from explorer_state import DRAFTER_KEY, ExplorerSettings
from tevcore.config import DEFAULT_BUDGET, SAMPLING_TEMPERATURE, DecodeConfig
from tevcore.studio import models
from tevcore.studio.rules import MAX_SEED


def _prompt() -> tuple[str, bool]:
    """The prompt text (a set's item, edited freely) and whether the chat template wraps it."""
    st.header("Prompt")
    source = st.selectbox("prompt source", list(shared_ui.PROMPT_SETS), key="ex_set")
    if source == "examples":
        options = list(shared_ui.EXAMPLE_PROMPTS.items())
    else:
        try:
            options = shared_ui.prompt_items(shared_ui.PROMPT_SETS[source])
        except Exception as err:  # dataset file or wheel missing
            st.error(f"could not load {source}: {err}")
            options = list(shared_ui.EXAMPLE_PROMPTS.items())
    labels = [label for label, _ in options]
    picked = st.selectbox("item", labels, key=f"ex_item_{source}")
    prompt = st.text_area("prompt (free text; edit freely)", value=dict(options)[picked], height=120,
                          key=f"ex_prompt_{source}_{labels.index(picked)}")
    chat = st.checkbox("apply the chat template", value=True, key="ex_chat")
    return prompt, chat


def _drafter(active_drafter: str | None) -> str:
    """The drafter: a folder made active on the ExitTrain page first (alone, and with the context lookup)."""
    options = models.drafter_choices(active_drafter)
    env_choice = shared_ui.default_proposer_spec()
    if env_choice not in options:
        options.append(env_choice)
    first_choice = active_drafter or env_choice
    options = room_ui.drafter_options(options)
    return st.selectbox("drafter", options, index=options.index(first_choice) if first_choice in options else 0,
                        key=DRAFTER_KEY,
                        help=f"{models.drafters_help()}; a folder made active on the ExitTrain page is offered first")


def settings_sidebar(active_drafter: str | None) -> tuple[ExplorerSettings, list[str]]:
    """Draw the sidebar; the settings it chose and the refusal of each number out of range (shown there too)."""
    with st.sidebar:
        prompt, chat = _prompt()
        st.header("Target")
        target = room_ui.target_input(
            "target model", shared_ui.target_spec(), key="ex_target",
            help="'default' = the embedded SmolLM2-135M; or a hub id (from the local cache: the app runs offline), "
                 "a local model folder or a .gguf file. Loaded once per process on the first Run or Step.")
        st.header("Decoding")
        # no min/max on the boxes: a typed number always reaches the script, and an out-of-range one is refused
        # below. The explorer shows the sampled law (the engine decodes greedily by default): it opens at the
        # sampling temperature of the project's studies; the budget is the engine's
        temperature = st.number_input("temperature", value=SAMPLING_TEMPERATURE, step=0.1, key="ex_temp")
        budget = st.number_input("budget (tree nodes)", value=DEFAULT_BUDGET, step=1, key="ex_budget")
        builder, builder_problem, verifier = explorer_sampled.tree_choice()
        trim = st.selectbox("trim", ["off", "auto"], key="ex_trim",
                            help="off = score the whole drafted tree; auto = each round scores the prefix of its "
                                 "tree with the most forecast tokens per forward cost measured on this machine (down "
                                 "to a plain one-token step), as `--trim auto` does")
        seed = st.number_input("seed", value=DecodeConfig.default("seed"), step=1, key="ex_seed")
        max_new = st.number_input("max new tokens", value=48, step=8, key="ex_max_new")
        proposer = _drafter(active_drafter)
    limits = room_ui.limits()  # the server's caps (generous on one's own machine, tight in a room)
    problems = inputs.range_problems([
        ("temperature", temperature, inputs.decode_range("temperature", 5.0)),
        ("budget (tree nodes)", budget, inputs.decode_range("budget", limits.budget)),
        ("seed", seed, inputs.decode_range("seed", MAX_SEED)),
        ("max new tokens", max_new, inputs.decode_range("max_new_tokens", limits.new_tokens))])
    for problem in problems:
        st.sidebar.error(f"Refused: {problem}.")
    settings = ExplorerSettings(target=target, prompt=prompt, chat=chat, temperature=float(temperature),
                                budget=int(budget), builder=builder, verifier=verifier, seed=int(seed),
                                max_new_tokens=int(max_new), proposer=proposer, trim=trim,
                                builder_problem=builder_problem)
    return settings, problems
