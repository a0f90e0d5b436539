/* SPDX-License-Identifier: MIT */
/*
 * stoker.h — keep GPUs fed: packed image shards, an io_uring reader, a libjpeg-turbo
 * decode/augment pool, a pinned batch ring and an asynchronous CUDA stager.
 *
 * This header is the manual. Every public name is documented here: what it does, when it may
 * be called, who owns what, and which threads may call it.
 *
 * Conventions
 *   - Status codes: every function that can fail returns an int status: STK_OK (0) on success,
 *     a positive "soft" status (STK_END, STK_TIMEOUT) where documented, a negative library code
 *     STK_E_* (-1000 and below) or a negated errno (-1 .. -999) on failure. stk_strerror() names
 *     any of them.
 *   - Handles are opaque and created/destroyed by the library; every *_destroy(NULL) is a no-op.
 *   - Per-handle detail: after a failure, *_last_error(h) returns a message naming the file,
 *     record and cause. The string is owned by the handle and valid until the next call on it.
 *   - Options are key + value (stk_loader_set, stk_writer_set, ...). Keys are pinned numbers,
 *     grouped per stage in hundreds, append-only. Each key says its type, range and [default]
 *     and when it may be set; stk_param_bounds() returns the range.
 *   - Thread safety: a handle is used by one thread at a time unless its section says otherwise.
 *     Free functions without a handle (stk_strerror, stk_version, stk_decode with a NULL
 *     decoder, ...) are thread-safe.
 *   - fork(): a handle belongs to the process that created it. After fork() the child must not
 *     use (or destroy) handles created by the parent; their threads do not exist in the child.
 *     Create new handles in the child.
 *   - 64-bit Linux only.
 */
#ifndef STOKER_H
#define STOKER_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(STOKER_STATIC)
#  define STK_API
#elif defined(STOKER_BUILDING)
#  define STK_API __attribute__((visibility("default")))
#else
#  define STK_API
#endif

/* ---------------------------------------------------------------------------------------------
 * Version
 * ------------------------------------------------------------------------------------------- */

#define STK_VERSION_MAJOR 0
#define STK_VERSION_MINOR 5
#define STK_VERSION_PATCH 0
/** MAJOR*10000 + MINOR*100 + PATCH. */
#define STK_VERSION_NUMBER (STK_VERSION_MAJOR * 10000 + STK_VERSION_MINOR * 100 + STK_VERSION_PATCH)
#define STK_VERSION_STRING "0.5.0"

/** The library's STK_VERSION_NUMBER (compare with the header's to detect a mismatch).
 *  Thread-safe. */
STK_API unsigned stk_version(void);
/** "0.5.0" plus the build's features, e.g. "0.5.0 (uring cuda)". Static string. Thread-safe. */
STK_API const char *stk_version_string(void);

/** Build features, for stk_has_feature(). */
enum stk_feature {
    STK_FEATURE_URING = 1, /**< built with liburing (io_uring may still be refused at run time) */
    STK_FEATURE_CUDA = 2,  /**< built with the CUDA runtime (a device may still be absent) */
    STK_FEATURE_S3 = 3,    /**< built with libcurl + libxml2: s3:// datasets (since 0.5) */
};
/** 1 when the build has the feature, else 0. Thread-safe. */
STK_API int stk_has_feature(int feature);
/** Number of CUDA devices usable now (0 without CUDA or without a GPU). Thread-safe. */
STK_API int stk_cuda_device_count(void);

/* ---------------------------------------------------------------------------------------------
 * Status codes
 * ------------------------------------------------------------------------------------------- */

/* X(name, value, text). Values are pinned: append only. */
#define STK_STATUS_LIST(X)                                                                     \
    X(STK_OK, 0, "success")                                                                    \
    X(STK_END, 1, "end of epoch")                                                              \
    X(STK_TIMEOUT, 2, "timed out")                                                             \
    X(STK_E_INVALID, -1001, "invalid argument")                                                \
    X(STK_E_STATE, -1002, "call not allowed in this state")                                    \
    X(STK_E_NOMEM, -1003, "out of memory")                                                     \
    X(STK_E_FORMAT, -1004, "not a stoker dataset or unsupported format")                       \
    X(STK_E_CORRUPT, -1005, "corrupt record")                                                  \
    X(STK_E_CRC, -1006, "CRC32C mismatch")                                                     \
    X(STK_E_DECODE, -1007, "cannot decode image")                                              \
    X(STK_E_NOT_JPEG, -1008, "not a JPEG")                                                     \
    X(STK_E_TOO_LARGE, -1009, "image exceeds the pixel limit")                                 \
    X(STK_E_EMPTY, -1010, "empty record or file")                                              \
    X(STK_E_EXISTS, -1011, "destination already holds a dataset")                              \
    X(STK_E_RANGE, -1012, "index out of range")                                                \
    X(STK_E_LMDB, -1013, "LMDB error")                                                         \
    X(STK_E_CUDA, -1014, "CUDA error")                                                         \
    X(STK_E_NODEVICE, -1015, "no usable CUDA device")                                          \
    X(STK_E_UNSUPPORTED, -1016, "not supported by this build")                                 \
    X(STK_E_CHANGED, -1017, "dataset changed while open")                                      \
    X(STK_E_INCOMPLETE, -1018, "dataset incomplete (interrupted pack)")                        \
    X(STK_E_CANCELLED, -1019, "cancelled")                                                     \
    X(STK_E_IO, -1020, "I/O error")                                                            \
    X(STK_E_TRUNCATED, -1021, "truncated data")                                                \
    X(STK_E_BADPARAM, -1022, "unknown parameter or wrong type")                                \
    X(STK_E_EMPTYSET, -1023, "dataset has no records")

enum stk_status {
#define STK__ENUM(name, value, text) name = value,
    STK_STATUS_LIST(STK__ENUM)
#undef STK__ENUM
};

/** Static text for any status: STK_*, or a negated errno (then strerror's text). Thread-safe. */
STK_API const char *stk_strerror(int status);
/** The symbolic name ("STK_E_CRC", "EIO", ...) of a status. Static string. Thread-safe. */
STK_API const char *stk_status_name(int status);

/* ---------------------------------------------------------------------------------------------
 * Parameters: pinned keys, grouped per stage. Types: I = integer (stk_*_set),
 * D = double (stk_*_set_double), F = float vector (stk_loader_set_floats), S = string.
 * ------------------------------------------------------------------------------------------- */

