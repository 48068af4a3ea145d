"""Every ```python block of README.md runs, so the examples never rot."""

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)


def _param(index: int):
    """The blocks that train on the built-in task take 15-30 s each: the slow set."""
    trains = "load_task(" in BLOCKS[index] and ".fit(" in BLOCKS[index]
    return pytest.param(index, marks=pytest.mark.slow) if trains else index


@pytest.mark.parametrize("index", [_param(i) for i in range(len(BLOCKS))])
def test_readme_python_example_runs(index, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    exec(compile(BLOCKS[index], f"README.md block {index}", "exec"), {"__name__": "__readme__"})


def test_readme_gives_the_two_commands():
    text = README.read_text()
    assert "make demo" in text and "make test" in text
