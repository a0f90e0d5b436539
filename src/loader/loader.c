/* SPDX-License-Identifier: MIT */
/*
 * loader.c — the public stk_loader_* API's lifecycle: create, open, configure, allocate the ring,
 * start/stop, destroy (the consumer side — next, release, seek, tell — is loader_consume.c). The ring and the threads are
 * pictured in loader_internal.h; order and augmentation are pure functions of (seed, epoch,
 * position / dataset index) and a sample's place in the ring a function of its position, so the
 * bytes of every batch are the same for any worker count and any completion order.
 */
#include "loader_internal.h"
#include "remote.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- parameters ---------------------------------------------------------------------------- */

int64_t stk__loader_pget(const stk_loader *h, int key) { return h->pv[stk__param_find(key)].i; }
static int64_t pget_i(const stk_loader *h, int key) { return stk__loader_pget(h, key); }
static double pget_d(const stk_loader *h, int key) { return h->pv[stk__param_find(key)].d; }

int stk_loader_create(stk_loader **out)
{
    if (!out)
        return STK_E_INVALID;
    *out = NULL;
    stk_loader *h = calloc(1, sizeof(*h));
    if (!h)
        return STK_E_NOMEM;
    h->pv = calloc(stk__param_count, sizeof(*h->pv));
    if (!h->pv) {
        free(h);
        return STK_E_NOMEM;
    }
    for (size_t i = 0; i < stk__param_count; i++) {
        const stk__param_def *p = &stk__param_table[i];
        if (p->type == STK__PT_DOUBLE)
            h->pv[i].d = p->ddef;
        else
            h->pv[i].i = p->idef;
    }
    stk__cpu_budget_at("", getenv("LOCAL_WORLD_SIZE"), &h->budget);
    h->pv[stk__param_find(STK_P_WORKERS)].i = h->budget.workers;
    for (int c = 0; c < 3; c++) {
        h->mean[c] = 0.0f;
        h->std[c] = 1.0f;
    }
    pthread_mutex_init(&h->mu, NULL);
    pthread_mutex_init(&h->stats_mu, NULL);
    pthread_mutex_init(&h->sub_mu, NULL);
    stk__errlist_init(&h->errs);
    stk__cond_init_monotonic(&h->space_cv);
    stk__cond_init_monotonic(&h->ready_cv);
    stk__cond_init_monotonic(&h->stage_cv);
    stk__cond_init_monotonic(&h->idle_cv);
    h->state = STK__LS_CREATED;
    *out = h;
    return STK_OK;
}

/* ---- open ---------------------------------------------------------------------------------- */

int stk_loader_open(stk_loader *h, const char *path)
{
    if (!h || !path)
        return STK_E_INVALID;
    if (h->state != STK__LS_CREATED)
        return stk__err(h->err, STK_E_STATE, "stk_loader_open: the loader already has a dataset");
    stk_dataset *ds = NULL;
    int rc = stk_dataset_create(&ds);
    if (rc != STK_OK)
        return stk__err(h->err, rc, "stk_loader_open: cannot create a dataset handle");
    if ((rc = stk_dataset_set(ds, STK_P_LAYOUT, pget_i(h, STK_P_LAYOUT))) != STK_OK ||
        (rc = stk_dataset_set(ds, STK_P_FOREIGN_LABEL, pget_i(h, STK_P_FOREIGN_LABEL))) != STK_OK ||
        (rc = stk_dataset_set(ds, STK_P_ALLOW_INCOMPLETE, pget_i(h, STK_P_ALLOW_INCOMPLETE))) != STK_OK ||
        (rc = stk_dataset_set(ds, STK_P_CACHE_BYTES, pget_i(h, STK_P_CACHE_BYTES))) != STK_OK ||
        /* a window set before the open asks for the streamed order: an s3:// dataset then
         * streams even when the cache could hold it (a first epoch at the link's pace) */
        (rc = stk_dataset_set(ds, STK_P_STREAM, pget_i(h, STK_P_STREAM) ||
                                                pget_i(h, STK_P_SHUFFLE_WINDOW) > 0)) != STK_OK ||
        (rc = stk_dataset_set_cache_dir(ds, h->cache_dir)) != STK_OK ||
        (rc = stk_dataset_open(ds, path)) != STK_OK) {
        const char *why = stk_dataset_last_error(ds);
        stk__err(h->err, rc, "%s", why && *why ? why : stk_strerror(rc));
        stk_dataset_destroy(ds);
        return rc;
    }
    if (stk_dataset_count(ds) == 0) {
        stk_dataset_destroy(ds);
        return stk__err(h->err, STK_E_EMPTYSET, "%s: the dataset has no records", path);
    }
    h->ds = ds;
    if ((rc = stk__loader_order_open(h)) != STK_OK) {
        stk__loader_order_free(h);
        h->ds = NULL;
        stk_dataset_destroy(ds);
        return stk__err(h->err, rc, "stk_loader_open: no memory for the shard table");
    }
    h->state = STK__LS_OPENED;
    return STK_OK;
}