typedef enum stk_param {
    /* 0..99: dataset / source (loader and stk_dataset). Before open. */
    STK_P_LAYOUT = 1,        /**< I: STK_LAYOUT_* [STK_LAYOUT_AUTO] */
    STK_P_FOREIGN_LABEL = 2, /**< I: label given to every record of a foreign LMDB [-1] */
    STK_P_ALLOW_INCOMPLETE = 3, /**< I 0/1: open a dataset an interrupted pack left [0] */
    STK_P_CACHE_BYTES = 4,   /**< I >= 0: size limit of the cache directory that s3:// datasets
                                  are fetched into; 0 = env STOKER_CACHE_BYTES, else none [0]
                                  (since 0.5). Below the dataset's size (and at least its
                                  largest shard): streaming, in the shard-window order */
    STK_P_STREAM = 5,        /**< I 0/1: open an s3:// dataset streaming even when its cache could
                                  hold it: no shard fetched at open, a loader fetches each as it
                                  reads it (docs/S3.md "Streaming") [0]. A loader sets it itself
                                  when STK_P_SHUFFLE_WINDOW is set before its open. Ignored for
                                  local paths. (since 0.5) */

    /* 100..199: reader. Before start. */
    STK_P_IO_BACKEND = 100,     /**< I: STK_IO_* [STK_IO_AUTO]. Env STOKER_DISABLE_URING=1 makes
                                     io_uring unavailable (AUTO falls back to pread, URING fails) */
    STK_P_IO_DIRECT = 101,      /**< I 0/1: O_DIRECT for shards [1] (buffered where refused) */
    STK_P_QUEUE_DEPTH = 102,    /**< I 1..4096: reads in flight [32] */
    STK_P_INFLIGHT_BYTES = 103, /**< I >= 1 MiB: cap on bytes in flight [64 MiB] */
    STK_P_VERIFY_CRC = 104,     /**< I 0/1: check each record's stored CRC32C (format-2 shards:
                                     of payload, label and target, so a changed label is a bad
                                     record, STK_E_CRC; format 1: of the payload) [1] */
    STK_P_IO_THREADS = 105,     /**< I 1..256: threads of the pread / files / mmap backends [8] */
    STK_P_SHUFFLE = 110,        /**< I 0/1: permute each epoch [1] */
    STK_P_SEED = 111,           /**< I: seed of order and augmentation [0] */
    STK_P_EPOCH = 112,          /**< I >= 0: epoch to start at [0] */
    STK_P_RANK = 113,           /**< I 0..world_size-1 [0] */
    STK_P_WORLD_SIZE = 114,     /**< I >= 1 [1] */
    STK_P_DIST_MODE = 115,      /**< I: STK_DIST_PAD (wrap, as DistributedSampler), STK_DIST_DROP or
                                     STK_DIST_EXACT (unequal parts, each sample once) [PAD] */
    STK_P_DRAW_KEY = 116,       /**< I -1..2^62: what keys each sample's random draws (crop, flip,
                                     interpolation, augmentations, erasing) besides (seed, epoch):
                                     -1 its record index; B >= 0 the number B + its position in
                                     this rank's epoch, so that a record listed twice
                                     (stk_loader_set_indices) draws differently per copy [-1]
                                     (since 0.5) */
    STK_P_SHUFFLE_WINDOW = 117, /**< I 0..256: the epoch order. 0 = the exact global order (a
                                     permutation of every record) [0]. W >= 1 = the shard-window
                                     order, for a dataset read through a cache smaller than itself
                                     (docs/S3.md): shards dealt to ranks once by the seed (each rank
                                     reads only its own shards), each epoch a rank's shards in a
                                     seeded order; window k shuffles together a slice (1/W) of each
                                     of the shards at places k-W+1..k, so each window brings in one
                                     shard and retires one and at most W shards are read at once
                                     (W >= a rank's shard count: its records in one window, a
                                     uniform shuffle). Deterministic for any worker count; exact
                                     resume with the same world size (stk_loader_seek, or
                                     stk_loader_resume with a consumed count from a run of the same
                                     world size); exact elastic resume on another world size with
                                     stk_loader_tell_segments / stk_loader_resume_segments. Dataset
                                     of shards only. With stk_loader_set_indices (since 0.5): the
                                     same order on the list's entries grouped by shard, only shards
                                     holding an entry dealt (docs/S3.md "Subsets"). An s3:// dataset
                                     streamed through a smaller cache always takes this order: 0
                                     then means W = limit / largest shard / 2 (at least 1); a window
                                     the cache cannot hold fails the start (STK_E_TOO_LARGE). Set
                                     before stk_loader_open, it also makes an s3:// dataset stream
                                     (STK_P_STREAM) even when the cache could hold it: a cold
                                     cache's first epoch at the link's pace. (since 0.5) */
    STK_P_FAULT_EIO_PPM = 120,  /**< I 0..1e6: inject EIO on this many reads per million [0] */
    STK_P_FAULT_SHORT_PPM = 121, /**< I 0..1e6: inject short reads per million [0] */
    STK_P_FAULT_DELAY_PPM = 122, /**< I 0..1e6: delay this many reads per million [0] */
    STK_P_FAULT_DELAY_US = 123,  /**< I >= 0: the injected delay [1000] */
    STK_P_FAULT_SEED = 124,      /**< I: seed of the fault draw [0] */

    /* 200..299: decode / augment. Before start. */
    STK_P_WORKERS = 200,       /**< I 1..1024: decode threads [the CPU budget: stk_cpu_budget_get] */
    STK_P_MODE = 201,          /**< I: STK_MODE_TRAIN or STK_MODE_EVAL [TRAIN] */
    STK_P_OUT_HEIGHT = 202,    /**< I 1..65535: output height [224] */
    STK_P_OUT_WIDTH = 203,     /**< I 1..65535: output width [224] */
    STK_P_RESIZE = 204,        /**< I 1..65535: eval: shorter side resized to this [256] */
    STK_P_FLIP_PROB = 205,     /**< D 0..1: horizontal flip probability (train) [0.5] */
    STK_P_SCALE_MIN = 206,     /**< D (0,1]: RandomResizedCrop area scale, low [0.08] */
    STK_P_SCALE_MAX = 207,     /**< D (0,1]: high [1.0] */
    STK_P_RATIO_MIN = 208,     /**< D > 0: aspect ratio, low [3/4] */
    STK_P_RATIO_MAX = 209,     /**< D > 0: high [4/3] */
    STK_P_MAX_PIXELS = 210,    /**< I >= 1: images with more pixels are bad records [89478485] */
    STK_P_STRICT = 211,        /**< I 0/1: a bad record or libjpeg warning fails next(); else a
                                    bad record is replaced by a good one (stk_loader_next) [0] */
    STK_P_DCT_SCALING = 212,   /**< I 0/1: decode at the smallest covering DCT scale [1] */
    STK_P_MAX_OUT_HEIGHT = 213, /**< I 0..65535: largest output height stk_loader_set_output_size
                                     may ask for; the ring is sized for it. 0 = STK_P_OUT_HEIGHT.
                                     Setting it (or STK_P_MAX_OUT_WIDTH) makes the loader
                                     resizable (see stk_loader_set_output_size) [0] (since 0.2) */
    STK_P_MAX_OUT_WIDTH = 214,  /**< I 0..65535: the same for the width [0] (since 0.2) */
    STK_P_MULTI_HOT = 215,      /**< I 0/1: deliver a label-list target (STK_TARGET_LABELS) as
                                     float32 multi-hot rows of the dataset's class count instead
                                     of the stored int32 lists; start says STK_E_INVALID for a
                                     dataset without one [0] (since 0.2) */
    STK_P_INTERP = 216,         /**< I: STK_INTERP_* filter of the train crop's resize and of eval's
                                     Resize, Pillow's arithmetic byte for byte at DCT scale 8/8
                                     (torchvision's interpolation= on PIL images). NEAREST always
                                     decodes at 8/8; RANDOM picks BILINEAR or BICUBIC per sample
                                     [STK_INTERP_BILINEAR] (since 0.3) */
    STK_P_RESIZE_HEIGHT = 217,  /**< I 0..65535: eval: resize the whole image to exactly this height
                                     (torchvision Resize((h, w))) instead of the shorter side to
                                     STK_P_RESIZE; the centre crop follows. 0 = off; set with
                                     STK_P_RESIZE_WIDTH, both or neither [0] (since 0.3) */
    STK_P_RESIZE_WIDTH = 218,   /**< I 0..65535: the same for the width [0] (since 0.3) */
    STK_P_RESIZE_PASSES = 219,  /**< I: STK_RESIZE_PASSES_*, the order of the resize's two passes
                                     (each rounds to 8 bits, so the order shows in the last bit):
                                     Pillow 12 and older always run the horizontal one first,
                                     Pillow 13 the vertical one when the height shrinks by more
                                     than twice as many pixels as the width. Set the Pillow the
                                     output must equal; stoker.Loader sets the installed one's
                                     [STK_RESIZE_PASSES_PILLOW12] (since 0.4) */
    /* 220..229: per-sample augmentation after the crop/resize/flip, on the uint8 sample, equal
     * to torchvision's tensor implementation (docs/ARCHITECTURE.md, "Decode and augment");
     * drawn from (seed, epoch, index) on a stream of its own, so crops do not change (since 0.3) */
    STK_P_AUG_POLICY = 220,     /**< I: STK_AUG_* policy [STK_AUG_NONE] (AUGMIX: since 0.3 too) */
    STK_P_AUG_NUM_OPS = 221,    /**< I 0..65535: RandAugment's num_ops, timm's num_layers (0..15
                                     with STK_P_TIMM_WEIGHTED) (0..16 before 0.5) [2] */
    STK_P_AUG_MAGNITUDE = 222,  /**< I 0..16777215: RandAugment's magnitude, a bin index below
                                     STK_P_AUG_BINS (checked at start) (0..1023 before 0.5) [9] */
    STK_P_AUG_BINS = 223,       /**< I 2..16777216: num_magnitude_bins of TrivialAugmentWide and
                                     RandAugment (AutoAugment always uses 10; 1 is refused:
                                     torchvision's Posterize table is then 0 / 0 and it raises)
                                     (2..1024 before 0.5) [31] */
    STK_P_AUG_INTERP = 224,     /**< I: STK_AUG_INTERP_NEAREST, _BILINEAR or _BICUBIC (since 0.5),
                                     of the geometric ops [NEAREST] */
    STK_P_AUG_FILL = 225,       /**< I -1..0xFFFFFF: the geometric ops' fill as 0xRRGGBB, or -1
                                     for torchvision's fill=None (zeros, no fill mask) [-1] */
    STK_P_AUG_STEPS = 226,      /**< F[n], n <= 256: per-sample steps run in this order after the
                                     flip, each its kind then its values: 1 p (RandomVerticalFlip),
                                     2 p (RandomGrayscale), 3 bmin bmax cmin cmax smin smax hmin
                                     hmax (ColorJitter's factor ranges; a range (1, 1), or (0, 0)
                                     for hue, is off), 4 (where the STK_P_AUG_POLICY policy runs;
                                     without it, after the last step), 5 kx ky smin smax
                                     (transforms.GaussianBlur, kernel odd 1..255; equal to torch
                                     built without MKL (1.x); with MKL (the PyPI wheels) equal
                                     when given torch's exp (stk_loader_set_vexp), else within
                                     one level: docs/ARCHITECTURE.md), 8 kx ky smin smax
                                     (transforms.v2.GaussianBlur, its softmax kernel; equal to
                                     torch 2.x; since 0.5), 6 dmin dmax tx ty smin smax shx0 shx1 shy0
                                     shy1 interp fill_on r g b (RandomAffine: translate in
                                     0..1, scale 1 1 and shear 0 0 0 0 when None; interp
                                     STK_AUG_INTERP_* (BICUBIC since 0.5); fill_on 0 = fill None), 7 dmin dmax
                                     interp fill_on r g b (RandomRotation) (6, 7: since 0.4;
                                     expand=False, center=None). At most 16 steps; set (NULL,
                                     0) to remove.
                                     Equal to torchvision's tensor path [none] */
    STK_P_ERASE_PROB = 227,     /**< D 0..1: RandomErasing's p, on the delivered (converted,
                                     normalised) host sample, after everything else; device
                                     batches refuse it at start (STK_E_UNSUPPORTED) [0] */
    STK_P_ERASE_SCALE_MIN = 228, /**< D 0..FLT_MAX: RandomErasing's scale, low (torchvision takes
                                      0..1, timm any; a box of area 0 erases nothing; (0, 1]
                                      before 0.5) [0.02] */
    STK_P_ERASE_SCALE_MAX = 229, /**< D 0..FLT_MAX: high [0.33] */
    STK_P_ERASE_RATIO_MIN = 230, /**< D (0, FLT_MAX]: RandomErasing's ratio, low ((0, 1000]
                                      before 0.5) [0.3] */
    STK_P_ERASE_RATIO_MAX = 231, /**< D (0, FLT_MAX]: high [3.3] */
    STK_P_ERASE_VALUE = 232,    /**< F[3]: the value per channel, in delivered units (after the
                                     normalisation; uint8: clamped, truncated) [0, 0, 0] */
    STK_P_ERASE_RANDOM = 233,   /**< I: STK_ERASE_RANDOM_*: 1 (PIXEL) value='random' (timm's
                                     mode 'pixel'), a standard normal per element; 2 (CHANNEL,
                                     since 0.4) timm's mode 'rand', one per channel and box;
                                     0 (OFF) STK_P_ERASE_VALUE [0] */
    STK_P_AUGMIX_SEVERITY = 234, /**< I 1..10: AugMix's severity [3] */
    STK_P_AUGMIX_WIDTH = 235,   /**< I 1..8: mixture_width [3] */
    STK_P_AUGMIX_DEPTH = 236,   /**< I -1..8: chain_depth; <= 0: 1..3 at random per chain [-1] */
    STK_P_AUGMIX_ALPHA = 237,   /**< D > 0: the Dirichlet / Beta parameter alpha [1.0] */
    STK_P_AUGMIX_ALL_OPS = 238, /**< I 0/1: all_ops (the colour ops too) [1] */
    /* 239..249: timm's RandAugment (STK_AUG_TIMM_RAND; since 0.4), the sections of its
     * 'rand-m9-n2-mstd0.5-inc1' strings; its num_layers is STK_P_AUG_NUM_OPS, its hparams
     * img_mean STK_P_AUG_FILL (-1: timm's default (128, 128, 128)) */
    STK_P_TIMM_MAGNITUDE = 239, /**< D 0..1000: 'm', the magnitude before noise and clip [10] */
    STK_P_TIMM_MSTD = 240,      /**< D 0..1e6: 'mstd', the std of the normal noise added to the
                                     magnitude per op applied; 0 = none [0] */
    STK_P_TIMM_UNIFORM = 241,   /**< I 0/1: the magnitude drawn uniformly from [0, m] instead
                                     (timm's magnitude_std = inf, 'mstd' above 100) [0] */
    STK_P_TIMM_MMAX = 242,      /**< D 0..1000: the clip's upper bound, 'mmax' (timm: mmax or 10)
                                     [10] */
    STK_P_TIMM_PROB = 243,      /**< D 0..1: 'p', the probability that a chosen op runs [0.5] */
    STK_P_TIMM_INCREASING = 244, /**< I 0/1: 'inc1', timm's _RAND_INCREASING_TRANSFORMS instead
                                     of _RAND_TRANSFORMS [0] */
    STK_P_TIMM_RESAMPLE = 245,  /**< I -1..2: the geometric ops' filter, STK_INTERP_BILINEAR,
                                     _BICUBIC or _NEAREST (Pillow's), or -1: BILINEAR or BICUBIC
                                     at random per op (timm's default, hparams without
                                     interpolation) [-1] */
    STK_P_TIMM_TRANSLATE_PCT = 246, /**< D 0..1: hparams translate_pct of TranslateX/YRel [0.45] */
    STK_P_TIMM_WEIGHTED = 247,  /**< I 0/1: 'tweights', timm's _RAND_WEIGHTED_0 ops and weights,
                                     chosen without replacement (STK_P_TIMM_INCREASING is then
                                     ignored; num_layers above 15 is refused at start) [0] */
    /* 250..: more of torchvision's and timm's per-sample augmentation (since 0.4) */
    STK_P_AUG_AUTO_POLICY = 250, /**< I: STK_AUG_AUTO_* table of STK_AUG_AUTO (torchvision's
                                      AutoAugmentPolicy) [STK_AUG_AUTO_IMAGENET] */
    STK_P_ERASE_MIN_COUNT = 251, /**< I 1..STK_ERASE_MAX_COUNT: timm's RandomErasing min_count:
                                      each erased sample gets a count of boxes uniform on
                                      [MIN_COUNT, MAX_COUNT], each drawn with the area scale
                                      divided by the count; 1, 1 is torchvision's one box [1] */
    STK_P_ERASE_MAX_COUNT = 252, /**< I 1..STK_ERASE_MAX_COUNT, >= MIN_COUNT (checked at start):
                                      timm's max_count [1] */
    STK_P_AUG_TORCH = 253,      /**< I: STK_AUG_TORCH_*: whose float32 arithmetic the per-sample
                                      augmentation equals bit for bit, as torch and torchvision
                                      changed it at 2.0 / 0.15: torch.linspace behind the
                                      magnitude tables (1.x computes runs of 2 x 8 points, 2 x 16
                                      on AVX512 kernels, as vectors; 2.x every point alone) and
                                      adjust_hue's return to uint8 (0.14: x 255, truncated; 0.15:
                                      convert_image_dtype's x (256 - 1e-3), truncated). The Python
                                      binding sets it from the torch it imports. Torch's DEFAULT
                                      (no FMA) CPU kernels are not reproduced [STK_AUG_TORCH_1] */
    STK_P_TIMM_AUTO_POLICY = 254, /**< F[n], n <= 256: the policy of STK_AUG_TIMM_AUTO (timm's
                                      AutoAugment, since 0.4): its sub-policies in order, each
                                      its op count k (1..16) then k triples op, prob (0..1),
                                      magnitude (0..1000) (timm's AugmentOp(name, prob,
                                      magnitude)); op numbers: 0 AutoContrast, 1 Equalize,
                                      2 Invert, 3 Rotate, 4 Posterize, 5 PosterizeIncreasing,
                                      6 Solarize, 7 SolarizeIncreasing, 8 SolarizeAdd, 9 Color,
                                      10 ColorIncreasing, 11 Contrast, 12 ContrastIncreasing,
                                      13 Brightness, 14 BrightnessIncreasing, 15 Sharpness,
                                      16 SharpnessIncreasing, 17 ShearX, 18 ShearY,
                                      19 TranslateXRel, 20 TranslateYRel, 21 PosterizeOriginal.
                                      At most 64 sub-policies and 128 ops; the hparams shared by
                                      the ops are STK_P_TIMM_MSTD / _UNIFORM / _MMAX / _RESAMPLE
                                      / _TRANSLATE_PCT and STK_P_AUG_FILL. (NULL, 0) empties it;
                                      start refuses STK_AUG_TIMM_AUTO with an empty policy [none] */
    STK_P_MAX_BAD_FRACTION = 255, /**< D 0..1: the largest share of bad records an epoch may have
                                      (since 0.5). Checked by stk_loader_next as it hands out each
                                      batch: once 10000 samples of the epoch were handed out
                                      (STK_BAD_CHECK_MIN), and at the epoch's last batch whatever
                                      the count; above it (bad > fraction x handed out) next fails
                                      with the commonest reason's status and a last_error naming
                                      the commonest reasons (sticky until a seek or set_epoch).
                                      1 never fails; STK_P_STRICT fails at the first [0.01] */

    /* 300..399: batches, host ring, stager. Before start. */
    STK_P_BATCH_SIZE = 300,    /**< I 1..65536 [256] */
    STK_P_DROP_LAST = 301,     /**< I 0/1: drop a short last batch [0] */
    STK_P_PREFETCH = 302,      /**< I 2..64: host batch slots K [4] */
    STK_P_DEVICE = 303,        /**< I: CUDA device ordinal, or -1 for host batches [-1] */
    STK_P_DTYPE = 304,         /**< I: STK_DTYPE_* of delivered images [UINT8] */
    STK_P_OUT_LAYOUT = 305,    /**< I: STK_NCHW or STK_NHWC [NCHW] */
    STK_P_DEVICE_BUFFERS = 306, /**< I 2..16: device batch buffers [2] */
    STK_P_MAX_PINNED_BYTES = 307, /**< I: cap on pinned/host ring bytes, 0 = no cap [0] */
    STK_P_MAX_DEVICE_BYTES = 308, /**< I: cap on device buffer bytes, 0 = no cap [0] */
    STK_P_STAGE = 309,         /**< I: STK_STAGE_* last stage run [FULL] */
    STK_P_MEAN = 310,          /**< F[3]: per-channel mean, in 0..255 units [none] */
    STK_P_STD = 311,           /**< F[3]: per-channel std, in 0..255 units [none] */
    STK_P_PIN_HOST = 312,      /**< I 0/1: host batches in page-locked memory (cudaHostAlloc, portable
                                     to every device) so that the caller's host-to-device copies
                                     are asynchronous. Without CUDA in the build or a device, the
                                     ring is pageable and stats.pin_reason says why (not an
                                     error). Device batches' ring is always page-locked. [0] */
    STK_P_LUT = 313,           /**< F[768]: float host batches take value lut[256 * c + x] for
                                     channel c and 8-bit pixel x, instead of the MEAN/STD
                                     expression: any per-channel map (another library's order
                                     of rounding, bit for bit). Needs a float STK_P_DTYPE, no
                                     MEAN/STD, host batches (start says STK_E_INVALID /
                                     STK_E_UNSUPPORTED otherwise). stk_loader_set_floats(h,
                                     STK_P_LUT, NULL, 0) removes it. [none] */
} stk_param;

