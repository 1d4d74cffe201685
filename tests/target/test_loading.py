"""Loading any target: device and dtype choice, one-line errors for what cannot work, the CLI round trip."""

from __future__ import annotations

from pathlib import Path

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


# ---------------------------------------------------------------- the converted-model cache
# TEVCORE_CACHE always points into the test's own folder: the real ~/.cache/tevcore is never touched.

@pytest.fixture(scope="module")
def tiny_gguf(tmp_path_factory):
    from tiny_models import save_tiny_gguf

    return save_tiny_gguf(tmp_path_factory.mktemp("gguf") / "tiny.gguf")


@pytest.fixture
def cache(tmp_path, monkeypatch):
    folder = tmp_path / "cache"
    monkeypatch.setenv("TEVCORE_CACHE", str(folder))
    return folder


def _logits(target) -> torch.Tensor:
    return target.model(torch.tensor([[3, 4, 5, 6]])).logits


def _conversion(cache_folder):
    (found,) = [p for p in cache_folder.iterdir() if p.name.startswith("tiny-")]
    return found


def _no_conversion_allowed(monkeypatch):
    import tevcore.target.loading as loading

    def refuse(*args):
        raise AssertionError("converted although it could not be cached")

    monkeypatch.setattr(loading, "_convert_into", refuse)


@pytest.fixture
def converted(tiny_gguf, cache):
    """(the cache entry, the logits of a target loaded from it) after one conversion."""
    target = load_target(str(tiny_gguf), device="cpu")
    entry = _conversion(cache)
    assert (entry / "tevcore-converted.json").is_file() and not list(cache.glob(".*.partial"))
    return entry, _logits(target)


def test_a_cached_conversion_is_reused_without_converting(converted, tiny_gguf, monkeypatch, capsys):
    entry, logits = converted
    _no_conversion_allowed(monkeypatch)
    capsys.readouterr()
    assert torch.equal(_logits(load_target(str(tiny_gguf), device="cpu")), logits)
    assert "note:" not in capsys.readouterr().err


def _flip_a_weight_byte(entry):
    weights = entry / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-3] ^= 0x40  # inside the last tensor: the header reads, the size is unchanged
    weights.write_bytes(bytes(data))


def _drop_the_record_then_truncate(entry):  # a conversion cached before records were kept, then damaged
    (entry / "tevcore-converted.json").unlink()
    (entry / "model.safetensors").write_bytes((entry / "model.safetensors").read_bytes()[:-64])


DAMAGE = {
    "truncated-weights": lambda e: (e / "model.safetensors").write_bytes((e / "model.safetensors").read_bytes()[:5000]),
    "empty-weights": lambda e: (e / "model.safetensors").write_bytes(b""),
    "missing-weights": lambda e: (e / "model.safetensors").unlink(),
    "changed-weights": _flip_a_weight_byte,
    "config-not-json": lambda e: (e / "config.json").write_text('{"model_type": "llama",'),
    "config-missing": lambda e: (e / "config.json").unlink(),
    "tokenizer-missing": lambda e: (e / "tokenizer.json").unlink(),
    "tokenizer-config-damaged": lambda e: (e / "tokenizer_config.json").write_text("[]"),
    "unrecorded-and-truncated": _drop_the_record_then_truncate,
}


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_a_damaged_conversion_is_named_and_converted_again(damage, converted, tiny_gguf, capsys):
    entry, logits = converted
    DAMAGE[damage](entry)
    capsys.readouterr()
    target = load_target(str(tiny_gguf), device="cpu")
    err = capsys.readouterr().err
    assert f"note: the converted model in {entry} is damaged (" in err and "converting it again" in err
    assert torch.equal(_logits(target), logits)  # the same weights as the first conversion
    load_target(str(tiny_gguf), device="cpu")
    assert "damaged" not in capsys.readouterr().err


def _cache_is_a_file(cache):
    cache.write_text("not a folder")


def _cache_under_a_file(cache):
    cache.parent.joinpath("file").write_text("x")
    return cache.parent / "file" / "cache"


def _cache_in_proc(cache):
    return "/proc/self/tevcore-cache"  # no process, root included, can make a folder there


