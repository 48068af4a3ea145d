"""The README's server examples (```bash server and ```python server blocks: curl, the
`openai` client, `tritonclient`) run against a live server with models of those names."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from tests.serving.live_server import LiveServer

README = (Path(__file__).resolve().parents[2] / "README.md").read_text()
BASH = re.findall(r"```bash server\n(.*?)```", README, flags=re.S)
PYTHON = re.findall(r"```python server\n(.*?)```", README, flags=re.S)


@pytest.fixture(scope="module")
def server(family_artifacts, wordpiece_artifacts):
    live = LiveServer({
        "gpt": str(family_artifacts("decoder-only").export_dir),
        "translator": str(family_artifacts("encoder-decoder").export_dir),
        "minilm": str(wordpiece_artifacts.export_dir),
    }).start()  # fmt: skip
    yield live
    live.stop()


def _here(block: str, server) -> str:
    return block.replace("127.0.0.1:8000", f"127.0.0.1:{server.port}")


def test_the_readme_has_server_examples():
    assert len(BASH) >= 1 and len(PYTHON) >= 2
    assert "transformer-zoo serve exports/gpt exports/translator exports/minilm" in README


@pytest.mark.parametrize("index", range(len(BASH)))
def test_readme_curl_example_runs(server, index):
    result = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", _here(BASH[index], server)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert '"choices"' in result.stdout and '"embedding"' in result.stdout
    assert '"outputs"' in result.stdout and "transformer_zoo_batch_size_count" in result.stdout


@pytest.mark.parametrize("index", range(len(PYTHON)))
def test_readme_client_example_runs(server, index, capsys):
    exec(compile(_here(PYTHON[index], server), f"README server block {index}", "exec"), {})
    assert capsys.readouterr().out.strip()