enum stk_layout { STK_LAYOUT_AUTO = 0, STK_LAYOUT_SHARDS = 1, STK_LAYOUT_FILES = 2, STK_LAYOUT_LMDB = 3 };
enum stk_io_backend {
    STK_IO_AUTO = 0,  /**< io_uring, else the pread pool */
    STK_IO_URING = 1, /**< io_uring; start fails if unavailable */
    STK_IO_PREAD = 2, /**< pread thread pool */
    STK_IO_MMAP = 3,  /**< LMDB's own read path (mdb_get on the map): the reference. A shard cut
                           while open: its records fail (STK_E_TRUNCATED, "shrank from X to Y
                           bytes while open"); a cut within microseconds of a read of it can
                           still raise SIGBUS (docs/HARDENING.md) */
};
/*
 * Distributed split (STK_P_DIST_MODE), N samples over W ranks, rank r taking the epoch's global
 * positions r, r + W, r + 2W, ... as torch's DistributedSampler does:
 *   PAD    the list is extended to ceil(N / W) * W by wrapping around: equal parts, some samples
 *          twice. DROP: cut to floor(N / W) * W: equal parts, some samples never.
 *   EXACT  neither: rank r gets the positions below N, ceil((N - r) / W) samples (0 when r >= N).
 *          Every sample is in exactly one rank's part, for evaluation that counts each once.
 *          The parts differ by one sample, so the ranks may run different numbers of batches:
 *          a DDP training step (or any collective per step) on such a loader hangs the rank
 *          with more steps. Use EXACT for eval loops that gather (all_reduce / all_gather) once
 *          after the loop.
 */
enum stk_dist_mode { STK_DIST_PAD = 0, STK_DIST_DROP = 1, STK_DIST_EXACT = 2 };
enum stk_mode { STK_MODE_TRAIN = 0, STK_MODE_EVAL = 1 };
/** STK_P_INTERP: Pillow's BILINEAR / BICUBIC (a = -0.5) antialiased filters, NEAREST (since 0.3);
 *  RANDOM: timm's interpolation='random', BILINEAR or BICUBIC with equal odds for each sample, a
 *  pure function of (seed, epoch, index) like the crop (since 0.4) */
enum stk_interp { STK_INTERP_BILINEAR = 0, STK_INTERP_BICUBIC = 1, STK_INTERP_NEAREST = 2, STK_INTERP_RANDOM = 3 };
enum stk_dtype { STK_DTYPE_UINT8 = 0, STK_DTYPE_FLOAT16 = 1, STK_DTYPE_BFLOAT16 = 2, STK_DTYPE_FLOAT32 = 3 };
enum stk_out_layout { STK_NCHW = 0, STK_NHWC = 1 };
enum stk_stage { STK_STAGE_READ = 0, STK_STAGE_DECODE = 1, STK_STAGE_FULL = 2 };
/** STK_P_AUG_POLICY: torchvision's TrivialAugmentWide(num_magnitude_bins), RandAugment(num_ops,
 *  magnitude, num_magnitude_bins), AutoAugment(STK_P_AUG_AUTO_POLICY), AugMix(STK_P_AUGMIX_*),
 *  each with STK_P_AUG_INTERP and STK_P_AUG_FILL; TIMM_RAND: timm's RandAugment
 *  (rand_augment_transform, STK_P_TIMM_*), its PIL ops equal to Pillow's (since 0.4);
 *  TIMM_AUTO: timm's AutoAugment (auto_augment_transform: one sub-policy of
 *  STK_P_TIMM_AUTO_POLICY uniformly per sample, each op with its probability), the same ops
 *  (since 0.4). */
enum stk_aug_policy {
    STK_AUG_NONE = 0,
    STK_AUG_TRIVIAL = 1,
    STK_AUG_RAND = 2,
    STK_AUG_AUTO = 3,
    STK_AUG_AUGMIX = 4,
    STK_AUG_TIMM_RAND = 5,
    STK_AUG_TIMM_AUTO = 6
};
/** STK_P_RESIZE_PASSES: the pass order of Pillow <= 12 or of Pillow >= 13 (since 0.4) */
enum stk_resize_passes { STK_RESIZE_PASSES_PILLOW12 = 0, STK_RESIZE_PASSES_PILLOW13 = 1 };
/** STK_P_AUG_INTERP: the geometric ops' filter; BICUBIC (since 0.5) is torch's grid_sample(mode='bicubic'),
 *  which torchvision's tensor F.affine / F.rotate refuse (docs/ARCHITECTURE.md) */
enum stk_aug_interp { STK_AUG_INTERP_NEAREST = 0, STK_AUG_INTERP_BILINEAR = 1, STK_AUG_INTERP_BICUBIC = 2 };
/** STK_P_ERASE_RANDOM's fills; the most boxes STK_P_ERASE_MAX_COUNT allows (since 0.4) */
enum stk_erase_random { STK_ERASE_RANDOM_OFF = 0, STK_ERASE_RANDOM_PIXEL = 1, STK_ERASE_RANDOM_CHANNEL = 2 };
#define STK_ERASE_MAX_COUNT 16
/** STK_P_AUG_AUTO_POLICY: AutoAugmentPolicy.IMAGENET, CIFAR10, SVHN (since 0.4) */
enum stk_aug_auto { STK_AUG_AUTO_IMAGENET = 0, STK_AUG_AUTO_CIFAR10 = 1, STK_AUG_AUTO_SVHN = 2 };
/** STK_P_AUG_TORCH: torch 1.x with torchvision <= 0.14 on its AVX2 CPU kernels; the same on its
 *  AVX512 kernels; torch >= 2.0 with torchvision >= 0.15 (since 0.4) on its AVX2 kernels; the same
 *  on its AVX512 kernels (since 0.5: only transforms.v2's GaussianBlur, STK_P_AUG_STEPS kind 8,
 *  differs, by the width of its softmax's sum). STK_AUG_TORCH_GRID_FMA (since 0.5), OR-ed onto
 *  any of them: the geometric ops' affine grid (torchvision's _gen_affine_grid, a bmm with
 *  K = 3) as fma(y, r1, x * r0) + r2, which Intel MKL's AVX-512 sgemm gives on some CPUs (torch
 *  built with MKL: the PyPI x86-64 wheels), rather than (x * r0 + y * r1) + r2, each step
 *  rounded, which its AVX2 kernels and torch without MKL give; the Python binding sets it when
 *  the torch it imports computes its bmm so (docs/ARCHITECTURE.md) */
enum stk_aug_torch { STK_AUG_TORCH_1 = 0, STK_AUG_TORCH_1_AVX512 = 1, STK_AUG_TORCH_2 = 2, STK_AUG_TORCH_2_AVX512 = 3,
                     STK_AUG_TORCH_GRID_FMA = 4 };

/** Range of a parameter: *lo and *hi (integers are exact in a double). STK_E_BADPARAM if unknown.
 *  A range written (0, x] excludes its lower bound, which is still returned as *lo. Covers the
 *  STK_P_* and STK_W_* keys (one table; the setters check the same ranges). Thread-safe. */
STK_API int stk_param_bounds(int key, double *lo, double *hi);

/* ---------------------------------------------------------------------------------------------
 * Dataset (read side): open shards, a folder of images or a foreign LMDB; count, describe, read
 * single records. Used by `stoker info/ls/get` and by the loader.
 * Thread safety: after stk_dataset_open() returns, the query and read functions may be called
 * from several threads at once; set/open/destroy are single-threaded.
 * ------------------------------------------------------------------------------------------- */

typedef struct stk_dataset stk_dataset;

/** Create an unopened dataset handle. *out is owned by the caller: stk_dataset_destroy(). */
STK_API int stk_dataset_create(stk_dataset **out);
/** Set STK_P_LAYOUT / STK_P_FOREIGN_LABEL / STK_P_ALLOW_INCOMPLETE / STK_P_CACHE_BYTES /
 *  STK_P_STREAM. Before open. */
STK_API int stk_dataset_set(stk_dataset *ds, int key, int64_t value);
/** The cache directory that an s3:// dataset is fetched into (copied; NULL or "" = the default:
 *  env STOKER_CACHE_DIR, else $XDG_CACHE_HOME/stoker, else ~/.cache/stoker). Before open. Several
 *  processes may share one cache directory. (since 0.5) */
STK_API int stk_dataset_set_cache_dir(stk_dataset *ds, const char *dir);
/**
 * Open PATH: a directory of shards (shard-NNNNN.lmdb), a single shard file, an LMDB environment
 * (directory with data.mdb, or a file) whose main database maps keys to image bytes, an
 * ImageFolder root, or (STK_LAYOUT_FILES) a manifest or list file naming image files (its path
 * and label fields; a bad line fails the open naming it; targets need a pack). STK_LAYOUT_AUTO detects which. Builds the offset table (see FORMAT.md);
 * reads no payload pages. Holds an LMDB read transaction per shard until destroy.
 * s3://bucket/prefix (since 0.5; docs/S3.md): the shards shard-NNNNN.lmdb under the prefix are
 * fetched into the cache directory (stk_dataset_set_cache_dir, STK_P_CACHE_BYTES) — the whole
 * dataset, in name order, before open returns; cached shards of the same ETag are not fetched
 * again — every record of a fetched shard is CRC-checked, and the cached copy is opened as a
 * local dataset (stk_dataset_shard_path names the cached files). Endpoint, region and credentials
 * come from the environment as the AWS tools read them (AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID,
 * AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, AWS_REGION, AWS_PROFILE with ~/.aws/credentials and
 * ~/.aws/config). A cache limit that cannot hold the whole dataset (but holds its largest
 * shard), or STK_P_STREAM = 1, opens it **streaming** (since 0.5; docs/S3.md "Streaming"): no
 * shard is fetched at open
 * (each shard's record count is read from its LMDB pages with two small ranged GETs); a loader
 * then fetches the shards ahead of its reads in the shard-window order (STK_P_SHUFFLE_WINDOW)
 * and lets them go behind; stk_dataset_read reads only shards a loader has in the cache;
 * records with targets are refused at the first shard fetched (STK_E_UNSUPPORTED: give a cache
 * that holds the dataset).
 * Errors: STK_E_UNSUPPORTED in a build without libcurl; -EACCES (credentials refused) and other
 * request failures name the endpoint; STK_E_TOO_LARGE when the cache limit is smaller than one
 * shard (naming the limit, the shard and its size).
 * Files layout: an entry that is not a regular file (a FIFO, socket or device named like an
 * image, a symlink to one) stays a record, at its ImageFolder index, that is never opened
 * blocking: reading it fails with STK_E_IO "not a regular file: FIFO" (a loader substitutes it
 * and names it in its error list, every epoch).
 */
STK_API int stk_dataset_open(stk_dataset *ds, const char *path);
/** Close everything and free the handle. NULL is a no-op. */
STK_API void stk_dataset_destroy(stk_dataset *ds);
/** Text of the last failure on this handle ("" if none). Owned by ds. */
STK_API const char *stk_dataset_last_error(const stk_dataset *ds);

typedef struct stk_dataset_info {
    int layout;           /**< STK_LAYOUT_SHARDS / FILES / LMDB */
    int format_version;   /**< stoker shards: the shard format, 1 or 2 (the oldest of the
                               dataset's shards: stk_dataset_shard_format tells each); 0 otherwise */
    uint32_t shards;      /**< shard files (1 for a foreign LMDB, 0 for files) */
    uint32_t classes;     /**< class names known (0 if none) */
    uint64_t records;     /**< total records */
    uint64_t payload_bytes; /**< sum of payload sizes (encoded image bytes) */
    uint64_t file_bytes;  /**< sum of shard/file sizes on disk */
    uint32_t max_record_bytes; /**< largest payload */
    uint32_t reserved[7];
} stk_dataset_info;

/** Fill *info. */
STK_API int stk_dataset_info_get(const stk_dataset *ds, stk_dataset_info *info);

/** What the fetch stage of an s3:// dataset did since the dataset's open, the open's own fetch
 *  included (since 0.5; docs/S3.md, "Fetch stats"). All zero for a local path. Each fetch call
 *  adds its figures when it returns, so a snapshot taken during one sees the calls before it. */
