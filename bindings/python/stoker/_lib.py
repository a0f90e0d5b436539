# SPDX-License-Identifier: MIT
"""ctypes declarations of libstoker's public API (include/stoker.h) and the library search.

Nothing here is compiled: every struct below mirrors the C header field by field (the test
tests/python/test_binding_abi.py compiles a small C program and compares sizes and offsets).

The library is looked up in this order; the first that loads wins:

1. ``$STOKER_LIBRARY`` (a path to ``libstoker.so``; if it is set and fails to load, that is an
   error — no silent fallback to another copy);
2. next to this package (``stoker/libstoker.so.0`` or ``stoker/libstoker.so``): where a wheel
   (``pip install .``) puts it;
3. a source checkout: when this package is ``<checkout>/bindings/python/stoker`` (found with
   ``PYTHONPATH=<checkout>/bindings/python``), the README's build directory
   ``<checkout>/build/libstoker.so``;
4. the install prefix: ``cmake --install`` puts this package into
   ``<prefix>/lib/python3/dist-packages/stoker``, so ``<prefix>/lib`` (also
   ``<prefix>/lib/<multiarch>`` and ``<prefix>/lib64``) is searched;
5. the system loader path (``ctypes.util.find_library("stoker")``, then ``libstoker.so.0``).

The library's ``stk_version()`` must have this package's major and minor version, else
:class:`ImportError` is raised naming both versions and the file that was loaded.
"""

import ctypes
import ctypes.util
import os
import sys
import sysconfig
import threading

# The header version this binding was written against (STK_VERSION_MAJOR / MINOR).
EXPECTED_MAJOR = 0
EXPECTED_MINOR = 5

c_int = ctypes.c_int
c_uint = ctypes.c_uint
c_int32 = ctypes.c_int32
c_uint8 = ctypes.c_uint8
c_uint32 = ctypes.c_uint32
c_int64 = ctypes.c_int64
c_uint64 = ctypes.c_uint64
c_double = ctypes.c_double
c_float = ctypes.c_float
c_size_t = ctypes.c_size_t
c_char_p = ctypes.c_char_p
c_void_p = ctypes.c_void_p
POINTER = ctypes.POINTER

# ---- status codes (STK_STATUS_LIST) ------------------------------------------------------------
STK_OK = 0
STK_END = 1
STK_TIMEOUT = 2
STK_E_INVALID = -1001
STK_E_STATE = -1002
STK_E_NOMEM = -1003
STK_E_FORMAT = -1004
STK_E_CORRUPT = -1005
STK_E_CRC = -1006
STK_E_DECODE = -1007
STK_E_NOT_JPEG = -1008
STK_E_TOO_LARGE = -1009
STK_E_EMPTY = -1010
STK_E_EXISTS = -1011
STK_E_RANGE = -1012
STK_E_LMDB = -1013
STK_E_CUDA = -1014
STK_E_NODEVICE = -1015
STK_E_UNSUPPORTED = -1016
STK_E_CHANGED = -1017
STK_E_INCOMPLETE = -1018
STK_E_CANCELLED = -1019
STK_E_IO = -1020
STK_E_TRUNCATED = -1021
STK_E_BADPARAM = -1022
STK_E_EMPTYSET = -1023

