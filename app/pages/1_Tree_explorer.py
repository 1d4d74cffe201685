"""Tree explorer: run the target live (or one round at a time) and look inside every round."""

from __future__ import annotations

import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import shared_ui  # noqa: E402
import streamlit as st  # noqa: E402

import appdata  # noqa: E402
import explorer_sampled  # noqa: E402
import explorer_state  # noqa: E402
import figures  # noqa: E402
import inputs  # noqa: E402
import room_ui  # noqa: E402
from tevcore.config import DEFAULT_BUDGET, SAMPLING_TEMPERATURE, DecodeConfig  # noqa: E402
from tevcore.engine.sampling import MAX_SEED  # noqa: E402
from tevcore.proposers.lookup import SUFFIX as LOOKUP_SUFFIX  # noqa: E402
from tevcore.proposers.registry import proposer_specs, ready_specs  # noqa: E402

shared_ui.page_header("Tree explorer", "One speculative round at a time: the draft tree, where the target's mass "
                      "flows (colour = P(v), red ring = exit mass X(v)), the accepted path (orange), the exit node "
                      "(red star) and the bonus token (green diamond).")

ss = st.session_state
explorer = explorer_state.ExplorerSession.of(ss)
explorer.restore(ss)  # the settings this session chose here before it visited another page
ss.setdefault("ex_records", [])
ss.setdefault("ex_gen", None)
ss.setdefault("ex_done", False)
ss.setdefault("ex_source", None)
ss.setdefault("ex_seen", 0)

FAN_SHOWN = 6  # children the node-link tree draws per node before folding the rest of a fan into "+N more"

# ------------------------------------------------------------------ settings (sidebar)
with st.sidebar:
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
    default_text = dict(options)[picked]
    prompt = st.text_area("prompt (free text; edit freely)", value=default_text, height=120,
                          key=f"ex_prompt_{source}_{labels.index(picked)}")
    chat = st.checkbox("apply the chat template", value=True, key="ex_chat")
    st.header("Target")
    target_choice = room_ui.target_input(
        "target model", shared_ui.target_spec(), key="ex_target",
        help="'default' = the embedded SmolLM2-135M; or a hub id (from the local cache: the app runs offline), "
             "a local model folder or a .gguf file. Loaded once per process on the first Run or Step.")
    st.header("Decoding")
    # no min/max on the boxes: a typed number always reaches the script, and an out-of-range one is refused below
    # the explorer shows the sampled law (the engine decodes greedily by default): it opens at the sampling
    # temperature of the project's studies; the budget is the engine's
    temperature = st.number_input("temperature", value=SAMPLING_TEMPERATURE, step=0.1, key="ex_temp")
    budget = st.number_input("budget (tree nodes)", value=DEFAULT_BUDGET, step=1, key="ex_budget")
    builder, builder_problem, verifier = explorer_sampled.tree_choice()
    trim = st.selectbox("trim", ["off", "auto"], key="ex_trim",
                        help="off = score the whole drafted tree; auto = each round scores the prefix of its tree "
                             "with the most forecast tokens per forward cost measured on this machine (down to a "
                             "plain one-token step), as `--trim auto` does")
    seed = st.number_input("seed", value=DecodeConfig.default("seed"), step=1, key="ex_seed")
    max_new = st.number_input("max new tokens", value=48, step=8, key="ex_max_new")
    proposer_options = ready_specs()
    if ss.get("active_drafter"):  # a drafter trained on the ExitTrain page: alone, and with the context lookup
        proposer_options[:0] = [ss["active_drafter"], ss["active_drafter"] + LOOKUP_SUFFIX]
    env_choice = shared_ui.default_proposer_spec()
    if env_choice not in proposer_options:
        proposer_options.append(env_choice)
    first_choice = ss["active_drafter"] if ss.get("active_drafter") else env_choice
    proposer_options = room_ui.drafter_options(proposer_options)
    proposer_spec = st.selectbox("drafter", proposer_options, index=proposer_options.index(first_choice)
                                 if first_choice in proposer_options else 0, key="ex_proposer",
        help=f"{proposer_specs()}; a folder made active on the ExitTrain page is offered first")

