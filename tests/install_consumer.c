/* SPDX-License-Identifier: MIT */
/*
 * install_consumer.c — the program test_install.sh and test_static_link.sh build against an
 * installed stoker (shared, static, through pkg-config and find_package): a writer -> dataset
 * round trip in DIR, a loader opened on it, the CUDA device count and the CPU budget, enough to
 * pull in every stage's objects (the CUDA stager's included in a CUDA build). Prints
 * "consumer-ok <text of STK_E_CRC>" on stdout when every check holds, the device count and
 * version on stderr.
 */
#include <stoker.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
    if (argc != 2 || stk_version() != STK_VERSION_NUMBER) {
        fprintf(stderr, "version mismatch or usage\n");
        return 1;
    }
    const char *payload = "\xff\xd8\xff\xe0 consumer payload";
    const char *cls[] = {"only"};
    stk_writer *w;
    if (stk_writer_create(&w) || stk_writer_set_classes(w, cls, 1) || stk_writer_open(w, argv[1]) ||
        stk_writer_add(w, payload, strlen(payload), 0, "a.jpg") || stk_writer_finish(w)) {
        fprintf(stderr, "writer: %s\n", stk_writer_last_error(w));
        return 1;
    }
    stk_writer_destroy(w);
    stk_dataset *ds;
    char buf[64];
    size_t len;
    stk_record_info ri;
    if (stk_dataset_create(&ds) || stk_dataset_open(ds, argv[1]) ||
        stk_dataset_read(ds, 0, buf, sizeof buf, &len, &ri)) {
        fprintf(stderr, "dataset: %s\n", stk_dataset_last_error(ds));
        return 1;
    }
    int ok = len == strlen(payload) && !memcmp(buf, payload, len) && ri.label == 0 &&
             !strcmp(stk_dataset_class_name(ds, 0), "only");
    stk_dataset_destroy(ds);
    stk_loader *h;
    if (stk_loader_create(&h) || stk_loader_set(h, STK_P_BATCH_SIZE, 1) || stk_loader_open(h, argv[1])) {
        fprintf(stderr, "loader: %s\n", stk_loader_last_error(h));
        return 1;
    }
    ok = ok && stk_loader_samples_per_epoch(h) == 1;
    stk_loader_destroy(h);
    stk_cpu_budget b;
    ok = ok && stk_cpu_budget_get(&b) == STK_OK && b.workers >= 1;
    printf("%s %s\n", ok ? "consumer-ok" : "consumer-bad", stk_strerror(STK_E_CRC));
    fprintf(stderr, "devices=%d %s\n", stk_cuda_device_count(), stk_version_string());
    return ok ? 0 : 1;
}