# ---- parameters (stk_param) --------------------------------------------------------------------
P_LAYOUT = 1
P_FOREIGN_LABEL = 2
P_ALLOW_INCOMPLETE = 3
P_CACHE_BYTES = 4
P_STREAM = 5
P_IO_BACKEND = 100
P_IO_DIRECT = 101
P_QUEUE_DEPTH = 102
P_INFLIGHT_BYTES = 103
P_VERIFY_CRC = 104
P_IO_THREADS = 105
P_SHUFFLE = 110
P_SEED = 111
P_EPOCH = 112
P_RANK = 113
P_WORLD_SIZE = 114
P_DIST_MODE = 115
P_DRAW_KEY = 116
P_SHUFFLE_WINDOW = 117
P_FAULT_EIO_PPM = 120
P_FAULT_SHORT_PPM = 121
P_FAULT_DELAY_PPM = 122
P_FAULT_DELAY_US = 123
P_FAULT_SEED = 124
P_WORKERS = 200
P_MODE = 201
P_OUT_HEIGHT = 202
P_OUT_WIDTH = 203
P_RESIZE = 204
P_FLIP_PROB = 205
P_SCALE_MIN = 206
P_SCALE_MAX = 207
P_RATIO_MIN = 208
P_RATIO_MAX = 209
P_MAX_PIXELS = 210
P_STRICT = 211
P_DCT_SCALING = 212
P_MAX_OUT_HEIGHT = 213
P_MAX_OUT_WIDTH = 214
P_MULTI_HOT = 215
P_INTERP = 216
P_RESIZE_HEIGHT = 217
P_RESIZE_WIDTH = 218
P_RESIZE_PASSES = 219  # since 0.4
P_AUG_POLICY = 220
P_AUG_NUM_OPS = 221
P_AUG_MAGNITUDE = 222
P_AUG_BINS = 223
P_AUG_INTERP = 224
P_AUG_FILL = 225
P_AUG_STEPS = 226
P_ERASE_PROB = 227
P_ERASE_SCALE_MIN = 228
P_ERASE_SCALE_MAX = 229
P_ERASE_RATIO_MIN = 230
P_ERASE_RATIO_MAX = 231
P_ERASE_VALUE = 232
P_ERASE_RANDOM = 233
P_AUGMIX_SEVERITY = 234
P_AUGMIX_WIDTH = 235
P_AUGMIX_DEPTH = 236
P_AUGMIX_ALPHA = 237
P_AUGMIX_ALL_OPS = 238
# timm's RandAugment (STK_AUG_TIMM_RAND; since 0.4)
P_TIMM_MAGNITUDE = 239
P_TIMM_MSTD = 240
P_TIMM_UNIFORM = 241
P_TIMM_MMAX = 242
P_TIMM_PROB = 243
P_TIMM_INCREASING = 244
P_TIMM_RESAMPLE = 245
P_TIMM_TRANSLATE_PCT = 246
P_TIMM_WEIGHTED = 247
P_BATCH_SIZE = 300
P_DROP_LAST = 301
P_PREFETCH = 302
P_DEVICE = 303
P_DTYPE = 304
P_OUT_LAYOUT = 305
P_DEVICE_BUFFERS = 306
P_MAX_PINNED_BYTES = 307
P_MAX_DEVICE_BYTES = 308
P_STAGE = 309
P_MEAN = 310
P_STD = 311
P_PIN_HOST = 312
P_LUT = 313
# AutoAugment's tables, timm's RandomErasing (since 0.4; numbered from 250, 239..249 are timm's
# RandAugment's)
P_AUG_AUTO_POLICY = 250
P_ERASE_MIN_COUNT = 251
P_ERASE_MAX_COUNT = 252
# whose float32 arithmetic the augmentation equals (STK_AUG_TORCH_*; augment.torch_arithmetic)
P_AUG_TORCH = 253
AUG_TORCH_1, AUG_TORCH_1_AVX512, AUG_TORCH_2, AUG_TORCH_2_AVX512 = 0, 1, 2, 3
AUG_TORCH_GRID_FMA = 4   # OR-ed on: the affine grid's product fused (since 0.5)
# timm's AutoAugment policy (STK_AUG_TIMM_AUTO; since 0.4): sub-policies of (op, prob, magnitude)
P_TIMM_AUTO_POLICY = 254
# the largest share of bad records an epoch may have (since 0.5)
P_MAX_BAD_FRACTION = 255
# STK_P_TIMM_AUTO_POLICY's op numbers: the index in this tuple (timm's NAME_TO_OP names)
TIMM_OPS = ("AutoContrast", "Equalize", "Invert", "Rotate", "Posterize", "PosterizeIncreasing", "Solarize",
            "SolarizeIncreasing", "SolarizeAdd", "Color", "ColorIncreasing", "Contrast", "ContrastIncreasing",
            "Brightness", "BrightnessIncreasing", "Sharpness", "SharpnessIncreasing", "ShearX", "ShearY",
            "TranslateXRel", "TranslateYRel", "PosterizeOriginal")
AUG_AUTO_IMAGENET, AUG_AUTO_CIFAR10, AUG_AUTO_SVHN = 0, 1, 2
ERASE_RANDOM_OFF, ERASE_RANDOM_PIXEL, ERASE_RANDOM_CHANNEL = 0, 1, 2
ERASE_MAX_COUNT = 16

