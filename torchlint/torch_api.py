"""What torchlint knows about torch's API, in one place.

Tests check these tables against ``inspect.signature`` of an installed torch, so the linter itself
never needs torch at run time.
"""

from __future__ import annotations

# Public spellings that reach the same object; the right-hand side is what rules compare against.
CANONICAL_NAMES = {
    "torch.utils.data.dataloader.DataLoader": "torch.utils.data.DataLoader",
    "torch.nn.parallel.DataParallel": "torch.nn.DataParallel",
    "torch.nn.parallel.data_parallel.DataParallel": "torch.nn.DataParallel",
    "torch.nn.parallel.data_parallel.data_parallel": "torch.nn.parallel.data_parallel",
    "torch.nn.parallel.DistributedDataParallel": "torch.nn.parallel.DistributedDataParallel",
    "torch.nn.parallel.distributed.DistributedDataParallel": "torch.nn.parallel.DistributedDataParallel",
    "torch.autograd.anomaly_mode.detect_anomaly": "torch.autograd.detect_anomaly",
    "torch.autograd.anomaly_mode.set_detect_anomaly": "torch.autograd.set_detect_anomaly",
    "torch.autograd.profiler.emit_nvtx": "torch.autograd.profiler.emit_nvtx",
    "torch.cuda.memory.empty_cache": "torch.cuda.empty_cache",
}

# Module paths whose public members are re-exported one level up (torch.nn.modules.conv.Conv2d).
CANONICAL_PREFIXES = (
    ("torch.nn.modules.conv.", "torch.nn."),
    ("torch.nn.modules.batchnorm.", "torch.nn."),
    ("torch.nn.modules.container.", "torch.nn."),
    ("torch.nn.modules.", "torch.nn."),
)

# Names that `from <module> import *` is known to bring in, so star imports still resolve.
STAR_EXPORTS = {
    "torch": {"zeros", "ones", "empty", "full", "arange", "linspace", "logspace", "eye", "tensor",
              "rand", "randn", "randint", "randperm", "normal", "zeros_like", "ones_like",
              "empty_like", "full_like", "rand_like", "randn_like", "randint_like", "as_tensor"},
    "torch.nn": {"Conv1d", "Conv2d", "Conv3d", "BatchNorm1d", "BatchNorm2d", "BatchNorm3d",
                 "Sequential", "DataParallel", "Module", "ConvTranspose1d", "ConvTranspose2d",
                 "ConvTranspose3d", "LazyConv1d", "LazyConv2d", "LazyConv3d", "LazyConvTranspose1d",
                 "LazyConvTranspose2d", "LazyConvTranspose3d", "SyncBatchNorm", "LazyBatchNorm1d",
                 "LazyBatchNorm2d", "LazyBatchNorm3d", "ModuleList"},
    "torch.utils.data": {"DataLoader"},
}

DATALOADER = "torch.utils.data.DataLoader"
# Calls that hand a loader's items through unchanged (`zip`: each of its arguments'):
# `for i, (a, b) in enumerate(tqdm(zip(loader_a, loader_b)))`.
ITERATION_WRAPPERS = frozenset({
    "enumerate", "iter", "zip", "tqdm", "tqdm.tqdm", "tqdm.auto.tqdm", "tqdm.notebook.tqdm",
    "tqdm.rich.tqdm", "rich.progress.track",
})
# Parameter order of torch.utils.data.DataLoader.__init__ (checked against torch in the tests).
DATALOADER_PARAMS = (
    "dataset", "batch_size", "shuffle", "sampler", "batch_sampler", "num_workers", "collate_fn",
    "pin_memory", "drop_last", "timeout", "worker_init_fn", "multiprocessing_context",
    "generator", "prefetch_factor", "persistent_workers", "pin_memory_device", "in_order",
)

# Tensor constructors whose result does not depend on the device it is built on.
DETERMINISTIC_FACTORIES = frozenset({
    "zeros", "ones", "empty", "full", "arange", "range", "linspace", "logspace", "eye",
    "tensor", "empty_strided", "tril_indices", "triu_indices",
})
# Random constructors: building them on another device draws from another generator.
RANDOM_FACTORIES = frozenset({"rand", "randn", "randint", "randperm", "normal", "bernoulli"})
TENSOR_FACTORIES = DETERMINISTIC_FACTORIES | RANDOM_FACTORIES
# Factories that take `device=`: torch.bernoulli never does, torch.normal only in its
# (mean: float, std: float, size) form.
DEVICE_FACTORIES = TENSOR_FACTORIES - {"bernoulli"}
# Factories whose values are exact in every dtype: building in a dtype equals building then casting.
DTYPE_EXACT_FACTORIES = frozenset({"zeros", "ones", "empty", "empty_strided", "eye"})
# Parameter order of torch.Tensor.to(device, dtype, non_blocking, copy) and Tensor.cuda.
TENSOR_TO_PARAMS = ("device", "dtype", "non_blocking", "copy")
TENSOR_CUDA_PARAMS = ("device", "non_blocking")
# Device types that are not the host (the part of "cuda:1" before the colon).
ACCELERATOR_DEVICE_TYPES = frozenset({"cuda", "mps", "xpu", "hpu", "npu", "mtia", "xla", "privateuseone"})

