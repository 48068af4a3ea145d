import subprocess
import sys

from transformer_zoo import __version__
from transformer_zoo.cli import main


def test_version_flag_prints_the_package_version():
    result = subprocess.run(
        [sys.executable, "-m", "transformer_zoo.cli", "--version"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert result.stdout.strip() == f"transformer-zoo {__version__}"


def test_unknown_command_exits_with_code_2(capsys):
    try:
        main(["no-such-command"])
    except SystemExit as exit_:
        assert exit_.code == 2
    assert "invalid choice" in capsys.readouterr().err
