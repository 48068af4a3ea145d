"""`serve run transformer_zoo.serving.http.ray_serve:build_app ...`: the builder's
`key=value` arguments reach the server's settings, and others are refused (without Ray
running: the arguments are read before any deployment is made)."""

from __future__ import annotations

import pytest

from transformer_zoo.serving.http.ray_serve import build_arguments


def test_limits_and_the_api_key_reach_the_settings(monkeypatch, tmp_path):
    monkeypatch.delenv("TRANSFORMER_ZOO_API_KEY", raising=False)
    directories, settings, replicas, level = build_arguments(
        {"models": f"gpt={tmp_path}", "replicas": "3", "api_key": "secret", "max_tokens": "7",
         "max_queue": "4", "timeout": "2.5", "log_level": "info"}
    )  # fmt: skip
    assert directories == {"gpt": str(tmp_path)}
    assert (replicas, level) == (3, "info")
    assert settings.api_key == "secret"
    assert (settings.max_tokens, settings.max_queue, settings.request_timeout) == (7, 4, 2.5)


def test_the_key_comes_from_the_environment_as_for_the_command(monkeypatch, tmp_path):
    monkeypatch.setenv("TRANSFORMER_ZOO_API_KEY", "from-env")
    _, settings, _, _ = build_arguments({"models": str(tmp_path)})
    assert settings.api_key == "from-env"
    monkeypatch.delenv("TRANSFORMER_ZOO_API_KEY")
    assert build_arguments({"models": str(tmp_path)})[1].api_key is None


@pytest.mark.parametrize(
    "args, message",
    [
        ({"models": "x", "api-key": "k"}, "unknown argument(s) api-key"),
        ({"models": "x", "max_tokens": "many"}, "invalid literal"),
        ({"models": "x", "replicas": "0"}, "replicas must be at least 1"),
        ({}, "Give the models"),
    ],
)
def test_wrong_arguments_are_refused(args, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        build_arguments(args)