typedef struct stk_fetch_stats {
    uint64_t shards;         /**< shards of the dataset */
    uint64_t shards_cached;  /**< shard lookups found in the cache with the bucket's ETag (hits) */
    uint64_t shards_fetched; /**< shard lookups that had to fetch (misses) */
    uint64_t bytes_fetched;  /**< shard bytes received, retried parts included */
    uint64_t requests;       /**< ranged GETs sent, retries included */
    uint64_t retries;        /**< attempts that failed and were retried */
    double fetch_s;          /**< busy: wall time of the fetch calls, requests in flight (0: all
                                  were cached) */
    /** Starved: seconds a user of the dataset was blocked until fetched bytes were there (the
     *  open waiting for its download; a reader waiting for a shard). */
    double starved_s;
    uint64_t bytes_cached;   /**< sizes of the shards behind shards_cached */
    uint64_t bytes_missed;   /**< sizes of the shards behind shards_fetched (without retries) */
    /** The link's measured throughput: bytes_fetched / fetch_s, bytes per second (0 before any
     *  fetch). Over the calls' whole wall time, so it includes each call's first-byte latency:
     *  on a link with a long round trip, more requests in flight raise it. */
    double link_bytes_per_s;
    uint64_t inflight;       /**< requests the fetch keeps in flight (STOKER_S3_INFLIGHT) */
    uint64_t cache_limit;    /**< the cache directory's size limit in bytes (0: none) */
    uint64_t reserved[2];
} stk_fetch_stats;

/** Fill *ST with the dataset's fetch counters. After open. Thread-safe. (since 0.5) */
STK_API int stk_dataset_fetch_stats(const stk_dataset *ds, stk_fetch_stats *st);
/** Number of records (0 before open). */
STK_API uint64_t stk_dataset_count(const stk_dataset *ds);
/** Name of class LABEL, or NULL. Owned by ds. */
STK_API const char *stk_dataset_class_name(const stk_dataset *ds, uint32_t label);
/** Path of shard I (or of the ImageFolder root for files), or NULL. Owned by ds. */
STK_API const char *stk_dataset_shard_path(const stk_dataset *ds, uint32_t shard);
/**
 * Format version of shard SHARD (docs/FORMAT.md): 1 (its records' checksum covers the payload
 * only) or 2 (payload, label and target: what stk_writer and stoker pack write since 0.5); 0 for
 * a foreign LMDB, the files layout, a shard number out of range or an unopened handle. A dataset
 * whose pack was resumed by a newer stoker can hold both. Thread-safe on an open handle.
 * (since 0.5)
 */
STK_API int stk_dataset_shard_format(const stk_dataset *ds, uint32_t shard);

typedef struct stk_record_info {
    uint64_t index;   /**< dataset index */
    uint32_t shard;   /**< shard number (files: 0) */
    uint32_t length;  /**< payload bytes */
    uint64_t key;     /**< key within the shard (stoker shards: record number; foreign: ordinal) */
    uint64_t offset;  /**< file offset of the payload */
    int32_t label;    /**< label, -1 if none */
    uint32_t crc32c;  /**< stored checksum (stoker shards: format 1 CRC32C(payload), format 2
                           CRC32C(payload || label || target), docs/FORMAT.md), else computed
                           by stk_dataset_read (of the payload) */
    int has_crc;      /**< 1 when crc32c was stored at pack time */
    int reserved;
} stk_record_info;

/**
 * Describe record INDEX. For stoker shards this reads the 16-byte record header (one small
 * read). Returns STK_E_RANGE past the end; STK_E_STATE for a record of an s3:// dataset
 * streamed through a cache smaller than itself whose shard no loader has attached (the message
 * names the cache limit that would hold the dataset; docs/S3.md "Streaming").
 */
STK_API int stk_dataset_record(stk_dataset *ds, uint64_t index, stk_record_info *info);
/**
 * Read the payload of record INDEX into BUF (CAP bytes), set *len. If CAP is too small,
 * returns STK_E_RANGE with *len = the size needed. Checks the stored checksum (STK_E_CRC; in a
 * format-2 shard it covers the label and target too, so a changed label fails the read).
 * STK_E_STATE as stk_dataset_record for a streamed record not in the cache. INFO may be NULL.
 * Thread-safe after open.
 */
STK_API int stk_dataset_read(stk_dataset *ds, uint64_t index, void *buf, size_t cap, size_t *len,
                             stk_record_info *info);
/** A printable name of record INDEX into BUF (truncated to CAP): "shard-00001.lmdb key 42
 *  (n01440764/img_00012.JPEG)" where the shard keeps source names (its `sources` database),
 *  else "shard-00001.lmdb key 42"; for image files, the file path. Returns STK_E_RANGE past the
 *  end. Thread-safe after open. */
STK_API int stk_dataset_record_name(const stk_dataset *ds, uint64_t index, char *buf, size_t cap);

/*
 * Targets (since 0.2): besides its int32 label, every record of a dataset may carry a target of
 * one fixed shape and type — several labels, a vector of floats — packed from a manifest
 * (stk_pack_ext) or written with stk_writer_add_target. Stored in the shard's `targets` database
 * (docs/FORMAT.md); datasets without one (every shard written before 0.2) read as dtype
 * STK_TDT_NONE. The loader hands each batch's targets out beside its labels
 * (stk_loader_batch_targets).
 */
enum stk_target_dtype {
    STK_TDT_NONE = 0,    /**< no targets */
    STK_TDT_UINT8 = 1,
    STK_TDT_INT32 = 2,
    STK_TDT_INT64 = 3,
    STK_TDT_FLOAT32 = 4,
    STK_TDT_FLOAT64 = 5,
};
enum stk_target_kind {
    STK_TARGET_VALUES = 0, /**< a vector of SIZE values */
    STK_TARGET_LABELS = 1, /**< a list of class indices (int32, 0..classes-1), padded to SIZE
                                with -1; the loader can expand it to multi-hot (STK_P_MULTI_HOT) */
};
typedef struct stk_target_info {
    int dtype;        /**< STK_TDT_*; STK_TDT_NONE: the records carry no target */
    int kind;         /**< STK_TARGET_* */
    uint32_t size;    /**< elements per record (K), 1..65536 */
    uint32_t classes; /**< STK_TARGET_LABELS: number of classes (the multi-hot width); else 0 */
} stk_target_info;

/** Bytes of one element of DTYPE (0 for STK_TDT_NONE or an unknown value). Thread-safe.
 *  (since 0.2) */
STK_API size_t stk_target_dtype_size(int dtype);
/** The dataset's target shape and type into *INFO (dtype STK_TDT_NONE when it has none). After
 *  open. Thread-safe. Since 0.2. */
STK_API int stk_dataset_target_info(const stk_dataset *ds, stk_target_info *info);
/** Copy the target of record INDEX (size × dtype bytes, little-endian as the machine's) into
 *  OUT (CAP bytes). STK_E_RANGE past the end or when CAP is too small, STK_E_INVALID when the
 *  dataset has no targets. Targets are held in memory from open on (records × size × dtype
 *  bytes), so this reads nothing. On an s3:// dataset opened streamed (docs/S3.md "Streaming";
 *  since 0.5) the target shape is known at open but each shard's targets are read when a loader
 *  first attaches the shard: before that, STK_E_STATE. Thread-safe after open. Since 0.2. */
STK_API int stk_dataset_target(const stk_dataset *ds, uint64_t index, void *out, size_t cap);

/* ---------------------------------------------------------------------------------------------
 * Writer: build one dataset of shards from your own code. `stk_pack` uses it.
 * Thread safety: one thread at a time.
 * ------------------------------------------------------------------------------------------- */

typedef struct stk_writer stk_writer;

enum stk_writer_param {
    STK_W_SHARD_BYTES = 1000, /**< I >= 1 MiB: target payload bytes per shard [1 GiB] */
    STK_W_FORCE = 1001,       /**< I 0/1: replace a dataset already in DST [0] */
};

/** Create a writer (shard size 1 GiB, no force). *out is owned by the caller:
 *  stk_writer_destroy(). */
STK_API int stk_writer_create(stk_writer **out);
/** Set a STK_W_* key. Before open (STK_E_STATE after). STK_E_BADPARAM for an unknown key,
 *  STK_E_INVALID out of range. */
STK_API int stk_writer_set(stk_writer *w, int key, int64_t value);
/** Class names, label = position. Copied. Before finish. */
STK_API int stk_writer_set_classes(stk_writer *w, const char *const *names, size_t n);
/** Create directory DST (and its parents) or use an existing one and lock it against other
 *  writers and packs (an flock on DST/.stoker-pack.lock, held until finish or destroy; -EBUSY
 *  naming the holder's pid when another has it); refuses a DST that holds a
 *  finished dataset (shard files and no incomplete-marker) unless STK_W_FORCE (STK_E_EXISTS).
 *  Writes DST/.stoker-pack-incomplete first, then removes stoker's own files left in DST
 *  (shard-*.lmdb*, pack-report.tsv; other files are left alone). Until stk_writer_finish the
 *  directory reads as an interrupted dataset (stk_dataset_open: STK_E_INCOMPLETE). */
STK_API int stk_writer_open(stk_writer *w, const char *dst);
/** Append one record: payload bytes (copied), its label and, optionally, its source name
 *  (kept in the shard's `sources` database). Records get consecutive dataset indices. Shards
 *  are written in format 2 (since 0.5): the record's checksum covers its payload, label and
 *  target (docs/FORMAT.md). */
STK_API int stk_writer_add(stk_writer *w, const void *payload, size_t len, int32_t label,
                           const char *source);
/** Give every record of this dataset a target of shape and type INFO (copied). Before the first
 *  add (STK_E_STATE after). STK_E_INVALID for a dtype, size or kind out of range (a label list is
 *  STK_TDT_INT32 with classes >= 1). Since 0.2. */
STK_API int stk_writer_set_targets(stk_writer *w, const stk_target_info *info);
/** stk_writer_add with the record's TARGET: size × dtype bytes as set by stk_writer_set_targets
 *  (a label list: indices 0..classes-1, then -1 padding; STK_E_INVALID otherwise). A writer
 *  with targets takes only this call, one without only stk_writer_add (STK_E_STATE). Since 0.2. */
STK_API int stk_writer_add_target(stk_writer *w, const void *payload, size_t len, int32_t label,
                                  const char *source, const void *target);
/** Close the last shard, write meta, rename temp files to their final names (each shard is
 *  fsynced before its rename), then remove the incomplete-marker. A dataset with no records
 *  still gets one (empty) shard. After a failed add/finish the writer only accepts destroy. */
STK_API int stk_writer_finish(stk_writer *w);
/** Abandon an unfinished dataset (temp files are removed; complete shards and the marker stay,
 *  so DST reads as interrupted) and free. After finish: just frees. NULL is a no-op. */
STK_API void stk_writer_destroy(stk_writer *w);
/** Text of the last failure on this writer, naming the file and cause ("" if none). Owned by
 *  w, valid until the next call on it. */
STK_API const char *stk_writer_last_error(const stk_writer *w);

/* ---------------------------------------------------------------------------------------------
 * Pack: an ImageFolder root, a CSV / TSV / JSON Lines manifest or a `path<TAB>label` list file
 * into a dataset of shards, in parallel, resumable after an interruption. The library behind
 * `stoker pack`.
 * ------------------------------------------------------------------------------------------- */

typedef struct stk_pack_progress {
    uint64_t files_total, files_done, records_written, skipped;
    uint64_t bytes_total, bytes_done;
    double elapsed_s;
} stk_pack_progress;

/** Called from the packing thread about 4 times a second and once at the end. */
typedef void (*stk_pack_progress_fn)(const stk_pack_progress *p, void *user);

typedef struct stk_pack_options {
    uint64_t shard_bytes;          /**< 0 = 1 GiB */
    int threads;                   /**< 0 = all cores */
    int strict;                    /**< stop at the first bad source file */
    int force;                     /**< replace a dataset in DST */
    stk_pack_progress_fn progress; /**< may be NULL */
    void *progress_user;
    char *error;                   /**< optional buffer for the failure text */
    size_t error_cap;
} stk_pack_options;

typedef struct stk_pack_result {
    uint64_t records, skipped, shards, classes, payload_bytes, resumed_records;
    double elapsed_s;
} stk_pack_result;