# keys of type D (stk_loader_set_double); every other numeric key is type I
DOUBLE_PARAMS = frozenset({P_FLIP_PROB, P_SCALE_MIN, P_SCALE_MAX, P_RATIO_MIN, P_RATIO_MAX, P_ERASE_PROB,
                           P_ERASE_SCALE_MIN, P_ERASE_SCALE_MAX, P_ERASE_RATIO_MIN, P_ERASE_RATIO_MAX,
                           P_AUGMIX_ALPHA})
# timm's RandAugment's doubles
DOUBLE_PARAMS = DOUBLE_PARAMS | frozenset({P_TIMM_MAGNITUDE, P_TIMM_MSTD, P_TIMM_MMAX, P_TIMM_PROB,
                                           P_TIMM_TRANSLATE_PCT})
DOUBLE_PARAMS = DOUBLE_PARAMS | frozenset({P_MAX_BAD_FRACTION})

LAYOUT_AUTO, LAYOUT_SHARDS, LAYOUT_FILES, LAYOUT_LMDB = 0, 1, 2, 3
LAYOUT_NAMES = {LAYOUT_AUTO: "auto", LAYOUT_SHARDS: "shards", LAYOUT_FILES: "files",
                LAYOUT_LMDB: "lmdb"}
IO_AUTO, IO_URING, IO_PREAD, IO_MMAP = 0, 1, 2, 3
IO_NAMES = {IO_AUTO: "auto", IO_URING: "io_uring", IO_PREAD: "pread", IO_MMAP: "mmap"}
DIST_PAD, DIST_DROP, DIST_EXACT = 0, 1, 2
MODE_TRAIN, MODE_EVAL = 0, 1
INTERP_BILINEAR, INTERP_BICUBIC, INTERP_NEAREST, INTERP_RANDOM = 0, 1, 2, 3
RESIZE_PASSES_PILLOW12, RESIZE_PASSES_PILLOW13 = 0, 1  # since 0.4
DTYPE_UINT8, DTYPE_FLOAT16, DTYPE_BFLOAT16, DTYPE_FLOAT32 = 0, 1, 2, 3
NCHW, NHWC = 0, 1
STAGE_READ, STAGE_DECODE, STAGE_FULL = 0, 1, 2
# augmentation policies (stk_aug_policy, stk_aug_interp; since 0.3)
AUG_NONE, AUG_TRIVIAL, AUG_RAND, AUG_AUTO, AUG_AUGMIX = 0, 1, 2, 3, 4
AUG_TIMM_RAND = 5  # since 0.4
AUG_TIMM_AUTO = 6  # since 0.4
AUG_INTERP_NEAREST, AUG_INTERP_BILINEAR = 0, 1
FEATURE_URING, FEATURE_CUDA = 1, 2
W_SHARD_BYTES = 1000
W_FORCE = 1001
# targets (stk_target_dtype, stk_target_kind; since 0.2)
TDT_NONE, TDT_UINT8, TDT_INT32, TDT_INT64, TDT_FLOAT32, TDT_FLOAT64 = 0, 1, 2, 3, 4, 5
TDT_NAMES = {TDT_UINT8: "uint8", TDT_INT32: "int32", TDT_INT64: "int64", TDT_FLOAT32: "float32",
             TDT_FLOAT64: "float64"}
TARGET_VALUES, TARGET_LABELS = 0, 1
TARGET_KIND_NAMES = {TARGET_VALUES: "values", TARGET_LABELS: "labels"}


# ---- structs -----------------------------------------------------------------------------------
class DatasetInfo(ctypes.Structure):
    _fields_ = [
        ("layout", c_int),
        ("format_version", c_int),
        ("shards", c_uint32),
        ("classes", c_uint32),
        ("records", c_uint64),
        ("payload_bytes", c_uint64),
        ("file_bytes", c_uint64),
        ("max_record_bytes", c_uint32),
        ("reserved", c_uint32 * 7),
    ]


class FetchStats(ctypes.Structure):
    """stk_fetch_stats (since 0.5)."""
    _fields_ = [("shards", c_uint64), ("shards_cached", c_uint64), ("shards_fetched", c_uint64),
                ("bytes_fetched", c_uint64), ("requests", c_uint64), ("retries", c_uint64),
                ("fetch_s", ctypes.c_double), ("starved_s", ctypes.c_double),
                ("bytes_cached", c_uint64), ("bytes_missed", c_uint64),
                ("link_bytes_per_s", ctypes.c_double), ("inflight", c_uint64),
                ("cache_limit", c_uint64), ("reserved", c_uint64 * 2)]


