# SPDX-License-Identifier: MIT
"""stoker.DataLoader's transform parser: what it accepts gives torch's DataLoader's tensors,
what it refuses is named with its class, its position in the (flattened) list and what to use
instead. torchvision v1 always; torchvision.transforms.v2 and timm with their real classes where
they can be imported (Debian's torchvision 0.14 has no v2, Debian has no timm: those tests skip).
"""
import pytest

from conftest import make_imagefolder

torch = pytest.importorskip("torch")
torchvision = pytest.importorskip("torchvision")
import torchvision.transforms as T  # noqa: E402
from torchvision.datasets import ImageFolder  # noqa: E402
from torch.utils.data import DataLoader as TorchDataLoader  # noqa: E402

MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("parse_folder"))
    make_imagefolder(root, per_class=(5, 4, 4), seed=11)
    return root


def _v2():
    return pytest.importorskip("torchvision.transforms.v2")


def _debian_pil():
    """stoker's resampling reproduces the Pillow Debian ships (9.x) bit for bit; a pip Pillow
    (13.x in a venv with torch 2) resamples some images one level apart."""
    import PIL
    return PIL.__file__.startswith("/usr/lib/python3/")


def _batches(loader):
    return [(x.clone(), y.clone()) for x, y in loader]


def _equal_to_torch(ds, batch_size=4, same_as=None):
    """stoker.DataLoader(ds) gives torch's DataLoader(ds)'s batches: bit for bit under Debian's
    Pillow, within one 8-bit level under another. SAME_AS: a dataset whose transform is the v1
    equivalent: then stoker's and torch's batches must each equal their v1 ones exactly."""
    import stoker
    ours = _batches(stoker.DataLoader(ds, batch_size=batch_size))
    ref = _batches(TorchDataLoader(ds, batch_size=batch_size))
    assert len(ours) == len(ref)
    for (x, y), (u, v) in zip(ours, ref):
        assert x.dtype == u.dtype and x.shape == u.shape, (x.dtype, u.dtype, x.shape, u.shape)
        diff = float((x.double() - u.double()).abs().max())
        if _debian_pil():
            assert torch.equal(x, u), diff
        else:
            level = 1.0 if x.dtype == torch.uint8 else 1 / 255 / min(STD) + 1e-2
            assert diff <= level, diff
        assert torch.equal(y, v)
    if same_as is not None:
        for a, b in ((ours, _batches(stoker.DataLoader(same_as, batch_size=batch_size))),
                     (ref, _batches(TorchDataLoader(same_as, batch_size=batch_size)))):
            assert len(a) == len(b)
            for (x, y), (u, v) in zip(a, b):
                assert x.dtype == u.dtype and torch.equal(x, u) and torch.equal(y, v)
    return ours


def _refusal(ds, *needles):
    import stoker
    with pytest.raises(ValueError) as e:
        stoker.DataLoader(ds, batch_size=4, strict=True)
    text = str(e.value)
    for n in needles:
        assert n in text, text
    assert "Compose first" not in text and "Instead:" in text, text
    return text


def _values_are(folder, tf, value_steps):
    """stoker's float batches for TF are VALUE_STEPS (torchvision's own, run here) applied to
    stoker's uint8 batches of the same geometry: bit for bit, whatever Pillow resamples like.
    (v2.ToDtype(scale=True) multiplies by 1/255 where ToTensor divides by 255: 126 of the 256
    values differ in the last bit, so a parser that maps it to ToTensor fails here.)"""
    import stoker
    geometry = T.Compose([T.Resize(20), T.CenterCrop(16), T.PILToTensor()])
    u8 = _batches(stoker.DataLoader(ImageFolder(folder, geometry), batch_size=4))
    got = _batches(stoker.DataLoader(ImageFolder(folder, tf), batch_size=4))
    for (x, y), (u, v) in zip(got, u8):
        want = u
        for step in value_steps:
            want = step(want)
        want = want.as_subclass(torch.Tensor)
        assert x.dtype == want.dtype and torch.equal(x, want), float((x - want).abs().max())


# ---- v1 -------------------------------------------------------------------------------------

def test_nested_compose_equals_torch(folder):
    tf = T.Compose([T.Compose([T.Resize(20), T.CenterCrop(16)]),
                    T.Compose([T.ToTensor(), T.Compose([T.Normalize(MEAN, STD)])])])
    _equal_to_torch(ImageFolder(folder, tf))


def test_float16_conversion_equals_torch(folder):
    tf = T.Compose([T.Resize(20), T.CenterCrop(16), T.PILToTensor(),
                    T.ConvertImageDtype(torch.float16), T.Normalize(MEAN, STD)])
    out = _equal_to_torch(ImageFolder(folder, tf))
    assert out[0][0].dtype == torch.float16