LIMITS = room_ui.limits()  # the server's caps (generous on one's own machine, tight in a room)
RANGES = {"temperature": inputs.decode_range("temperature", 5.0),
          "budget": inputs.decode_range("budget", LIMITS.budget), "seed": inputs.decode_range("seed", MAX_SEED),
          "max_new_tokens": inputs.decode_range("max_new_tokens", LIMITS.new_tokens)}
input_problems = [problem for problem in (
    inputs.range_problem(label, value, RANGES[name]) for name, label, value in (
        ("temperature", "temperature", temperature), ("budget", "budget (tree nodes)", budget),
        ("seed", "seed", seed), ("max_new_tokens", "max new tokens", max_new))) if problem]
for problem in input_problems:
    st.sidebar.error(f"Refused: {problem}.")
settings = dict(target=target_choice, prompt=prompt, chat=chat, temperature=float(temperature), budget=int(budget),
                builder=builder,
                verifier=verifier, seed=int(seed), max_new_tokens=int(max_new), proposer=proposer_spec, trim=trim)
explorer.keep(ss)


def make_config():
    """The settings as a config: refused here, before any model loads (a bad builder, a trimmed sampled tree)."""
    if builder_problem:
        raise ValueError(builder_problem)
    return DecodeConfig(max_new_tokens=settings["max_new_tokens"], temperature=settings["temperature"],
                        budget=settings["budget"], builder=settings["builder"], verifier=settings["verifier"],
                        seed=settings["seed"], chat=settings["chat"], trim=settings["trim"])


def start_generation() -> bool:
    """A fresh generator for the current settings; False (with an error shown) if the inputs are invalid."""
    if not prompt.strip():
        st.error("The prompt is empty: pick an item or type a prompt.")
        return False
    try:
        config = room_ui.guarded.check_decode(LIMITS, make_config())
    except ValueError as err:
        st.error(f"Invalid settings: {err}")
        return False
    from tevcore.decoding.autobudget import trim_costs
    from tevcore.decoding.loop import prompt_ids, rounds  # loads transformers: only when a generation starts

    spec = target_choice
    if not spec:
        st.error("The target field is empty: type 'default', a hub id, a model folder or a .gguf path.")
        return False
    try:
        target = shared_ui.get_target(spec)
        proposer, note = shared_ui.proposer_with_fallback(proposer_spec, spec) if config.budget > 0 else (None, None)
        ids = prompt_ids(target, prompt, chat=chat)
        config = replace(config, tree_costs=trim_costs(target, [config.budget], config.trim)[config.budget])
    except Exception as err:  # a missing model file, a bad drafter folder, a prompt too long ...
        st.error(f"Could not start ({type(err).__name__}): {err}")
        return False
    if note:
        st.warning(note)
    ss.update(ex_gen=rounds(target, proposer, ids, config), ex_records=[], ex_done=False, ex_seen=0,
              ex_nodes={}, ex_clicks={}, ex_opened={}, ex_logits={},
              ex_settings=dict(settings), ex_prompt_ids=ids, ex_target_spec=spec, ex_source="live",
              ex_meta={"target": target.name, "prompt": prompt, "proposer": getattr(proposer, "name", None),
                       "config": {k: v for k, v in config.to_dict().items() if k != "stop_tokens"}},
              ex_proposer_note=note, ex_wall_start=time.perf_counter())
    return True


def advance(limit: int | None, live_slot=None) -> None:
    """Pull up to `limit` rounds (None = to the end) from the generator, streaming them into `live_slot`.

    Each round's tree and the text so far are drawn as the round arrives; the slot is emptied at the end.
    """
    gen = ss.ex_gen
    pulled = 0
    live_area = live_slot.container() if live_slot is not None else None
    progress = live_area.progress(0.0, text="decoding…") if live_area is not None else None
    tree_box = live_area.empty() if live_area is not None else None
    text_box = live_area.empty() if live_area is not None else None
    while limit is None or pulled < limit:
        try:
            record = next(gen)
        except StopIteration:
            ss.ex_done = True
            break
        except Exception as err:  # shown, never a traceback: the generation ends here
            st.error(f"The round failed ({type(err).__name__}): {err}")
            ss.ex_done = True
            break
        ss.ex_records.append(record)
        pulled += 1
        if progress is not None:
            made = sum(len(r.emitted_tokens) for r in ss.ex_records)
            progress.progress(min(1.0, made / settings["max_new_tokens"]),
                              text=f"round {record.index}: {made} tokens, block length {record.emitted}")
            tree_box.plotly_chart(figures.record_tree_figure(record, fan=FAN_SHOWN), key=f"ex_live_tree_{record.index}")
            text_box.markdown(figures.text_by_round_html(ss.ex_records), unsafe_allow_html=True)
    if live_slot is not None:
        live_slot.empty()