class RecordInfo(ctypes.Structure):
    _fields_ = [
        ("index", c_uint64),
        ("shard", c_uint32),
        ("length", c_uint32),
        ("key", c_uint64),
        ("offset", c_uint64),
        ("label", c_int32),
        ("crc32c", c_uint32),
        ("has_crc", c_int),
        ("reserved", c_int),
    ]


class PackProgress(ctypes.Structure):
    _fields_ = [
        ("files_total", c_uint64),
        ("files_done", c_uint64),
        ("records_written", c_uint64),
        ("skipped", c_uint64),
        ("bytes_total", c_uint64),
        ("bytes_done", c_uint64),
        ("elapsed_s", c_double),
    ]


PackProgressFn = ctypes.CFUNCTYPE(None, POINTER(PackProgress), c_void_p)
# stk_log_fn (since 0.5): (user, level, message)
LogFn = ctypes.CFUNCTYPE(None, c_void_p, ctypes.c_int, ctypes.c_char_p)
LOG_WARNING, LOG_INFO = 1, 2


class PackOptions(ctypes.Structure):
    _fields_ = [
        ("shard_bytes", c_uint64),
        ("threads", c_int),
        ("strict", c_int),
        ("force", c_int),
        ("progress", PackProgressFn),
        ("progress_user", c_void_p),
        ("error", c_void_p),
        ("error_cap", c_size_t),
    ]


class PackResult(ctypes.Structure):
    _fields_ = [
        ("records", c_uint64),
        ("skipped", c_uint64),
        ("shards", c_uint64),
        ("classes", c_uint64),
        ("payload_bytes", c_uint64),
        ("resumed_records", c_uint64),
        ("elapsed_s", c_double),
    ]


class TargetInfo(ctypes.Structure):
    _fields_ = [
        ("dtype", c_int),
        ("kind", c_int),
        ("size", c_uint32),
        ("classes", c_uint32),
    ]


class PackExtOptions(ctypes.Structure):
    """stk_pack_ext_options: set size = ctypes.sizeof(PackExtOptions) before the call."""
    _fields_ = [
        ("size", c_size_t),
        ("max_side", c_int),
        ("quality", c_int),
        ("converted", c_uint64),
        ("resized", c_uint64),
        ("manifest_format", c_char_p),
        ("path_field", c_char_p),
        ("label_field", c_char_p),
        ("target_fields", c_char_p),
        ("classes_file", c_char_p),
        ("label_sep", c_char_p),
        ("multi_label", c_int),
        ("target_dtype", c_int),
        ("bad_lines", c_uint64),
        ("targets", TargetInfo),
        ("labels", c_int),          # since 0.3: STK_LABELS_*
        ("max_line", c_uint64),
        ("keep_damaged", c_int),
        ("kept_damaged", c_uint64),
        ("ignored", c_uint64),
        ("over_loader_limit", c_uint64),  # since 0.5
    ]


# stk_pack_ext_options.labels (STK_LABELS_AUTO, _INDEX, _NAMES, _NONE since 0.5)
LABELS_MODES = {"auto": 0, "index": 1, "names": 2, "none": 3}


class DecodeArgs(ctypes.Structure):
    _fields_ = [
        ("crop_x", c_int),
        ("crop_y", c_int),
        ("crop_w", c_int),
        ("crop_h", c_int),
        ("scale_num", c_int),
        ("max_pixels", c_int64),
        ("strict", c_int),
    ]


class Batch(ctypes.Structure):
    _fields_ = [
        ("epoch", c_uint64),
        ("number", c_uint64),
        ("first_sample", c_uint64),
        ("size", c_uint32),
        ("capacity", c_uint32),
        ("dtype", c_int),
        ("layout", c_int),
        ("device", c_int),
        ("channels", c_uint32),
        ("height", c_uint32),
        ("width", c_uint32),
        ("images", c_void_p),
        ("image_bytes", c_size_t),
        ("sample_bytes", c_size_t),
        ("labels", POINTER(c_int32)),
        ("indices", POINTER(c_uint64)),
        ("substituted", POINTER(c_uint8)),
        ("payload_bytes", POINTER(c_uint32)),
        ("bad", c_uint32),
        ("reserved", c_uint32),
        ("internal", c_void_p),
    ]


class StageStats(ctypes.Structure):
    _fields_ = [
        ("busy_s", c_double),
        ("starved_s", c_double),
        ("blocked_s", c_double),
        ("items", c_uint64),
        ("bytes", c_uint64),
        ("errors", c_uint64),
        ("threads", c_uint32),
        ("reserved", c_uint32),
    ]


