"""Export a zoo of torchvision and timm architectures to ONNX, with random weights,
for ``benchmarks/onnx_models.py --zoo`` (issue 15, target 1).

Each model is built with random weights (``weights=None`` / ``pretrained=False``,
``torch.manual_seed(seed)`` before each one), put in eval mode, and exported at
batch 1 (224x224 unless the model needs another size: inception_v3 takes
299x299) by ``torch.onnx.export`` to ``OUT/<name>.onnx``. A model whose file
is already there is skipped. ``OUT/manifest.json`` lists every model (name,
family, input shape, opset, file size, exporter, torch / torchvision / timm
versions) and, for a model that failed to build or export, the error.

The exporter is the legacy TorchScript one (``dynamo=False``) at opset 17: it
writes the plain ONNX ops graphc imports (Conv, Gemm, BatchNormalization...),
where the dynamo exporter decomposes more and leaves ops graphc lacks.

This needs torch, torchvision, timm and onnx, which graphc's own environment
does not have (its torch 2.13 CPU wheel comes without torchvision). Run it with
a separate environment (see docs/benchmarks-peers.md)::

    /work/venv-export/bin/python benchmarks/export_zoo.py            # all models
    /work/venv-export/bin/python benchmarks/export_zoo.py --models resnet18 vit_b_16
    /work/venv-export/bin/python benchmarks/export_zoo.py --list     # names, families

>>> [m.name for m in MODELS if m.family == "MLP-mixer"]  # doctest: +SKIP
['mixer_b16_224', 'resmlp_12_224']
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
import warnings
from dataclasses import dataclass

DEFAULT_OUT = os.path.join(os.path.expanduser("~"), ".cache", "graphc", "onnx-zoo")
OPSET = 17


@dataclass(frozen=True)
class ZooModel:
    """One architecture of the zoo: where it comes from and what it takes."""
    name: str            # the torchvision / timm name, and the file's
    family: str
    library: str         # "torchvision" or "timm"
    size: int = 224      # input height and width

    @property
    def input_shape(self) -> tuple:
        return (1, 3, self.size, self.size)


_T, _M = "torchvision", "timm"
MODELS = (
    # mobile nets, built on depthwise or grouped convolutions
    ZooModel("mobilenet_v2", "mobile/depthwise", _T),
    ZooModel("mobilenet_v3_small", "mobile/depthwise", _T),
    ZooModel("mobilenet_v3_large", "mobile/depthwise", _T),
    ZooModel("mnasnet0_5", "mobile/depthwise", _T),
    ZooModel("mnasnet1_0", "mobile/depthwise", _T),
    ZooModel("shufflenet_v2_x1_0", "mobile/depthwise", _T),
    ZooModel("efficientnet_b0", "mobile/depthwise", _T),
    ZooModel("tf_efficientnet_lite0", "mobile/depthwise", _M),
    ZooModel("ghostnet_100", "mobile/depthwise", _M),
    ZooModel("mobilevit_xxs", "mobile/depthwise", _M, size=256),
    # residual nets
    ZooModel("resnet18", "ResNet-like", _T),
    ZooModel("resnet50", "ResNet-like", _T),
    ZooModel("resnext50_32x4d", "ResNet-like", _T),
    ZooModel("wide_resnet50_2", "ResNet-like", _T),
    ZooModel("regnet_y_800mf", "ResNet-like", _T),
    ZooModel("convnext_tiny", "ResNet-like", _T),
    # dense and inception nets
    ZooModel("densenet121", "dense/inception", _T),
    ZooModel("googlenet", "dense/inception", _T),
    ZooModel("inception_v3", "dense/inception", _T, size=299),
    # parallel resolutions fused by upsampling (ONNX Resize)
    ZooModel("hrnet_w18_small", "dense/inception", _M),
    # plain convolutional stacks
    ZooModel("alexnet", "classic CNN", _T),
    ZooModel("vgg11_bn", "classic CNN", _T),
    ZooModel("squeezenet1_1", "classic CNN", _T),
    # transformers
    ZooModel("vit_b_16", "transformer", _T),   # its zero head is redrawn (see build)
    ZooModel("vit_tiny_patch16_224", "transformer", _M),
    ZooModel("deit_tiny_distilled_patch16_224", "transformer", _M),
    ZooModel("swin_t", "transformer", _T),
    ZooModel("swin_tiny_patch4_window7_224", "transformer", _M),
    ZooModel("levit_128s", "transformer", _M),
    ZooModel("efficientformer_l1", "transformer", _M),
    # MLP-mixers
    ZooModel("mixer_b16_224", "MLP-mixer", _M),
    ZooModel("resmlp_12_224", "MLP-mixer", _M),
)


def build(model: ZooModel, seed: int):
    """The torch module of ``model`` with random weights (seeded), in eval mode."""
    import torch

    torch.manual_seed(seed)
    name = model.name
    if model.library == _T:
        import torchvision

        extra = {"aux_logits": False, "init_weights": True} \
            if name in ("googlenet", "inception_v3") else {}
        module = torchvision.models.get_model(name, weights=None, **extra)
    else:
        import timm

        module = timm.create_model(name, pretrained=False)
    _fill_zero_weights(module)
    return module.eval()


def _fill_zero_weights(module) -> None:
    """Redraw the weights a library's init leaves all zero, which would make the
    outputs check nothing: a weight matrix (torchvision's vit_b_16 head) gets
    N(0, 0.02), a normalisation's scale (timm's zero-init last batch norm of a
    residual branch) gets ones. Biases stay zero."""
    import torch

    with torch.no_grad():
        for name, param in module.named_parameters():
            if param.any():
                continue
            if param.dim() >= 2:
                param.normal_(0.0, 0.02)
            elif name.endswith("weight"):
                param.fill_(1.0)


def export(model: ZooModel, path: str, seed: int, opset: int = OPSET) -> None:
    """Build ``model`` and write it to ``path`` (through a temporary file, so an
    interrupted export leaves nothing that looks finished)."""
    import torch

    module = build(model, seed)
    example = torch.randn(model.input_shape, generator=torch.Generator().manual_seed(seed))
    partial = path + ".partial"
    # nn.MultiheadAttention's eval fast path is one fused aten op the ONNX exporter
    # lacks (vit_b_16); the plain path computes the same attention
    fastpath = torch.backends.mha.get_fastpath_enabled()
    torch.backends.mha.set_fastpath_enabled(False)
    try:
        with torch.no_grad(), warnings.catch_warnings():
            # the legacy exporter is chosen on purpose (see the module doc)
            warnings.simplefilter("ignore", DeprecationWarning)
            torch.onnx.export(module, (example,), partial, dynamo=False, opset_version=opset,
                              input_names=["input"], output_names=["logits"],
                              do_constant_folding=True)
    finally:
        torch.backends.mha.set_fastpath_enabled(fastpath)
    os.replace(partial, path)


def versions() -> dict:
    """The versions of the libraries that made the files."""
    import onnx
    import timm
    import torch
    import torchvision

    return {"torch": torch.__version__, "torchvision": torchvision.__version__,
            "timm": timm.__version__, "onnx": onnx.__version__,
            "python": sys.version.split()[0]}


def read_manifest(folder: str) -> dict:
    """The manifest of the zoo in ``folder`` (``{"models": {}}`` when there is none).

    Example: ``read_manifest(DEFAULT_OUT)["models"]["resnet18"]["family"]``
    """
    path = os.path.join(folder, "manifest.json")
    if not os.path.exists(path):
        return {"models": {}}
    with open(path) as f:
        return json.load(f)


def export_all(models, folder: str, seed: int, opset: int = OPSET) -> dict:
    """Export each of ``models`` missing from ``folder``; returns the updated manifest."""
    os.makedirs(folder, exist_ok=True)
    manifest = read_manifest(folder)
    manifest.update({"versions": versions(), "seed": seed,
                     "exporter": f"torch.onnx.export(dynamo=False), opset {opset}"})
    for model in models:
        path = os.path.join(folder, f"{model.name}.onnx")
        entry = {"name": model.name, "family": model.family, "library": model.library,
                 "input_shape": list(model.input_shape), "opset": opset,
                 "file": os.path.basename(path)}
        if os.path.exists(path):
            print(f"{model.name}: already there, skipped", file=sys.stderr)
            old = manifest["models"].get(model.name, {})
            entry.update({k: old[k] for k in ("export_seconds", "versions") if k in old})
        else:
            print(f"{model.name}: exporting", file=sys.stderr, flush=True)
            started = time.perf_counter()
            try:
                export(model, path, seed, opset)
            except Exception as exc:  # noqa: BLE001 - one model's failure is a result
                traceback.print_exc()
                entry["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}"
                manifest["models"][model.name] = entry
                continue
            entry["export_seconds"] = round(time.perf_counter() - started, 1)
            entry["versions"] = manifest["versions"]
        entry["bytes"] = os.path.getsize(path)
        manifest["models"][model.name] = entry
        with open(os.path.join(folder, "manifest.json"), "w") as f:
            json.dump(manifest, f, indent=1)
    with open(os.path.join(folder, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    return manifest


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=DEFAULT_OUT, help=f"the zoo folder (default {DEFAULT_OUT})")
    ap.add_argument("--models", nargs="+", help="export only these (default: all)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--opset", type=int, default=OPSET)
    ap.add_argument("--list", action="store_true", help="print the models and their families")
    args = ap.parse_args(argv)
    by_name = {m.name: m for m in MODELS}
    if args.list:
        for m in MODELS:
            print(f"{m.name:24s} {m.family:18s} {m.library:12s} {m.input_shape}")
        return
    unknown = sorted(set(args.models or ()) - set(by_name))
    if unknown:
        raise SystemExit(f"export_zoo: unknown models {unknown}; --list shows the zoo")
    chosen = [by_name[n] for n in args.models] if args.models else list(MODELS)
    manifest = export_all(chosen, args.out, args.seed, args.opset)
    failed = {n: e["error"] for n, e in manifest["models"].items() if "error" in e}
    print(f"{len(manifest['models']) - len(failed)} models in {args.out}; "
          f"{len(failed)} failed to export", file=sys.stderr)
    for name, error in failed.items():
        print(f"  {name}: {error}", file=sys.stderr)


if __name__ == "__main__":
    main()