def _reference(p_erase=0.1, augment=True):
    """torchvision's classification reference recipe (v1 backend), at 16 px."""
    steps = [T.RandomResizedCrop(16), T.RandomHorizontalFlip(0.5)]
    if augment:
        steps.append(T.TrivialAugmentWide())
    steps += [T.PILToTensor(), T.ConvertImageDtype(torch.float32), T.Normalize(MEAN, STD)]
    if p_erase:
        steps.append(T.RandomErasing(p_erase))
    return T.Compose(steps)


def _epoch(ds, **kw):
    import stoker
    with stoker.DataLoader(ds, batch_size=4, **kw) as dl:
        return [(x.clone(), y.clone()) for x, y in dl]


def test_reference_recipe_end_to_end(folder):
    """The reference recipe runs through stoker.DataLoader: torch's labels in torch's order,
    the same batches for 1 and 2 workers and from run to run, and TrivialAugmentWide really
    applied (the batches differ from the recipe without it, whose crops are the same)."""
    ds = ImageFolder(folder, _reference())
    one = _epoch(ds, num_workers=1)
    two = _epoch(ds, num_workers=2)
    ref = _batches(TorchDataLoader(ImageFolder(folder, _reference(0, False)), batch_size=4))
    assert len(one) == len(two) == len(ref)
    plain = _epoch(ImageFolder(folder, _reference(0, False)), num_workers=1)
    changed = 0
    for (x, y), (u, v), (_, t), (p, _) in zip(one, two, ref, plain):
        assert x.dtype == torch.float32 and x.shape[1:] == (3, 16, 16)
        assert torch.equal(x, u) and torch.equal(y, v) and torch.equal(y, t)
        changed += int(not torch.equal(x, p))
    assert changed > 0
    again = _epoch(ds, num_workers=2)
    assert all(torch.equal(x, u) for (x, _), (u, _) in zip(one, again))


def test_random_erasing_after_normalize_erases_a_box(folder):
    """RandomErasing(p=1) after Normalize: every sample gets one box of exact zeros (value 0 in
    normalised units), and outside it the sample is the unerased one."""
    erased = _epoch(ImageFolder(folder, _reference(1.0, False)), num_workers=1)
    plain = _epoch(ImageFolder(folder, _reference(0, False)), num_workers=1)
    for (x, _), (p, _) in zip(erased, plain):
        for a, b in zip(x, p):
            diff = (a != b).any(0)
            assert diff.any()
            rows = diff.any(1).nonzero().flatten()
            cols = diff.any(0).nonzero().flatten()
            box = (slice(int(rows[0]), int(rows[-1]) + 1), slice(int(cols[0]), int(cols[-1]) + 1))
            assert bool((a[:, box[0], box[1]] == 0).all())
            outside = torch.ones_like(diff)
            outside[box] = False
            assert torch.equal(a[:, outside], b[:, outside])


def test_unknown_step_and_nested_position(folder):
    tf = T.Compose([T.Compose([T.Resize(20), T.CenterCrop(16)]), T.Lambda(lambda x: x),
                    T.ToTensor()])
    _refusal(ImageFolder(folder, tf), "torchvision.transforms.Lambda at position 2 of "
             "transforms.Compose([Resize, CenterCrop, Lambda, ToTensor]) (nested Compose "
             "flattened)", "does not know")


def test_subclass_of_a_known_transform_is_unknown(folder):
    class MyFlip(T.RandomHorizontalFlip):
        def forward(self, img):
            return super().forward(img)
    tf = T.Compose([T.RandomResizedCrop(16), MyFlip(), T.ToTensor()])
    _refusal(ImageFolder(folder, tf), "MyFlip at position 1", "does not know")


def test_conversion_before_crop_refused(folder):
    tf = T.Compose([T.PILToTensor(), T.Resize(20), T.CenterCrop(16)])
    _refusal(ImageFolder(folder, tf), "torchvision.transforms.PILToTensor at position 0",
             "tensors")


def test_bicubic_and_nearest_eval_equal_torch(folder):
    # accepted since the resize filters landed (STK_P_INTERP): torch's batches, bit for bit
    for mode in (T.InterpolationMode.BICUBIC, T.InterpolationMode.NEAREST):
        _equal_to_torch(ImageFolder(folder, T.Compose([T.Resize(20, interpolation=mode),
                                                       T.CenterCrop(16), T.ToTensor()])))


def test_resize_hw_equals_torch(folder):
    _equal_to_torch(ImageFolder(folder, T.Compose([T.Resize((20, 30)), T.CenterCrop(16),
                                                   T.ToTensor()])))
    _equal_to_torch(ImageFolder(folder, T.Compose([T.Resize((18, 22)), T.PILToTensor()])))