class Stats(ctypes.Structure):
    _fields_ = [
        ("read", StageStats),
        ("decode", StageStats),
        ("stager", StageStats),
        ("wall_s", c_double),
        ("wait_s", c_double),
        ("cpu_user_s", c_double),
        ("cpu_sys_s", c_double),
        ("batches", c_uint64),
        ("samples", c_uint64),
        ("epoch", c_uint64),
        ("next_sample", c_uint64),
        ("samples_per_epoch", c_uint64),
        ("batches_per_epoch", c_uint64),
        ("io_backend", c_int),
        ("io_direct", c_int),
        ("inflight_now", c_uint32),
        ("inflight_max", c_uint32),
        ("bytes_read", c_uint64),
        ("disk_bytes", c_uint64),
        ("crc_errors", c_uint64),
        ("io_errors", c_uint64),
        ("decode_errors", c_uint64),
        ("substituted", c_uint64),
        ("decode_warnings", c_uint64),
        ("h2d_bytes", c_uint64),
        ("h2d_s", c_double),
        ("convert_s", c_double),
        ("release_wait_s", c_double),
        ("host_ring_bytes", c_uint64),
        ("pinned_bytes", c_uint64),
        ("device_bytes", c_uint64),
        ("reader_pool_bytes", c_uint64),
        ("device", c_int),
        ("fallback_reason", c_int),
        ("io_backend_note", ctypes.c_char * 96),
        ("detached", c_uint64),
        ("pin_reason", c_int),
        ("fetch_max_wait_us", c_uint32),  # since 0.5: the former reserved int
        ("augment_s", c_double),          # since 0.4: two of the former reserved[6]
        ("augment_items", c_uint64),
        ("fetch_bytes", c_uint64),        # since 0.5: the former reserved[4]
        ("fetch_busy_s", c_double),
        ("fetch_starved_s", c_double),
        ("cache_hits", c_uint32),
        ("cache_misses", c_uint32),
    ]


class CpuBudget(ctypes.Structure):
    _fields_ = [
        ("online", c_int),
        ("affinity", c_int),
        ("quota", c_double),
        ("usable", c_int),
        ("local_ranks", c_int),
        ("workers", c_int),
        ("reserved0", c_int),
        ("note", ctypes.c_char * 256),
        ("reserved", c_uint64 * 4),
    ]


BOTTLENECK_NONE, BOTTLENECK_CONSUMER, BOTTLENECK_READ, BOTTLENECK_DECODE, BOTTLENECK_STAGE = 0, 1, 2, 3, 4
BOTTLENECK_FETCH = 5  # since 0.5
VERDICT_CPU_STARVED = 1


class Verdict(ctypes.Structure):
    """stk_verdict: set size = ctypes.sizeof(Verdict) before the call."""
    _fields_ = [
        ("size", c_uint32),
        ("bottleneck", c_int),
        ("flags", c_uint32),
        ("decode_threads", c_uint32),
        ("cpus_online", c_uint32),
        ("reserved", c_uint32),
        ("wait_share", c_double),
        ("read_busy", c_double),
        ("read_blocked", c_double),
        ("decode_busy", c_double),
        ("decode_starved", c_double),
        ("stager_busy", c_double),
        ("cores", c_double),
        ("h2d_gbps", c_double),
    ]


def loader_verdict(lib, h):
    """The library's bottleneck verdict of loader H as a dict (stk_loader_verdict), or None when
    the library predates it."""
    if "stk_loader_verdict" in lib.missing:
        return None
    v = Verdict()
    v.size = ctypes.sizeof(Verdict)
    if lib.stk_loader_verdict(h, ctypes.byref(v)) != STK_OK:
        return None
    d = {name: getattr(v, name) for name, _t in Verdict._fields_ if name not in ("size", "reserved")}
    d["bottleneck_name"] = text(lib.stk_bottleneck_name(v.bottleneck))
    d["cpu_starved"] = bool(v.flags & VERDICT_CPU_STARVED)
    return d


class RecordError(ctypes.Structure):
    _fields_ = [
        ("index", c_uint64),
        ("epoch", c_uint64),
        ("status", c_int),
        ("sys_errno", c_int),
        ("where", ctypes.c_char * 256),
        ("reason", ctypes.c_char * 256),
    ]