int stk_loader_set_cache_dir(stk_loader *h, const char *dir)
{
    if (!h)
        return STK_E_INVALID;
    if (h->state != STK__LS_CREATED)
        return stk__err(h->err, STK_E_STATE, "stk_loader_set_cache_dir: only before stk_loader_open");
    char *d = dir && *dir ? stk__strdup(dir) : NULL;
    if (dir && *dir && !d)
        return STK_E_NOMEM;
    free(h->cache_dir);
    h->cache_dir = d;
    return STK_OK;
}

/* Samples per rank (from the sampler) with the current parameters; 0 if they are inconsistent. */
static uint64_t per_rank_now(const stk_loader *h)
{
    if (!h || !h->ds)
        return 0;
    stk__plan plan;
    int64_t rank = pget_i(h, STK_P_RANK), world = pget_i(h, STK_P_WORLD_SIZE);
    if (rank >= world)
        return 0;
    if (stk__loader_plan_of(h, &plan, stk__loader_records(h), (uint64_t)pget_i(h, STK_P_SEED), 0,
                            (int)pget_i(h, STK_P_SHUFFLE), (uint32_t)rank, (uint32_t)world,
                            (int)pget_i(h, STK_P_DIST_MODE),
                            pget_i(h, STK_P_SHUFFLE_WINDOW) || !stk__remote_streaming(h->ds)
                                ? (uint32_t)pget_i(h, STK_P_SHUFFLE_WINDOW) : 1) != STK_OK)
        return 0;
    return plan.per_rank;
}

uint64_t stk_loader_batches_per_epoch(const stk_loader *h)
{
    uint64_t n = per_rank_now(h);
    if (!n)
        return 0;
    uint64_t bs = (uint64_t)pget_i(h, STK_P_BATCH_SIZE);
    return pget_i(h, STK_P_DROP_LAST) ? n / bs : (n + bs - 1) / bs;
}

uint64_t stk_loader_samples_per_epoch(const stk_loader *h)
{
    uint64_t n = per_rank_now(h);
    if (!n)
        return 0;
    uint64_t bs = (uint64_t)pget_i(h, STK_P_BATCH_SIZE);
    return pget_i(h, STK_P_DROP_LAST) ? n / bs * bs : n;
}

const stk_dataset *stk_loader_dataset(const stk_loader *h) { return h ? h->ds : NULL; }

/* ---- start / stop -------------------------------------------------------------------------- */

/*
 * Everything is allocated in stk_loader_start: K slots (images, labels, indices, substituted,
 * payload sizes), the device buffers' metadata, per-worker decompressors and scratch; the reader
 * allocates its buffer pool. Nothing is allocated per sample. A seek or set_epoch that does not
 * match what is prefetched halts the run (reader, workers and stager threads joined, queued reads
 * returned) and launches a new one at the requested position; the allocations stay.
 */

/* Host image buffers. Each slot's images are one allocation with a header page in front (size
 * and whether the memory is page-locked), so that a buffer stk_loader_detach hands to the caller
 * can be freed alone, from any thread and after the loader is gone: stk_images_free. */
typedef struct img_header {
    uint64_t magic;
    size_t bytes;
    int pinned;
} img_header;
#define IMG_MAGIC UINT64_C(0x73746b2d696d6731) /* "stk-img1" */

int stk__loader_images_alloc(size_t bytes, int device, uint8_t **out, int *pinned, char *err)
{
    size_t page = stk__page_size();
    void *base = NULL;
    *out = NULL;
    int rc = stk__host_alloc(bytes + page, device, &base, pinned, err);
    if (rc != STK_OK)
        return rc;
    img_header *hd = base;
    hd->magic = IMG_MAGIC;
    hd->bytes = bytes;
    hd->pinned = *pinned;
    *out = (uint8_t *)base + page;
    return STK_OK;
}

void stk_images_free(void *images)
{
    if (!images)
        return;
    img_header *hd = (img_header *)((uint8_t *)images - stk__page_size());
    if (hd->magic != IMG_MAGIC)
        return; /* not ours (or freed twice): leaking is the safe answer */
    hd->magic = 0;
    stk__host_free(hd, hd->pinned);
}

static void free_ring(stk_loader *h)
{
    if (h->workers) {
        for (int i = 0; i < h->workers_n; i++) {
            stk__worker_ctx_destroy(h->workers[i].ctx);
            stk__free_aligned(h->workers[i].scratch);
            stk__free_aligned(h->workers[i].aug_scratch);
            stk__free_aligned(h->workers[i].aug_tmp);
            free(h->workers[i].sub_buf);
        }
        free(h->workers);
        h->workers = NULL;
    }
    if (h->slots) {
        for (uint32_t i = 0; i < h->K; i++) {
            stk_images_free(h->slots[i].images);
            free(h->slots[i].labels);
            free(h->slots[i].targets);
            free(h->slots[i].indices);
            free(h->slots[i].substituted);
            free(h->slots[i].payload);
        }
        free(h->slots);
        h->slots = NULL;
    }
    if (h->devs) {
        for (int i = 0; i < h->nbuf; i++) {
            free(h->devs[i].labels);
            free(h->devs[i].targets);
            free(h->devs[i].indices);
            free(h->devs[i].substituted);
            free(h->devs[i].payload);
        }
        free(h->devs);
        h->devs = NULL;
    }
    h->ring_bytes = 0;
    h->ring_pinned = 0;
    stk__stager_destroy(h->stager);
    h->stager = NULL;
    if (h->dq_ok)
        stk__queue_destroy(&h->dq);
    h->dq_ok = 0;
}

