# SPDX-License-Identifier: MIT
# stk-test: pixels (compared with an independent implementation: also run in the Release build)
"""BICUBIC and NEAREST resize, and Resize((h, w)), against torchvision on Pillow images.

torchvision's resize of a PIL image is Pillow's Image.resize(size, filter): BICUBIC is the
antialiased a = -0.5 cubic (support 2, 22-bit fixed point, 8-bit intermediate), NEAREST goes
through ImagingScaleAffine (a running double sum of the scale). stoker re-implements both, so
every sample decoded at DCT scale 8/8 is byte-identical:
  train: stk-aug's crop fed to torchvision's resized_crop(..., interpolation) (+ hflip);
  eval:  Resize(R or (h, w), interpolation) + CenterCrop(S), and Resize((h, w)) alone;
  end to end: stoker.Loader(interpolation=, resize=) against torchvision's transforms on the same
  ImageFolder, train through RandomResizedCrop's deterministic centre fallback.
Images: /work/data/imagenet-like (every 50th file) when present, else libjpeg-written ones of
several sizes, from 61 x 47 (upscaled) to 1500 x 1100 (downscaled several times).
"""
import functools
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
torchvision = pytest.importorskip("torchvision")
from PIL import Image  # noqa: E402
import torchvision.transforms as T  # noqa: E402
import torchvision.transforms.functional as F  # noqa: E402

import stoker  # noqa: E402
from stoker.loader import installed_pillow_passes  # noqa: E402

TOOLS = Path(os.environ.get("TEST_TOOLS_DIR", ""))
DATA = Path("/work/data/imagenet-like")
MANIFEST = Path("/work/data/imagenet-like.manifest.tsv")
MODES = {"bicubic": (1, T.InterpolationMode.BICUBIC), "nearest": (2, T.InterpolationMode.NEAREST),
         "bilinear": (0, T.InterpolationMode.BILINEAR)}
SIZES = [(61, 47), (150, 230), (224, 224), (333, 250), (500, 375), (640, 480), (801, 599),
         (1023, 767), (1500, 1100), (300, 1200)]


