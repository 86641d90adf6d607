"""Fixes look hand-written (issue 14): an added import goes where isort / ruff's ``I`` rules would
put it, and a call laid out one argument per line stays so when a fix adds an argument. Every
case goes through the real fixer (``fixer.fix_text``)."""

from __future__ import annotations

import textwrap

import pytest

from torchlint.config import Settings, settings_from_table
from torchlint.fixer import fix_text

WORKERS = "num_workers=min(4, os.cpu_count() or 1)"


def fixed(source: str, rule: str) -> str:
    # preview on: TL101, the rule most of these cases fix, is a preview rule (issue 29)
    settings = settings_from_table({"select": [rule], "preview": True}, "t.toml", Settings())
    result = fix_text(textwrap.dedent(source), "train.py", settings, unsafe=True)
    assert result.error is None and result.changed
    return result.text


@pytest.mark.parametrize(
    "imports, expected",
    [
        # sorted into the standard-library group, before the `from` lines
        (
            "import argparse\nimport re\nfrom pathlib import Path\n\nimport torch\n",
            "import argparse\nimport os\nimport re\nfrom pathlib import Path\n\nimport torch\n",
        ),
        # first of its group
        ("import sys\n\nimport torch\n", "import os\nimport sys\n\nimport torch\n"),
        # last of its group, still before `from` lines of the standard library
        ("import json\nfrom typing import List\n\nimport torch\n",
         "import json\nimport os\nfrom typing import List\n\nimport torch\n"),
        # no standard-library group yet: a new one before the third-party group
        ("import torch\nimport torch.nn as nn\n", "import os\n\nimport torch\nimport torch.nn as nn\n"),
        # after `from __future__`, in its own group
        (
            '"""Doc."""\nfrom __future__ import annotations\n\nimport torch\n',
            '"""Doc."""\nfrom __future__ import annotations\n\nimport os\n\nimport torch\n',
        ),
    ],
)
def test_added_import_goes_where_isort_puts_it(imports, expected):
    source = imports + "from torch.utils.data import DataLoader\n\nloader = DataLoader(ds)\n"
    out = fixed(source, "TL101")
    assert out == expected + f"from torch.utils.data import DataLoader\n\nloader = DataLoader(ds, {WORKERS})\n"


def test_added_import_in_an_isort_clean_file_stays_isort_clean():
    """The result is a fixed point of isort's ordering: plain sorting of each group keeps it."""
    source = "import abc\nimport operator\nimport sys\n\nimport numpy as np\nimport torch\nfrom torch.utils.data import DataLoader\n\nloader = DataLoader(ds)\n"
    head = fixed(source, "TL101").split("\n\n")[0].splitlines()
    assert head == ["import abc", "import operator", "import os", "import sys"]
    assert head == sorted(head)


def test_a_third_party_import_joins_the_third_party_group():
    """TL904's rename adds `import torch` when the file reaches torch only through an alias of a
    submodule; it goes into the third-party group, sorted."""
    from torchlint.context import import_placement
    import libcst as cst

    module = cst.parse_module("import os\n\nimport numpy as np\nimport zarr\n\nx = 1\n")
    edit = import_placement(module, "torch")
    assert edit.mode == "insert-before" and module.code_for_node(edit.node) == "import zarr\n"
    assert edit.content == "import torch\n"


def test_multi_line_call_stays_multi_line_when_a_keyword_is_added():
    source = """\
    import os
    from torch.utils.data import DataLoader

    loader = DataLoader(
        dataset,
        batch_size=64,
    )
    """
    assert fixed(source, "TL101") == textwrap.dedent(f"""\
    import os
    from torch.utils.data import DataLoader

    loader = DataLoader(
        dataset,
        batch_size=64,
        {WORKERS},
    )
    """)


def test_multi_line_call_stays_multi_line_when_a_positional_argument_is_added():
    """TL404 puts the device type first: `torch.amp.autocast("cuda", ...)`."""
    source = """\
    import torch

    with torch.cuda.amp.autocast(
        enabled=True,
        dtype=torch.float16,
    ):
        pass
    scaler = torch.cuda.amp.GradScaler(
        init_scale=2.0
    )
    with torch.cuda.amp.autocast():
        pass
    """
    assert fixed(source, "TL404") == textwrap.dedent("""\
    import torch

    with torch.amp.autocast(
        "cuda",
        enabled=True,
        dtype=torch.float16,
    ):
        pass
    scaler = torch.amp.GradScaler(
        "cuda",
        init_scale=2.0
    )
    with torch.amp.autocast("cuda"):
        pass
    """)