/**
 * Pack SRC into DST. SRC is never modified. JPEG files are stored byte for byte; PNG, WebP, GIF
 * (first frame), BMP, TIFF and binary PPM/PGM files (known by their content, whatever their name)
 * are decoded as Pillow's Image.open(f).convert("RGB") does and stored as JPEGs (quality 95,
 * 4:4:4; docs/FORMAT.md). Every JPEG is decoded completely first (libjpeg-turbo at DCT scale
 * 1/8, which still entropy-decodes every scan): one that does not decode fully — truncated,
 * corrupt entropy data, any libjpeg warning — is not stored (stk_pack_ext_options.keep_damaged
 * stores it). Files that cannot be packed (corrupt, truncated, another format, a format this
 * build has no decoder for) are skipped and listed in DST/pack-report.tsv (path, reason) unless
 * OPTS->strict, which fails naming the file; so are the files of an ImageFolder's class folders
 * whose extension torchvision's ImageFolder does not load (".gif": left out, listed), the folders
 * that cannot be listed (a class folder of mode 000: "unreadable directory", counted as skipped)
 * and, since 0.5, JPEGs over 178,956,970 pixels (every one is checked; one that max_side does not
 * bring under the limit is skipped as "too large"). A record whose image is over the loader's
 * default pixel limit is listed as a warning (stk_pack_ext_options.over_loader_limit). A DST that
 * an interrupted pack left is finished (completed shards are kept). One pack at a time per DST:
 * the pack holds an flock on DST/.stoker-pack.lock (holding its pid) from before it reads DST
 * until it returns; another pack, resume or force on the same DST fails at once with -EBUSY
 * ("DST is being packed by pid N"). The lock goes with the process, so a killed pack leaves
 * nothing that blocks the next one. OPTS may be NULL. RESULT may be NULL. Thread-safe (no
 * shared state).
 *
 * Details: records are appended in SRC's order (torchvision's for an ImageFolder; the lines'
 * order for a manifest or list file), whatever the thread count. A manifest's lines that cannot
 * be used are listed in the report as `MANIFEST line N<TAB>reason` (stk_pack_ext counts them;
 * under strict the first fails with STK_E_FORMAT); docs/FORMAT.md "Manifests" has the rules.
 * A source that is not a regular file (FIFO, socket, device, directory) is skipped unopened:
 * `PATH<TAB>not a regular file: FIFO`, counted in RESULT->skipped. Resuming requires the same plan: the same
 * files with the same sizes and mtimes and labels (their digest is kept in the marker and in each
 * shard's meta); a marker of another plan, or OPTS->force, starts over. A pack that fails (e.g.
 * --strict) leaves DST interrupted. DST must not lie inside an ImageFolder SRC (STK_E_INVALID).
 * Errors: STK_E_EXISTS (finished dataset in DST, no force), -EBUSY (another pack holds DST),
 * STK_E_EMPTYSET (no image files),
 * STK_E_FORMAT (bad list file line), the bad file's status under strict (STK_E_NOT_JPEG,
 * STK_E_EMPTY, -errno, ...), -errno / STK_E_LMDB for DST I/O; the text (naming the path) goes to
 * OPTS->error. RESULT: records and shards of the whole dataset, resumed_records = records kept
 * from the interrupted run, payload_bytes = all payload bytes, elapsed_s = this call's time.
 *
 * DST = s3://bucket/prefix (since 0.5, docs/S3.md): packed as above into a local staging folder
 * (CACHE/pack/HOST/BUCKET/PREFIX under the cache root of stk_dataset_set_cache_dir's default);
 * each shard is uploaded while the pack writes the next and then removed from the local disk, so
 * at most STOKER_S3_PACK_QUEUE + 1 shard files are there (env, [2], 1..64: shards waiting for or
 * in upload; the pack waits for room). The marker object PREFIX/.stoker-pack-incomplete makes an
 * s3:// open refuse the prefix (STK_E_INCOMPLETE) until the upload is complete. A rerun after a
 * kill resumes like a local pack (the uploaded shards are not packed again). A failed upload
 * stops the pack; OPTS->error names the shard file, the object and the endpoint.
 */
STK_API int stk_pack(const char *src, const char *dst, const stk_pack_options *opts,
                     stk_pack_result *result);

/** Pack options added in 0.2 (since 0.2). SIZE comes first so that the struct can grow: set it to
 *  sizeof(stk_pack_ext_options); fields past the caller's SIZE read as 0. All zero (or NULL) =
 *  stk_pack's behaviour. */
typedef struct stk_pack_ext_options {
    size_t size;          /**< sizeof(stk_pack_ext_options) as the caller was compiled */
    int max_side;         /**< > 0: images whose longer side is larger are resized (the loader's
                               antialiased filter) to this longer side, the other side
                               round(side * max_side / longer), and stored as JPEG at `quality`;
                               smaller JPEGs stay byte for byte. An image that should be
                               resized but cannot be is skipped and listed; a JPEG over the
                               pack's pixel limit is decoded at a DCT scale first (since 0.5).
                               0 = off */
    int quality;          /**< JPEG quality 1..100 of every re-encoded image; 0 = 95 */
    uint64_t converted;   /**< out: non-JPEG sources stored as JPEG by this call */
    uint64_t resized;     /**< out: images made smaller for max_side by this call */
    /* Manifests (since 0.2; docs/FORMAT.md "Manifests"): SRC may be a CSV, TSV or JSON Lines
     * file naming a path and its label, labels or values per line. NULL / 0 = the defaults. */
    const char *manifest_format; /**< "csv", "tsv", "jsonl" or "list" (path<TAB>label, no
                                      header); NULL: by SRC's name: .csv, .jsonl/.ndjson, and a
                                      .tsv or any other file whose first line names the path
                                      field is a TSV manifest, else a list file */
    const char *path_field;   /**< the field holding the image path ["path"] */
    const char *label_field;  /**< the field holding the label: an index, a class name, or with
                                   multi_label a list of them; absent from the manifest = no
                                   labels ["label"] */
    const char *target_fields; /**< comma-separated fields whose numbers, in that order, form
                                    each record's value vector (a number, a JSON array, or a
                                    CSV cell of numbers separated by label_sep) [none] */
    const char *classes_file; /**< class names, one per line (label = line): names are looked up
                                   in it, unknown ones are bad lines. NULL: the sorted names the
                                   manifest uses (see `labels` for when labels are names) */
    const char *label_sep;    /**< separator of the values inside one CSV/TSV cell [" "] */
    int multi_label;          /**< 1: the label field holds a list of labels per record, stored
                                   as an STK_TARGET_LABELS target (int32, -1 padded) */
    int target_dtype;         /**< STK_TDT_* of the value vector; 0 = STK_TDT_FLOAT32 */
    uint64_t bad_lines;       /**< out: manifest lines not used (each in pack-report.tsv with
                                   its file, line and reason; under opts->strict the first fails) */
    stk_target_info targets;  /**< out: the shape and type of the records' targets (dtype
                                   STK_TDT_NONE: they have none) */
    /* since 0.3 */
    int labels;               /**< STK_LABELS_*: what a manifest's labels are [STK_LABELS_AUTO] */
    uint64_t max_line;        /**< longest manifest line in bytes (the line break not counted);
                                   a longer line is a bad line, skipped without being held in
                                   memory. 0 = 1 MiB (1048576) */
    /* Damaged JPEGs (since 0.3): every JPEG source is decoded completely before it is stored;
     * one that does not decode fully (data ending early, corrupt entropy data, bytes before EOI:
     * any libjpeg warning) is skipped and listed in pack-report.tsv with libjpeg's message. */
    int keep_damaged;         /**< 1: store such JPEGs as they are instead, each listed in the
                                   report as `kept-damaged: <reason>` (part of the pack plan) */
    uint64_t kept_damaged;    /**< out: damaged JPEGs stored because of keep_damaged */
    uint64_t ignored;         /**< out: files under an ImageFolder's class folders left out, as
                                   torchvision's ImageFolder leaves them, for an extension not in
                                   its IMG_EXTENSIONS (each in the report, with the extension) */
    /* since 0.5 */
    uint64_t over_loader_limit; /**< out: records stored whose image is over the loader's
                                     default pixel limit (89,478,485, STK_P_MAX_PIXELS): each in
                                     the report as `over-loader-limit: WxH ...`, a warning */
} stk_pack_ext_options;

/** stk_pack_ext_options.labels (since 0.3; docs/FORMAT.md "Manifests"). A label is an *index*
 *  when it is a decimal integer 0..2147483647 (a JSON integer, or text of digits only: `007`
 *  is 7), *numeric* when it is an index or reads as a number that is not one (`-1`, `+3`,
 *  `1.0`, `1e3`, `99999999999`), else a *name*. */
enum {
    STK_LABELS_AUTO = 0,  /**< no numeric label in the manifest: names, as STK_LABELS_NAMES;
                               every label numeric: indices, as STK_LABELS_INDEX (so a numeric
                               label that is no index is a bad line, never a renumbering);
                               numeric labels and names mixed: the pack fails, naming a line
                               of each (choose one of the two below) */
    STK_LABELS_INDEX = 1, /**< every label is a class index (below classes_file's count when
                               one is given); any other label makes its line bad */
    STK_LABELS_NAMES = 2, /**< every label is a class name (its text; a JSON integer's decimal
                               text), looked up in classes_file or else one of the sorted set of
                               names the manifest uses. Not for list files (their labels are
                               indices) */
    STK_LABELS_NONE = 3,  /**< unlabelled data, asked for explicitly (since 0.5): the label field
                               is not read and every record's label is -1. In the other modes a
                               record must have its label: an empty CSV/TSV cell, a JSON `null`
                               or a missing label key is a bad line, and a manifest without the
                               label field at all fails the pack. Not for list files, nor with
                               multi_label */
};

/** stk_pack with EXT (may be NULL) (since 0.2). EXT->max_side and quality are part of the pack plan: an
 *  interrupted pack resumes only with the same values. STK_E_INVALID for a size smaller than
 *  the first field or values out of range. Thread-safe (no shared state); EXT's out fields are
 *  written by this call. */
STK_API int stk_pack_ext(const char *src, const char *dst, const stk_pack_options *opts,
                         stk_pack_ext_options *ext, stk_pack_result *result);

/* ---------------------------------------------------------------------------------------------
 * Decode one JPEG (libjpeg-turbo) into a caller buffer: full size, or a crop window at a DCT
 * scale. Output is RGB, 8 bits, HWC, rows packed (stride = 3 * width).
 * ------------------------------------------------------------------------------------------- */

typedef struct stk_decoder stk_decoder;

/** A decoder with its own libjpeg state and scratch. One thread at a time per decoder.
 *  *out is owned by the caller: stk_decoder_destroy() (NULL is a no-op). A decoder stays usable
 *  after any failure. */
STK_API int stk_decoder_create(stk_decoder **out);
STK_API void stk_decoder_destroy(stk_decoder *d);
/** Reason for the last failure of stk_decode on D ("truncated: Premature end of JPEG file",
 *  "not a JPEG: a PNG image (...)", ...). Owned by D; valid until its next call. The thread
 *  using D. */
STK_API const char *stk_decoder_last_error(const stk_decoder *d);

/** Width, height and components (1 gray, 3 YCbCr/RGB, 4 CMYK/YCCK) from the headers. Thread-safe.
 *  Reads only the headers; no pixel limit applies. Statuses as stk_decode's. Any output pointer
 *  may be NULL. */
STK_API int stk_image_info(const void *data, size_t len, int *width, int *height, int *components);

typedef struct stk_decode_args {
    int crop_x, crop_y, crop_w, crop_h; /**< crop window in full-size pixels; crop_w = 0: whole image */
    int scale_num;                      /**< decode at scale_num/8: 1, 2, 4 or 8; 0 means 8 */
    int64_t max_pixels;                 /**< 0: STK_P_MAX_PIXELS's default */
    int strict;                         /**< 1: libjpeg warnings are errors */
} stk_decode_args;

/**
 * Decode DATA (LEN bytes). ARGS may be NULL (full size). The output is the crop window scaled by
 * scale_num/8: width = ceil(crop_w * scale_num / 8) (as libjpeg scales), likewise height; *out_w,
 * *out_h receive them. OUT must hold out_w * out_h * 3 bytes (STK_E_RANGE otherwise, with the
 * sizes set). D may be NULL (a temporary decoder is used). *warnings (may be NULL) receives the
 * number of libjpeg warnings (corrupt data that was decoded anyway).
 *
 * The window's first output pixel is full-size pixel (crop_x, crop_y) scaled down:
 * (floor(crop_x * scale_num / 8), floor(crop_y * scale_num / 8)) of the image decoded at that
 * scale; the bytes equal that region of a whole-image decode at the same scale exactly (only the
 * iMCU columns covering the window are decoded; rows above it are skipped). Grayscale becomes
 * R = G = B; CMYK/YCCK are
 * converted as Pillow's Image.convert('RGB') does (Adobe-inverted CMYK assumed, as Pillow does),
 * so full-size output equals Pillow's pixel for pixel. Progressive, restart markers, EXIF/APPn
 * markers and every chroma subsampling are handled. Rows below the window are never read: a
 * baseline file truncated below the window decodes (a progressive one is read whole).
 *
 * Statuses: STK_E_EMPTY (0 bytes), STK_E_NOT_JPEG (no SOI marker; the reason names PNG, GIF,
 * BMP, WebP or TIFF data), STK_E_TRUNCATED (data ends early), STK_E_TOO_LARGE (width * height >
 * max_pixels, checked from the headers before any pixel memory is allocated), STK_E_DECODE
 * (corrupt data libjpeg cannot decode, more than 500 progressive scans, or any warning when
 * strict), STK_E_INVALID (bad scale_num, a crop outside the image), STK_E_RANGE (OUT too small).
 *
 * Threads: one thread at a time per decoder D; with D NULL, thread-safe. OUT and DATA stay the
 * caller's; nothing is kept after the call.
 */
STK_API int stk_decode(stk_decoder *d, const void *data, size_t len, const stk_decode_args *args,
                       uint8_t *out, size_t cap, int *out_w, int *out_h, int *warnings);

/* ---------------------------------------------------------------------------------------------
 * Loader: the whole pipeline. Lifecycle:
 *   stk_loader_create → stk_loader_set* → stk_loader_open(path) → stk_loader_start →
 *   { stk_loader_next → (use the batch) → stk_loader_release }* → stk_loader_destroy.
 * stk_loader_next returns STK_END once at the end of each epoch; the loader then moves to the
 * next epoch (it already prefetches it) unless stk_loader_set_epoch/seek says otherwise.
 *
 * Thread safety: one consumer thread calls next/release/detach/set_epoch/seek/resume and the
 * setters; stk_loader_stats, stk_loader_report and stk_loader_cancel may be called from any
 * thread at any time after start. stk_loader_stop and stk_loader_destroy may be called from any
 * thread, also while the consumer is blocked in stk_loader_next: that call wakes and returns
 * STK_E_CANCELLED ("being stopped"), and stop/destroy free the ring only after it has left, so it
 * never touches freed memory (a consumer in detach or seek is waited for the same way). A second
 * consumer is refused, not undefined: a thread calling stk_loader_next while one is inside gets
 * STK_E_STATE ("another thread is in stk_loader_next") and no batch; consumer calls made while a
 * stop is under way get STK_E_STATE (next: STK_E_CANCELLED). What stays the caller's: a call that
 * begins after destroy has begun uses freed memory, as after free(); so a binding serialises its
 * own close against entry (Python's stoker.Loader does). stop returns once the pipeline threads
 * are joined: a read the kernel never completes (a hung network mount) holds stop and destroy
 * until it does, though the consumer blocked in next is woken at once. (The files layout opens
 * without blocking: a FIFO in place of a file is a bad record, not a wait.)
 * ------------------------------------------------------------------------------------------- */