# (name, restype, argtypes)
_PROTOTYPES = [
    ("stk_version", c_uint, []),
    ("stk_version_string", c_char_p, []),
    ("stk_has_feature", c_int, [c_int]),
    ("stk_cuda_device_count", c_int, []),
    ("stk_strerror", c_char_p, [c_int]),
    ("stk_status_name", c_char_p, [c_int]),
    ("stk_param_bounds", c_int, [c_int, POINTER(c_double), POINTER(c_double)]),
    # dataset
    ("stk_dataset_create", c_int, [POINTER(c_void_p)]),
    ("stk_dataset_set", c_int, [c_void_p, c_int, c_int64]),
    ("stk_dataset_set_cache_dir", c_int, [c_void_p, c_char_p]),
    ("stk_dataset_fetch_stats", c_int, [c_void_p, c_void_p]),
    ("stk_dataset_open", c_int, [c_void_p, c_char_p]),
    ("stk_dataset_destroy", None, [c_void_p]),
    ("stk_dataset_last_error", c_char_p, [c_void_p]),
    ("stk_dataset_info_get", c_int, [c_void_p, POINTER(DatasetInfo)]),
    ("stk_dataset_count", c_uint64, [c_void_p]),
    ("stk_dataset_class_name", c_char_p, [c_void_p, c_uint32]),
    ("stk_dataset_shard_path", c_char_p, [c_void_p, c_uint32]),
    ("stk_dataset_shard_format", c_int, [c_void_p, c_uint32]),   # 0.5
    ("stk_dataset_record", c_int, [c_void_p, c_uint64, POINTER(RecordInfo)]),
    ("stk_dataset_read", c_int,
     [c_void_p, c_uint64, c_void_p, c_size_t, POINTER(c_size_t), POINTER(RecordInfo)]),
    ("stk_dataset_record_name", c_int, [c_void_p, c_uint64, c_void_p, c_size_t]),
    # writer
    ("stk_writer_create", c_int, [POINTER(c_void_p)]),
    ("stk_writer_set", c_int, [c_void_p, c_int, c_int64]),
    ("stk_writer_set_classes", c_int, [c_void_p, POINTER(c_char_p), c_size_t]),
    ("stk_writer_open", c_int, [c_void_p, c_char_p]),
    ("stk_writer_add", c_int, [c_void_p, c_void_p, c_size_t, c_int32, c_char_p]),
    ("stk_writer_finish", c_int, [c_void_p]),
    ("stk_writer_destroy", None, [c_void_p]),
    ("stk_writer_last_error", c_char_p, [c_void_p]),
    # pack
    ("stk_pack", c_int, [c_char_p, c_char_p, POINTER(PackOptions), POINTER(PackResult)]),
    # decode
    ("stk_decoder_create", c_int, [POINTER(c_void_p)]),
    ("stk_decoder_destroy", None, [c_void_p]),
    ("stk_decoder_last_error", c_char_p, [c_void_p]),
    ("stk_image_info", c_int, [c_void_p, c_size_t, POINTER(c_int), POINTER(c_int), POINTER(c_int)]),
    ("stk_decode", c_int,
     [c_void_p, c_void_p, c_size_t, POINTER(DecodeArgs), c_void_p, c_size_t, POINTER(c_int),
      POINTER(c_int), POINTER(c_int)]),
    # loader
    ("stk_loader_create", c_int, [POINTER(c_void_p)]),
    ("stk_loader_set", c_int, [c_void_p, c_int, c_int64]),
    ("stk_loader_set_double", c_int, [c_void_p, c_int, c_double]),
    ("stk_loader_set_floats", c_int, [c_void_p, c_int, POINTER(c_float), c_size_t]),
    ("stk_loader_get", c_int, [c_void_p, c_int, POINTER(c_double)]),
    ("stk_loader_open", c_int, [c_void_p, c_char_p]),
    ("stk_loader_set_cache_dir", c_int, [c_void_p, c_char_p]),
    ("stk_loader_samples_per_epoch", c_uint64, [c_void_p]),
    ("stk_loader_batches_per_epoch", c_uint64, [c_void_p]),
    ("stk_loader_dataset", c_void_p, [c_void_p]),
    ("stk_loader_start", c_int, [c_void_p]),
    # the batch pointer travels as a plain address (the binding keeps it in a c_void_p slot)
    ("stk_loader_next", c_int, [c_void_p, c_void_p, c_int, c_void_p]),
    ("stk_loader_release", c_int, [c_void_p, c_void_p, c_void_p]),
    ("stk_loader_set_epoch", c_int, [c_void_p, c_uint64]),
    ("stk_loader_tell", c_int, [c_void_p, POINTER(c_uint64), POINTER(c_uint64)]),
    ("stk_loader_seek", c_int, [c_void_p, c_uint64, c_uint64]),
    ("stk_loader_resume", c_int, [c_void_p, c_uint64, c_uint64, c_uint64]),
    ("stk_loader_tell_global", c_int,
     [c_void_p, POINTER(c_uint64), POINTER(c_uint64), POINTER(c_uint64)]),
    ("stk_loader_tell_segments", c_int,   # 0.5
     [c_void_p, POINTER(c_uint64), POINTER(c_uint64), c_uint32, POINTER(c_uint32)]),
    ("stk_loader_resume_segments", c_int, [c_void_p, c_uint64, POINTER(c_uint64), c_uint32]),  # 0.5
    ("stk_loader_set_output_size", c_int, [c_void_p, c_uint32, c_uint32]),
    ("stk_loader_set_indices", c_int, [c_void_p, POINTER(c_uint64), c_size_t]),   # 0.3
    ("stk_loader_set_log", c_int, [c_void_p, LogFn, c_void_p]),   # 0.5
    ("stk_loader_set_vexp", c_int, [c_void_p, c_void_p, c_int64]),   # 0.5
    ("stk_loader_cancel", c_int, [c_void_p]),
    ("stk_loader_stop", c_int, [c_void_p]),
    ("stk_loader_destroy", None, [c_void_p]),
    ("stk_loader_last_error", c_char_p, [c_void_p]),
    ("stk_loader_stats", c_int, [c_void_p, POINTER(Stats)]),
    ("stk_loader_report", c_size_t, [c_void_p, c_void_p, c_size_t]),
    ("stk_loader_error_count", c_uint64, [c_void_p]),
    ("stk_loader_error_get", c_int, [c_void_p, c_uint64, POINTER(RecordError)]),
    ("stk_loader_workers_note", c_size_t, [c_void_p, c_void_p, c_size_t]),
    ("stk_cpu_budget_get", c_int, [POINTER(CpuBudget)]),
    # 0.2
    ("stk_loader_detach", c_int, [c_void_p, c_void_p, POINTER(c_void_p)]),
    ("stk_images_free", None, [c_void_p]),
    ("stk_stats_verdict", c_int, [POINTER(Stats), c_int, POINTER(Verdict)]),
    ("stk_loader_verdict", c_int, [c_void_p, POINTER(Verdict)]),
    ("stk_bottleneck_name", c_char_p, [c_int]),
    ("stk_pack_ext", c_int,
     [c_char_p, c_char_p, POINTER(PackOptions), POINTER(PackExtOptions), POINTER(PackResult)]),
    ("stk_target_dtype_size", c_size_t, [c_int]),
    ("stk_dataset_target_info", c_int, [c_void_p, POINTER(TargetInfo)]),
    ("stk_dataset_target", c_int, [c_void_p, c_uint64, c_void_p, c_size_t]),
    ("stk_writer_set_targets", c_int, [c_void_p, POINTER(TargetInfo)]),
    ("stk_writer_add_target", c_int, [c_void_p, c_void_p, c_size_t, c_int32, c_char_p, c_void_p]),
    ("stk_loader_batch_targets", c_void_p, [c_void_p, c_void_p, POINTER(TargetInfo)]),
]


