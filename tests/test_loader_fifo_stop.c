/* SPDX-License-Identifier: MIT */
/* test_loader_fifo_stop.c — a file of an ImageFolder replaced by a FIFO after the dataset was
 * opened (so the files layout lists it) neither blocks a read thread nor, through it, the epoch,
 * stk_loader_stop or stk_loader_destroy (which join that thread): the read opens without
 * blocking, the record is refused as "not a regular file" (substituted and listed), every other
 * record is delivered, and stop returns. The old reader blocked in open(2) until a writer came:
 * the batch never completed and stop / destroy waited forever. alarm() fails a hang. */
#include "test_loader_util.h"

#include <sys/stat.h>
#include <unistd.h>

int main(void)
{
    alarm(120);
    char *dir = t_tmpdir("fifo-stop");
    char root[4200], victim[4300];
    snprintf(root, sizeof root, "%s/folder", dir);
    size_t n = t_make_imagefolder(root, 2, 6, 32, 64, 3);
    stk_loader *h = tl_loader(root, 4, 2);
    T_OK(stk_loader_set(h, STK_P_FAULT_DELAY_PPM, 0));
    T_OK(stk_loader_set_double(h, STK_P_MAX_BAD_FRACTION, 1.0)); /* bad records are the subject */
    const stk_dataset *ds = stk_loader_dataset(h);
    T_CHECK(stk_dataset_count(ds) == n, "%llu records, %zu files", (unsigned long long)stk_dataset_count(ds), n);
    /* class_001's first file becomes a FIFO nobody writes to */
    snprintf(victim, sizeof victim, "%s/class_001/", root);
    T_CHECK(t_system("f=$(ls '%s' | head -n1) && rm -- '%s'\"$f\" && mkfifo -- '%s'\"$f\"", victim,
                     victim, victim) == 0, "mkfifo");
    T_OK(stk_loader_start(h));
    uint64_t delivered = 0, bad = 0;
    int rc;
    const stk_batch *b;
    while ((rc = stk_loader_next(h, NULL, 30000, &b)) == STK_OK) {
        delivered += b->size;
        bad += b->bad;
        T_OK(stk_loader_release(h, b, NULL));
    }
    T_CHECK(rc == STK_END, "the epoch ended with %d (%s): %s", rc, stk_strerror(rc), stk_loader_last_error(h));
    T_CHECK(delivered == n && bad == 1, "%llu samples delivered (want %zu), %llu substituted (want 1)",
            (unsigned long long)delivered, n, (unsigned long long)bad);
    /* the loader already prefetches epoch 1, which may meet the FIFO too before stop: epoch 0
     * has exactly one error, and every error is that file's */
    uint64_t nerr = stk_loader_error_count(h), in_epoch0 = 0;
    T_CHECK(nerr >= 1 && nerr <= 2, "%llu record errors", (unsigned long long)nerr);
    for (uint64_t i = 0; i < nerr; i++) {
        stk_record_error e;
        T_OK(stk_loader_error_get(h, i, &e));
        T_CHECK(strstr(e.where, "class_001/") && strstr(e.reason, "not a regular file"), "error: %s: %s",
                e.where, e.reason);
        in_epoch0 += e.epoch == 0;
    }
    T_CHECK(in_epoch0 == 1, "%llu record errors in epoch 0", (unsigned long long)in_epoch0);
    T_OK(stk_loader_stop(h));
    stk_loader_destroy(h);
    t_rmtree(dir);
    free(dir);
    printf("ok\n");
    return 0;
}
