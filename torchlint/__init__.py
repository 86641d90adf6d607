"""torchlint: a static linter for PyTorch performance anti-patterns."""

__version__ = "0.1.0"

DOCS_URL = "https://github.com/torchlint/torchlint/blob/main/docs/rules/{code}.md"

__all__ = ["__version__", "DOCS_URL"]
