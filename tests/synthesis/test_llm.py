"""The LLM wrapper: Retry-After and backoff, the cache key."""

import random

from ifir_lib.synthesis.llm import backoff_delay, cache_key, retry_after_seconds


def test_retry_after_and_backoff():
    assert retry_after_seconds({"retry-after": "2"}) == 2.0
    assert retry_after_seconds({"retry-after-ms": "1500", "retry-after": "9"}) == 1.5
    assert retry_after_seconds({}) is None
    assert 0 <= retry_after_seconds({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}) <= 0.0  # a past date: 0
    rng = random.Random(0)
    for failures, lo, hi in [(1, 0.5, 1.0), (3, 2.0, 4.0), (10, 30.0, 60.0)]:
        d = backoff_delay(failures, 1.0, 60.0, rng)
        assert lo <= d <= hi
    assert backoff_delay(1, 0.01, 60.0, rng, retry_after=3.0) == 3.0  # Retry-After is a floor


def test_cache_key_covers_model_prompt_and_params():
    m = [{"role": "user", "content": "x"}]
    k = cache_key("openai", "m", m, {"temperature": 0.7})
    assert len(k) == 64
    assert k != cache_key("openai", "m2", m, {"temperature": 0.7})
    assert k != cache_key("openai", "m", [{"role": "user", "content": "y"}], {"temperature": 0.7})
    assert k != cache_key("openai", "m", m, {"temperature": 0.0})
    assert k == cache_key("openai", "m", m, {"temperature": 0.7})
    assert k == cache_key("openai", "m", m, {"temperature": 0.7}, "")  # OpenAI's API: keys as before
    assert k != cache_key("openai", "m", m, {"temperature": 0.7}, "http://gpu-box:8000/v1")