typedef struct stk_loader stk_loader;

/** A delivered batch. Borrowed: valid until stk_loader_release() of it (or destroy). */
typedef struct stk_batch {
    uint64_t epoch;        /**< epoch it belongs to */
    uint64_t number;       /**< batch number within the epoch */
    uint64_t first_sample; /**< position in the epoch's order of its first sample */
    uint32_t size;         /**< samples in this batch (< capacity only for a short last batch) */
    uint32_t capacity;     /**< STK_P_BATCH_SIZE */
    int dtype;             /**< STK_DTYPE_* */
    int layout;            /**< STK_NCHW / STK_NHWC */
    int device;            /**< CUDA device of `images`, or -1 for host memory */
    uint32_t channels, height, width;
    void *images;          /**< size samples, densely packed; NULL for STK_STAGE_READ */
    size_t image_bytes;    /**< bytes of `images` used by the `size` samples */
    size_t sample_bytes;   /**< bytes per sample */
    const int32_t *labels;    /**< host, size entries */
    const uint64_t *indices;  /**< host, size entries: dataset index of each sample */
    const uint8_t *substituted; /**< host, size entries: 1 where a bad record was replaced */
    const uint32_t *payload_bytes; /**< host, size entries: encoded bytes read per sample */
    uint32_t bad;          /**< number of substituted samples */
    uint32_t reserved;
    void *internal;        /**< do not touch */
} stk_batch;

typedef struct stk_stage_stats {
    double busy_s;     /**< time spent working (summed over the stage's threads) */
    double starved_s;  /**< time waiting for input */
    double blocked_s;  /**< time waiting for space downstream */
    uint64_t items, bytes, errors;
    uint32_t threads;
    uint32_t reserved;
} stk_stage_stats;

typedef struct stk_stats {
    stk_stage_stats read, decode, stager;
    double wall_s;            /**< since start */
    double wait_s;            /**< caller time spent blocked in stk_loader_next */
    double cpu_user_s, cpu_sys_s; /**< process CPU time since start */
    uint64_t batches, samples; /**< delivered */
    uint64_t epoch, next_sample; /**< current position */
    uint64_t samples_per_epoch, batches_per_epoch;
    int io_backend;           /**< STK_IO_* actually used */
    int io_direct;            /**< 1 when O_DIRECT is in use */
    uint32_t inflight_now, inflight_max;
    uint64_t bytes_read;      /**< payload bytes */
    uint64_t disk_bytes;      /**< bytes requested from storage (aligned ranges) */
    uint64_t crc_errors, io_errors, decode_errors, substituted, decode_warnings;
    uint64_t h2d_bytes; double h2d_s, convert_s, release_wait_s;
    uint64_t host_ring_bytes, pinned_bytes, device_bytes, reader_pool_bytes;
    int device;               /**< device batches come from, -1 host */
    int fallback_reason;      /**< status explaining a backend / device fallback, 0 = none */
    char io_backend_note[96]; /**< e.g. "io_uring" or "pread pool (io_uring refused: EPERM)" */
    uint64_t detached;        /**< host batches taken out of the ring by stk_loader_detach */
    int pin_reason;           /**< STK_P_PIN_HOST asked but the ring is pageable: why
                                   (STK_E_UNSUPPORTED: no CUDA in this build, STK_E_NODEVICE,
                                   STK_E_CUDA: cudaHostAlloc failed); 0 otherwise */
    /** The longest single wait of the consumer for the fetch of an s3:// dataset, in
     *  microseconds, in the epoch of the last batch handed out (from its first batch on; 0 for a
     *  local path, or when the fetch kept ahead): of the consumer's wait for one batch (summed
     *  over the stk_loader_next calls that timed out waiting for it), the time during which the
     *  reader was waiting for a shard to arrive. The rest of that wait, the batch's decode, is
     *  not counted: a consumer that takes each batch at once waits about a batch's time for
     *  every batch, fetch or not. Compare it with the epoch's time per batch: a stall of the
     *  fetch. It never exceeds fetch_starved_s. Reset by each start. (since 0.5, in the former
     *  reserved int: the struct's size and every other offset are those of 0.4) */
    uint32_t fetch_max_wait_us;
    /** Seconds the decode workers spent in the per-sample augmentation (the STK_P_AUG_POLICY
     *  policy or STK_P_AUG_STEPS program, then RandomErasing, STK_P_ERASE_PROB), summed over the
     *  workers. Measured as decode.busy_s is: wall time inside the work (CLOCK_MONOTONIC), so
     *  it grows when other processes share the cores. It is a part of decode.busy_s (the
     *  workers' whole busy time, which the verdict uses): decode without augmentation is
     *  decode.busy_s - augment_s. Exactly 0 when no augmentation is set (no clock is read for
     *  it then). (since 0.4; it and augment_items took two of the reserved words, so the
     *  struct's size and every other offset are those of 0.3) */
    double augment_s;
    /** Samples the augmentation ran on (decoded without error; erased or not). (since 0.4) */
    uint64_t augment_items;
    /** The fetch stage of an s3:// dataset (all zero for a local path; since 0.5, in the four
     *  former reserved words, so the struct's size and every other offset are those of 0.4).
     *  Unlike the fields above these are cumulative since the loader's stk_loader_open, the
     *  open's own fetch included, and a restart does not reset them (zero before the first
     *  start, as every field; stk_dataset_fetch_stats of the loader's dataset has them all):
     *  fetch_bytes received from the object store, fetch_busy_s with requests in flight,
     *  fetch_starved_s that the loader (its open included) was blocked waiting for fetched
     *  bytes; cache_hits / cache_misses count shard lookups found in / fetched into the cache
     *  (hit rate = hits / (hits + misses)). */
    uint64_t fetch_bytes;
    double fetch_busy_s, fetch_starved_s;
    uint32_t cache_hits, cache_misses;
} stk_stats;

/** Samples of an epoch handed out before STK_P_MAX_BAD_FRACTION is checked mid-epoch (since 0.5);
 *  a shorter epoch is checked at its last batch only. */
#define STK_BAD_CHECK_MIN 10000
/** Draws of a substitute for one bad record before the batch fails (since 0.5). */
#define STK_SUBSTITUTE_TRIES 64

/** Record error kept by the loader (the first 1024 are kept; the count goes on). */
typedef struct stk_record_error {
    uint64_t index;   /**< dataset index */
    uint64_t epoch;
    int status;       /**< STK_E_* or -errno */
    int sys_errno;    /**< errno of an I/O error, else 0 */
    char where[256];  /**< shard and key, or file path */
    char reason[256];
} stk_record_error;

/** Create a loader with all parameters at their defaults. *out is owned by the caller:
 *  stk_loader_destroy(). */
STK_API int stk_loader_create(stk_loader **out);
/** Set an integer parameter (type I). Returns STK_E_STATE if it is too late to set it,
 *  STK_E_BADPARAM for an unknown key or the wrong type, STK_E_INVALID out of range.
 *  "Before start" keys may be set again after stk_loader_stop, for the next start. Ranges that
 *  involve two keys (rank < world size, scale/ratio min <= max, the ring against
 *  STK_P_MAX_PINNED_BYTES) are checked by stk_loader_start (STK_E_INVALID, naming them). */
STK_API int stk_loader_set(stk_loader *h, int key, int64_t value);
/** Set a double parameter (type D). */
STK_API int stk_loader_set_double(stk_loader *h, int key, double value);
/** Set a float-vector parameter (type F): STK_P_MEAN / STK_P_STD / STK_P_ERASE_VALUE with N = 3
 *  (or 1: all channels);
 *  STK_P_LUT with N = 768 (since 0.2); STK_P_AUG_STEPS, a program of N values (since 0.3);
 *  STK_P_TIMM_AUTO_POLICY, a policy of N values (since 0.4). */
STK_API int stk_loader_set_floats(stk_loader *h, int key, const float *v, size_t n);
/**
 * A vector exponential (since 0.5): Y[i] = exp(X[i]) for i < N, in float32; ARG as given to
 * stk_loader_set_vexp. Intel MKL's vmsExp has this shape (LP64 MKL_INT n; MKL_INT64 mode, ARG
 * being the VML mode).
 */
typedef void (*stk_vexp_fn)(int n, const float *x, float *y, int64_t arg);
/**
 * The exp of transforms.GaussianBlur's kernel (STK_P_AUG_STEPS kind 5; since 0.5). torchvision
 * computes that kernel with torch.exp, whose float32 results depend on the torch build: SLEEF's
 * expf_u10 without MKL (what the library repeats for STK_AUG_TORCH_1*), Intel MKL's closed vmsExp
 * in builds with MKL (the PyPI x86-64 wheels), which cannot be repeated: for STK_AUG_TORCH_2*
 * glibc's expf stands in, and a blurred value can be one level off (docs/ARCHITECTURE.md). With
 * FN set the kernel's exp is FN(k, x, y, ARG) over its k arguments at once, as torch.exp calls
 * vmsExp(k, x, y, VML_HA | VML_FTZDAZ_OFF | VML_ERRMODE_IGNORE) on the contiguous k-vector: given
 * torch's own vmsExp (the Python binding resolves it from libtorch_cpu.so and checks it against
 * torch.exp), the blur equals torchvision's byte for byte. FN NULL (the default) restores the
 * built-in exp. Other steps and kind 8 (transforms.v2, whose softmax uses SLEEF's exp in every
 * build) do not use it. FN is called from the decode worker threads, concurrently, with N from 1
 * to 255: it must be thread-safe (MKL's VML functions are), write Y only and stay callable until
 * the loader is destroyed; the loader does not own it. Any time before stk_loader_start (or
 * between stop and start); STK_E_STATE once started.
 */
STK_API int stk_loader_set_vexp(stk_loader *h, stk_vexp_fn fn, int64_t arg);
/** Read any integer/double parameter's current value (as a double). */
STK_API int stk_loader_get(const stk_loader *h, int key, double *value);
/** Open the dataset at PATH (see stk_dataset_open). After this the sizes below are known. */
STK_API int stk_loader_open(stk_loader *h, const char *path);
/** The cache directory of an s3:// dataset (see stk_dataset_set_cache_dir; STK_P_CACHE_BYTES is
 *  its limit). Before stk_loader_open. (since 0.5) */
STK_API int stk_loader_set_cache_dir(stk_loader *h, const char *dir);
/** Restrict every epoch to the records IDX[0..N) (a subset, as torch.utils.data.Subset): the
 *  epoch's order is then a permutation of positions in this list (identity without shuffle:
 *  IDX[0], IDX[1], ...), split over ranks as the whole dataset would be; entries may repeat.
 *  The list is copied. (NULL, 0) removes it. After open, before start (or after stop): STK_E_STATE
 *  otherwise; STK_E_RANGE for an index >= stk_dataset_count, naming it. In the shard-window
 *  order (STK_P_SHUFFLE_WINDOW, and so an s3:// dataset streamed through a cache smaller than
 *  itself; since 0.5) the epoch is that order on the list's entries grouped by shard: every entry
 *  once per epoch, only the shards holding one dealt to ranks (and fetched), resumable as the
 *  whole dataset's (give a resumed run the same list; another list forgets a pending
 *  stk_loader_resume_segments); without shuffle the listed shards in name order, each one's
 *  entries in the list's order (docs/S3.md "Subsets of a streamed dataset"). Consumer thread.
 *  (since 0.3) */
STK_API int stk_loader_set_indices(stk_loader *h, const uint64_t *idx, size_t n);
/** Samples and batches this rank gets per epoch (after open; 0 before, or when RANK >= WORLD_SIZE),
 *  with the current parameters. With STK_P_DROP_LAST the samples are those delivered
 *  (batches x batch size). */
STK_API uint64_t stk_loader_samples_per_epoch(const stk_loader *h);
STK_API uint64_t stk_loader_batches_per_epoch(const stk_loader *h);
/** The opened dataset (borrowed; valid until destroy), e.g. for class names. */
STK_API const stk_dataset *stk_loader_dataset(const stk_loader *h);
/** Allocate every buffer and start the threads at (STK_P_EPOCH, sample 0). The host ring is
 *  STK_P_PREFETCH slots of STK_P_BATCH_SIZE samples (plus labels, indices, flags, sizes), the
 *  reader's buffer pool is bounded by STK_P_QUEUE_DEPTH / STK_P_INFLIGHT_BYTES, and each worker
 *  has one decoder and one sample of scratch: nothing grows afterwards (see stats memory fields).
 *  With STK_P_DEVICE >= 0 and STK_STAGE_FULL, a stager that cannot be created for lack of CUDA
 *  (STK_E_UNSUPPORTED) or of a device (STK_E_NODEVICE) is not an error: host batches follow,
 *  converted on the CPU, and stats.fallback_reason holds that status. */