# ------------------------------------------------------------------ replay: open a trace
def open_trace(source: bytes | Path, name: str) -> None:
    """Replay a trace (uploaded bytes or a file): its rounds replace the session's, or an error is shown."""
    try:
        text_cap = room_ui.upload_text_cap(len(source), name) if isinstance(source, bytes) else LIMITS.text_bytes
        trace = appdata.load_trace(source, name, max_text_bytes=text_cap)
    except (ValueError, OSError, EOFError) as err:
        st.error(f"Could not open {name}: {err}")
        return
    ss.update(ex_gen=None, ex_records=trace.rounds, ex_done=True, ex_source=f"trace {name}",
              ex_meta=trace.meta, ex_seen=0, ex_prompt_ids=None, ex_nodes={}, ex_clicks={}, ex_opened={}, ex_logits={})


# ------------------------------------------------------------------ controls
c1, c2, c3, c4 = st.columns([1, 1, 1, 3])
blocked = bool(input_problems)  # a run never starts with a number other than the one shown
run_clicked = c1.button("▶ Run live", type="primary", key="ex_run", help="stream rounds to the end", disabled=blocked)
step_clicked = c2.button("⏭ Step one round", key="ex_step", disabled=blocked)
new_clicked = c3.button("⟲ New generation", key="ex_new", help="forget the rounds and start over")
if blocked:
    st.error("Run and Step wait for valid settings: " + "; ".join(input_problems) + ".")

with st.expander("Open a trace (replay without a model)", expanded=False):
    upload = st.file_uploader("trace file (.jsonl or .jsonl.gz)", type=["jsonl", "gz"], key="ex_upload")
    if upload is not None and ss.get("ex_upload_id") != upload.file_id:
        ss.ex_upload_id = upload.file_id
        open_trace(upload.getvalue(), upload.name)
    folder = room_ui.space().folder if room_ui.in_room() else Path(  # a room: only this session's own space
        st.text_input("or open a saved trace from a folder", value="traces", key="ex_open_folder"))
    saved = sorted(folder.glob("*.jsonl*")) if folder.is_dir() else []
    if saved:
        chosen = st.selectbox("saved traces", [p.name for p in saved], key="ex_open_pick")
        if st.button("Open", key="ex_open_btn"):
            open_trace(folder / chosen, chosen)

live_slot = st.empty()  # a live run's progress, tree and text
# everything below: every run first puts an empty element here, so during a live run the previous view (its tree
# included) is gone; the view is drawn into it once the rounds are in. The live run draws into another slot: an
# empty element and a block sent to one place back to back are merged into the block, which keeps the old tail.
body = st.empty()
if new_clicked:
    ss.update(ex_gen=None, ex_records=[], ex_done=False, ex_source=None, ex_seen=0, ex_nodes={}, ex_clicks={},
              ex_opened={}, ex_logits={})
if run_clicked or step_clicked:
    with room_ui.compute_turn():  # the server's one compute queue: the place in line shows while waiting
        fresh = (ss.ex_gen is None or ss.ex_done or ss.get("ex_settings") != settings)
        if not fresh or start_generation():
            advance(None if run_clicked else 1, live_slot if run_clicked else None)
else:
    changed = explorer_state.settings_changes(ss.get("ex_settings"), settings) if ss.ex_records and \
        ss.get("ex_source") == "live" else []
    if changed:
        c4.warning("The rounds shown came from other settings: " + "; ".join(changed) + ". The next Run or Step "
                   "starts a new generation with the settings on screen.")

# ------------------------------------------------------------------ the selected round
VIEW_KEYS = ("ex_nodes", "ex_clicks", "ex_opened")  # what a view error resets (with the round); the rounds stay


def pick_node(index: int, key: str) -> None:
    """The node selectbox changed: remember its choice for this round (typed, checked)."""
    value = ss.get(key)
    if explorer_state.valid_node(value, ss.ex_records[index].tree.num_nodes):
        ss.ex_nodes[index] = value