class _Lib:
    """The loaded library: ``lib.stk_xxx`` are the C functions, ``lib.path`` the file loaded."""

    def __init__(self, cdll, path):
        self._cdll = cdll
        self.path = path
        self.missing = []
        for name, restype, argtypes in _PROTOTYPES:
            try:
                fn = getattr(cdll, name)
            except AttributeError:
                # A symbol the library does not export (yet): calling it raises a clear error.
                self.missing.append(name)
                setattr(self, name, _missing_symbol(name, path))
                continue
            fn.restype = restype
            fn.argtypes = argtypes
            setattr(self, name, fn)


def _missing_symbol(name, path):
    def call(*_args, **_kw):
        raise NotImplementedError("libstoker at %s does not export %s()" % (path, name))
    call.__name__ = name
    return call


def _candidates():
    here = os.path.dirname(os.path.abspath(__file__))
    names = ("libstoker.so.0", "libstoker.so")
    out = [os.path.join(here, n) for n in names]
    # <checkout>/bindings/python/stoker -> <checkout>/build
    checkout = os.path.normpath(os.path.join(here, os.pardir, os.pardir, os.pardir))
    if os.path.exists(os.path.join(checkout, "include", "stoker.h")):
        out.extend(os.path.join(checkout, "build", n) for n in names)
    # <prefix>/lib/python3/dist-packages/stoker -> <prefix>/lib
    libdir = os.path.normpath(os.path.join(here, os.pardir, os.pardir, os.pardir))
    prefix = os.path.dirname(libdir)
    multiarch = sysconfig.get_config_var("MULTIARCH") or "x86_64-linux-gnu"
    for d in (libdir, os.path.join(libdir, multiarch), os.path.join(prefix, "lib64")):
        out.extend(os.path.join(d, n) for n in names)
    return out


