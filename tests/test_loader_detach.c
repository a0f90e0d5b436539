/* SPDX-License-Identifier: MIT */
/* stk-test: concurrency (workers write the buffers a detach swaps)
 * test_loader_detach: held host batches taken out of the ring (stk_loader_detach) keep their
 * bytes while the loader goes on for two more epochs, equal to a reference run that copied each
 * batch; the ring keeps running with every batch of an epoch held (more than STK_P_PREFETCH);
 * detached memory outlives stop and destroy (stk_images_free after them; ASan checks the frees);
 * detach refuses what it must (not held, twice). STK_P_PIN_HOST on a machine or build without a
 * usable CUDA device leaves the ring pageable and says why in stats.pin_reason. */
#include "test_loader_util.h"

static stk_loader *mk(const char *path, int pin)
{
    stk_loader *h = tl_loader(path, 5, 2);
    /* tl_loader opened it: these are "before start" keys */
    T_OK(stk_loader_set(h, STK_P_PREFETCH, 2));
    T_OK(stk_loader_set(h, STK_P_DTYPE, STK_DTYPE_FLOAT32));
    T_OK(stk_loader_set(h, STK_P_PIN_HOST, pin));
    return h;
}

int main(void)
{
    tl_data d;
    tl_data_make(&d, "detach", 37);
    tl_write(&d);

    /* reference: epoch 0, each batch copied then released */
    stk_loader *h = mk(d.path, 0);
    T_OK(stk_loader_start(h));
    tl_epoch ref;
    T_CHECK(tl_run(h, &ref, -1) == STK_END, "reference epoch");
    stk_loader_destroy(h);

    h = mk(d.path, 1);
    T_OK(stk_loader_start(h));
    stk_stats st;
    T_OK(stk_loader_stats(h, &st));
    T_CHECK(st.pinned_bytes == 0 || stk_cuda_device_count() > 0, "pinned without a device");
    if (stk_cuda_device_count() == 0)
        T_CHECK(st.pin_reason == (stk_has_feature(STK_FEATURE_CUDA) ? STK_E_NODEVICE : STK_E_UNSUPPORTED),
                "pin_reason %s", stk_status_name(st.pin_reason));
    else
        T_CHECK(st.pin_reason == 0 && st.pinned_bytes == st.host_ring_bytes, "pinned ring");

    /* hold every batch of epoch 0 (8 batches, ring of 2): detach each once the next is wanted */
    void *kept[64];
    uint32_t sizes[64];
    size_t nk = 0;
    const stk_batch *b, *prev = NULL;
    int rc;
    while ((rc = stk_loader_next(h, NULL, 20000, &b)) == STK_OK || rc == STK_E_STATE) {
        if (rc == STK_E_STATE)
            T_FAIL("next refused with a batch held: %s", stk_loader_last_error(h));
        if (prev) {
            T_CHECK(nk < 64, "too many batches");
            sizes[nk] = prev->size;
            T_OK(stk_loader_detach(h, prev, &kept[nk]));
            T_CHECK(kept[nk] != NULL, "detach gave no memory");
            nk++;
            T_CHECK(stk_loader_detach(h, prev, &kept[nk]) == STK_E_INVALID && kept[nk] == NULL,
                    "a batch detached twice");
        }
        prev = b;
    }
    T_CHECK(rc == STK_END, "epoch 0 ended with %s", stk_status_name(rc));
    sizes[nk] = prev->size;
    T_OK(stk_loader_detach(h, prev, &kept[nk]));
    nk++;
    T_CHECK(nk == ref.nbatches, "%zu batches held, reference %zu", nk, ref.nbatches);

    /* two more epochs through the same ring, released as usual */
    for (int e = 1; e <= 2; e++) {
        tl_epoch other;
        T_CHECK(tl_run(h, &other, -1) == STK_END, "epoch %d", e);
        T_CHECK(other.epoch == (uint64_t)e, "epoch %llu", (unsigned long long)other.epoch);
        T_CHECK(memcmp(other.images, ref.images, ref.n * ref.sample_bytes) != 0,
                "epoch %d equals epoch 0 (augmentation should differ)", e);
        tl_epoch_free(&other);
    }
    T_OK(stk_loader_stats(h, &st));
    T_CHECK(st.detached == nk, "stats.detached %llu, want %zu", (unsigned long long)st.detached, nk);
    stk_loader_destroy(h);

    /* the kept bytes equal the reference, after the loader is gone */
    size_t off = 0;
    for (size_t i = 0; i < nk; i++) {
        size_t bytes = (size_t)sizes[i] * ref.sample_bytes;
        T_CHECK(memcmp(kept[i], ref.images + off, bytes) == 0, "held batch %zu changed", i);
        off += bytes;
        stk_images_free(kept[i]);
    }
    T_CHECK(off == ref.n * ref.sample_bytes, "bytes held %zu, reference %zu", off, ref.n * ref.sample_bytes);
    stk_images_free(NULL);

    /* refusals: not started, not held */
    T_OK(stk_loader_create(&h));
    void *p = (void *)1;
    stk_batch fake;
    memset(&fake, 0, sizeof fake);
    T_CHECK(stk_loader_detach(h, &fake, &p) == STK_E_STATE && p == NULL, "detach before start");
    stk_loader_destroy(h);
    h = mk(d.path, 0);
    T_OK(stk_loader_start(h));
    T_OK(stk_loader_next(h, NULL, 20000, &b));
    T_OK(stk_loader_release(h, b, NULL));
    T_CHECK(stk_loader_detach(h, b, &p) == STK_E_INVALID, "detach of a released batch");
    stk_loader_destroy(h);

    tl_epoch_free(&ref);
    tl_data_free(&d);
    printf("test_loader_detach: ok\n");
    return 0;
}