static int alloc_meta(uint32_t n, int32_t **labels, uint64_t **indices, uint8_t **subst, uint32_t **payload)
{
    *labels = calloc(n, sizeof(**labels));
    *indices = calloc(n, sizeof(**indices));
    *subst = calloc(n, sizeof(**subst));
    *payload = calloc(n, sizeof(**payload));
    return (*labels && *indices && *subst && *payload) ? STK_OK : STK_E_NOMEM;
}

/* Read the parameters into the fixed-at-start fields and check what single ranges cannot. */
_Static_assert((int)STK_AUG_TRIVIAL == (int)STK__AUGP_TRIVIAL && (int)STK_AUG_RAND == (int)STK__AUGP_RAND &&
                   (int)STK_AUG_AUTO == (int)STK__AUGP_AUTO && (int)STK_AUG_AUGMIX == (int)STK__AUGP_AUGMIX &&
                   (int)STK_AUG_TIMM_RAND == (int)STK__AUGP_TIMM_RAND &&
                   (int)STK_AUG_TIMM_AUTO == (int)STK__AUGP_TIMM_AUTO && STK__TIMM_POSTERIZE_ORIG == 21 &&
                   (int)STK_AUG_INTERP_BILINEAR == (int)STK__INTERP_BILINEAR &&
                   (int)STK_AUG_INTERP_BICUBIC == (int)STK__INTERP_BICUBIC &&
                   (int)STK_INTERP_BILINEAR == (int)STK__TIMM_BILINEAR &&
                   (int)STK_INTERP_BICUBIC == (int)STK__TIMM_BICUBIC && (int)STK_INTERP_NEAREST == (int)STK__TIMM_NEAREST,
               "the public and internal policy numbers agree");
_Static_assert((int)STK_AUG_AUTO_CIFAR10 == (int)STK__AA_CIFAR10 && (int)STK_AUG_AUTO_SVHN == (int)STK__AA_SVHN,
               "the public and internal AutoAugment table numbers agree");
_Static_assert(STK_ERASE_MAX_COUNT == STK__ERASE_MAX_COUNT, "one limit on RandomErasing's boxes");

/* STK_P_TIMM_*: timm's RandAugment; its fill is STK_P_AUG_FILL's colour or timm's default. */
static int timmra_config(stk_loader *h, stk__augpolicy *p)
{
    stk__timmra *t = &p->timm;
    t->num_layers = p->num_ops;
    t->magnitude = pget_d(h, STK_P_TIMM_MAGNITUDE);
    t->mstd = pget_i(h, STK_P_TIMM_UNIFORM) ? INFINITY : pget_d(h, STK_P_TIMM_MSTD);
    t->mmax = pget_d(h, STK_P_TIMM_MMAX);
    t->prob = pget_d(h, STK_P_TIMM_PROB);
    t->increasing = (int)pget_i(h, STK_P_TIMM_INCREASING);
    t->translate_pct = pget_d(h, STK_P_TIMM_TRANSLATE_PCT);
    int64_t rs = pget_i(h, STK_P_TIMM_RESAMPLE);
    t->resample = rs < 0 ? STK__TIMM_RANDOM : (int)rs; /* STK_INTERP_* == STK__TIMM_* */
    int64_t fill = pget_i(h, STK_P_AUG_FILL);
    for (int c = 0; c < 3; c++)
        t->fill[c] = fill >= 0 ? (uint8_t)((fill >> (16 - 8 * c)) & 0xff) : 128;
    t->weighted = (int)pget_i(h, STK_P_TIMM_WEIGHTED);
    if (t->weighted && t->num_layers > 15)
        return stk__err(h->err, STK_E_INVALID, "STK_P_AUG_NUM_OPS = %d: STK_P_TIMM_WEIGHTED chooses without "
                        "replacement among 15 ops", t->num_layers);
    return STK_OK;
}