STK_API int stk_loader_start(stk_loader *h);
/*
 * Device batches (STK_P_DEVICE >= 0): the hand-off contract. Neither next() nor release()
 * synchronises the host with the GPU.
 *   - next(h, stream, ...) returns a batch whose `images` is device memory on STK_P_DEVICE and
 *     makes STREAM wait (cudaStreamWaitEvent) until the batch has been copied and converted.
 *     Work the caller queues on STREAM afterwards sees the finished batch; work on another
 *     stream does not wait, unless that stream waits on STREAM.
 *   - release(h, batch, stream) records an event on STREAM. The loader overwrites the batch's
 *     device buffer only after that event completes, i.e. after all work queued on STREAM
 *     before the release. So release right after queueing the step that reads the batch; do
 *     not queue more reads of it after release.
 *   - At most STK_P_DEVICE_BUFFERS batches can be held; with the default 2, hold one while the
 *     next is staged. STREAM must belong to STK_P_DEVICE (NULL = its legacy default stream).
 *     The calling thread's current CUDA device is left as it was.
 *   - Without a usable device (no GPU, or a build without CUDA), start() falls back to host
 *     batches (batch->device == -1, stats fallback_reason says why) and STREAM is ignored.
 *
 *     cudaStream_t s;
 *     cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
 *     stk_loader_set(h, STK_P_DEVICE, 0);
 *     stk_loader_set(h, STK_P_DTYPE, STK_DTYPE_FLOAT16);
 *     const float mean[3] = {123.675f, 116.28f, 103.53f}, std[3] = {58.395f, 57.12f, 57.375f};
 *     stk_loader_set_floats(h, STK_P_MEAN, mean, 3);
 *     stk_loader_set_floats(h, STK_P_STD, std, 3);
 *     stk_loader_open(h, "data/train");
 *     stk_loader_start(h);
 *     const stk_batch *b;
 *     int rc;
 *     while ((rc = stk_loader_next(h, s, -1, &b)) == STK_OK) {
 *         train_step<<<grid, block, 0, s>>>((const __half *)b->images, b->size);
 *         stk_loader_release(h, b, s);   // the buffer is reused after train_step, not before
 *     }
 *     if (rc != STK_END) fprintf(stderr, "%s\n", stk_loader_last_error(h));
 *     cudaStreamSynchronize(s);
 *
 * (Labels are host memory: copy them to the device on S as well if the step needs them there.)
 */
/**
 * Next batch, in order. CUDA_STREAM: the caller's cudaStream_t for device batches (NULL = the
 * legacy default stream); the stream is made to wait for the batch (no host sync). Ignored for
 * host batches. TIMEOUT_MS < 0 waits without limit; STK_TIMEOUT when it expires (call again;
 * stk_loader_last_error then names the read in flight the longest, shard and key or file).
 * Returns STK_OK with *out set; STK_END at the end of the epoch (*out = NULL); an error in
 * strict mode naming the record (stk_loader_last_error). At most STK_P_PREFETCH (host) or
 * STK_P_DEVICE_BUFFERS (device) batches may be held unreleased; one more next() returns
 * STK_E_STATE. Batch k reuses the slot of batch k - STK_P_PREFETCH (k - STK_P_DEVICE_BUFFERS
 * for device batches): while that one is held, next() returns STK_E_STATE instead of waiting.
 * After STK_TIMEOUT or STK_E_CANCELLED nothing is lost: the next call returns the same batch.
 * A strict-mode failure (or a fatal stager error) is sticky: next() returns it until
 * stk_loader_seek / stk_loader_set_epoch (which restart the pipeline) or stop + start.
 * Images: JPEG; and (since 0.5) PNG, WebP, GIF, BMP, TIFF and PPM/PGM, known by their first
 * bytes, where the build has their decoders (stk_version_string lists them): decoded whole with
 * pack's decoders (Pillow's convert("RGB") pixels), then cropped and resized as a JPEG at 8/8.
 * Bad records in the default mode (corrupt, truncated, empty, not an image it reads, over STK_P_MAX_PIXELS,
 * CRC mismatch, unreadable; since 0.5): each is replaced by another good record of the epoch's
 * record set (the dataset, or the stk_loader_set_indices list; on an s3:// dataset streamed
 * through its cache, of the bad record's own shard, the one sure to be in the cache), drawn
 * uniformly from the key
 * (STK_P_SEED, epoch, bad record's index) — the same for any worker count and after a seek or
 * resume — decoded and augmented as the bad record's sample would have been (its crop key),
 * with its own label and target (labels[i]); indices[i] stays the bad record (the epoch's
 * order), payload_bytes[i] is 0. A drawn record that is
 * bad too is drawn again, STK_SUBSTITUTE_TRIES times at most; when none is good the batch fails
 * (the bad record's status, last_error naming it and the commonest reasons; sticky as a strict
 * failure). STK_STAGE_READ delivers no image and draws no substitute (the label stays the
 * record's). batch->substituted[i] = 1 marks a substitute, batch->bad counts them,
 * stk_loader_error_get names the bad records. The first bad record of the loader is logged and
 * every epoch that had one ends with a summary line (stk_loader_set_log); above
 * STK_P_MAX_BAD_FRACTION next fails. STK_P_STRICT fails at the first bad record instead.
 * When the dataset gives no batch per epoch (STK_P_DROP_LAST with fewer samples than a batch),
 * every call returns STK_END and moves on one epoch.
 * Threads: the consumer thread. Another thread calling it while one is inside gets STK_E_STATE
 * at once ("another thread is in stk_loader_next"; the first goes on undisturbed). A call
 * blocked when stk_loader_stop / stk_loader_destroy begins in another thread returns
 * STK_E_CANCELLED (last_error: "the loader is being stopped"); after the stop, STK_E_STATE.
 */
STK_API int stk_loader_next(stk_loader *h, void *cuda_stream, int timeout_ms, const stk_batch **out);
/** Give a batch back. Device batches: an event recorded on CUDA_STREAM orders the reuse of the
 *  buffer after the caller's work. Batches may be released in any order. Consumer thread;
 *  STK_E_STATE once a stop has begun (the batch is then invalid anyway). */
STK_API int stk_loader_release(stk_loader *h, const stk_batch *batch, void *cuda_stream);
/*
 * Holding host batches longer than the ring (since 0.2). Batch k reuses the slot of batch
 * k - STK_P_PREFETCH, so a batch kept while the loader goes on would stop it (next() returns
 * STK_E_STATE). stk_loader_detach takes a held host batch's image memory out of the ring instead:
 * the slot gets a new buffer of the same kind (page-locked or not) and is released, and the old
 * buffer now belongs to the caller, who frees it with stk_images_free — from any thread, and
 * after the loader is stopped or destroyed too. Nothing is copied; the cost is one allocation
 * of a slot (STK_P_BATCH_SIZE samples) per detach. A binding that hands batches to code that
 * may keep them (Python's stoker.Loader) releases a batch when its last reference is dropped and
 * detaches the ones still referenced when their slot is needed, so the plain loop stays zero copy
 * and a kept batch is never overwritten; the memory is then the ring plus what the caller keeps.
 * Device batches cannot be detached: such a binding releases one when its last reference is
 * gone, with the stream current then (so the buffer is reused after the work queued on it), and
 * hands out copies rather than hold all STK_P_DEVICE_BUFFERS.
 */
/** Detach held host batch BATCH: *IMAGES receives its `images` pointer, owned by the caller from
 *  now on (stk_images_free); the batch is released (its labels, indices and other metadata are
 *  the ring's again: copy them first). STK_E_UNSUPPORTED for device batches, STK_E_INVALID for a
 *  batch not held from H or without images (STK_STAGE_READ), STK_E_NOMEM (nothing changed) when
 *  the replacement cannot be allocated. Consumer thread, after start. Since 0.2. */
STK_API int stk_loader_detach(stk_loader *h, const stk_batch *batch, void **images);
/** Free image memory returned by stk_loader_detach (page-locked or not). NULL is a no-op. Any
 *  thread; the loader that detached it may already be destroyed. Since 0.2. */
STK_API void stk_images_free(void *images);
/** The targets of host or device batch BATCH, held from H (see stk_target_info): a host array
 *  of batch->size rows of INFO->size elements of INFO->dtype, valid until the batch is released
 *  (or detached: copy them first). With STK_P_MULTI_HOT a label list comes as float32 rows of
 *  INFO->classes (1.0 for each label of the record, else 0.0; INFO->size = classes, kind
 *  STK_TARGET_VALUES). A substituted sample (bad record) carries its substitute's target, as
 *  its label (since 0.5). NULL, with INFO->dtype = STK_TDT_NONE, when the dataset has no targets. INFO may be
 *  NULL. Consumer thread. Since 0.2. */
STK_API const void *stk_loader_batch_targets(const stk_loader *h, const stk_batch *batch,
                                             stk_target_info *info);
/** Move to the start of EPOCH: stk_loader_seek(h, EPOCH, 0). After start. */
STK_API int stk_loader_set_epoch(stk_loader *h, uint64_t epoch);
/** Position = {seed, epoch, next sample}: the sample after the last one delivered; after
 *  STK_END of epoch e it is (e + 1, 0). Before start: (STK_P_EPOCH, 0). */
STK_API int stk_loader_tell(const stk_loader *h, uint64_t *epoch, uint64_t *next_sample);
/** Continue from a saved position: the rest of the epoch is reproduced exactly. All batches
 *  must be released (else STK_E_STATE). NEXT_SAMPLE <= samples per epoch (else STK_E_RANGE);
 *  batches then start at NEXT_SAMPLE (equal to the end: STK_END comes first). If the position
 *  is the one being prefetched — what tell() reports, or (e + 1, 0) right after the last batch
 *  of epoch e, which also skips that STK_END — the prefetched batches are kept; otherwise the
 *  reader, workers and stager are stopped, drained and restarted there (buffers are kept).
 *  After start. */
STK_API int stk_loader_seek(stk_loader *h, uint64_t epoch, uint64_t next_sample);
/*
 * Elastic resume (since 0.2). An epoch's global order is a permutation of the N records; rank r
 * of W takes global positions r, r + W, r + 2W, ... (STK_P_DIST_MODE pads the last row by
 * wrapping around, or drops it). Under DDP every rank has taken the same number k of samples at
 * a checkpoint, so what the run delivered is the global prefix [0, c), c = min(k W, N): a set
 * that does not depend on W. A run with any world size W' continues the epoch from c: the rest
 * [c, N) is split as a whole list is (rank r' takes c + r', c + r' + W', ...), with the tail rule
 * of the new run's STK_P_DIST_MODE applied to the rest: PAD repeats the rest's first samples
 * until every rank has ceil((N - c) / W'), DROP leaves out its last (N - c) mod W'. Across the two
 * runs every sample of the epoch is delivered once, but for those tail samples (and, if the
 * checkpoint came after the last padded row, the first run's own padding). The result does not
 * depend on STK_P_WORKERS or any other thread count. Later epochs are whole epochs split over W'.
 * A resumed run can itself be checkpointed (its prefix is c plus what it delivered) and resumed.
 */
/** Continue epoch EPOCH in this run, its global positions [0, CONSUMED) delivered before (by a run
 *  of any world size; CONSUMED <= N, else STK_E_RANGE), at sample NEXT_SAMPLE of this rank's
 *  share of the rest (0 for an elastic resume; a same-world resume of a state taken in a resumed
 *  epoch passes that epoch's CONSUMED base and the rank's own position). The share has
 *  ceil or floor((N - CONSUMED) / world) samples (see above; STK_P_DROP_LAST applies to it);
 *  NEXT_SAMPLE past it is STK_E_RANGE. stk_loader_resume(h, e, 0, s) = stk_loader_seek(h, e, s).
 *  All batches must be released (else STK_E_STATE). After start; consumer thread. (since 0.2) */
STK_API int stk_loader_resume(stk_loader *h, uint64_t epoch, uint64_t consumed, uint64_t next_sample);
/** The epoch-global view of tell(): *EPOCH as tell() reports it, *CONSUMED = the global prefix
 *  delivered once every rank is where this one is (base + min(next_sample * world, N - base)),
 *  *BASE = the prefix the current epoch of this run started from (stk_loader_resume's CONSUMED;
 *  0 otherwise). What a checkpoint saves to resume on another world size. Any pointer may be
 *  NULL. Before start: (STK_P_EPOCH, 0, 0). Consumer thread. (since 0.2) */
STK_API int stk_loader_tell_global(const stk_loader *h, uint64_t *epoch, uint64_t *consumed,
                                   uint64_t *base);
/**
 * Elastic resume in the shard-window order (STK_P_SHUFFLE_WINDOW; an s3:// dataset streamed
 * through a cache smaller than itself), docs/S3.md "Elastic resume inside a streamed epoch".
 * There what the ranks delivered is not a prefix of one global order (each rank reads its own
 * shards), so a checkpoint saves the epoch's history instead of a count: a list of segments,
 * one per run that read part of the epoch, each three uint64: (world size, window W, samples
 * each rank took). stk_loader_tell_segments writes the current epoch's: the segments this run
 * resumed from, then (STK_P_WORLD_SIZE, the window in use, this rank's position in its list).
 * Under DDP every rank is at the same step, so every rank's list is the same but for a rank
 * whose share ran out (STK_DIST_EXACT): save the list of a rank that is not done, or any.
 * *NSEGS = the count (at most 17); CAP is SEGS's room in segments
 * (STK_E_RANGE if too small, *NSEGS set). Before start: (STK_P_EPOCH, 0 segments). A loader in
 * the global order: STK_E_INVALID (use stk_loader_tell_global). Consumer thread. (since 0.5) */