# Tensor methods that keep a freshly built host tensor on the host: in-place fills, dtype casts,
# shape changes. `torch.ones(1).fill_(v).float().to(device)` still builds and fills on the CPU.
# (`type_as(x)` may itself move to x's device: still a host tensor copied over.)
HOST_CHAIN_METHODS = frozenset({
    "zero_", "fill_", "normal_", "uniform_", "random_", "exponential_", "fill_diagonal_",
    "float", "double", "half", "bfloat16", "long", "int", "short", "bool", "byte", "char", "type_as",
    "view", "reshape", "unsqueeze", "squeeze", "expand", "repeat", "t", "transpose", "permute",
    "contiguous", "flatten", "expand_as", "view_as", "reshape_as",
})

# Parameter order of torch.nn.Conv1d/2d/3d.__init__ (checked against torch in the tests).
CONV_PARAMS = (
    "in_channels", "out_channels", "kernel_size", "stride", "padding", "dilation", "groups", "bias",
    "padding_mode", "device", "dtype",
)
CONV_BIAS_POSITION = CONV_PARAMS.index("bias")
# ... of ConvTranspose1d/2d/3d, LazyConv1d/2d/3d and LazyConvTranspose1d/2d/3d.
CONV_TRANSPOSE_PARAMS = (
    "in_channels", "out_channels", "kernel_size", "stride", "padding", "output_padding", "groups", "bias",
    "dilation", "padding_mode", "device", "dtype",
)
LAZY_CONV_PARAMS = CONV_PARAMS[1:]
LAZY_CONV_TRANSPOSE_PARAMS = CONV_TRANSPOSE_PARAMS[1:]
# Every torch convolution module class -> its constructor's parameter order.
CONV_CLASS_PARAMS = {
    f"torch.nn.{prefix}{kind}{n}d": params
    for n in (1, 2, 3)
    for prefix, kind, params in (
        ("", "Conv", CONV_PARAMS),
        ("", "ConvTranspose", CONV_TRANSPOSE_PARAMS),
        ("Lazy", "Conv", LAZY_CONV_PARAMS),
        ("Lazy", "ConvTranspose", LAZY_CONV_TRANSPOSE_PARAMS),
    )
}
CONV_CLASSES = frozenset(CONV_CLASS_PARAMS)
# Position of `bias` among each conv class's constructor parameters.
CONV_BIAS_POSITIONS = {name: params.index("bias") for name, params in CONV_CLASS_PARAMS.items()}
BATCHNORM_CLASSES = frozenset({"torch.nn.BatchNorm1d", "torch.nn.BatchNorm2d", "torch.nn.BatchNorm3d"})
# Norms that subtract a per-channel mean computed from the batch in training mode.
MEAN_SUBTRACTING_NORMS = BATCHNORM_CLASSES | {
    "torch.nn.SyncBatchNorm", "torch.nn.LazyBatchNorm1d", "torch.nn.LazyBatchNorm2d", "torch.nn.LazyBatchNorm3d",
}

HOST_SYNC_METHODS = frozenset({"item", "cpu", "numpy", "tolist"})

# Release the caching allocator's free blocks to the driver (TL501).
EMPTY_CACHE_FUNCTIONS = frozenset({"torch.cuda.empty_cache", "torch.xpu.empty_cache", "torch.mps.empty_cache",
                                   "torch.xpu.memory.empty_cache", "torch.mps.memory.empty_cache",
                                   "torch.accelerator.empty_cache", "torch.accelerator.memory.empty_cache"})
# Autograd anomaly mode and the legacy autograd profilers (TL601); torch.profiler.profile is not here.
SET_DETECT_ANOMALY = "torch.autograd.set_detect_anomaly"
DETECT_ANOMALY = "torch.autograd.detect_anomaly"
LEGACY_PROFILERS = frozenset({"torch.autograd.profiler.profile", "torch.autograd.profiler.emit_nvtx",
                              "torch.autograd.profiler_legacy.profile"})

DEFAULT_TORCH_VERSION = (2, 13)


def canonical_name(qualified: str) -> str:
    name = CANONICAL_NAMES.get(qualified)
    if name is not None:
        return name
    for prefix, replacement in CANONICAL_PREFIXES:
        if qualified.startswith(prefix):
            return replacement + qualified[len(prefix):]
    return qualified
