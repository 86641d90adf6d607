"""Deprecated and removed torch APIs (TL904's table), torchvision's legacy ``pretrained=`` weights
(TL907's table) and TorchFix's codes with their torchlint counterparts (migration).

Plain data: no libcst, no torch. ``tests/behaviour/test_fix_behaviour_compat.py`` checks the
table against the installed torch (each name exists or raises as removed, each pure rename returns
equal results).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, FrozenSet, Optional, Tuple

Version = Tuple[int, int]


@dataclass(frozen=True)
class Deprecation:
    name: str  #: canonical qualified name of the deprecated callable
    deprecated: Version  #: first torch release that deprecates it (warning or documented)
    removed: Optional[Version]  #: first release where calling it fails, None while it still works
    replacement: Optional[str]  #: what to use instead (a qualified name), None when it is a rewrite
    #: The replacement is a pure rename at ``replacement_since`` and later: same parameters, same
    #: result. ``pure_args`` narrows "pure" to calls with at most that many positional arguments and
    #: only those keywords (``torch.qr(A)`` is ``torch.linalg.qr(A)``; ``torch.qr(A, False)`` is not).
    pure: bool = False
    pure_args: Optional[Tuple[int, FrozenSet[str]]] = None
    replacement_since: Version = (0, 0)
    hint: str = ""  #: one line on how to migrate when it is not a rename


def _d(name, deprecated, removed, replacement, hint="", pure=False, pure_args=None, since=(0, 0)):
    return Deprecation(name, deprecated, removed, replacement, pure, pure_args, since, hint)


_INPUT_ONLY: Tuple[int, FrozenSet[str]] = (1, frozenset())

DEPRECATIONS: Dict[str, Deprecation] = {d.name: d for d in (
    # linear algebra: torch.linalg since 1.8/1.9
    _d("torch.solve", (1, 9), (1, 13), "torch.linalg.solve", "arguments are reversed: `torch.linalg.solve(A, B)`; no LU is returned"),
    _d("torch.symeig", (1, 9), (1, 13), "torch.linalg.eigh", "`torch.linalg.eigh(A, UPLO=...)`; eigenvalues only: `torch.linalg.eigvalsh`"),
    _d("torch.eig", (1, 9), (1, 13), "torch.linalg.eig", "returns complex eigenvalues and eigenvectors"),
    _d("torch.lstsq", (1, 9), (1, 13), "torch.linalg.lstsq", "arguments are reversed: `torch.linalg.lstsq(A, B).solution`"),
    _d("torch.matrix_rank", (1, 9), (1, 13), "torch.linalg.matrix_rank", "`symmetric=` is `hermitian=`"),
    _d("torch.qr", (1, 9), None, "torch.linalg.qr", "`some=False` is `mode=\"complete\"`", pure_args=_INPUT_ONLY, since=(1, 8)),
    _d("torch.cholesky", (1, 9), None, "torch.linalg.cholesky", "`upper=True` is `torch.linalg.cholesky(A).mH`", pure_args=_INPUT_ONLY, since=(1, 8)),
    _d("torch.chain_matmul", (1, 9), None, "torch.linalg.multi_dot", "pass the matrices as one list: `multi_dot([a, b, c])`"),
    _d("torch.ger", (1, 8), None, "torch.outer", pure=True, since=(1, 8)),
    _d("torch.svd", (1, 9), None, "torch.linalg.svd", "returns `Vh`, not `V`; `some=True` is `full_matrices=False`"),
    _d("torch.triangular_solve", (1, 11), None, "torch.linalg.solve_triangular", "arguments are reversed and `upper=` is keyword-only"),
    _d("torch.lu", (1, 13), None, "torch.linalg.lu_factor", "`get_infos=True` is `torch.linalg.lu_factor_ex`"),
    _d("torch.lu_solve", (1, 13), None, "torch.linalg.lu_solve", "`torch.linalg.lu_solve(LU, pivots, B)`: B comes last"),
    _d("torch.norm", (1, 9), None, "torch.linalg.norm", "`torch.linalg.vector_norm` / `matrix_norm` say which norm is meant"),
    # tensors, modules, functions
    _d("torch.range", (0, 4), None, "torch.arange", "`torch.arange` excludes the end: `torch.arange(start, end + step, step)`"),
    _d("torch.set_default_tensor_type", (2, 1), None, "torch.set_default_dtype", "and `torch.set_default_device` for the device"),
    _d("torch.nn.UpsamplingNearest2d", (0, 4), None, "torch.nn.Upsample", "`nn.Upsample(..., mode=\"nearest\")`"),
    _d("torch.nn.UpsamplingBilinear2d", (0, 4), None, "torch.nn.Upsample", "`nn.Upsample(..., mode=\"bilinear\", align_corners=True)`"),
    _d("torch.nn.functional.upsample", (0, 4), None, "torch.nn.functional.interpolate", pure=True),
    _d("torch.nn.functional.upsample_nearest", (0, 4), None, "torch.nn.functional.interpolate", "`interpolate(x, ..., mode=\"nearest\")`"),
    _d("torch.nn.functional.upsample_bilinear", (0, 4), None, "torch.nn.functional.interpolate", "`interpolate(x, ..., mode=\"bilinear\", align_corners=True)`"),
    _d("torch.nn.functional.sigmoid", (0, 4), None, "torch.sigmoid", pure=True),
    _d("torch.nn.functional.tanh", (0, 4), None, "torch.tanh", pure=True),
    _d("torch.nn.utils.weight_norm", (2, 1), None, "torch.nn.utils.parametrizations.weight_norm", "the parametrization stores `original0`/`original1`, not `weight_g`/`weight_v`: old checkpoints need a key mapping"),
    _d("torch.testing.assert_allclose", (1, 12), None, "torch.testing.assert_close", "different default tolerances, and `equal_nan` defaults to False"),
    _d("torch.backends.cuda.sdp_kernel", (2, 3), None, "torch.nn.attention.sdpa_kernel", "takes a list of `SDPBackend`s instead of booleans"),
    _d("torch.utils._pytree._register_pytree_node", (2, 2), None, "torch.utils._pytree.register_pytree_node",
       pure_args=(3, frozenset({"to_dumpable_context", "from_dumpable_context"})), since=(2, 2)),
    _d("torch.nn.utils.stateless.functional_call", (2, 0), None, "torch.func.functional_call",
       pure_args=(4, frozenset({"args", "kwargs", "tie_weights", "strict"})), since=(2, 0)),
    # mixed precision: the device-generic torch.amp since 2.3/2.4
    # (autocast and GradScaler are TL404 legacy-amp-api's, with its fix; not reported twice)
    _d("torch.cuda.amp.custom_fwd", (2, 4), None, "torch.amp.custom_fwd", "`torch.amp.custom_fwd(device_type=\"cuda\")`"),
    _d("torch.cuda.amp.custom_bwd", (2, 4), None, "torch.amp.custom_bwd", "`torch.amp.custom_bwd(device_type=\"cuda\")`"),
    # functorch was merged into torch.func in 2.0
    *(_d(f"functorch.{fn}", (2, 0), None, f"torch.func.{fn}", pure=True, since=(2, 0))
      for fn in ("vmap", "grad", "grad_and_value", "vjp", "jvp", "jacrev", "jacfwd", "hessian", "functionalize")),
)}

#: Last name components, for the prefilter (a call's last component is always in the text).
DEPRECATED_TOKENS: Tuple[str, ...] = tuple(sorted({name.rsplit(".", 1)[1] for name in DEPRECATIONS}))


def is_pure_rename(entry: Deprecation, positional: int, keywords: FrozenSet[str], version: Version) -> bool:
    """Can a call with ``positional`` arguments and these ``keywords`` be renamed as it stands?"""
    if entry.replacement is None or version < entry.replacement_since:
        return False
    if entry.pure:
        return True
    if entry.pure_args is None:
        return False
    most, allowed = entry.pure_args
    return positional <= most and keywords <= allowed


# -- TL907: what `pretrained=True` loaded, per torchvision model builder ------------------------
# torchvision's own legacy handling maps `pretrained=True` to these weights (not to `.DEFAULT`,
# which for resnet50, mobilenet_v2, regnet, vit_b_16, ... is a newer, different checkpoint).
# builder -> (weights enum, member, backbone weights for `pretrained_backbone=True` or None).
_IMAGENET = "IMAGENET1K_V1"
TORCHVISION_WEIGHTS: Dict[str, Tuple[str, str, Optional[str]]] = {
    **{f"resnet{n}": (f"ResNet{n}_Weights", _IMAGENET, None) for n in (18, 34, 50, 101, 152)},
    "resnext50_32x4d": ("ResNeXt50_32X4D_Weights", _IMAGENET, None),
    "resnext101_32x8d": ("ResNeXt101_32X8D_Weights", _IMAGENET, None),
    "resnext101_64x4d": ("ResNeXt101_64X4D_Weights", _IMAGENET, None),
    "wide_resnet50_2": ("Wide_ResNet50_2_Weights", _IMAGENET, None),
    "wide_resnet101_2": ("Wide_ResNet101_2_Weights", _IMAGENET, None),
    "alexnet": ("AlexNet_Weights", _IMAGENET, None),
    "googlenet": ("GoogLeNet_Weights", _IMAGENET, None),
    "inception_v3": ("Inception_V3_Weights", _IMAGENET, None),
    **{f"vgg{n}{bn}": (f"VGG{n}{bn.upper()}_Weights", _IMAGENET, None) for n in (11, 13, 16, 19) for bn in ("", "_bn")},
    **{f"densenet{n}": (f"DenseNet{n}_Weights", _IMAGENET, None) for n in (121, 161, 169, 201)},
    "mobilenet_v2": ("MobileNet_V2_Weights", _IMAGENET, None),
    "mobilenet_v3_large": ("MobileNet_V3_Large_Weights", _IMAGENET, None),
    "mobilenet_v3_small": ("MobileNet_V3_Small_Weights", _IMAGENET, None),
    **{f"mnasnet{n}": (f"MNASNet{n}_Weights", _IMAGENET, None) for n in ("0_5", "0_75", "1_0", "1_3")},
    **{f"shufflenet_v2_x{n}": (f"ShuffleNet_V2_X{n}_Weights", _IMAGENET, None) for n in ("0_5", "1_0", "1_5", "2_0")},
    "squeezenet1_0": ("SqueezeNet1_0_Weights", _IMAGENET, None),
    "squeezenet1_1": ("SqueezeNet1_1_Weights", _IMAGENET, None),
    **{f"efficientnet_b{n}": (f"EfficientNet_B{n}_Weights", _IMAGENET, None) for n in range(8)},
    **{f"efficientnet_v2_{s}": (f"EfficientNet_V2_{s.upper()}_Weights", _IMAGENET, None) for s in "sml"},
    **{f"convnext_{s}": (f"ConvNeXt_{s.capitalize()}_Weights", _IMAGENET, None) for s in ("tiny", "small", "base", "large")},
    **{f"vit_{s}": (f"ViT_{s.upper()}_Weights", _IMAGENET, None) for s in ("b_16", "b_32", "l_16", "l_32")},
    **{f"regnet_{k}_{s}": (f"RegNet_{k.upper()}_{s.upper()}_Weights", _IMAGENET, None)
       for k in "xy" for s in ("400mf", "800mf", "1_6gf", "3_2gf", "8gf", "16gf", "32gf")},
    # detection / segmentation: their own weights, and an ImageNet backbone
    "detection.fasterrcnn_resnet50_fpn": ("FasterRCNN_ResNet50_FPN_Weights", "COCO_V1", "ResNet50_Weights"),
    "detection.fasterrcnn_mobilenet_v3_large_fpn": ("FasterRCNN_MobileNet_V3_Large_FPN_Weights", "COCO_V1", "MobileNet_V3_Large_Weights"),
    "detection.fasterrcnn_mobilenet_v3_large_320_fpn": ("FasterRCNN_MobileNet_V3_Large_320_FPN_Weights", "COCO_V1", "MobileNet_V3_Large_Weights"),
    "detection.maskrcnn_resnet50_fpn": ("MaskRCNN_ResNet50_FPN_Weights", "COCO_V1", "ResNet50_Weights"),
    "detection.keypointrcnn_resnet50_fpn": ("KeypointRCNN_ResNet50_FPN_Weights", "COCO_V1", "ResNet50_Weights"),
    "detection.retinanet_resnet50_fpn": ("RetinaNet_ResNet50_FPN_Weights", "COCO_V1", "ResNet50_Weights"),
    "detection.ssd300_vgg16": ("SSD300_VGG16_Weights", "COCO_V1", None),
    "detection.ssdlite320_mobilenet_v3_large": ("SSDLite320_MobileNet_V3_Large_Weights", "COCO_V1", "MobileNet_V3_Large_Weights"),
    "segmentation.fcn_resnet50": ("FCN_ResNet50_Weights", "COCO_WITH_VOC_LABELS_V1", "ResNet50_Weights"),
    "segmentation.fcn_resnet101": ("FCN_ResNet101_Weights", "COCO_WITH_VOC_LABELS_V1", "ResNet101_Weights"),
    "segmentation.deeplabv3_resnet50": ("DeepLabV3_ResNet50_Weights", "COCO_WITH_VOC_LABELS_V1", "ResNet50_Weights"),
    "segmentation.deeplabv3_resnet101": ("DeepLabV3_ResNet101_Weights", "COCO_WITH_VOC_LABELS_V1", "ResNet101_Weights"),
    "segmentation.deeplabv3_mobilenet_v3_large": ("DeepLabV3_MobileNet_V3_Large_Weights", "COCO_WITH_VOC_LABELS_V1", "MobileNet_V3_Large_Weights"),
    "segmentation.lraspp_mobilenet_v3_large": ("LRASPP_MobileNet_V3_Large_Weights", "COCO_WITH_VOC_LABELS_V1", "MobileNet_V3_Large_Weights"),
}
# Submodules a builder may also be imported from: torchvision.models.resnet.resnet50.
TORCHVISION_SUBMODULES = frozenset({
    "alexnet", "convnext", "densenet", "efficientnet", "googlenet", "inception", "mnasnet", "mobilenet",
    "mobilenetv2", "mobilenetv3", "regnet", "resnet", "shufflenetv2", "squeezenet", "vgg", "vision_transformer",
})


# -- migration: TorchFix's codes -> torchlint's --------------------------------------------------
#: A ``# noqa: TORxxx`` suppresses the counterpart, and ``ignore = ["TORxxx"]`` ignores it.
TORCHFIX_CODES: Dict[str, str] = {
    "TOR001": "TL904",  # use of a removed function
    "TOR003": "TL903",  # checkpoint without use_reentrant
    "TOR004": "TL904",  # import of a removed function (torchlint flags the calls)
    "TOR101": "TL904",  # use of a deprecated function
    "TOR102": "TL901",  # torch.load without weights_only
    "TOR103": "TL904",  # import of a deprecated function (torchlint flags the calls)
    "TOR201": "TL907",  # torchvision pretrained=
    "TOR401": "TL101",  # DataLoader without workers
}