/* STK_P_AUG_*: the augmentation policy the workers apply after the crop. */
static int augpolicy_config(stk_loader *h)
{
    stk__augpolicy *p = &h->augp;
    memset(p, 0, sizeof *p);
    p->policy = (int)pget_i(h, STK_P_AUG_POLICY); /* STK_AUG_* == STK__AUGP_* */
    p->num_ops = (int)pget_i(h, STK_P_AUG_NUM_OPS);
    p->magnitude = (int)pget_i(h, STK_P_AUG_MAGNITUDE);
    p->bins = (int)pget_i(h, STK_P_AUG_BINS);
    p->interp = (int)pget_i(h, STK_P_AUG_INTERP);
    p->severity = (int)pget_i(h, STK_P_AUGMIX_SEVERITY);
    p->width = (int)pget_i(h, STK_P_AUGMIX_WIDTH);
    p->depth = (int)pget_i(h, STK_P_AUGMIX_DEPTH);
    p->alpha = pget_d(h, STK_P_AUGMIX_ALPHA);
    p->all_ops = (int)pget_i(h, STK_P_AUGMIX_ALL_OPS);
    p->aa_policy = (int)pget_i(h, STK_P_AUG_AUTO_POLICY); /* STK_AUG_AUTO_* == STK__AA_* */
    int torch = (int)pget_i(h, STK_P_AUG_TORCH);
    p->torch = torch & ~STK__TORCH_GRID_FMA;              /* STK_AUG_TORCH_* == STK__TORCH_* */
    p->grid_fma = !!(torch & STK__TORCH_GRID_FMA);
    h->augprog.torch = p->torch;
    h->augprog.grid_fma = p->grid_fma;
    h->augprog.vexp = h->vexp;
    h->augprog.vexp_arg = h->vexp_arg;
    int64_t fill = pget_i(h, STK_P_AUG_FILL);
    if (fill >= 0) {
        p->fill.on = 1;
        for (int c = 0; c < 3; c++)
            p->fill.v[c] = (float)((fill >> (16 - 8 * c)) & 0xff);
    }
    if (p->policy == STK_AUG_TIMM_RAND && timmra_config(h, p) != STK_OK)
        return STK_E_INVALID;
    if (p->policy == STK_AUG_TIMM_AUTO) { /* timm's AutoAugment: RandAugment's hparams, its policy */
        if (h->timmaa.nsub == 0)
            return stk__err(h->err, STK_E_INVALID, "STK_P_AUG_POLICY = STK_AUG_TIMM_AUTO needs a policy "
                            "(STK_P_TIMM_AUTO_POLICY)");
        p->num_ops = 0;
        if (timmra_config(h, p) != STK_OK)
            return STK_E_INVALID;
        p->timm.aa = h->timmaa;
    }
    if (p->policy == STK_AUG_RAND && p->magnitude >= p->bins)
        return stk__err(h->err, STK_E_INVALID, "STK_P_AUG_MAGNITUDE = %d must be below STK_P_AUG_BINS = %d",
                        p->magnitude, p->bins);
    h->aug_on = p->policy != STK__AUGP_NONE || h->augprog.n > 0;
    stk__erase *e = &h->erase;
    e->p = pget_d(h, STK_P_ERASE_PROB);
    e->scale_lo = pget_d(h, STK_P_ERASE_SCALE_MIN), e->scale_hi = pget_d(h, STK_P_ERASE_SCALE_MAX);
    e->ratio_lo = pget_d(h, STK_P_ERASE_RATIO_MIN), e->ratio_hi = pget_d(h, STK_P_ERASE_RATIO_MAX);
    h->erase_random = (int)pget_i(h, STK_P_ERASE_RANDOM);
    e->min_count = (int)pget_i(h, STK_P_ERASE_MIN_COUNT), e->max_count = (int)pget_i(h, STK_P_ERASE_MAX_COUNT);
    if (e->p > 0 && e->min_count > e->max_count)
        return stk__err(h->err, STK_E_INVALID, "STK_P_ERASE_MIN_COUNT = %d must not exceed STK_P_ERASE_MAX_COUNT = %d",
                        e->min_count, e->max_count);
    if (e->p > 0 && (e->scale_lo > e->scale_hi || e->ratio_lo > e->ratio_hi))
        return stk__err(h->err, STK_E_INVALID, "STK_P_ERASE_SCALE_MIN/MAX = %g, %g and RATIO_MIN/MAX = %g, %g "
                        "must be ordered ranges", e->scale_lo, e->scale_hi, e->ratio_lo, e->ratio_hi);
    if (e->p > 0 && h->dev_id >= 0 && h->stage == STK_STAGE_FULL)
        return stk__err(h->err, STK_E_UNSUPPORTED, "STK_P_ERASE_PROB applies to host batches; device batches "
                        "are converted on the GPU");
    return STK_OK;
}

/* The targets as handed out: the dataset's, or float32 multi-hot rows (STK_P_MULTI_HOT). */
static int targets_config(stk_loader *h)
{
    stk_target_info t;
    stk_dataset_target_info(h->ds, &t);
    if (pget_i(h, STK_P_MULTI_HOT)) {
        if (t.kind != STK_TARGET_LABELS || t.dtype == STK_TDT_NONE)
            return stk__err(h->err, STK_E_INVALID, "STK_P_MULTI_HOT needs a dataset whose records carry a "
                            "label list (packed with --multi-label); this one has %s",
                            t.dtype == STK_TDT_NONE ? "no targets" : "value targets");
        t = (stk_target_info){STK_TDT_FLOAT32, STK_TARGET_VALUES, t.classes, 0};
    }
    h->tout = t;
    h->tout_row = stk_target_dtype_size(t.dtype) * t.size;
    return STK_OK;
}

