"""The built-in tiny model: deterministic, loadable, and the same model in both formats."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import gguf
import numpy as np
import pytest
from safetensors import safe_open
from tokenizers import Tokenizer

from bench.setup.tinymodel import RECIPE_VERSION, TinyModel, build, chat_template, ensure_tiny_model, render_chat
from bench.setup.tinymodel.build import MARKER

HF_FILES = {
    "chat_template.jinja", "config.json", "generation_config.json", "model.safetensors",
    "special_tokens_map.json", "tokenizer.json", "tokenizer_config.json",
}
DEFAULT_SYSTEM = "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather for a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> TinyModel:
    return build(tmp_path_factory.mktemp("tiny"))


def _files(root: Path) -> dict[str, bytes]:
    return {path.relative_to(root).as_posix(): path.read_bytes() for path in sorted(root.rglob("*")) if path.is_file()}


def test_two_builds_are_byte_identical(built: TinyModel, tmp_path: Path) -> None:
    again = build(tmp_path / "again")
    first, second = _files(built.root), _files(again.root)
    assert set(first) == {f"hf/{name}" for name in HF_FILES} | {"tiny.gguf"}
    assert set(second) == set(first)
    for name in first:
        assert first[name] == second[name], f"{name} differs between builds"
    assert again.digest == built.digest and len(built.digest) == 64


def test_json_files_have_sorted_keys_and_a_trailing_newline(built: TinyModel) -> None:
    for path in built.hf_dir.glob("*.json"):
        text = path.read_text(encoding="utf-8")
        assert text == json.dumps(json.loads(text), indent=2, sort_keys=True, ensure_ascii=False) + "\n", path.name


def test_tokenizer_round_trips_and_has_the_chatml_specials(built: TinyModel) -> None:
    tokenizer = Tokenizer.from_file(str(built.hf_dir / "tokenizer.json"))
    assert tokenizer.get_vocab_size() == 2048
    samples = ["Hello, world!", "  two  spaces\tand a tab\n", "Zürich → 東京 🚀", 'def f(x):\n    return {"a": x}']
    for text in samples:
        ids = tokenizer.encode(text).ids
        assert tokenizer.decode(ids) == text
        assert ids[0] != 0  # no BOS added
    assert tokenizer.encode("<|im_start|>user\nhi<|im_end|>").ids[0] == 1
    assert tokenizer.encode("<|im_start|>user\nhi<|im_end|>").ids[-1] == 2
    assert tokenizer.token_to_id("<|endoftext|>") == 0
    assert len(tokenizer.encode("<tool_call>").ids) > 1  # a single token makes llama-server answer 500


def test_template_plain_chat() -> None:
    messages = [{"role": "user", "content": "hi"}]
    assert render_chat(messages, add_generation_prompt=True) == (
        DEFAULT_SYSTEM + "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    )
    assert render_chat(messages) == DEFAULT_SYSTEM + "<|im_start|>user\nhi<|im_end|>\n"


def test_template_system_and_user() -> None:
    rendered = render_chat([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}])
    assert rendered == "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n"


def test_template_tools_section() -> None:
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Weather?"}]
    rendered = render_chat(messages, [WEATHER_TOOL], add_generation_prompt=True)
    assert rendered.startswith("<|im_start|>system\nBe brief.\n\n# Tools\n\n")
    assert "<tools>\n" + json.dumps(WEATHER_TOOL) + "\n</tools>" in rendered  # key order kept, as servers do
    instruction = '<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>'
    assert instruction + "<|im_end|>\n" in rendered
    assert rendered.count("<|im_start|>system") == 1
    assert rendered.endswith("<|im_start|>user\nWeather?<|im_end|>\n<|im_start|>assistant\n")
    without_system = render_chat([{"role": "user", "content": "Weather?"}], [WEATHER_TOOL])
    assert without_system.startswith("<|im_start|>system\nYou are a helpful assistant.\n\n# Tools\n")


def test_template_tool_calls_and_tool_responses() -> None:
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "Weather in Zürich and Bern?"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "a", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Zürich"}'}},
            {"id": "b", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Bern"}}},
        ]},
        {"role": "tool", "tool_call_id": "a", "content": '{"t": 3}'},
        {"role": "tool", "tool_call_id": "b", "content": '{"t": 5}'},
        {"role": "assistant", "content": "Cold in both."},
    ]
    rendered = render_chat(messages, [WEATHER_TOOL], add_generation_prompt=True)
    assert (
        '<|im_start|>assistant\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Zürich"}}\n</tool_call>'
        '\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Bern"}}\n</tool_call><|im_end|>\n'
    ) in rendered
    assert (
        '<|im_start|>user\n<tool_response>\n{"t": 3}\n</tool_response>'
        '\n<tool_response>\n{"t": 5}\n</tool_response><|im_end|>\n'
        "<|im_start|>assistant\nCold in both.<|im_end|>\n<|im_start|>assistant\n"
    ) in rendered
    assert "None" not in rendered


def test_template_is_the_same_everywhere(built: TinyModel) -> None:
    template = chat_template()
    assert (built.hf_dir / "chat_template.jinja").read_text(encoding="utf-8") == template
    assert json.loads((built.hf_dir / "tokenizer_config.json").read_text())["chat_template"] == template
    assert gguf.GGUFReader(built.gguf_path).fields["tokenizer.chat_template"].contents() == template


def test_hf_config_and_tokenizer_config(built: TinyModel) -> None:
    config = json.loads((built.hf_dir / "config.json").read_text())
    assert config["architectures"] == ["LlamaForCausalLM"] and config["model_type"] == "llama"
    assert (config["rope_theta"], config["torch_dtype"], config["eos_token_id"]) == (10000.0, "float32", [2, 0])
    generation = json.loads((built.hf_dir / "generation_config.json").read_text())
    assert generation["do_sample"] is True and generation["temperature"] == 1.0
    tok_config = json.loads((built.hf_dir / "tokenizer_config.json").read_text())
    assert (tok_config["eos_token"], tok_config["pad_token"], tok_config["model_max_length"]) == (
        "<|im_end|>", "<|endoftext|>", 32768)
    assert tok_config["add_bos_token"] is False and tok_config["tokenizer_class"] == "PreTrainedTokenizerFast"


def _expected_hf_shapes(config: dict) -> dict[str, tuple[int, ...]]:
    h, ff, hd = config["hidden_size"], config["intermediate_size"], config["head_dim"]
    q, kv = config["num_attention_heads"] * hd, config["num_key_value_heads"] * hd
    shapes = {"model.embed_tokens.weight": (config["vocab_size"], h), "model.norm.weight": (h,)}
    for i in range(config["num_hidden_layers"]):
        p = f"model.layers.{i}"
        shapes |= {
            f"{p}.self_attn.q_proj.weight": (q, h), f"{p}.self_attn.k_proj.weight": (kv, h),
            f"{p}.self_attn.v_proj.weight": (kv, h), f"{p}.self_attn.o_proj.weight": (h, q),
            f"{p}.mlp.gate_proj.weight": (ff, h), f"{p}.mlp.up_proj.weight": (ff, h),
            f"{p}.mlp.down_proj.weight": (h, ff),
            f"{p}.input_layernorm.weight": (h,), f"{p}.post_attention_layernorm.weight": (h,),
        }
    return shapes


def _hf_tensors(model: TinyModel) -> dict[str, np.ndarray]:
    with safe_open(str(model.hf_dir / "model.safetensors"), framework="numpy") as handle:
        assert handle.metadata() == {"format": "pt"}
        return {name: handle.get_tensor(name) for name in handle.keys()}


def test_safetensors_match_the_config(built: TinyModel) -> None:
    config = json.loads((built.hf_dir / "config.json").read_text())
    tensors = _hf_tensors(built)
    assert {name: t.shape for name, t in tensors.items()} == _expected_hf_shapes(config)
    assert all(t.dtype == np.float32 for t in tensors.values())
    assert sum(t.size for t in tensors.values()) == 1_705_216
    assert np.all(tensors["model.norm.weight"] == 1.0)
    assert 0.018 < float(tensors["model.embed_tokens.weight"].std()) < 0.022


def test_gguf_metadata_and_tensors(built: TinyModel) -> None:
    reader = gguf.GGUFReader(built.gguf_path)
    field = {name: f.contents() for name, f in reader.fields.items()}
    assert field["general.architecture"] == "llama"
    assert field["general.file_type"] == gguf.LlamaFileType.ALL_F32
    assert field["llama.context_length"] == 32768
    assert (field["llama.attention.head_count"], field["llama.attention.head_count_kv"]) == (4, 2)
    sizes = ("llama.embedding_length", "llama.block_count", "llama.feed_forward_length")
    assert [field[name] for name in sizes] == [256, 2, 512]
    assert (field["tokenizer.ggml.model"], field["tokenizer.ggml.pre"]) == ("gpt2", "gpt-2")
    tokens = field["tokenizer.ggml.tokens"]
    assert len(tokens) == 2048 and tokens[:3] == ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    assert field["tokenizer.ggml.token_type"][:4] == [gguf.TokenType.CONTROL] * 3 + [gguf.TokenType.NORMAL]
    assert (field["tokenizer.ggml.eos_token_id"], field["tokenizer.ggml.bos_token_id"]) == (2, 0)
    assert field["tokenizer.ggml.padding_token_id"] == 0 and field["tokenizer.ggml.add_bos_token"] is False
    assert len(field["tokenizer.ggml.merges"]) == 2048 - 256 - 3
    hf_vocab = Tokenizer.from_file(str(built.hf_dir / "tokenizer.json")).get_vocab(with_added_tokens=True)
    assert all(hf_vocab[token] == i for i, token in enumerate(tokens))

    shapes = {t.name: tuple(int(d) for d in t.shape) for t in reader.tensors}  # GGUF order: innermost first
    assert len(shapes) == 2 + 2 * 9 and "output.weight" not in shapes  # tied: llama.cpp reuses token_embd
    assert shapes["token_embd.weight"] == (256, 2048)
    assert shapes["blk.1.attn_q.weight"] == (256, 256) and shapes["blk.1.attn_k.weight"] == (256, 128)
    assert shapes["blk.0.ffn_down.weight"] == (512, 256) and shapes["output_norm.weight"] == (256,)
    assert all(t.tensor_type == gguf.GGMLQuantizationType.F32 for t in reader.tensors)


def _rope(x: np.ndarray, pairs: str, theta: float = 10000.0) -> np.ndarray:
    """Rotate (positions, heads, head_dim) by position; HF pairs (i, i+d/2), llama.cpp pairs (2i, 2i+1)."""
    positions, _, dim = x.shape
    angles = np.arange(positions)[:, None] * theta ** (-np.arange(0, dim, 2) / dim)
    cos, sin = np.cos(angles)[:, None, :], np.sin(angles)[:, None, :]
    first, second = (x[..., : dim // 2], x[..., dim // 2:]) if pairs == "hf" else (x[..., 0::2], x[..., 1::2])
    out = np.empty_like(x)
    rotated = (first * cos - second * sin, first * sin + second * cos)
    if pairs == "hf":
        out[..., : dim // 2], out[..., dim // 2:] = rotated
    else:
        out[..., 0::2], out[..., 1::2] = rotated
    return out


def _scores(hidden: np.ndarray, wq: np.ndarray, wk: np.ndarray, pairs: str) -> np.ndarray:
    """Attention logits q.k per (query head, query pos, key pos), GQA heads shared as Llama does."""
    positions = hidden.shape[0]
    q = _rope((hidden @ wq.T).reshape(positions, 4, 64), pairs)
    k = np.repeat(_rope((hidden @ wk.T).reshape(positions, 2, 64), pairs), 2, axis=1)
    return np.einsum("phd,shd->hps", q, k)


def test_gguf_computes_the_same_attention_as_hf(built: TinyModel) -> None:
    hf = _hf_tensors(built)
    gg = {t.name: np.asarray(t.data).reshape(t.data.shape) for t in gguf.GGUFReader(built.gguf_path).tensors}
    np.testing.assert_array_equal(gg["token_embd.weight"], hf["model.embed_tokens.weight"])
    np.testing.assert_array_equal(gg["blk.0.attn_v.weight"], hf["model.layers.0.self_attn.v_proj.weight"])
    hidden = np.random.default_rng(1).standard_normal((7, 256))
    hf_q, hf_k = hf["model.layers.0.self_attn.q_proj.weight"], hf["model.layers.0.self_attn.k_proj.weight"]
    expected = _scores(hidden, hf_q, hf_k, "hf")
    got = _scores(hidden, gg["blk.0.attn_q.weight"], gg["blk.0.attn_k.weight"], "llama.cpp")
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-9)
    # Control: unpermuted HF weights under llama.cpp's rotation are a different model.
    assert not np.allclose(_scores(hidden, hf_q, hf_k, "llama.cpp"), expected, rtol=1e-3, atol=1e-6)


def test_ensure_tiny_model_builds_once_and_redoes_an_interrupted_build(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CELLBENCH_CACHE", str(tmp_path))
    first = ensure_tiny_model()
    assert first.root == tmp_path / "models" / f"tiny-{RECIPE_VERSION}"
    assert (first.root / MARKER).is_file() and first.gguf_path.is_file()
    stamps = {path: path.stat().st_mtime_ns for path in first.root.rglob("*")}

    second = ensure_tiny_model()
    assert second == first
    assert {path: path.stat().st_mtime_ns for path in first.root.rglob("*")} == stamps  # nothing rewritten

    # A killed build: no marker, a truncated file, a leftover.
    (first.root / MARKER).unlink()
    good_gguf = first.gguf_path.read_bytes()
    first.gguf_path.write_bytes(good_gguf[:1000])
    (first.root / "leftover.tmp").write_text("x")
    third = ensure_tiny_model()
    assert third.digest == first.digest
    assert third.gguf_path.read_bytes() == good_gguf
    assert (first.root / MARKER).is_file() and not (first.root / "leftover.tmp").exists()