@pytest.mark.parametrize(
    "call, expected",
    [
        # no trailing comma: the comment stays on `batch_size`'s line, after its new comma
        (
            "DataLoader(\n    dataset,\n    batch_size=64  # the batch\n)\n",
            f"DataLoader(\n    dataset,\n    batch_size=64,  # the batch\n    {WORKERS}\n)\n",
        ),
        # trailing comma: the same, and the new argument keeps the trailing comma
        (
            "DataLoader(\n    dataset,\n    batch_size=64,  # the batch\n)\n",
            f"DataLoader(\n    dataset,\n    batch_size=64,  # the batch\n    {WORKERS},\n)\n",
        ),
        # a comment line before `)` stays before `)`
        (
            "DataLoader(\n    dataset,\n    batch_size=64,  # the batch\n    # the end\n)\n",
            f"DataLoader(\n    dataset,\n    batch_size=64,  # the batch\n    {WORKERS},\n    # the end\n)\n",
        ),
        # comments of earlier arguments stay where they are
        (
            "DataLoader(\n    dataset,  # the data\n    batch_size=64,\n)\n",
            f"DataLoader(\n    dataset,  # the data\n    batch_size=64,\n    {WORKERS},\n)\n",
        ),
        # a call on one line whose last argument carries a comment before `)`
        (
            "DataLoader(dataset, batch_size=64  # the batch\n)\n",
            f"DataLoader(dataset, batch_size=64,  # the batch\n    {WORKERS}\n)\n",
        ),
    ],
)
def test_added_argument_leaves_each_comment_with_its_argument(call, expected):
    """Issue 31 / issue 32 item 14: the last argument's trailing comment stayed at the end of the
    call, so it moved onto the argument the fix added."""
    head = "import os\nfrom torch.utils.data import DataLoader\n\n"
    # assigned, not a bare call: a module whose only code is a call is a program, and one that
    # never touches an accelerator gets no TL101 (issue 29 class 5)
    assert fixed(head + "loader = " + call, "TL101") == head + "loader = " + expected


DDP_SCRIPT = """
def main(ds):
    dist.init_process_group("nccl")
    loader = DataLoader(ds, shuffle=True)
    for x in loader:
        pass
"""


@pytest.mark.parametrize(
    "imports, expected",
    [
        # joins the `from torch.utils.data import` line, at its sorted place among the classes
        (
            "import torch.distributed as dist\nfrom torch.utils.data import DataLoader, TensorDataset\n",
            "import torch.distributed as dist\nfrom torch.utils.data import DataLoader, DistributedSampler, TensorDataset\n",
        ),
        # a parenthesized list one name per line gets a line, the trailing comma stays trailing
        (
            "import torch.distributed as dist\nfrom torch.utils.data import (\n    DataLoader,\n    Dataset,\n)\n",
            "import torch.distributed as dist\nfrom torch.utils.data import (\n    DataLoader,\n    Dataset,\n"
            "    DistributedSampler,\n)\n",
        ),
        # no such line: a new one, sorted among the section's `from` lines, after its `import` lines
        (
            "import os\n\nimport torch.distributed as dist\nfrom torch import nn\n"
            "from torch.utils.data.dataloader import DataLoader\nfrom torchvision import datasets\n",
            "import os\n\nimport torch.distributed as dist\nfrom torch import nn\n"
            "from torch.utils.data import DistributedSampler\nfrom torch.utils.data.dataloader import DataLoader\n"
            "from torchvision import datasets\n",
        ),
    ],
)
def test_added_from_import_goes_where_isort_puts_it(imports, expected):
    """TL104's fix needs `DistributedSampler` (issue 31: an added import goes into the import
    block in sorted order)."""
    settings = settings_from_table({"select": ["TL104"], "preview": True}, "t.toml", Settings())
    result = fix_text(imports + DDP_SCRIPT, "train.py", settings, unsafe=True)
    assert result.error is None and result.changed
    assert result.text.startswith(expected)
    assert "loader = DataLoader(ds, sampler=DistributedSampler(ds))" in result.text