static int configure(stk_loader *h)
{
    h->n = stk__loader_records(h);
    h->bs = (uint32_t)pget_i(h, STK_P_BATCH_SIZE);
    h->K = (uint32_t)pget_i(h, STK_P_PREFETCH);
    h->stage = (int)pget_i(h, STK_P_STAGE);
    h->workers_n = (int)pget_i(h, STK_P_WORKERS);
    h->out_dtype = (int)pget_i(h, STK_P_DTYPE);
    h->out_layout = (int)pget_i(h, STK_P_OUT_LAYOUT);
    h->dev_id = (int)pget_i(h, STK_P_DEVICE);
    h->nbuf = (int)pget_i(h, STK_P_DEVICE_BUFFERS);
    h->seed = (uint64_t)pget_i(h, STK_P_SEED);
    h->draw_key = pget_i(h, STK_P_DRAW_KEY);
    h->shuffle = (int)pget_i(h, STK_P_SHUFFLE);
    h->dist_mode = (int)pget_i(h, STK_P_DIST_MODE);
    h->normalize = h->have_mean || h->have_std;
    int64_t rank = pget_i(h, STK_P_RANK), world = pget_i(h, STK_P_WORLD_SIZE);
    if (rank >= world)
        return stk__err(h->err, STK_E_INVALID, "STK_P_RANK = %lld must be below STK_P_WORLD_SIZE = %lld",
                        (long long)rank, (long long)world);
    h->rank = (uint32_t)rank;
    h->world = (uint32_t)world;
    h->sw_window = (uint32_t)pget_i(h, STK_P_SHUFFLE_WINDOW);
    h->rcfg.backend = (int)pget_i(h, STK_P_IO_BACKEND);
    int rc = stk__loader_stream_config(h);
    if (rc != STK_OK)
        return rc;
    stk__plan plan;
    if ((rc = stk__loader_order_subset(h)) != STK_OK)
        return stk__err(h->err, rc, "out of memory for the shard table of %llu indices",
                        (unsigned long long)h->nsubset);
    rc = stk__loader_plan(h, &plan, 0);
    if (rc != STK_OK && h->sw_window)
        return stk__err(h->err, rc, "STK_P_SHUFFLE_WINDOW = %u: %s", h->sw_window,
                        !h->sw_tab.n ? "the shard-window order needs a dataset of shards"
                        : rc == STK_E_RANGE && h->subset ? "the indices lie in fewer shards than "
                                                           "there are ranks"
                        : rc == STK_E_RANGE ? "fewer shards than ranks (or a rank whose shards are "
                                              "all empty)" : "out of range");
    if (rc != STK_OK)
        return stk__err(h->err, rc, "cannot set up the sampler for %llu records, rank %u of %u",
                        (unsigned long long)h->n, h->rank, h->world);
    h->per_rank = plan.per_rank;
    h->drop_last = (int)pget_i(h, STK_P_DROP_LAST);
    h->bpe = h->drop_last ? h->per_rank / h->bs : (h->per_rank + h->bs - 1) / h->bs;
    h->epoch_end = h->drop_last ? h->bpe * h->bs : h->per_rank;

    stk__aug_config_default(&h->aug);
    h->aug.mode = (int)pget_i(h, STK_P_MODE);
    h->aug.out_h = (int)pget_i(h, STK_P_OUT_HEIGHT);
    h->aug.out_w = (int)pget_i(h, STK_P_OUT_WIDTH);
    h->aug.resize = (int)pget_i(h, STK_P_RESIZE);
    h->aug.flip_prob = pget_d(h, STK_P_FLIP_PROB);
    h->aug.scale_min = pget_d(h, STK_P_SCALE_MIN);
    h->aug.scale_max = pget_d(h, STK_P_SCALE_MAX);
    h->aug.ratio_min = pget_d(h, STK_P_RATIO_MIN);
    h->aug.ratio_max = pget_d(h, STK_P_RATIO_MAX);
    h->aug.max_pixels = pget_i(h, STK_P_MAX_PIXELS);
    h->aug.strict = (int)pget_i(h, STK_P_STRICT);
    h->max_bad = pget_d(h, STK_P_MAX_BAD_FRACTION);
    h->aug.dct_scaling = (int)pget_i(h, STK_P_DCT_SCALING);
    h->aug.interp = (int)pget_i(h, STK_P_INTERP);
    h->aug.passes = (int)pget_i(h, STK_P_RESIZE_PASSES);
    h->aug.resize_h = (int)pget_i(h, STK_P_RESIZE_HEIGHT);
    h->aug.resize_w = (int)pget_i(h, STK_P_RESIZE_WIDTH);
    if ((h->aug.resize_h > 0) != (h->aug.resize_w > 0))
        return stk__err(h->err, STK_E_INVALID, "STK_P_RESIZE_HEIGHT = %d and STK_P_RESIZE_WIDTH = %d: set both "
                        "(Resize((h, w))) or neither", h->aug.resize_h, h->aug.resize_w);
    if (h->aug.scale_min > h->aug.scale_max)
        return stk__err(h->err, STK_E_INVALID, "STK_P_SCALE_MIN = %g is above STK_P_SCALE_MAX = %g",
                        h->aug.scale_min, h->aug.scale_max);
    if (h->aug.ratio_min > h->aug.ratio_max)
        return stk__err(h->err, STK_E_INVALID, "STK_P_RATIO_MIN = %g is above STK_P_RATIO_MAX = %g",
                        h->aug.ratio_min, h->aug.ratio_max);
    if ((rc = augpolicy_config(h)) != STK_OK)
        return rc;
    int64_t mh = pget_i(h, STK_P_MAX_OUT_HEIGHT), mw = pget_i(h, STK_P_MAX_OUT_WIDTH);
    h->resizable = mh > 0 || mw > 0;
    h->max_h = mh > 0 ? (int)mh : h->aug.out_h;
    h->max_w = mw > 0 ? (int)mw : h->aug.out_w;
    if (h->aug.out_h > h->max_h || h->aug.out_w > h->max_w)
        return stk__err(h->err, STK_E_INVALID,
                        "the output size %d x %d is above STK_P_MAX_OUT_HEIGHT x STK_P_MAX_OUT_WIDTH "
                        "= %d x %d", h->aug.out_h, h->aug.out_w, h->max_h, h->max_w);

    if ((rc = targets_config(h)) != STK_OK)
        return rc;
    if (h->lut && h->out_dtype == STK_DTYPE_UINT8)
        return stk__err(h->err, STK_E_INVALID, "STK_P_LUT needs a float STK_P_DTYPE (uint8 output has no table)");
    if (h->lut && (h->have_mean || h->have_std))
        return stk__err(h->err, STK_E_INVALID, "STK_P_LUT replaces STK_P_MEAN / STK_P_STD: set one or the other");
    if (h->lut && h->dev_id >= 0 && h->stage == STK_STAGE_FULL)
        return stk__err(h->err, STK_E_UNSUPPORTED,
                        "STK_P_LUT applies to host batches; device batches convert with STK_P_MEAN / STK_P_STD");

    memset(&h->rcfg, 0, sizeof h->rcfg);
    h->rcfg.backend = (int)pget_i(h, STK_P_IO_BACKEND);
    h->rcfg.direct = (int)pget_i(h, STK_P_IO_DIRECT);
    h->rcfg.queue_depth = (int)pget_i(h, STK_P_QUEUE_DEPTH);
    h->rcfg.inflight_bytes = (size_t)pget_i(h, STK_P_INFLIGHT_BYTES);
    h->rcfg.verify_crc = (int)pget_i(h, STK_P_VERIFY_CRC);
    h->rcfg.io_threads = (int)pget_i(h, STK_P_IO_THREADS);
    h->rcfg.fault_eio_ppm = (uint32_t)pget_i(h, STK_P_FAULT_EIO_PPM);
    h->rcfg.fault_short_ppm = (uint32_t)pget_i(h, STK_P_FAULT_SHORT_PPM);
    h->rcfg.fault_delay_ppm = (uint32_t)pget_i(h, STK_P_FAULT_DELAY_PPM);
    h->rcfg.fault_delay_us = (uint32_t)pget_i(h, STK_P_FAULT_DELAY_US);
    h->rcfg.fault_seed = (uint64_t)pget_i(h, STK_P_FAULT_SEED);
    return STK_OK;
}