def _load():
    env = os.environ.get("STOKER_LIBRARY")
    if env:
        try:
            return ctypes.CDLL(env), env
        except OSError as e:
            raise ImportError("stoker: cannot load STOKER_LIBRARY=%s: %s" % (env, e)) from None
    tried = []
    for path in _candidates():
        if os.path.exists(path):
            try:
                return ctypes.CDLL(path), path
            except OSError as e:
                tried.append("%s (%s)" % (path, e))
    for name in (ctypes.util.find_library("stoker"), "libstoker.so.0", "libstoker.so"):
        if not name:
            continue
        try:
            return ctypes.CDLL(name), name
        except OSError as e:
            tried.append("%s (%s)" % (name, e))
    raise ImportError(
        "stoker: libstoker not found. Install the package with the library inside it "
        "(pip install <stoker checkout>); or, in a source checkout, build it into <checkout>/build "
        "(the README's build); or set STOKER_LIBRARY=/path/to/libstoker.so; or install the "
        "library (cmake --install build --prefix P) so that it lies in P/lib next to "
        "P/lib/python3/dist-packages/stoker, or on the system loader path. Tried: "
        + ("; ".join(tried) if tried else "(no candidate file existed)"))


def _check_version(lib):
    v = int(lib.stk_version())
    major, minor, patch = v // 10000, (v // 100) % 100, v % 100
    if (major, minor) != (EXPECTED_MAJOR, EXPECTED_MINOR):
        raise ImportError(
            "stoker: version mismatch: the Python package expects libstoker %d.%d.x but %s is "
            "%d.%d.%d; install matching versions (or point STOKER_LIBRARY at the right file)"
            % (EXPECTED_MAJOR, EXPECTED_MINOR, lib.path, major, minor, patch))
    return (major, minor, patch)


_lock = threading.Lock()
_lib = None


def get():
    """The loaded, version-checked library (loaded on first use, once per process)."""
    global _lib
    if _lib is None:
        with _lock:
            if _lib is None:
                cdll, path = _load()
                lib = _Lib(cdll, path)
                if "stk_version" in lib.missing:
                    raise ImportError("stoker: %s does not export stk_version(): not libstoker?"
                                      % path)
                lib.version = _check_version(lib)
                _lib = lib
    return _lib


def workers_note(lib, handle):
    """stk_loader_workers_note as str ("" with a library that lacks it)."""
    if "stk_loader_workers_note" in lib.missing:
        return ""
    need = int(lib.stk_loader_workers_note(handle, None, 0))
    buf = ctypes.create_string_buffer(need + 1)
    lib.stk_loader_workers_note(handle, buf, len(buf))
    return text(buf.value)


def text(b):
    """bytes from a C string (may be None) -> str."""
    if b is None:
        return ""
    return b.decode("utf-8", "replace")


def path_arg(p):
    """os.fspath(P) of a path argument (str, bytes, os.PathLike); ValueError when it holds a NUL
    byte, as os.open does (C would read the path only up to it: another file)."""
    p = os.fspath(p)
    if ("\0" if isinstance(p, str) else b"\0") in p:
        raise ValueError("embedded null byte in path %r" % (p,))
    return p


def fspath(p):
    """A path argument (str, bytes, os.PathLike) -> bytes for C (path_arg's checks)."""
    p = path_arg(p)
    if isinstance(p, str):
        return os.fsencode(p)
    return p


if sys.byteorder != "little" or ctypes.sizeof(ctypes.c_void_p) != 8:  # pragma: no cover
    raise ImportError("stoker supports 64-bit little-endian Linux only")