STK_API int stk_loader_tell_segments(const stk_loader *h, uint64_t *epoch, uint64_t *segs,
                                     uint32_t cap, uint32_t *nsegs);
/** Continue epoch EPOCH from its history SEGS (NSEGS segments from stk_loader_tell_segments, of
 *  runs of any world sizes; 0 segments = the epoch's start). If the last segment's world size
 *  and window are this loader's, each rank continues its own list there exactly
 *  (stk_loader_resume with the same world size: the uninterrupted run's samples). Otherwise the
 *  records every segment left are split among this run's ranks: the shards with records left
 *  are dealt to the ranks by the seed and the history (each rank reads and fetches only its
 *  own), each rank's in a seeded order, in windows of their records left (as
 *  STK_P_SHUFFLE_WINDOW's); over all the runs every record of the epoch is delivered once
 *  (STK_DIST_EXACT; PAD repeats a rank's first samples up to the largest share, and a rank past
 *  the shards left reads another rank's list again; DROP cuts every share to the smallest).
 *  Same seed, shuffle and dataset required (not checked here). At most 16 segments to split the
 *  rest of (17 when the last is of this loader's world size and window; else STK_E_RANGE); a
 *  segment taking more than its largest share, or with fewer shards than ranks as its first:
 *  STK_E_RANGE; a world size or window out of range: STK_E_INVALID; the loader in the global
 *  order: STK_E_INVALID. Before start (opened or not): only the count and ranges are checked
 *  here; the next stk_loader_start begins there instead of at STK_P_EPOCH's start, so that a
 *  streamed dataset fetches nothing of the epoch's start (the history's errors then fail the
 *  start). After start: all batches must be released (else STK_E_STATE). Consumer thread.
 *  (since 0.5) */
STK_API int stk_loader_resume_segments(stk_loader *h, uint64_t epoch, const uint64_t *segs,
                                       uint32_t nsegs);
/**
 * Change the output size (STK_P_OUT_HEIGHT x STK_P_OUT_WIDTH) from the next epoch on, without
 * stopping the loader: no thread is started or stopped, nothing is reallocated, the dataset stays
 * open (since 0.2). Progressive resizing: 160 px for the first epochs, then 192, ...
 *   - Before start: sets the two parameters (checked against STK_P_MAX_OUT_* when those are set).
 *   - After start the loader must be resizable: STK_P_MAX_OUT_HEIGHT or STK_P_MAX_OUT_WIDTH set
 *     before start (else STK_E_STATE). The ring, worker scratch and device buffers are sized for
 *     the maximum, so memory stays bounded; HEIGHT x WIDTH above it is STK_E_INVALID.
 *   - Allowed only between epochs, with no batch held: after stk_loader_next returned STK_END,
 *     or after start, stk_loader_set_epoch, stk_loader_seek or stk_loader_resume (also to a
 *     mid-epoch position: the size applies from there), before the next stk_loader_next. A seek
 *     to the position already prefetched keeps that prefetch and so does not allow it. Elsewhere
 *     STK_E_STATE (nothing changes).
 *   - The batches from there on are byte for byte those of a loader started at that size
 *     (same seed, epoch, position and parameters): train crops are drawn from (seed, epoch,
 *     index) whatever the size; eval crops HEIGHT x WIDTH out of the image resized to
 *     STK_P_RESIZE.
 *   - Cost: a resizable loader prefetches nothing of an epoch before the consumer asks for its
 *     first batch (the size is fixed then), so the pipeline refills at each epoch start; a loader
 *     without STK_P_MAX_OUT_* keeps prefetching across epochs.
 * Consumer thread.
 */
STK_API int stk_loader_set_output_size(stk_loader *h, uint32_t height, uint32_t width);
/** Wake a thread blocked in stk_loader_next (it returns STK_E_CANCELLED). If no thread is
 *  waiting, the next stk_loader_next call returns STK_E_CANCELLED instead (once), so a cancel
 *  is never lost between two calls. Any thread (it takes a mutex: not from a signal handler). */
STK_API int stk_loader_cancel(stk_loader *h);
/** Stop the threads (prefetched batches are dropped; batches still held become invalid) and
 *  free the ring. start() may be called again; it begins at (STK_P_EPOCH, 0) and the stats
 *  restart. No-op when not started. Any thread: a thread blocked in stk_loader_next wakes with
 *  STK_E_CANCELLED and the ring is freed after it (and any detach or seek under way) has left;
 *  a second stop meanwhile waits for the first. Returns once every pipeline thread is joined. */
STK_API int stk_loader_stop(stk_loader *h);
/** Stop (as stk_loader_stop, from any thread, waking a blocked stk_loader_next) and free
 *  everything, device memory too. No call on H may begin once destroy has. NULL is a no-op. */
STK_API void stk_loader_destroy(stk_loader *h);
/** Text of the last failure on this loader, naming the shard and key or the file and the cause
 *  ("" if none; "invalid handle" for NULL). Owned by H, valid until the next call on H: read it
 *  in the thread whose call failed (or, from stk_log_fn, during the call). */
STK_API const char *stk_loader_last_error(const stk_loader *h);
/** Snapshot of the counters since start: the stages count the work done, prefetched samples
 *  included; batches/samples count what was delivered. Any thread. */
STK_API int stk_loader_stats(stk_loader *h, stk_stats *out);
/** A one-screen report (stages, waits, the bottleneck stage and what would help) into BUF.
 *  Returns the length it needs (like snprintf). Any thread. */
STK_API size_t stk_loader_report(stk_loader *h, char *buf, size_t cap);
/** What limits the pipeline, as stk_loader_report names it (values pinned, new ones appended). */
enum {
    STK_BOTTLENECK_NONE = 0,     /**< no verdict: nothing delivered yet */
    STK_BOTTLENECK_CONSUMER = 1, /**< the loader keeps up: the consumer waited < 5% of the time */
    STK_BOTTLENECK_READ = 2,     /**< storage-bound: decode workers starved more than busy, or
                                      STK_STAGE_READ */
    STK_BOTTLENECK_DECODE = 3,   /**< decode-bound: the decode workers are the busiest stage */
    STK_BOTTLENECK_STAGE = 4,    /**< transfer-bound: the stager copied > 70% of the time, more
                                      than the decode workers were busy */
    /** fetch-bound (since 0.5): an s3:// dataset's loader was blocked waiting for the fetch
     *  (stats fetch_starved_s) >= 25% of its time, wall_s plus the waits at open:
     *  fetch_starved_s >= 0.25 x (wall_s + fetch_starved_s); tried before the others, the fetch
     *  being upstream of every stage. The link rate is fetch_bytes / fetch_busy_s. */
    STK_BOTTLENECK_FETCH = 5,
};
/** stk_verdict.flags */
enum {
    /** Decode-bound, but the process ran on fewer than 70% of the cores its busy workers imply:
     *  other processes share the cores (busy time is wall time inside the work). */
    STK_VERDICT_CPU_STARVED = 1,
};

/** The bottleneck and the figures behind it. Shares are fractions of the wall time summed over
 *  a stage's threads (a stage with several threads: 1.0 = all of them all the time). SIZE makes
 *  the struct extensible: the caller sets it to sizeof(stk_verdict); the library fills the
 *  fields it knows and sets SIZE to the bytes it filled. New fields are only appended. */
typedef struct stk_verdict {
    uint32_t size;           /**< in: sizeof(stk_verdict); out: bytes filled */
    int bottleneck;          /**< STK_BOTTLENECK_* */
    uint32_t flags;          /**< STK_VERDICT_* */
    uint32_t decode_threads; /**< decode workers counted */
    uint32_t cpus_online;    /**< cores online on this machine */
    uint32_t reserved;
    double wait_share;       /**< consumer time blocked in stk_loader_next / wall */
    double read_busy, read_blocked;       /**< shares of the reader threads' time */
    double decode_busy, decode_starved;   /**< shares of the decode workers' time */
    double stager_busy;      /**< share of the stager thread's time spent copying (0 without) */
    double cores;            /**< cores the process used: (user + system CPU) / wall */
    double h2d_gbps;         /**< host-to-device copy rate in GB/s (0 without a stager) */
} stk_verdict;

/** Classify a stats snapshot (or the difference of two, for a window: subtract the times,
 *  counts and CPU seconds, set wall_s to the window) as stk_loader_report does. STAGE is the
 *  STK_STAGE_* the loader ran. Pure: reads only its arguments and the number of online cores.
 *  STK_E_INVALID when V is NULL or V->size < sizeof(stk_verdict) of this release. Thread-safe.
 *  (since 0.2) */
STK_API int stk_stats_verdict(const stk_stats *st, int stage, stk_verdict *v);
/** stk_stats_verdict over this loader's stats since start (STK_BOTTLENECK_NONE before start).
 *  Any thread, like stk_loader_stats. (since 0.2) */
STK_API int stk_loader_verdict(stk_loader *h, stk_verdict *v);
/** "none", "consumer", "read", "decode", "stage", "fetch" (that one added in 0.5); "unknown" for
 *  other values. Static string. Thread-safe. (since 0.2) */
STK_API const char *stk_bottleneck_name(int bottleneck);
/** Number of record errors seen (all epochs, counted when the record is processed, so
 *  prefetched records count before they are delivered). Any thread. */
STK_API uint64_t stk_loader_error_count(const stk_loader *h);
/** The I-th kept record error (I < min(count, 1024); STK_E_RANGE otherwise), in the order the
 *  workers met them. Any thread. */
STK_API int stk_loader_error_get(const stk_loader *h, uint64_t i, stk_record_error *out);
/** Levels of stk_log_fn messages (since 0.5). */
enum stk_log_level { STK_LOG_WARNING = 1, STK_LOG_INFO = 2 };
/**
 * A log message of a loader (since 0.5): LEVEL (STK_LOG_*), MSG a line without its newline, owned
 * by the loader and valid during the call only; USER as given to stk_loader_set_log.
 */
typedef void (*stk_log_fn)(void *user, int level, const char *msg);
/**
 * Where the loader's messages go (since 0.5). Messages: the first bad record of the loader
 * (STK_LOG_WARNING: its name — shard and key, or file path — dataset index, epoch, status and
 * reason, and the record that replaced it), and at the end of every epoch that had a bad record
 * one summary line (STK_LOG_WARNING: the count of bad records among those handed out, the
 * commonest reasons). FN NULL (the default) writes each as one line "stoker: MSG" on stderr.
 * FN is called only from the thread calling stk_loader_next, inside that call, after the loader's
 * locks are released: it may call the query functions (stats, report, error_get, last_error) but
 * not next, release, seek, stop or destroy of this loader. Any time before stk_loader_start (or
 * between stop and start); STK_E_STATE once started.
 */
STK_API int stk_loader_set_log(stk_loader *h, stk_log_fn fn, void *user);
/** How the loader's STK_P_WORKERS was chosen, as text into BUF (like snprintf: returns the length
 *  it needs, BUF may be NULL with CAP 0): the CPU budget's note when the default is in use (the
 *  budget is measured once, by stk_loader_create), else "workers N: set by the caller (default
 *  here: ...)". The caller owns BUF. Any thread after stk_loader_start; before it, the thread
 *  that sets the parameters. (since 0.2) */
STK_API size_t stk_loader_workers_note(const stk_loader *h, char *buf, size_t cap);

/* ---------------------------------------------------------------------------------------------
 * CPU budget: how many decode threads fit this process — STK_P_WORKERS' default.
 *
 * usable = the CPUs in the calling thread's affinity mask (sched_getaffinity: taskset, cpusets,
 * a container's --cpuset-cpus), lowered to floor(quota) when a cgroup CPU quota is set (cgroup
 * v2 cpu.max, or v1 cpu.cfs_quota_us / cpu.cfs_period_us; the smallest along the process's
 * cgroup path: a container's --cpus), at least 1. Under torchrun every local rank is a process
 * with its own loader, so workers = usable / LOCAL_WORLD_SIZE, at least 1 (8 ranks on 16 cores:
 * 2 workers each, not 16). A quota is rounded down: threads beyond it would be throttled.
 * ------------------------------------------------------------------------------------------- */

/** (since 0.2) */
typedef struct stk_cpu_budget {
    int online;        /**< online CPUs (sysconf _SC_NPROCESSORS_ONLN) */
    int affinity;      /**< CPUs in the calling thread's affinity mask (online if unreadable) */
    double quota;      /**< cgroup CPU quota in CPUs (e.g. 1.5), 0 = none found */
    int usable;        /**< min(affinity, floor(quota) when set), at least 1 */
    int local_ranks;   /**< LOCAL_WORLD_SIZE when it is a positive integer, else 1 */
    int workers;       /**< max(1, usable / local_ranks), at most 1024 */
    int reserved0;
    char note[256];    /**< e.g. "workers 3 = 12 usable cores (affinity 16 of 16 online, cgroup
                            quota 12.00 CPUs in /sys/fs/cgroup/...) / 4 local ranks (LOCAL_WORLD_SIZE)" */
    uint64_t reserved[4];
} stk_cpu_budget;

/** Measure the CPU budget now: the calling thread's affinity, /proc/self/cgroup,
 *  /proc/self/mountinfo and the cgroup's quota files, $LOCAL_WORLD_SIZE. What cannot be read
 *  counts as no limit (and the note says so). Fills *OUT; STK_E_INVALID when OUT is NULL.
 *  Any thread (it reads the environment: not concurrently with setenv). (since 0.2) */
STK_API int stk_cpu_budget_get(stk_cpu_budget *out);

#ifdef __cplusplus
}
#endif
#endif /* STOKER_H */