/* Try the stager (device path) when a device is asked for and the stage runs that far. */
static int setup_stager(stk_loader *h)
{
    h->device_path = 0;
    h->fallback_reason = 0;
    if (h->dev_id < 0 || h->stage != STK_STAGE_FULL)
        return STK_OK;
    stk__stager_config sc;
    memset(&sc, 0, sizeof sc);
    sc.device = h->dev_id;
    sc.dtype = h->out_dtype;
    sc.layout = h->out_layout;
    sc.normalize = h->normalize;
    memcpy(sc.mean, h->mean, sizeof sc.mean);
    memcpy(sc.std, h->std, sizeof sc.std);
    sc.nbuf = h->nbuf;
    sc.batch_cap = h->bs;
    sc.h = h->max_h; /* device buffers for the largest size; set_size picks the current one */
    sc.w = h->max_w;
    sc.max_device_bytes = (size_t)pget_i(h, STK_P_MAX_DEVICE_BYTES);
    char err[STK__ERRLEN] = "";
    int rc = stk__stager_create(&h->stager, &sc, err);
    if (rc == STK_OK)
        rc = stk__stager_set_size(h->stager, h->aug.out_h, h->aug.out_w, err);
    if (rc == STK_OK) {
        h->device_path = 1;
        return STK_OK;
    }
    stk__stager_destroy(h->stager);
    h->stager = NULL;
    if (rc == STK_E_UNSUPPORTED || rc == STK_E_NODEVICE) {
        h->fallback_reason = rc; /* host batches, converted on the CPU */
        return STK_OK;
    }
    return stk__err(h->err, rc, "cannot set up the CUDA stager on device %d: %s", h->dev_id,
                    *err ? err : stk_strerror(rc));
}

/* Bytes per sample handed out and per sample in a host slot, at the current output size. */
void stk__loader_sample_bytes(stk_loader *h, int out_h, int out_w, size_t *out_b, size_t *host_b)
{
    size_t px = (size_t)out_h * (size_t)out_w * 3;
    *out_b = px * stk__dtype_size(h->out_dtype);
    if (h->stage == STK_STAGE_READ)
        *host_b = 0;
    else if (h->device_path)
        *host_b = px; /* uint8 HWC; the stager converts */
    else
        *host_b = *out_b;
}

/* The K host slots of SLOT_BYTES images each, with their metadata: page-locked when the stager
 * copies from the ring, or when STK_P_PIN_HOST asks and CUDA can do it (else pageable, and
 * pin_reason says why). */
