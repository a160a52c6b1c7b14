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


def test_capped_keeps_its_reason():
    v = classify(Evidence(levels=(level(),), identity=GOOD_ID, capped="budget 60 s ran out during c=8"))
    assert v.verdict is Verdict.CAPPED


def test_nothing_measured_is_a_failure():
    assert classify(Evidence(levels=(level(ok=0, failed=0),), identity=GOOD_ID)).verdict is Verdict.FAILED


def test_chunk_bundling_annotation_rides_along():
    v = classify(Evidence(levels=(level(per_chunk=True),), identity=GOOD_ID))
    assert v.verdict is Verdict.OK and v.annotations == ("chunk-bundling",)
