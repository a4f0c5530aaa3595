"""The pretrained path a learner's first run takes (ImageNet weights through torchvision's or
efficientnet_pytorch's downloader), tested offline: each downloader reads a file already in torch.hub's cache
without connecting, so the test writes a file of the right name and layout there. Its weights are random, made
here, never downloaded."""

import os
import urllib.request
from pathlib import Path
import pytest
import torch
from conftest import REPO


def _weights_file(arch: str) -> tuple[str, dict]:
    "The file name the downloader of `arch` looks for, and a random state dict in the layout it expects."
    if arch == "efficientnet-b0":
        from efficientnet_pytorch import EfficientNet
        from efficientnet_pytorch.utils import url_map

        return Path(url_map[arch]).name, EfficientNet.from_name(arch).state_dict()
    import torchvision

    weights = torchvision.models.get_model_weights(arch).DEFAULT
    return Path(weights.url).name, getattr(torchvision.models, arch)().state_dict()


def fill_cache(torch_home: Path, arch: str) -> dict:
    "Put random ImageNet-layout weights for `arch` where torch.hub looks for them; returns them."
    name, state = _weights_file(arch)
    state = {k: torch.randn_like(v) if v.is_floating_point() else v for k, v in state.items()}
    (torch_home / "hub" / "checkpoints").mkdir(parents=True, exist_ok=True)
    torch.save(state, torch_home / "hub" / "checkpoints" / name)
    return state


@pytest.mark.parametrize("arch", ["efficientnet_b0", "efficientnet-b0", "resnet18"])
def test_pretrained_weights_load_from_the_cache_without_a_connection(arch, tmp_path, monkeypatch):
    from course_lib.pytorch_loop import create_model

    monkeypatch.setenv("TORCH_HOME", str(tmp_path))
    saved = fill_cache(tmp_path, arch)

    def no_network(*a, **k):
        raise AssertionError("the cached weights were not used: a download was attempted")

    monkeypatch.setattr(urllib.request, "urlopen", no_network)
    model = create_model(arch, pretrained=True)
    loaded = model.state_dict()
    head = {"efficientnet_b0": "classifier.1.", "efficientnet-b0": "_fc.", "resnet18": "fc."}[arch]
    body = [k for k in saved if not k.startswith(head)]
    assert body and all(torch.equal(loaded[k], saved[k]) for k in body), "every weight but the head's loads"
    assert model(torch.randn(2, 3, 64, 64)).shape == (2, 1), "a new one-logit head"


def test_a_damaged_cached_file_is_one_clear_error(tmp_path, monkeypatch):
    from course_lib.pytorch_loop import create_model
    from course_lib.support.errors import CourseLibError

    monkeypatch.setenv("TORCH_HOME", str(tmp_path))
    name, _ = _weights_file("efficientnet_b0")
    (tmp_path / "hub" / "checkpoints").mkdir(parents=True)
    (tmp_path / "hub" / "checkpoints" / name).write_bytes(b"not a checkpoint")
    with pytest.raises(CourseLibError, match="no pretrained efficientnet_b0 weights could be loaded"):
        create_model("efficientnet_b0", pretrained=True)


def test_chapter_03_sets_up_from_the_cached_weights_outside_smoke_mode(sample_dir, tmp_path):
    """Chapter 03's setup as a learner with the internet runs it (SMOKE=False, PRETRAINED=True): every cell
    up to the one that builds the model, which loads the cached ImageNet weights (no connection here
    could download them)."""
    import json
    from course_lib.book.runner import run_notebook

    nb = json.loads((REPO / "nbs" / "03_pytorch_loop.ipynb").read_text())
    builds = "model = create_model(ARCH, pretrained=PRETRAINED)"
    last = next(i for i, c in enumerate(nb["cells"]) if builds in "".join(c["source"]))
    nb["cells"] = nb["cells"][: last + 1]
    setup = tmp_path / "03_setup.ipynb"
    setup.write_text(json.dumps(nb))
    fill_cache(tmp_path / "torch", "efficientnet_b0")
    env = {**os.environ, "TORCH_HOME": str(tmp_path / "torch"), "COURSE_LIB_CACHE": str(tmp_path / "cache")}
    params = dict(SMOKE=False, DATA_DIR=str(sample_dir), PRETRAINED=True)
    row = run_notebook(setup, tmp_path / "run", params, 600, env)
    assert row["status"] == "ok", row["error"]
    ran = json.loads((tmp_path / "run" / setup.name).read_text())["cells"][-1]  # after papermill's own cell
    assert builds in "".join(ran["source"])
    shown = "".join("".join(o.get("text", "")) for o in ran["outputs"])
    assert "Linear(in_features=1280, out_features=1" in shown and "4.0 M parameters" in shown, shown
