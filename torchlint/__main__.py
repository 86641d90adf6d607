from torchlint import _sigint

_sigint.install_early()  # before importing the command: Ctrl-C during the imports is one line

from torchlint.cli import run  # noqa: E402

if __name__ == "__main__":
    run()