def _images(tmp_path):
    """the JPEGs every comparison below runs on, written once per module (the `images` fixture):
    the same files whichever test reads them, as when each test wrote its own copy"""
    if MANIFEST.exists() and DATA.is_dir():
        rows = [l.rstrip("\n").split("\t") for l in MANIFEST.read_text().splitlines()[1:]]
        paths = [str(DATA / r[1]) for i, r in enumerate(rows)
                 if i % 50 == 0 and (DATA / r[1]).exists()]
        if len(paths) >= 60:
            return paths[:120]
    kinds = ["420", "444", "422", "gray", "cmyk", "440"]
    paths = []
    for i in range(30):
        w, h = SIZES[i % len(SIZES)]
        w, h = w + (i // len(SIZES)) * 7, h + (i // len(SIZES)) * 3
        p = tmp_path / f"g{i:02d}.jpg"
        subprocess.run([str(TOOLS / "stk-mkjpeg"), str(w), str(h), kinds[i % 6], str(i % 2), "90",
                        str(i), str(p)], check=True)
        paths.append(str(p))
    return paths


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    return _images(tmp_path_factory.mktemp("jpegs"))


def _stk(mode, paths, tmp_path, interp, out=(224, 224), resize=256, resize_hw=None, seed=3, dct=0):
    lst = tmp_path / "list.txt"
    lst.write_text("\n".join(paths) + "\n")
    raw = tmp_path / "out.raw"
    args = [str(TOOLS / "stk-aug"), "process", mode, str(out[0]), str(out[1]), str(resize),
            str(dct), str(seed), "0", str(lst), str(raw), str(MODES[interp][0])]
    rh, rw = resize_hw or (0, 0)
    args += [str(rh), str(rw), str(installed_pillow_passes())]  # the Pillow torchvision calls here
    r = subprocess.run(args, check=True, capture_output=True, text=True)
    meta = [l.split() for l in r.stdout.splitlines()]
    return meta, np.fromfile(raw, dtype=np.uint8).reshape(len(paths), out[0], out[1], 3)


@functools.lru_cache(maxsize=None)
def _rgb(p):
    """Pillow's decode of P, once per file: the tests share their JPEGs, and torchvision's
    transforms return new images (the cached one is only read)"""
    with Image.open(p) as im:
        return im.convert("RGB")


def _assert_same(name, p, got, ref):
    assert got.shape == ref.shape, (name, p, got.shape, ref.shape)
    if not np.array_equal(got, ref):
        idx = np.argwhere(got != ref)
        pytest.fail(f"{name}: {p}: {len(idx)} bytes differ from torchvision, first at {idx[0]}: "
                    f"{got[tuple(idx[0][:2])]} vs {ref[tuple(idx[0][:2])]}")


@pytest.mark.parametrize("interp", ["bicubic", "nearest"])
def test_train_resized_crop(interp, images, tmp_path):
    paths = images
    meta, imgs = _stk("train", paths, tmp_path, interp)
    ups = downs = 0
    for p, m, got in zip(paths, meta, imgs):
        assert m[1] == "STK_OK" and m[2] == "8", m
        x, y, w, h, flip = (int(v) for v in m[3:8])
        ups += w < 224 or h < 224
        downs += w > 224 or h > 224
        ref = F.resized_crop(_rgb(p), y, x, h, w, [224, 224], interpolation=MODES[interp][1])
        if flip:
            ref = F.hflip(ref)
        _assert_same(f"train {interp}", p, got, np.asarray(ref))
    assert ups and downs, (ups, downs)  # both directions exercised


@pytest.mark.parametrize("interp", ["bicubic", "nearest"])
@pytest.mark.parametrize("resize,out", [(256, (224, 224)), (232, (224, 224)), (180, (224, 200))])
def test_eval_resize_center_crop(interp, resize, out, images, tmp_path):
    """Resize(R) + CenterCrop: downscales, upscales (the 61 x 47 image) and, at 180 < 224, the
    zero padding of a crop larger than the resized image."""
    paths = images
    meta, imgs = _stk("eval", paths, tmp_path, interp, out=out, resize=resize)
    tf = T.Compose([T.Resize(resize, interpolation=MODES[interp][1]), T.CenterCrop(out)])
    for p, m, got in zip(paths, meta, imgs):
        assert m[1] == "STK_OK" and m[2] == "8", m
        _assert_same(f"eval {interp} Resize({resize})+CenterCrop{out}", p, got,
                     np.asarray(tf(_rgb(p))))


@pytest.mark.parametrize("interp", ["bilinear", "bicubic", "nearest"])
@pytest.mark.parametrize("hw,out", [((224, 224), (224, 224)), ((256, 320), (224, 224)),
                                    ((97, 301), (97, 301))])
def test_eval_resize_hw(interp, hw, out, images, tmp_path):
    """Resize((h, w)): every image to exactly h x w (aspect not kept), then CenterCrop(out) (none
    when out == (h, w))."""
    paths = images
    meta, imgs = _stk("eval", paths, tmp_path, interp, out=out, resize_hw=hw)
    tf = T.Compose([T.Resize(hw, interpolation=MODES[interp][1]), T.CenterCrop(out)])
    for p, m, got in zip(paths, meta, imgs):
        assert m[1] == "STK_OK", m
        _assert_same(f"eval {interp} Resize({hw})+CenterCrop{out}", p, got, np.asarray(tf(_rgb(p))))


def test_bicubic_dct_scaled_close(tmp_path):
    """Large images with dct_scaling on: BICUBIC from a 1/8..4/8 decode is close to torchvision's
    (PSNR >= 30 dB over all), exact where the scale is 8/8; NEAREST never takes a smaller scale."""
    paths = []
    for i, (w, h) in enumerate([(1800, 1400), (1200, 900), (2000, 600), (700, 2100), (950, 1300)]):
        p = tmp_path / f"big{i}.jpg"
        kind = ["420", "444", "422", "gray", "420"][i]
        subprocess.run([str(TOOLS / "stk-mkjpeg"), str(w), str(h), kind, str(i % 2), "90",
                        str(100 + i), str(p)], check=True)
        paths.append(str(p))
    tf = T.Compose([T.Resize(256, interpolation=T.InterpolationMode.BICUBIC), T.CenterCrop(224)])
    meta, imgs = _stk("eval", paths, tmp_path, "bicubic", dct=1)
    assert {m[2] for m in meta} & {"1", "2", "4"}, meta
    sq = n = 0
    for p, m, got in zip(paths, meta, imgs):
        ref = np.asarray(tf(_rgb(p)))
        if m[2] == "8":
            _assert_same("eval bicubic at 8/8", p, got, ref)
        d = got.astype(np.int64) - ref
        sq, n = sq + float((d * d).sum()), n + d.size
    psnr = 10 * np.log10(255.0 ** 2 / (sq / n))
    print(f"bicubic, DCT-scaled decode: PSNR {psnr:.2f} dB", file=sys.stderr)
    assert psnr >= 30.0, psnr
    meta, _ = _stk("eval", paths, tmp_path, "nearest", dct=1)
    assert {m[2] for m in meta} == {"8"}, meta


def _folder(tmp_path, images):
    root = tmp_path / "folder"
    (root / "a").mkdir(parents=True)
    for i, p in enumerate(images[:24]):
        os.link(p, root / "a" / f"{i:03d}.jpg")
    return root


def _through_loader(root, tf, **kw):
    ds = torchvision.datasets.ImageFolder(str(root))
    n = 0
    with stoker.Loader(root, 5, shuffle=False, workers=2, return_index=True, layout="NHWC",
                       **kw) as ld:
        for images, _, idx in ld:
            for img, i in zip(images.numpy(), idx.tolist()):
                p = ds.samples[i][0]
                _assert_same(f"Loader({kw})", p, img, np.asarray(tf(_rgb(p))))
                n += 1
    assert n == len(ds)


@pytest.mark.parametrize("interp", ["bicubic", "nearest"])
def test_loader_eval_end_to_end(interp, images, tmp_path):
    root = _folder(tmp_path, images)
    mode = MODES[interp][1]
    _through_loader(root, T.Compose([T.Resize(232, interpolation=mode), T.CenterCrop(224)]),
                    train=False, size=224, resize=232, interpolation=interp, dct_scaling=False)
    _through_loader(root, T.Resize((160, 288), interpolation=mode), train=False, size=(160, 288),
                    resize=(160, 288), interpolation=mode, dct_scaling=False)


@pytest.mark.parametrize("interp", ["bicubic", "nearest"])
def test_loader_train_end_to_end(interp, images, tmp_path):
    """RandomResizedCrop with scale (1, 1) and ratio (2.9, 3) takes its centre fallback on every
    image here (aspect < 2.9 or > 3: no try fits), the same crop in torchvision and stoker. NEAREST
    runs with the default dct_scaling (it always decodes at 8/8); BICUBIC with dct_scaling=False."""
    root = _folder(tmp_path, images)
    tf = T.RandomResizedCrop((112, 160), scale=(1.0, 1.0), ratio=(2.9, 3.0),
                             interpolation=MODES[interp][1])
    kw = {} if interp == "nearest" else {"dct_scaling": False}
    _through_loader(root, tf, train=True, size=(112, 160), scale=(1.0, 1.0), ratio=(2.9, 3.0),
                    flip_prob=0.0, interpolation=interp, **kw)


def test_interpolation_names():
    from PIL import Image as I
    from stoker import _lib
    from stoker.loader import parse_interpolation as parse
    for want, names in ((_lib.INTERP_BICUBIC, ["bicubic", "BICUBIC", T.InterpolationMode.BICUBIC,
                                                I.BICUBIC]),
                        (_lib.INTERP_NEAREST, ["nearest", T.InterpolationMode.NEAREST, I.NEAREST]),
                        (_lib.INTERP_BILINEAR, ["bilinear", T.InterpolationMode.BILINEAR,
                                                I.BILINEAR])):
        assert [parse(n) for n in names] == [want] * len(names), names
    for bad in ("lanczos", T.InterpolationMode.LANCZOS, I.LANCZOS, True, None):
        with pytest.raises(ValueError, match="interpolation"):
            parse(bad)


def test_bad_arguments():
    with pytest.raises(ValueError, match="interpolation"):
        stoker.Loader("/nonexistent", 4, interpolation="lanczos")
    with pytest.raises(ValueError, match="resize"):
        stoker.Loader("/nonexistent", 4, train=False, resize=(1, 2, 3))


def test_resize_hw_both_or_neither(imagefolder):
    from stoker import _lib
    with pytest.raises(stoker.InvalidArgument,
                       match="STK_P_RESIZE_HEIGHT = 100 and STK_P_RESIZE_WIDTH = 0"):
        with stoker.Loader(imagefolder[0], 4, train=False,
                           options={_lib.P_RESIZE_HEIGHT: 100}) as ld:
            next(iter(ld))