def show_round(record, index: int) -> None:
    """One round: the tree (a click selects a node or opens a folded fan), the metrics, the node's next-token law."""
    chosen = ss.setdefault("ex_nodes", {})
    clicks = ss.setdefault("ex_clicks", {})
    opened = ss.setdefault("ex_opened", {}).setdefault(index, set())
    num_nodes = record.tree.num_nodes
    chart_key = f"ex_tree_chart_{index}"  # a selection belongs to the round it was made on
    click = (explorer_state.clicked_node(ss.get(chart_key)), explorer_state.clicked_fold(ss.get(chart_key)))
    if click != clicks.get(index):  # a new click (not the old selection seen again)
        clicks[index] = click
        if explorer_state.valid_node(click[0], num_nodes):
            chosen[index] = click[0]
        if explorer_state.valid_node(click[1], num_nodes):
            opened.add(click[1])
    default = record.exit_node if record.exit_node is not None else 0
    node = explorer_state.node_for_round(chosen, index, num_nodes, default)
    node_key = f"ex_node_{index}"
    ss[node_key] = node  # set before the widget is drawn

    left, right = st.columns([3, 2])
    with left:
        link_tab, icicle_tab = st.tabs(["node-link tree", "icicle: where the mass leaves"])
        with link_tab:
            widest = max((len(kids) for kids in record.tree.children()), default=0)
            fan = None
            if widest > FAN_SHOWN + 1:
                f1, f2 = st.columns([3, 1])
                fan = f1.slider("children drawn per node (the rest of a fan folds into one '+N more' node)", 1,
                                widest, FAN_SHOWN, key="ex_fan",
                                help="the likeliest children by P(v) stay; the accepted path, the exit and the "
                                     "chosen node always do. Click a '+N more' node to open its fan.")
                if opened and f2.button("fold the opened fans", key=f"ex_fold_{index}"):
                    opened.clear()
            fig = figures.record_tree_figure(record, selected=node, fan=fan, opened=sorted(opened))
            st.plotly_chart(fig, key=chart_key, on_select="rerun", selection_mode="points",
                            config={"scrollZoom": True})
        with icicle_tab:
            st.plotly_chart(figures.record_icicle_figure(record), key="ex_icicle")
            st.caption("Each box is as wide as P(v); its children split it by their a, so the empty part under a "
                       "box is the mass X(v) that leaves the tree there. Orange outline: the accepted path; red "
                       "outline and ★: the exit node. Click a box to zoom into its subtree.")
    with right:
        m1, m2, m3, m4 = st.columns(4)  # short values only: a metric card truncates long ones; no deltas (no change)
        m1.metric("1 + C", f"{record.expected_length:.2f}", help="expected block length of this tree")
        m2.metric("block length", record.emitted, help="tokens this round emitted: depth(exit) + 1")
        m3.metric("tree nodes", record.tree.size, help="draft nodes, the root not counted (what the budget counts)")
        m4.metric("depth", record.tree.max_depth)
        st.markdown(f"**verifier** {record.verifier} · **exit node** {record.exit_node} · **bonus** "
                    f"`{record.bonus_text!r}` · **emitted** `{record.emitted_text!r}`")
        if record.trimmed:
            st.caption(f"✂ trimmed: the target scored the first {record.tree.size} of the {record.drafted_size} "
                       f"nodes drafted this round (trim auto keeps the prefix with the most forecast tokens per "
                       f"forward cost); the tree, 1 + C and the metrics above are those of the scored prefix.")
        elif record.drafted_size is not None:
            st.caption(f"trim auto kept all {record.drafted_size} drafted nodes this round.")
        texts = record.token_texts
        st.selectbox("node", list(range(num_nodes)), key=node_key, on_change=pick_node, args=(index, node_key),
                     format_func=lambda v: f"{v}: {texts[v]!r} (depth {int(record.tree.depths[v])})",
                     help="or click a node in the tree")
        drawn = figures.node_draws_text(record.tree, node)
        if drawn:
            st.caption(f"node {node}: {drawn}")
        rows = figures.node_distribution(record, node)
        st.plotly_chart(figures.next_token_figure(rows, f"p(.|node {node} {texts[node]!r}): tree children, "
                                                        "missing tokens, rest"), key="ex_node_chart")
        st.plotly_chart(figures.timings_figure(record), key="ex_timings")

    with st.expander("nodes of this round (table)", expanded=False):
        st.dataframe(figures.node_table(record), hide_index=True, key="ex_table")
    live = ss.get("ex_source") == "live" and ss.get("ex_prompt_ids") is not None
    seed_used = int(ss.get("ex_settings", settings)["seed"])
    explorer_sampled.show_draws_and_trail(record, index, round_logits, live, seed_used)


