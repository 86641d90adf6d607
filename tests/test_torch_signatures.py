"""torch_api's knowledge checked against the installed torch (the linter never imports torch)."""

from __future__ import annotations

import inspect

import pytest

from torchlint.torch_api import (
    DATALOADER_PARAMS,
    DETERMINISTIC_FACTORIES,
    DEVICE_FACTORIES,
    DTYPE_EXACT_FACTORIES,
    RANDOM_FACTORIES,
    TENSOR_CUDA_PARAMS,
    TENSOR_TO_PARAMS,
)

torch = pytest.importorskip("torch")

# Arguments that make each constructor valid; a float dtype suits them all.
SAMPLE_ARGS = {
    "zeros": (2, 3), "ones": (2, 3), "empty": (2, 3), "full": ((2, 3), 1.5), "arange": (5,),
    "range": (0, 4), "linspace": (0, 1, 5), "logspace": (0, 1, 5), "eye": (3,), "tensor": ([1.0, 2.0],),
    "empty_strided": ((2, 3), (3, 1)), "tril_indices": (3, 3), "triu_indices": (3, 3),
    "rand": (2, 3), "randn": (2, 3), "randint": (0, 5, (2, 3)), "randperm": (5,),
    "normal": (0.0, 1.0, (2, 3)),
}
# tril_indices/triu_indices/randint/randperm build integer tensors.
INTEGER_ONLY = {"tril_indices", "triu_indices", "randperm"}


def test_dataloader_parameter_order():
    from torch.utils.data import DataLoader

    params = [p for p in inspect.signature(DataLoader.__init__).parameters if p != "self"]
    assert tuple(params) == DATALOADER_PARAMS
    assert params.index("num_workers") == 5 and params.index("pin_memory") == 7


def test_factory_tables_cover_the_samples():
    assert DEVICE_FACTORIES <= DETERMINISTIC_FACTORIES | RANDOM_FACTORIES
    assert set(SAMPLE_ARGS) == set(DEVICE_FACTORIES)


@pytest.mark.filterwarnings("ignore:torch.range is deprecated")
@pytest.mark.parametrize("name", sorted(DEVICE_FACTORIES))
def test_factory_accepts_the_fix_keywords(name):
    """TL202's fix passes device= (and dtype= when .to() had one)."""
    fn = getattr(torch, name)
    dtype = torch.int64 if name in INTEGER_ONLY else torch.float64
    out = fn(*SAMPLE_ARGS[name], device="cpu", dtype=dtype)
    assert out.device.type == "cpu" and out.dtype == dtype


def test_bernoulli_and_tensor_normal_take_no_device():
    with pytest.raises(TypeError):
        torch.bernoulli(torch.full((3,), 0.5), device="cpu")
    with pytest.raises(TypeError):
        torch.normal(torch.zeros(3), torch.ones(3), device="cpu")


@pytest.mark.parametrize("name", sorted(DTYPE_EXACT_FACTORIES - {"empty", "empty_strided"}))
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.int8, torch.bool, torch.complex64])
def test_dtype_exact_factories(name, dtype):
    """Building in ``dtype`` equals building in the default dtype and casting."""
    fn = getattr(torch, name)
    args = SAMPLE_ARGS[name]
    assert torch.equal(fn(*args, dtype=dtype), fn(*args).to(dtype))


def test_tensor_to_positional_order():
    """Tensor.to(device, dtype, non_blocking, copy): TENSOR_TO_PARAMS, by behaviour (a builtin)."""
    assert TENSOR_TO_PARAMS == ("device", "dtype", "non_blocking", "copy")
    x = torch.zeros(3)
    y = x.to("cpu", torch.float16, False, True)
    assert y.dtype == torch.float16 and y.data_ptr() != x.data_ptr()
    z = x.to("cpu", torch.float32, False, True)  # copy=True: a new tensor even with nothing to do
    assert z.data_ptr() != x.data_ptr()
    assert x.to(device="cpu", dtype=torch.float32, non_blocking=True, copy=False) is x


def test_tensor_cuda_parameters():
    doc = torch.Tensor.cuda.__doc__
    assert doc.lstrip().startswith("cuda(device=None, non_blocking=False")
    assert TENSOR_CUDA_PARAMS == ("device", "non_blocking")
