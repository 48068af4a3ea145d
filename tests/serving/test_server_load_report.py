"""benchmarks/server_load.py's report: the table, the ratios against concurrency 1, the
in-process batch costs (also after a JSON round trip, which turns their keys into strings)
and the picture."""

import json

from benchmarks import server_load


def _level(concurrency, units_per_s):
    return {
        "concurrency": concurrency, "planned": 32, "requests": 32, "complete": 32, "429": 0,
        "failed": 0,
        "seconds": 1.0, "requests_per_s": units_per_s / 64, "units_per_s": units_per_s,
        "latency_p50": 0.1 * concurrency, "latency_p99": 0.2 * concurrency,
        "first_p50": 0.01 * concurrency, "first_p99": 0.02 * concurrency,
    }  # fmt: skip


def _report():
    levels = (1, 4, 16, 64)
    return {
        "machine": "x86_64, 2 CPUs",
        "cpu_flags": "avx2",
        "load_before": [0.5, 0.5, 0.5],
        "server_args": "",
        "models": {
            "decoder": {
                "unit": "tokens",
                "stream": True,
                "levels": [
                    _level(c, s) for c, s in zip(levels, (200, 600, 1000, 1000), strict=True)
                ],
            },
            "minilm": {
                "unit": "sentences",
                "stream": False,
                "levels": [
                    *[_level(c, s) for c, s in zip(levels[:3], (150, 210, 300), strict=True)],
                    {**_level(64, 330), "planned": 40},
                ],
            },
        },  # fmt: skip
        "ratios": {"decoder: tokens/s at concurrency 16 over 1": 5.0},
        "batch_costs": {"cpu_s_per_sentence": {1: 0.008, 8: 0.005, 32: 0.004}, "lone_s": 0.005},
    }


def test_markdown_gives_the_levels_the_ratios_and_what_batching_can_buy(tmp_path):
    report = _report()
    for case in (report, json.loads(json.dumps(report))):
        text = server_load.markdown(case)
        assert "| decoder (tokens) | 16 | 32/32 | 0 | 0 |" in text
        # A level the time limit ended shows the requests it never sent.
        assert "| minilm (sentences) | 64 | 32/40 | 0 | 0 |" in text
        assert "- decoder: tokens/s at concurrency 16 over 1: 5.00x" in text
        assert "k = 1: 8.00, 8: 5.00, 32: 4.00" in text
        assert "2.00x as productive" in text and "500 sentences/s" in text


def test_the_picture_is_written(tmp_path):
    path = tmp_path / "server_load.png"
    server_load.plot(_report(), path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 10_000