def round_logits(index: int):
    """Node logits of round `index`: kept ones, else the live round re-scored once (and kept)."""
    kept = ss.setdefault("ex_logits", {})
    if index not in kept:
        target = shared_ui.get_target(ss.ex_target_spec)
        kept[index] = appdata.rescored_logits(target, ss.ex_prompt_ids, ss.ex_records, index)[0]
    return kept[index]


def show_across_rounds(records) -> None:
    st.subheader("Across rounds")
    st.markdown(figures.text_by_round_html(records), unsafe_allow_html=True)
    a1, a2, a3 = st.columns(3)
    a1.plotly_chart(figures.emitted_figure(records), key="ex_emitted")
    a2.plotly_chart(figures.exit_depth_figure(records), key="ex_exit_depth")
    a3.plotly_chart(figures.speed_figure(records), key="ex_speed")
    for note in dict.fromkeys(appdata.over_draws_note(r.verifier) for r in records if r.verifier):
        if note:
            st.caption(f"Why a block can be longer than 1 + C: {note}")
    explorer_sampled.show_siblings(records)


def save_rounds(records) -> None:
    st.subheader("Save these rounds")
    meta = dict(ss.get("ex_meta") or {})
    s1, s2 = st.columns(2)
    with s1:
        # serialised only when clicked (a callable), so a render after each round stays cheap
        st.download_button("⬇ Download trace (.jsonl)", data=lambda: appdata.trace_bytes(records, meta),
                           file_name=f"trace-{time.strftime('%Y%m%d-%H%M%S')}.jsonl", mime="application/json",
                           key="ex_download")
    with s2:
        out_folder = room_ui.space().folder if room_ui.in_room() else st.text_input(
            "save to folder", value="traces", key="ex_save_folder")
        if st.button("💾 Save trace", key="ex_save"):
            from tevcore.engine.records import write_trace

            try:
                folder = Path(out_folder)
                folder.mkdir(parents=True, exist_ok=True)
                path = write_trace(folder / f"trace-{time.strftime('%Y%m%d-%H%M%S')}.jsonl.gz", records, meta)
            except OSError as err:
                st.error(f"Could not save: {err}")
            else:
                st.success(f"saved {path}")


def show_view() -> None:
    """The rounds so far: the chosen round up close, the rounds together, saving."""
    records = ss.ex_records
    if not records:
        st.info("Press **Run live** to stream a generation, **Step one round** to go one round at a time, "
                "or open a trace. The first run loads the target model (a few seconds).")
        return
    if ss.get("ex_proposer_note"):
        st.caption(ss.ex_proposer_note)
    st.caption(f"source: {ss.ex_source} · drafter: {records[-1].proposer} · {len(records)} rounds · "
               f"{'finished' if ss.ex_done else 'in progress (Step or Run for more)'}")
    if str(ss.ex_source).startswith("trace"):
        st.info(appdata.trace_settings_text(ss.get("ex_meta"), records))
    if ss.ex_seen != len(records):  # new rounds arrived: follow the latest
        ss.ex_round = len(records) - 1
        ss.ex_seen = len(records)
    if len(records) > 1:
        st.slider("round", 0, len(records) - 1, key="ex_round")
    index = ss.get("ex_round", len(records) - 1)
    index = min(max(index, 0), len(records) - 1) if isinstance(index, int) else len(records) - 1
    ss.ex_selected_round = index  # read by the verifier comparison page
    try:
        show_round(records[index], index)
        show_across_rounds(records)
    except Exception as err:  # a broken view never loses the rounds: say what failed, reset the view only
        st.error(f"This view failed ({type(err).__name__}: {err}). The {len(records)} rounds are kept; the view "
                 "(round, chosen node) was reset, so the next action draws it afresh.")
        for key in VIEW_KEYS:
            ss.pop(key, None)
        ss.ex_seen = -1  # the next run shows the latest round again
    save_rounds(records)


with body.container():
    show_view()