def _refuse_writes(monkeypatch):
    """Writing in the cache folder is refused, as in another user's folder (permission bits do not stop root)."""
    import tevcore.target.converted_cache as converted_cache

    def refused(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(converted_cache.tempfile, "TemporaryFile", refused)


def _cache_not_writable(cache, monkeypatch):
    cache.mkdir()
    _refuse_writes(monkeypatch)


@pytest.mark.parametrize("place", ["a-file", "under-a-file", "in-proc", "not-writable"])
def test_a_cache_that_cannot_be_written_is_found_before_converting_and_the_gguf_is_read_directly(
        place, tiny_gguf, cache, tmp_path, monkeypatch, capsys):
    reference = _logits(load_target(str(tiny_gguf), device="cpu"))  # converted once into a good cache
    import shutil

    shutil.rmtree(cache)
    setting = {"a-file": _cache_is_a_file, "under-a-file": _cache_under_a_file, "in-proc": _cache_in_proc,
               "not-writable": lambda c: _cache_not_writable(c, monkeypatch)}[place](cache)
    if setting is not None:
        monkeypatch.setenv("TEVCORE_CACHE", str(setting))
    _no_conversion_allowed(monkeypatch)
    capsys.readouterr()
    target = load_target(str(tiny_gguf), device="cpu")
    err = capsys.readouterr().err
    assert f"note: cannot cache the converted tiny.gguf in TEVCORE_CACHE={setting or cache}" in err
    assert "reading the GGUF file directly" in err
    assert torch.equal(_logits(target), reference)


def test_a_damaged_conversion_in_a_cache_that_cannot_be_written_says_what_to_delete(
        converted, tiny_gguf, cache, monkeypatch, capsys):
    entry, logits = converted
    (entry / "model.safetensors").write_bytes(b"")
    _refuse_writes(monkeypatch)
    capsys.readouterr()
    target = load_target(str(tiny_gguf), device="cpu")
    err = capsys.readouterr().err
    assert "it cannot be rebuilt" in err and f"delete {entry}" in err and torch.equal(_logits(target), logits)


def test_a_full_disk_while_caching_reads_the_gguf_directly_and_leaves_no_partial_conversion(
        tiny_gguf, cache, monkeypatch, capsys):
    import errno

    import tevcore.target.loading as loading

    def full(folder):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(loading, "record_conversion", full)
    target = load_target(str(tiny_gguf), device="cpu")
    assert "No space left on device; reading the GGUF file directly" in capsys.readouterr().err
    assert target.vocab_size == 97 and not list(cache.iterdir())


@pytest.mark.parametrize("spoil", ["truncated", "empty"])
def test_damaged_weights_in_a_model_folder_are_one_line_naming_the_folder(spoil, tiny_model_folder, tmp_path):
    import shutil

    folder = shutil.copytree(tiny_model_folder("llama"), tmp_path / "model")
    weights = folder / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000] if spoil == "truncated" else b"")
    with pytest.raises(ValueError, match=f"cannot load the weights of model from {folder}") as caught:
        load_target(str(folder), device="cpu")
    assert "\n" not in str(caught.value)


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


def _unreadable_by_this_user(monkeypatch, folder: Path) -> None:
    """`folder` as another user's cache of mode 0700 looks to this one (the tests run as root, whom permission
    bits do not stop): listing it or opening anything inside fails with EACCES, and a file in it is not found."""
    import builtins
    import errno
    import os

    def inside(path) -> bool:
        return Path(path).resolve().is_relative_to(folder.resolve()) and Path(path).resolve() != folder.resolve()

    def denied(path):
        return PermissionError(errno.EACCES, "Permission denied", str(path))

    real_open, real_listdir, real_is_file = builtins.open, os.listdir, Path.is_file
    real_read_text, real_read_bytes = Path.read_text, Path.read_bytes

    def opening(path, *args, **kwargs):
        if isinstance(path, (str, Path)) and inside(path):
            raise denied(path)
        return real_open(path, *args, **kwargs)

    def listing(path="."):
        if Path(path).resolve() == folder.resolve():
            raise denied(path)
        return real_listdir(path)

    def guarded(real):
        def read(self, *args, **kwargs):
            if inside(self):
                raise denied(self)
            return real(self, *args, **kwargs)
        return read

    monkeypatch.setattr(builtins, "open", opening)
    monkeypatch.setattr(os, "listdir", listing)
    monkeypatch.setattr(Path, "is_file", lambda self: False if inside(self) else real_is_file(self))
    monkeypatch.setattr(Path, "read_text", guarded(real_read_text))
    monkeypatch.setattr(Path, "read_bytes", guarded(real_read_bytes))


def test_another_users_healthy_cache_is_not_called_damaged_and_the_gguf_is_read_directly(
        converted, tiny_gguf, monkeypatch, capsys):
    entry, logits = converted
    _no_conversion_allowed(monkeypatch)
    _unreadable_by_this_user(monkeypatch, entry)
    capsys.readouterr()
    target = load_target(str(tiny_gguf), device="cpu")
    err = capsys.readouterr().err
    assert "damaged" not in err and f"note: {entry} cannot be read by this user (" in err
    assert "reading the GGUF file directly" in err and "TEVCORE_CACHE" in err
    monkeypatch.undo()
    assert torch.equal(_logits(target), logits)