def test_bicubic_train_crop_accepted(folder):
    import stoker
    tf = T.Compose([T.RandomResizedCrop(16, interpolation=T.InterpolationMode.BICUBIC),
                    T.ToTensor()])
    with stoker.DataLoader(ImageFolder(folder, tf), batch_size=4) as dl:
        assert dl.interpolation == "bicubic"
        x, y = next(iter(dl))
        assert x.shape[1:] == (3, 16, 16)


def test_no_conversion_refused(folder):
    tf = T.Compose([T.Resize(20), T.CenterCrop(16)])
    _refusal(ImageFolder(folder, tf), "conversion to a tensor")


# ---- torchvision.transforms.v2 --------------------------------------------------------------

def test_v2_eval_recipe_equals_torch(folder):
    v2 = _v2()
    tf = v2.Compose([v2.Resize(20), v2.CenterCrop(16), v2.ToImage(),
                     v2.ToDtype(torch.float32, scale=True), v2.Normalize(MEAN, STD),
                     v2.ToPureTensor()])
    _equal_to_torch(ImageFolder(folder, tf))
    _values_are(folder, tf, [v2.ToDtype(torch.float32, scale=True), v2.Normalize(MEAN, STD)])


def test_v2_uint8_and_float16(folder):
    v2 = _v2()
    _equal_to_torch(ImageFolder(folder, v2.Compose([v2.Resize(20), v2.CenterCrop(16),
                                                    v2.PILToTensor()])),
                    same_as=ImageFolder(folder, T.Compose([T.Resize(20), T.CenterCrop(16),
                                                           T.PILToTensor()])))
    out = _equal_to_torch(ImageFolder(folder, v2.Compose([
        v2.Resize(20), v2.CenterCrop(16), v2.ToImage(), v2.ToDtype(torch.float16, scale=True),
        v2.Normalize(MEAN, STD)])))
    assert out[0][0].dtype == torch.float16
    _values_are(folder, v2.Compose([v2.Resize(20), v2.CenterCrop(16), v2.ToImage(),
                                    v2.ToDtype(torch.float16, scale=True),
                                    v2.Normalize(MEAN, STD)]),
                [v2.ToDtype(torch.float16, scale=True), v2.Normalize(MEAN, STD)])


def test_v2_train_recipe_accepted(folder):
    import stoker
    v2 = _v2()
    tf = v2.Compose([v2.RandomResizedCrop(16, antialias=True), v2.RandomHorizontalFlip(0.5),
                     v2.PILToTensor(), v2.ToDtype(torch.float32, scale=True),
                     v2.Normalize(MEAN, STD), v2.ToPureTensor()])
    ds = ImageFolder(folder, tf)
    batches = list(stoker.DataLoader(ds, batch_size=4, shuffle=True))
    assert sum(len(y) for _, y in batches) == len(ds)
    assert batches[0][0].shape == (4, 3, 16, 16) and batches[0][0].dtype == torch.float32


def _v2_recipe(v2, augment):
    return v2.Compose([v2.RandomResizedCrop(16), v2.RandomHorizontalFlip(), augment,
                       v2.PILToTensor(), v2.ToDtype(torch.float32, scale=True),
                       v2.Normalize(MEAN, STD), v2.RandomErasing(0.1), v2.ToPureTensor()])


def test_v2_unknown_op_named_with_position(folder):
    """An augmentation stoker does not run (RandomPerspective, refused in v1 too) is named with
    its module, position and the whole v2 list."""
    v2 = _v2()
    _refusal(ImageFolder(folder, _v2_recipe(v2, v2.RandomPerspective())),
             "torchvision.transforms.v2.RandomPerspective at position 2 "
             "of transforms.v2.Compose([RandomResizedCrop, RandomHorizontalFlip, "
             "RandomPerspective, PILToTensor, ToDtype, Normalize, RandomErasing, ToPureTensor])")


def test_v2_reference_recipe_parsed_as_v1(folder):
    """The v2 reference recipe (TrivialAugmentWide, RandomErasing) gives the Loader the same
    settings as the v1 recipe, but for the value tables: each is what its own torchvision steps
    compute (v2's ToDtype + Normalize round a few values apart from v1's)."""
    from stoker.dataloader import parse_transform
    v2 = _v2()
    got = parse_transform(_v2_recipe(v2, v2.TrivialAugmentWide()))
    want = parse_transform(T.Compose([T.RandomResizedCrop(16), T.RandomHorizontalFlip(),
                                      T.TrivialAugmentWide(), T.PILToTensor(),
                                      T.ConvertImageDtype(torch.float32), T.Normalize(MEAN, STD),
                                      T.RandomErasing(0.1)]))
    assert [s["op"] for s in got["augment"]] == ["trivialaugment", "random_erasing"]
    assert got.pop("value_table").shape == want.pop("value_table").shape == (3, 256)
    assert got == want


