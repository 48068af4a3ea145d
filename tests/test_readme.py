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


def _readme_synopsis() -> dict[str, set[str]]:
    """Command → the flags the README's "Command line" block gives it ("" for the flags
    before COMMAND); an entry runs from `transformer-zoo` to the next, comments dropped."""
    section = README.read_text().split("\n## Command line\n", 1)[1]
    block = re.search(r"```bash\n(.*?)```", section, flags=re.S).group(1)
    block = re.sub(r"#.*", "", block)
    synopsis: dict[str, set[str]] = {}
    for entry in re.split(r"\n(?=transformer-zoo )", block.strip()):
        word = entry.split()[1]
        names = [""] if word.startswith(("-", "[")) else word.split("|")
        for name in names:
            synopsis.setdefault(name, set()).update(re.findall(r"--[a-z][a-z0-9-]*", entry))
    return synopsis


def test_the_command_line_section_gives_every_flag_of_every_command():
    """Train's --seed, serve's --max-tokens, export's --opset and a dozen more were in
    --help and nowhere in the README; each command's flags, as its parser has them."""
    import argparse

    from transformer_zoo.cli import build_parser

    def flags(parser) -> set[str]:
        return {
            option
            for action in parser._actions  # argparse has no public list of its actions
            for option in action.option_strings
            if option.startswith("--") and option != "--help"
        }

    root = build_parser()
    commands = next(a for a in root._actions if isinstance(a, argparse._SubParsersAction))
    expected = {"": flags(root), **{n: flags(p) for n, p in commands.choices.items()}}
    assert _readme_synopsis() == expected
