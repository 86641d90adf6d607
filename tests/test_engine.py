"""Engine behaviour shared by every rule: replacement nodes print in place."""

from __future__ import annotations

from torchlint.config import Settings
from torchlint.edits import apply_edits
from torchlint.engine import lint_source


def test_replacement_node_keeps_indentation_of_enclosing_blocks():
    src = (
        "import torch\n"
        "from torch.utils.data import DataLoader\n"
        "\n"
        "class Trainer:\n"
        "    def fit(self, ds):\n"
        "        if True:\n"
        "            loader = DataLoader(\n"
        "                ds,\n"
        "                batch_size=32,\n"
        "                num_workers=4,\n"
        "            )\n"
        "            for x in loader:\n"
        "                x = x.cuda()\n"
    )
    [d] = lint_source(src, "t.py", Settings(select=("TL102",)))
    fixed = apply_edits(src, d.fix.edits)
    compile(fixed, "t.py", "exec")
    assert fixed.splitlines()[6:12] == [
        "            loader = DataLoader(",
        "                ds,",
        "                batch_size=32,",
        "                num_workers=4,",
        "                pin_memory=True,",
        "            )",
    ]
