"""Comparing two stacks' greedy answers (bench.core.lenses.fidelity), by hand."""

from __future__ import annotations

import math

import pytest

from bench.core.lenses.fidelity import (
    Answer,
    Fidelity,
    agreement,
    first_divergence,
    flagged,
    in_words,
    more_divergent,
    wilson,
)


def answer(prompt: str, *tokens: int, finish: str = "length") -> Answer:
    return Answer(prompt, tokens, finish)


def test_the_first_divergence():
    assert first_divergence(answer("p", 1, 2, 3), answer("p", 1, 2, 3)) is None
    assert first_divergence(answer("p", 1, 2, 3), answer("p", 1, 9, 3)) == 1
    assert first_divergence(answer("p", 5, 2, 3), answer("p", 1, 2, 3)) == 0
    # one stopped (EOS) where the other went on: they differ where it stopped
    assert first_divergence(answer("p", 1, 2, finish="stop"), answer("p", 1, 2, 3, 4)) == 2
    assert first_divergence(answer("p", finish="stop"), answer("p", 7)) == 0


def test_agreement_by_prompt_name_with_its_intervals():
    ours = [answer(f"p{i}", *range(32)) for i in range(10)]
    theirs = [answer(f"p{i}", *range(32)) for i in range(6)]  # six alike
    theirs += [answer("p6", 0, 1, 2, 99), answer("p7", *range(20), 99), answer("p8", 99), answer("p9", *range(32), 5)]
    theirs.append(answer("p10", 1))  # a prompt only one side answered is not compared
    found = agreement(ours, theirs, agree_tokens=16)
    assert found["prompts"] == 10 and found["identical"] == 6
    assert found["divergences"] == [None] * 6 + [3, 20, 0, 32]
    assert found["agree"] == 8  # identical, or alike through 16 tokens (p7 from 20, p9 at 32: its extra token)
    assert found["agree_share"] == 0.8
    low, high = found["agree_ci95"] or (0.0, 0.0)
    assert low < 0.8 < high and (low, high) == pytest.approx(wilson(8, 10))
    # an identical answer counts at its length (32): the median of [32]*6 + [3, 20, 0, 32] is 32
    assert found["median_divergence"] == 32.0
    bound = found["median_ci95"] or {}
    assert bound["low"] is not None and bound["low"] <= 32.0 <= (bound["high"] or 0)


def test_wilson_by_hand():
    low, high = wilson(0, 16)
    assert low == 0.0 and high == pytest.approx(0.1936, abs=1e-4)
    assert wilson(16, 16) == pytest.approx((0.8064, 1.0), abs=1e-4)


def test_flagged_only_where_the_stack_diverges_more_than_the_reference_from_itself_beyond_chance():
    def counts(agree: int, n: int = 16) -> dict:
        return {"prompts": n, "agree": agree}
    # a deterministic reference (16 of 16 agree with its own second pass)
    assert not flagged(counts(16), counts(16))  # two runs of one stack
    assert not flagged(counts(14), counts(16))  # 2 of 16: chance could give that (p ~ 0.24)
    assert flagged(counts(11), counts(16))  # 5 of 16 against none
    assert flagged(counts(0), counts(16))  # another checkpoint: every prompt differs
    # a reference that differs from itself as often as the stack from it: not flagged
    assert not flagged(counts(10), counts(10))
    # the p-value by hand: 2 diverged of 16 against 0 of 16, hypergeometric tail
    p = sum(math.comb(2, k) * math.comb(30, 16 - k) for k in (2,)) / math.comb(32, 16)
    assert more_divergent(counts(14), counts(16)) == pytest.approx(p)


def test_in_words_says_the_comparison_the_reference_and_a_stack_unlike_itself():
    same = [answer(f"p{i}", *range(32)) for i in range(16)]
    other = [answer(f"p{i}", 99, *range(31)) for i in range(16)]
    block: Fidelity = {"prompts": 16, "max_tokens": 32, "unit": "tokens", "answers": "a.fidelity.jsonl",
                       "logprobs": True, "self": agreement(same, same), "reference_framework": "hf_transformers"}
    assert in_words(block, "hf_transformers") == "the reference; itself: 16/16 alike to 16 tokens"
    assert in_words(block, "llamacpp") == "no answers of hf_transformers to compare"
    said = in_words(block, "llamacpp", agreement(same, other), is_flagged=True)
    assert said.startswith("0/16 alike to 16 tokens vs hf_transformers, median divergence 0 [0, 0]")
    assert said.endswith("(flagged)")
    # a stack whose two passes differ (sampled where greedy was asked) says so beside its comparison
    unlike_itself = {**block, "self": agreement(same, other)}
    assert in_words(unlike_itself, "vllm", agreement(same, same)).endswith("; itself: 0/16 alike to 16 tokens")
    assert in_words({**block, "error": "HTTP 500"}, "vllm") == "none: HTTP 500"


def test_in_words_says_what_feeding_the_reference_s_answers_showed_or_why_it_could_not():
    same = [answer(f"p{i}", *range(32)) for i in range(16)]
    block: Fidelity = {"prompts": 16, "max_tokens": 32, "unit": "tokens", "answers": "a.fidelity.jsonl",
                       "logprobs": True, "self": agreement(same, same), "reference_framework": "hf_transformers",
                       "forced": {"offered": True, "reference": "hf.json", "positions": 256, "agree": 255,
                                  "agree_share": 255 / 256, "agree_ci95": list(wilson(255, 256)),
                                  "differ": {"p4": [5]}, "diverged": 1, "ties": 1}}
    vs = agreement(same, same)
    assert in_words(block, "vllm", vs).endswith(
        "; fed hf_transformers's answers, 255/256 picks alike, 1 of 1 divergent prompt a near-tie")
    assert "fed" not in in_words(block, "vllm", vs, brief=True)  # a sentence keeps to the comparison
    refused = block.copy()
    refused["forced"] = {"offered": False, "reference": "hf.json",
                         "note": 'HTTP 422 to a prompt of token ids on /v1/completions: {"detail":[{"type":"x"}]}'}
    assert in_words(refused, "vllm_mlx", vs).endswith(
        "; not fed hf_transformers's answers: HTTP 422 to a prompt of token ids on /v1/completions")