def test_v2_tensor_backend_refused(folder):
    v2 = _v2()
    tf = v2.Compose([v2.ToImage(), v2.RandomResizedCrop(16), v2.ToDtype(torch.float32, True)])
    _refusal(ImageFolder(folder, tf), "torchvision.transforms.v2.ToImage at position 0 of "
             "transforms.v2.Compose(", "tensors")


# ---- timm -----------------------------------------------------------------------------------

def test_timm_eval_equals_torch(folder):
    timm_data = pytest.importorskip("timm.data")
    tf = timm_data.create_transform(16, is_training=False)
    assert [type(t).__name__ for t in tf.transforms] == ["Resize", "CenterCrop",
                                                         "MaybeToTensor", "Normalize"]
    resize, crop, norm = tf.transforms[0].size, tf.transforms[1].size, tf.transforms[3]
    v1 = T.Compose([T.Resize(resize), T.CenterCrop(crop), T.ToTensor(),
                    T.Normalize(norm.mean, norm.std)])
    _equal_to_torch(ImageFolder(folder, tf), same_as=ImageFolder(folder, v1))


def test_timm_train_without_augment_accepted(folder):
    import stoker
    timm_data = pytest.importorskip("timm.data")
    tf = timm_data.create_transform(16, is_training=True, color_jitter=None)
    kinds = [type(t).__name__ for t in tf.transforms]
    assert kinds[0] == "RandomResizedCropAndInterpolation", kinds
    ds = ImageFolder(folder, tf)
    batches = list(stoker.DataLoader(ds, batch_size=4))
    assert batches[0][0].shape == (4, 3, 16, 16) and batches[0][0].dtype == torch.float32


def test_timm_rand_augment_accepted(folder):
    import stoker
    timm_data = pytest.importorskip("timm.data")
    tf = timm_data.create_transform(16, is_training=True, auto_augment="rand-m9-mstd0.5-inc1",
                                    interpolation="bilinear")
    batches = list(stoker.DataLoader(ImageFolder(folder, tf), batch_size=4))
    assert batches[0][0].shape == (4, 3, 16, 16) and batches[0][0].dtype == torch.float32


def test_timm_auto_augment_accepted_augmix_and_3a_named(folder):
    # timm's AutoAugment of its named policies runs in C (its pixels and draws:
    # test_timm_autoaugment.py, test_loader_timm_autoaugment.py); AugMixAugment and the '3a'
    # policy (Desaturate, GaussianBlurRand) are refused naming the transform, its position and
    # the op
    import stoker
    timm_data = pytest.importorskip("timm.data")
    tf = timm_data.create_transform(16, is_training=True, auto_augment="original-mstd0.5")
    with stoker.DataLoader(ImageFolder(folder, tf), batch_size=4) as dl:
        x, y = next(iter(dl))
        assert x.shape == (4, 3, 16, 16) and x.dtype == torch.float32 and y.shape == (4,)
    tf = timm_data.create_transform(16, is_training=True, auto_augment="augmix-m5-w4-d2")
    _refusal(ImageFolder(folder, tf), "timm.data.auto_augment.AugMixAugment at position 2 of "
             "transforms.Compose([RandomResizedCropAndInterpolation, ", "is not implemented in stoker")
    tf = timm_data.create_transform(16, is_training=True, auto_augment="3a")
    _refusal(ImageFolder(folder, tf), "timm.data.auto_augment.AutoAugment at position 2 of "
             "transforms.Compose([RandomResizedCropAndInterpolation, ", "sub-policy 1 op 0 is 'Desaturate'")


def test_timm_random_interpolation_accepted(folder):
    # timm's default train interpolation, random.choice((BILINEAR, BICUBIC)) per image, becomes
    # the Loader's interpolation='random' (its pixels: test_loader_interp_random.py); another
    # tuple is refused by name
    import stoker
    timm_data = pytest.importorskip("timm.data")
    tf = timm_data.create_transform(16, is_training=True, interpolation="random",
                                    color_jitter=None)
    with stoker.DataLoader(ImageFolder(folder, tf), batch_size=4) as dl:
        assert dl.interpolation == "random"
        x, y = next(iter(dl))
        assert x.shape == (4, 3, 16, 16) and x.dtype == torch.float32
    tf.transforms[0].interpolation = (T.InterpolationMode.BILINEAR, T.InterpolationMode.NEAREST)
    _refusal(ImageFolder(folder, tf), "timm.data.transforms.RandomResizedCropAndInterpolation "
             "at position 0", "interpolation='random' among ['bilinear', 'nearest']")
