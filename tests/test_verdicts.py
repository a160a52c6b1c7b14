"""Verdict rules, top to bottom, from recorded evidence (../shared/design/verdicts.md)."""

import pytest

from bench.verdicts import Evidence, Identity, Verdict, classify


def level(concurrency=1, ok=100, failed=0, dominant=None, client_bound=False, tps=100.0, per_chunk=False):
    return {
        "concurrency": concurrency,
        "successful": ok,
        "failed": failed,
        "dominant_error": dominant,
        "client": {"client_bound": client_bound},
        "output_throughput_tps": tps,
        "itl_per_chunk": per_chunk,
    }


GOOD_ID = Identity("tiny", ("tiny",), ("tiny",))


def test_ok_names_levels_and_throughput():
    v = classify(Evidence(levels=(level(1, tps=120.5), level(8, tps=900.0)), identity=GOOD_ID))
    assert v.verdict is Verdict.OK
    assert "200/200 requests ok" in v.reason and "c=8: 900.0 tok/s" in v.reason


def test_skipped_wins_over_everything():
    assert classify(Evidence(skipped="not installed", start_failure="x")).verdict is Verdict.SKIPPED


def test_start_failure_is_failed_even_after_measured_levels():
    v = classify(Evidence(levels=(level(),), identity=GOOD_ID, start_failure="port 8001 is already held by pid 7"))
    assert v.verdict is Verdict.FAILED and "port 8001" in v.reason


def test_oom_before_wrong_model():
    ev = Evidence(levels=(level(),), identity=Identity("tiny", ("other",), ()), oom="killed by the OOM killer")
    assert classify(ev).verdict is Verdict.OOM


@pytest.mark.parametrize(
    "identity, why",
    [
        (Identity("tiny", ("other",), ("other",)), "/v1/models lists other"),
        (Identity("tiny", ("tiny",), ("tiny", "stray")), "responses name stray"),
        (Identity("tiny", (), ()), "lists nothing"),
    ],
)
def test_wrong_model_from_listing_or_responses(identity, why):
    v = classify(Evidence(levels=(level(),), identity=identity))
    assert v.verdict is Verdict.WRONG_MODEL and why in v.reason


def test_unlisted_models_are_not_evidence_of_a_wrong_model():
    v = classify(Evidence(levels=(level(),), identity=Identity("tiny", None, ("tiny",))))
    assert v.verdict is Verdict.OK


def test_every_request_404_is_wrong_model_not_all_failed():
    dom = {"type": "http_4xx", "http_status": 404, "count": 100}
    v = classify(Evidence(levels=(level(ok=0, failed=100, dominant=dom),), identity=Identity("tiny", None, ())))
    assert v.verdict is Verdict.WRONG_MODEL and "404" in v.reason


def test_all_failed_records_dominant_error():
    dom = {"type": "http_5xx", "http_status": 500, "count": 100}
    v = classify(Evidence(levels=(level(ok=0, failed=100, dominant=dom),) * 3, identity=GOOD_ID))
    assert v.verdict is Verdict.ALL_FAILED
    assert v.reason == "300/300 requests failed, mostly http_5xx 500 (300x)"


def test_degraded_threshold_is_inclusive_and_configurable():
    ev = Evidence(levels=(level(ok=80, failed=20),), identity=GOOD_ID)
    assert classify(ev).verdict is Verdict.DEGRADED
    assert classify(ev, degraded_fraction=0.25).verdict is Verdict.OK
    assert classify(Evidence(levels=(level(ok=81, failed=19),), identity=GOOD_ID)).verdict is Verdict.OK


def test_client_bound_level_degrades_the_cell():
    v = classify(Evidence(levels=(level(1), level(16, client_bound=True)), identity=GOOD_ID))
    assert v.verdict is Verdict.DEGRADED and "client-bound at concurrency 16" in v.reason


def test_capped_wins_over_the_cancellations_it_caused():
    stalled = level(ok=0, failed=8, dominant={"type": "cancelled", "http_status": None, "count": 8})
    v = classify(Evidence(levels=(stalled,), identity=GOOD_ID, capped="no progress for 30 min at c=8"))
    assert v.verdict is Verdict.CAPPED and v.reason == "no progress for 30 min at c=8"


def test_capped_keeps_its_reason():
    v = classify(Evidence(levels=(level(),), identity=GOOD_ID, capped="budget 60 s ran out during c=8"))
    assert v.verdict is Verdict.CAPPED


def test_nothing_measured_is_a_failure():
    assert classify(Evidence(levels=(level(ok=0, failed=0),), identity=GOOD_ID)).verdict is Verdict.FAILED


def test_chunk_bundling_annotation_rides_along():
    v = classify(Evidence(levels=(level(per_chunk=True),), identity=GOOD_ID))
    assert v.verdict is Verdict.OK and v.annotations == ("chunk-bundling",)


# --- OOM: evidence from bench.oom (ExitInfo.oom / ServerStartError.oom) ---------------------------

KERNEL_LINE = ("Memory cgroup out of memory: Killed process 18244 (llama-server) total-vm:540856kB, "
               "anon-rss:65152kB, file-rss:6752kB, shmem-rss:0kB, UID:0 pgtables:192kB oom_score_adj:0")
OOM_EVIDENCE = {"source": "cgroup oom_kill", "pid": 18244, "process": "llama-server", "line": KERNEL_LINE,
                "lines": [KERNEL_LINE], "cgroup": {"limit_bytes": 8 << 30, "oom_kill": 1}}


def test_oom_reason_quotes_the_kernel_line():
    v = classify(Evidence(levels=(level(),), identity=GOOD_ID, oom=OOM_EVIDENCE))
    assert v.verdict is Verdict.OOM
    assert v.reason == f"killed for memory (cgroup oom_kill, limit 8 GiB): {KERNEL_LINE}"


@pytest.mark.parametrize(
    "others",
    [
        {"levels": (level(ok=0, failed=100, dominant={"type": "connect", "http_status": None, "count": 100}),)},
        {"levels": (level(ok=70, failed=30),)},
        {"levels": (level(),), "capped": "budget ran out"},
        {"levels": (level(ok=0, failed=100, dominant={"type": "http_4xx", "http_status": 404, "count": 100}),)},
        {"start_failure": "server was killed for memory while starting"},
    ],
    ids=["all-failed", "degraded", "capped", "404s", "start-failure"],
)
def test_oom_takes_precedence(others):
    ev = Evidence(identity=GOOD_ID, oom=OOM_EVIDENCE, **others)
    assert classify(ev).verdict is Verdict.OOM


def test_skipped_still_wins_over_oom():
    assert classify(Evidence(skipped="not installed", oom=OOM_EVIDENCE)).verdict is Verdict.SKIPPED


def test_oom_is_never_retried():
    v = classify(Evidence(oom=OOM_EVIDENCE))
    assert v.retryable is False and v.to_json()["retryable"] is False
    ok = classify(Evidence(levels=(level(),), identity=GOOD_ID))
    assert "retryable" not in ok.to_json(), "other verdicts keep the schema's shape"


def test_oom_evidence_without_a_kernel_line():
    ev = {"source": "vmstat oom_kill", "pid": 7, "process": "vllm", "note": "SIGKILL sent by no one here"}
    v = classify(Evidence(oom=ev))
    assert v.verdict is Verdict.OOM and v.reason == "pid 7 (vllm) killed for memory (vmstat oom_kill): SIGKILL sent by no one here"
