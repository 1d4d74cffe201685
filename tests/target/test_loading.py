"""Loading any target: device and dtype choice, one-line errors for what cannot work, the CLI round trip."""

from __future__ import annotations

import pytest
import torch

from tevcore.cli import main
from tevcore.engine.flow import target_flow
from tevcore.engine.records import read_trace
from tevcore.target import devices
from tevcore.target.devices import dtype_runs_on, pick_device, pick_dtype
from tevcore.target.loading import encode_prompt, load_target
from tevcore.target.session import TargetSession


def test_auto_picks_cuda_when_present_and_float32_on_cpu():
    assert pick_device("auto").type == ("cuda" if torch.cuda.is_available() else "cpu")
    assert pick_dtype(torch.device("cpu"), "auto") == torch.float32
    assert dtype_runs_on(torch.device("cpu"), torch.float32)


@pytest.mark.parametrize("spec, message", [("bogus", "unknown device"), ("cuda:x", "unknown device"),
                                           ("mps", "unknown device")])
def test_unknown_devices_are_refused(spec, message):
    with pytest.raises(ValueError, match=message):
        pick_device(spec)


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_cuda_without_cuda_is_refused():
    with pytest.raises(ValueError, match="no CUDA device"):
        pick_device("cuda")


def test_a_dtype_the_cpu_cannot_run_is_refused(monkeypatch):
    with pytest.raises(ValueError, match="unknown dtype"):
        pick_dtype(torch.device("cpu"), "float8")
    monkeypatch.setattr(devices, "dtype_runs_on", lambda device, dtype: dtype == torch.float32)
    with pytest.raises(ValueError, match="cannot run on this CPU"):
        pick_dtype(torch.device("cpu"), "bfloat16")
    assert pick_dtype(torch.device("cpu"), "float32") == torch.float32


def test_the_dtype_probe_really_runs_the_kernels():
    """bfloat16 on this CPU: the probe's answer is what a bf16 matmul does here, not a fixed table."""
    try:
        torch.randn(4, 4).bfloat16() @ torch.randn(4, 4).bfloat16()
        works = True
    except RuntimeError:
        works = False
    assert dtype_runs_on(torch.device("cpu"), torch.bfloat16) == works


@pytest.fixture(scope="module")
def not_a_causal_lm(tmp_path_factory):
    from transformers import BertConfig

    folder = tmp_path_factory.mktemp("bert")
    BertConfig(vocab_size=64, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=16,
               architectures=["BertForMaskedLM"]).save_pretrained(folder)
    return folder


def test_bad_targets_give_one_line_errors(not_a_causal_lm, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    cases = [("someone/some-model", "offline.*local model folder or a .gguf path"),
             (str(not_a_causal_lm), "BertForMaskedLM model, not a causal LM"),
             (str(tmp_path / "missing"), "no model folder or .gguf file"),
             (str(tmp_path / "missing.gguf"), "GGUF file not found"),
             (str(tmp_path), "no config.json")]
    for spec, message in cases:
        with pytest.raises(ValueError, match=message) as caught:
            load_target(spec, device="cpu")
        assert "\n" not in str(caught.value)


def test_no_chat_template_falls_back_to_plain_text_once(tiny_model_folder, capsys, monkeypatch):
    from tevcore.target import loading

    monkeypatch.setattr(loading, "_PLAIN_TEXT_SAID", set())  # an earlier test may have used this model already
    target = load_target(str(tiny_model_folder("llama")), device="cpu")
    first, second = encode_prompt(target, "abc"), encode_prompt(target, "abc")
    assert first == second == target.tokenizer("abc")["input_ids"]
    assert capsys.readouterr().err.count("no chat template") == 1


@pytest.mark.parametrize("chat_template", [False, True])
def test_a_reply_follows_its_prompt_whose_ids_stay_a_prefix(tiny_model_folder, chat_template):
    """Teacher-forced training data (build-data) encodes prompt + reference answer on targets with and
    without a chat template; the prompt's ids must be a prefix so the first draft root is the prompt's end."""
    target = load_target(str(tiny_model_folder("llama", chat_template=chat_template)), device="cpu")
    prompt, whole = encode_prompt(target, "abc"), encode_prompt(target, "abc", reply="xyz")
    assert len(whole) > len(prompt) + 2
    if chat_template:  # the template opens the assistant's turn after the prompt; the reply goes in that turn
        assert target.tokenizer.decode(whole).count("xyz") == 1
    else:
        assert whole[:len(prompt)] == prompt and target.tokenizer.decode(whole[len(prompt):]) == "\nxyz"


@pytest.mark.parametrize("flags, message", [(["--device", "bogus"], "unknown device"),
                                            (["--dtype", "int3"], "unknown dtype"),
                                            (["--prompt", "x" * 600], "exceeds the model's context")])
def test_cli_refuses_bad_target_flags_with_exit_code_2(tiny_model_folder, tmp_path, capsys, flags, message):
    out = tmp_path / "never.jsonl"
    argv = ["round", "--target", str(tiny_model_folder("qwen3")), "--proposer", "rollout", "--prompt", "hi",
            "--out", str(out)] + flags
    assert main(argv) == 2
    assert message in capsys.readouterr().err and not out.exists()


def test_round_on_a_tiny_qwen3_writes_a_record_whose_flow_recomputes(tiny_model_folder, tmp_path):
    folder, out = tiny_model_folder("qwen3"), tmp_path / "round.jsonl"
    assert main(["round", "--target", str(folder), "--proposer", "rollout", "--prompt", "hello there",
                 "--temperature", "1", "--budget", "8", "--out", str(out)]) == 0
    record = read_trace(out).rounds[0]
    target = load_target(str(folder))
    ids = encode_prompt(target, "hello there")
    assert record.context_length == len(ids) and record.tree.size == 8
    session = TargetSession(target)
    session.prefill(ids)
    again = target_flow(record.tree, session.score_tree(record.tree).logits, record.temperature)
    for field in ("edge_prob", "path_prob", "exit_mass"):
        assert torch.allclose(getattr(record.flow, field), getattr(again, field), atol=1e-6), field


@pytest.mark.parametrize("chat_template", [False, True])
@pytest.mark.parametrize("prompt, reply, message", [
    ("caf\udce9", None, "the prompt is not valid UTF-8 text: character 4 is '\\\\udce9', a byte that is not UTF-8"),
    ("\ud83d", None, "the prompt is not valid UTF-8 text: character 1 is '\\\\ud83d', a lone surrogate"),
    ("fine", "bad \udfff", "the reply is not valid UTF-8 text: character 5"),
])
def test_text_a_tokenizer_cannot_take_is_refused_before_it(tiny_model_folder, chat_template, prompt, reply, message):
    target = load_target(str(tiny_model_folder("llama", chat_template=chat_template)), device="cpu")
    with pytest.raises(ValueError, match=message):
        encode_prompt(target, prompt, reply=reply)