static int alloc_host_ring(stk_loader *h, size_t slot_bytes)
{
    h->slots = calloc(h->K, sizeof(*h->slots));
    if (!h->slots)
        return stk__err(h->err, STK_E_NOMEM, "out of memory for %u ring slots", h->K);
    int pin_dev = h->device_path ? h->dev_id : -1;
    h->pin_reason = 0;
    if (!h->device_path && pget_i(h, STK_P_PIN_HOST) && h->ring_bytes) {
        if (!stk_has_feature(STK_FEATURE_CUDA))
            h->pin_reason = STK_E_UNSUPPORTED;
        else if (stk_cuda_device_count() < 1)
            h->pin_reason = STK_E_NODEVICE;
        else
            pin_dev = 0; /* cudaHostAllocPortable: page-locked for every device */
    }
    int pinned_all = h->ring_bytes > 0;
    for (uint32_t i = 0; i < h->K; i++) {
        stk__slot *s = &h->slots[i];
        if (alloc_meta(h->bs, &s->labels, &s->indices, &s->substituted, &s->payload) != STK_OK ||
            (h->tout_row && !(s->targets = calloc(h->bs, h->tout_row))))
            return stk__err(h->err, STK_E_NOMEM, "out of memory for batch metadata");
        if (!h->ring_bytes)
            continue;
        char err[STK__ERRLEN] = "";
        int pinned = 0;
        int rc = stk__loader_images_alloc(slot_bytes, pin_dev, &s->images, &pinned, err);
        if (rc == STK_E_CUDA && !h->device_path) { /* asked to pin and could not: pageable */
            h->pin_reason = rc;
            pin_dev = -1;
            rc = stk__loader_images_alloc(slot_bytes, pin_dev, &s->images, &pinned, err);
        }
        if (rc != STK_OK)
            return stk__err(h->err, rc, "cannot allocate the host ring (%u slots of %zu bytes): %s",
                            h->K, slot_bytes, *err ? err : stk_strerror(rc));
        pinned_all &= pinned;
    }
    h->ring_pinned = pinned_all;
    h->slot_bytes = slot_bytes;
    return STK_OK;
}

/* The metadata of the device buffers (their memory is the stager's). */
static int alloc_dev_records(stk_loader *h)
{
    h->devs = calloc((size_t)h->nbuf, sizeof(*h->devs));
    if (!h->devs)
        return stk__err(h->err, STK_E_NOMEM, "out of memory for device batch records");
    for (int i = 0; i < h->nbuf; i++) {
        stk__devbuf *d = &h->devs[i];
        if (alloc_meta(h->bs, &d->labels, &d->indices, &d->substituted, &d->payload) != STK_OK ||
            (h->tout_row && !(d->targets = calloc(h->bs, h->tout_row))))
            return stk__err(h->err, STK_E_NOMEM, "out of memory for batch metadata");
    }
    return STK_OK;
}

/* The decode workers: a decoder each, and a sample of PX bytes of scratch unless they write
 * straight into the slots. */
static int alloc_workers(stk_loader *h, size_t px)
{
    h->workers = calloc((size_t)h->workers_n, sizeof(*h->workers));
    if (!h->workers)
        return stk__err(h->err, STK_E_NOMEM, "out of memory for %d workers", h->workers_n);
    for (int i = 0; i < h->workers_n; i++) {
        stk__worker *w = &h->workers[i];
        w->h = h;
        if (h->stage == STK_STAGE_READ)
            continue;
        int rc = stk__worker_ctx_create(&w->ctx);
        if (rc != STK_OK) {
            w->ctx = NULL;
            return stk__err(h->err, rc, "cannot create the decoder of worker %d", i);
        }
        if (!h->direct_out && !(w->scratch = stk__alloc_aligned(64, px)))
            return stk__err(h->err, STK_E_NOMEM, "out of memory for worker scratch (%zu bytes)", px);
        if (h->aug_on && !(w->aug_scratch = stk__alloc_aligned(64, px)))
            return stk__err(h->err, STK_E_NOMEM, "out of memory for augmentation scratch (%zu bytes)", px);
        if ((stk__augprog_has_blur(&h->augprog) || h->augp.policy == STK__AUGP_AUGMIX) && !(w->aug_tmp = stk__alloc_aligned(64, px * sizeof(double))))
            return stk__err(h->err, STK_E_NOMEM, "out of memory for the blur / AugMix scratch (%zu bytes)",
                            px * sizeof(double));
    }
    return STK_OK;
}

