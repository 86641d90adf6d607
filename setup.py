"""Build hook only; the project's metadata lives in pyproject.toml.

``docs/rules/*.md`` are the single source of the rule pages. A wheel carries a copy of them as
``torchlint/_docs/`` so that ``torchlint rule CODE`` and the SARIF help work when installed; an
editable install reads ``docs/rules/`` in place (see ``torchlint/ruledocs.py``).
"""

import glob
import os

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
DOCS = os.path.join(HERE, "docs", "rules")


class build_py_with_rule_docs(build_py):
    def run(self):
        super().run()
        if getattr(self, "editable_mode", False):
            return
        target = os.path.join(self.build_lib, "torchlint", "_docs")
        self.mkpath(target)
        for page in sorted(glob.glob(os.path.join(DOCS, "TL*.md"))):
            self.copy_file(page, os.path.join(target, os.path.basename(page)))


setup(cmdclass={"build_py": build_py_with_rule_docs})