static int alloc_ring(stk_loader *h)
{
    /* slots and scratch hold the largest size the loader may be set to (a fixed loader: its size) */
    size_t px = (size_t)h->max_h * (size_t)h->max_w * 3, max_out, max_host;
    stk__loader_sample_bytes(h, h->aug.out_h, h->aug.out_w, &h->out_sample_bytes, &h->host_sample_bytes);
    stk__loader_sample_bytes(h, h->max_h, h->max_w, &max_out, &max_host);
    h->direct_out = h->stage != STK_STAGE_READ &&
                    (h->device_path || (h->out_dtype == STK_DTYPE_UINT8 && h->out_layout == STK_NHWC));
    size_t slot_bytes = stk__round_up(max_host * h->bs, stk__page_size());
    h->ring_bytes = slot_bytes * h->K;
    int64_t cap = pget_i(h, STK_P_MAX_PINNED_BYTES);
    if (cap > 0 && h->ring_bytes > (uint64_t)cap)
        return stk__err(h->err, STK_E_INVALID,
                        "the host ring needs %u slots x %zu bytes = %zu bytes, above "
                        "STK_P_MAX_PINNED_BYTES = %lld (lower STK_P_PREFETCH or STK_P_BATCH_SIZE)",
                        h->K, slot_bytes, h->ring_bytes, (long long)cap);
    int rc = alloc_host_ring(h, slot_bytes);
    if (rc == STK_OK && h->device_path)
        rc = alloc_dev_records(h);
    if (rc == STK_OK)
        rc = alloc_workers(h, px);
    if (rc != STK_OK)
        return rc;
    /* Reader buffers the decode side may hold beyond the reads in flight: one per worker plus a
     * few queued per worker. Reading runs far ahead of decoding, so more would only cost memory
     * (each buffer fits 99% of the records). The queue holds every buffer of the reader's pool
     * (in flight + held + up to 8 large ones), so SINK never waits on it: the reader's
     * back-pressure is the pool. (A queue smaller than the pool made the reader block in SINK
     * and be woken at every pop: a context switch per image.) */
    h->rcfg.hold_buffers = (uint32_t)(3 * h->workers_n + 4);
    size_t qcap = (size_t)h->rcfg.queue_depth + h->rcfg.hold_buffers + 8;
    if (stk__queue_init(&h->dq, qcap) != STK_OK)
        return stk__err(h->err, STK_E_NOMEM, "out of memory for the decode queue");
    h->dq_ok = 1;
    return STK_OK;
}

int stk_loader_start(stk_loader *h)
{
    if (!h)
        return STK_E_INVALID;
    if (h->state == STK__LS_CREATED)
        return stk__err(h->err, STK_E_STATE, "stk_loader_start: open a dataset first");
    if (h->state == STK__LS_STARTED)
        return stk__err(h->err, STK_E_STATE, "stk_loader_start: already started");
    int rc = configure(h);
    if (rc == STK_OK)
        rc = setup_stager(h);
    if (rc == STK_OK)
        rc = alloc_ring(h);
    if (rc != STK_OK) {
        free_ring(h);
        return rc;
    }
    stk__loader_stats_reset(h);
    pthread_mutex_lock(&h->mu);
    h->fw_epoch = h->fw_k = UINT64_MAX;
    atomic_store(&h->fw_max_ns, 0);
    h->failed = 0;
    h->pipe_status = 0;
    h->cancel_pending = 0;
    h->t_epoch = UINT64_MAX;
    h->nlog = 0;
    h->held_host = h->held_dev = 0;
    pthread_mutex_unlock(&h->mu);
    rc = h->sw_pend_set ? stk__loader_launch_pending(h)
                        : stk__loader_launch(h, (uint64_t)pget_i(h, STK_P_EPOCH), 0);
    if (rc != STK_OK) {
        free_ring(h);
        return rc;
    }
    pthread_mutex_lock(&h->mu);
    h->state = STK__LS_STARTED;
    pthread_mutex_unlock(&h->mu);
    return STK_OK;
}

/* Any thread: no consumer call enters from here on, a next() waiting for a batch wakes with
 * STK_E_CANCELLED, and the ring is freed only once every consumer call has left (see "Consumer
 * entry" below). A second stop meanwhile waits for the first. */
int stk_loader_stop(stk_loader *h)
{
    if (!h)
        return STK_E_INVALID;
    pthread_mutex_lock(&h->mu);
    while (h->closing)
        pthread_cond_wait(&h->idle_cv, &h->mu);
    if (h->state != STK__LS_STARTED) {
        pthread_mutex_unlock(&h->mu);
        return STK_OK;
    }
    h->closing = 1;
    pthread_cond_broadcast(&h->ready_cv);
    while (h->inside)
        pthread_cond_wait(&h->idle_cv, &h->mu);
    pthread_mutex_unlock(&h->mu);
    stk__loader_halt(h);
    pthread_mutex_lock(&h->stats_mu);
    free_ring(h);
    pthread_mutex_unlock(&h->stats_mu);
    pthread_mutex_lock(&h->mu);
    h->state = STK__LS_OPENED;
    h->closing = 0;
    pthread_cond_broadcast(&h->idle_cv);
    pthread_mutex_unlock(&h->mu);
    return STK_OK;
}

void stk_loader_destroy(stk_loader *h)
{
    if (!h)
        return;
    stk_loader_stop(h);
    stk__loader_stream_free(h); /* detaches through the dataset */
    stk_dataset_destroy(h->ds);
    pthread_mutex_destroy(&h->mu);
    pthread_mutex_destroy(&h->stats_mu);
    pthread_mutex_destroy(&h->sub_mu);
    stk__errlist_destroy(&h->errs);
    pthread_cond_destroy(&h->space_cv);
    pthread_cond_destroy(&h->ready_cv);
    pthread_cond_destroy(&h->stage_cv);
    pthread_cond_destroy(&h->idle_cv);
    free(h->lut);
    free(h->subset);
    free(h->cache_dir);
    stk__loader_order_free(h);
    free(h->pv);
    free(h);
}
