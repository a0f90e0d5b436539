/* SPDX-License-Identifier: MIT */
/* test_dataset.c — stk_writer writes records, stk_dataset reads them back: bytes, labels, CRCs,
 * names, classes, several shards, the offset table against the file, errors on bad input.
 * stk-test: concurrency (reads from several threads at once) */
#include "testutil.h"

#include "dataset.h"
#include "format.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define N 300

typedef struct thr {
    stk_dataset *ds;
    int id;
    int bad;
} thr;

static void *reader(void *arg)
{
    thr *t = arg;
    uint8_t *buf = malloc(32768);
    for (uint64_t i = (uint64_t)t->id; i < N; i += 3) {
        size_t len, want;
        uint8_t *p = t_payload(i, &want);
        stk_record_info info;
        if (stk_dataset_read(t->ds, i, buf, 32768, &len, &info) != STK_OK || len != want ||
            memcmp(buf, p, len) != 0 || info.label != (int32_t)(i % 5))
            t->bad++;
        free(p);
    }
    free(buf);
    return NULL;
}

int main(void)
{
    char *dir = t_tmpdir("dataset");
    char dst[4200];
    snprintf(dst, sizeof dst, "%s/ds", dir);

    /* write N records over several 1 MiB shards */
    stk_writer *w;
    T_OK(stk_writer_create(&w));
    T_CHECK(stk_writer_set(w, STK_W_SHARD_BYTES, 1000) == STK_E_INVALID, "tiny shard size refused");
    T_OK(stk_writer_set(w, STK_W_SHARD_BYTES, 1 << 20));
    const char *classes[] = {"cat", "dog", "émeu", "fish-1", "zebra"};
    T_OK(stk_writer_set_classes(w, classes, 5));
    T_OK(stk_writer_open(w, dst));
    char mark[4300];
    snprintf(mark, sizeof mark, "%s/%s", dst, STK__INCOMPLETE_MARK);
    T_CHECK(access(mark, F_OK) == 0, "marker present while writing");
    for (uint64_t i = 0; i < N; i++) {
        size_t len;
        uint8_t *p = t_payload(i, &len);
        char src[64];
        snprintf(src, sizeof src, "class_%d/img_%03d.jpg", (int)(i % 5), (int)i);
        T_OK(stk_writer_add(w, p, len, (int32_t)(i % 5), i % 2 ? src : src));
        free(p);
    }
    /* an unfinished dataset is refused */
    {
        stk_dataset *ds;
        T_OK(stk_dataset_create(&ds));
        int rc = stk_dataset_open(ds, dst);
        T_CHECK(rc == STK_E_INCOMPLETE, "open of unfinished dataset: %d %s", rc, stk_dataset_last_error(ds));
        T_CHECK(strstr(stk_dataset_last_error(ds), "re-run") != NULL, "message: %s", stk_dataset_last_error(ds));
        stk_dataset_destroy(ds);
    }
    T_OK(stk_writer_finish(w));
    stk_writer_destroy(w);
    T_CHECK(access(mark, F_OK) != 0, "marker removed at finish");

    /* a second writer refuses the finished dataset without force */
    T_OK(stk_writer_create(&w));
    T_OK(stk_writer_open(w, dir)); /* parent dir: no dataset there, fine */
    stk_writer_destroy(w);
    T_OK(stk_writer_create(&w));
    int rc = stk_writer_open(w, dst);
    T_CHECK(rc == STK_E_EXISTS, "existing dataset refused: %d", rc);
    T_CHECK(strstr(stk_writer_last_error(w), dst) != NULL, "names DST: %s", stk_writer_last_error(w));
    stk_writer_destroy(w);

    stk_dataset *ds;
    T_OK(stk_dataset_create(&ds));
    T_OK(stk_dataset_open(ds, dst));
    stk_dataset_info info;
    T_OK(stk_dataset_info_get(ds, &info));
    T_CHECK(info.records == N, "records %llu", (unsigned long long)info.records);
    T_CHECK(info.shards >= 3, "several shards: %u", info.shards);
    uint32_t nsh = info.shards;
    T_CHECK(info.classes == 5 && info.format_version == 2 && info.layout == STK_LAYOUT_SHARDS, "info");
    for (uint32_t c = 0; c < 5; c++)
        T_CHECK(!strcmp(stk_dataset_class_name(ds, c), classes[c]), "class %u", c);
    T_CHECK(stk_dataset_class_name(ds, 5) == NULL, "class past end");
    uint64_t total = 0;
    uint32_t maxlen = 0;
    uint8_t *buf = malloc(32768);
    for (uint64_t i = 0; i < N; i++) {
        size_t want, len;
        uint8_t *p = t_payload(i, &want);
        total += want;
        if (want > maxlen)
            maxlen = (uint32_t)want;
        stk_record_info ri;
        T_OK(stk_dataset_record(ds, i, &ri));
        T_CHECK(ri.length == want && ri.label == (int32_t)(i % 5) && ri.has_crc &&
                    ri.crc32c == stk__rec_crc(2, stk__crc32c(0, p, want), ri.label, NULL, 0),
                "record %llu info", (unsigned long long)i);
        /* the offset table points at the payload in the file */
        const stk__shard *sh = &ds->shards[ds->recs[i].shard];
        T_CHECK(ds->recs[i].len == want + 16, "table length");
        uint8_t *fb = malloc(want + 16);
        T_CHECK(pread(sh->fd, fb, want + 16, (off_t)ds->recs[i].off) == (ssize_t)(want + 16), "pread");
        T_CHECK(!memcmp(fb, "STK2", 4) && !memcmp(fb + 16, p, want), "bytes at the table offset");
        free(fb);
        T_OK(stk_dataset_read(ds, i, buf, 32768, &len, NULL));
        T_CHECK(len == want && !memcmp(buf, p, len), "read %llu", (unsigned long long)i);
        if (want > 1) {
            T_CHECK(stk_dataset_read(ds, i, buf, want - 1, &len, NULL) == STK_E_RANGE && len == want,
                    "small buffer");
        }
        char name[512], exp[128];
        T_OK(stk_dataset_record_name(ds, i, name, sizeof name));
        snprintf(exp, sizeof exp, "key %llu (class_%d/img_%03d.jpg)",
                 (unsigned long long)(i - sh->first), (int)(i % 5), (int)i);
        T_CHECK(strstr(name, exp) && !strncmp(name, "shard-", 6), "name %s", name);
        free(p);
    }
    T_CHECK(info.payload_bytes == total && info.max_record_bytes == maxlen, "payload bytes");
    stk_record_info ri;
    T_CHECK(stk_dataset_record(ds, N, &ri) == STK_E_RANGE, "range");
    T_OK(stk__dataset_check(ds, NULL));

    /* threads */
    pthread_t th[3];
    thr ts[3];
    for (int t = 0; t < 3; t++) {
        ts[t] = (thr){ds, t, 0};
        pthread_create(&th[t], NULL, reader, &ts[t]);
    }
    for (int t = 0; t < 3; t++) {
        pthread_join(th[t], NULL);
        T_CHECK(ts[t].bad == 0, "thread %d: %d bad reads", t, ts[t].bad);
    }

    /* a single shard path opens alone */
    char s1[4300];
    snprintf(s1, sizeof s1, "%s/shard-00001.lmdb", dst);
    stk_dataset *one;
    T_OK(stk_dataset_create(&one));
    T_OK(stk_dataset_open(one, s1));
    T_CHECK(stk_dataset_count(one) == ds->shards[1].count, "single shard count");
    {
        size_t len, want;
        uint8_t *p = t_payload(ds->shards[1].first, &want);
        T_OK(stk_dataset_read(one, 0, buf, 32768, &len, NULL));
        T_CHECK(len == want && !memcmp(buf, p, want), "single shard record 0");
        free(p);
    }
    stk_dataset_destroy(one);

    /* corrupt a payload byte on disk: CRC error naming shard and key */
    {
        uint64_t i = 3;
        const stk__shard *sh = &ds->shards[ds->recs[i].shard];
        int fd = open(sh->path, O_RDWR);
        uint8_t b;
        pread(fd, &b, 1, (off_t)ds->recs[i].off + 20);
        b ^= 0x55;
        pwrite(fd, &b, 1, (off_t)ds->recs[i].off + 20);
        size_t len;
        rc = stk_dataset_read(ds, i, buf, 32768, &len, NULL);
        T_CHECK(rc == STK_E_CRC, "corrupt byte -> CRC error (%d)", rc);
        T_CHECK(strstr(stk_dataset_last_error(ds), "shard-00000.lmdb key 3"), "names record: %s",
                stk_dataset_last_error(ds));
        b ^= 0x55;
        pwrite(fd, &b, 1, (off_t)ds->recs[i].off + 20);
        close(fd);
    }
    stk_dataset_destroy(ds);
    free(buf);

    /* missing shard: clear error naming it */
    char s2[4300], s2b[4300];
    snprintf(s2, sizeof s2, "%s/shard-00001.lmdb", dst);
    snprintf(s2b, sizeof s2b, "%s/moved.lmdb", dir);
    T_CHECK(rename(s2, s2b) == 0, "rename");
    T_OK(stk_dataset_create(&ds));
    rc = stk_dataset_open(ds, dst);
    T_CHECK(rc == STK_E_FORMAT && strstr(stk_dataset_last_error(ds), "shard-00001.lmdb is missing"),
            "missing shard: %d %s", rc, stk_dataset_last_error(ds));
    stk_dataset_destroy(ds);
    T_CHECK(rename(s2b, s2) == 0, "rename back");
    snprintf(s2, sizeof s2, "%s/shard-%05u.lmdb", dst, nsh - 1);
    T_CHECK(rename(s2, s2b) == 0, "rename");
    T_OK(stk_dataset_create(&ds));
    rc = stk_dataset_open(ds, dst);
    T_CHECK(rc == STK_E_FORMAT && strstr(stk_dataset_last_error(ds), "is missing"),
            "missing last shard: %d %s", rc, stk_dataset_last_error(ds));
    stk_dataset_destroy(ds);

    /* truncated shard */
    struct stat st;
    stat(s2b, &st);
    T_CHECK(truncate(s2b, st.st_size / 2) == 0, "truncate");
    T_OK(stk_dataset_create(&ds));
    rc = stk_dataset_open(ds, s2b);
    T_CHECK(rc == STK_E_TRUNCATED && strstr(stk_dataset_last_error(ds), "moved.lmdb"), "truncated: %d %s",
            rc, stk_dataset_last_error(ds));
    stk_dataset_destroy(ds);

    /* not LMDB at all */
    char junk[4300];
    snprintf(junk, sizeof junk, "%s/junk.lmdb", dir);
    uint8_t zeros[8192] = {1, 2, 3};
    t_write_file(junk, zeros, sizeof zeros);
    T_OK(stk_dataset_create(&ds));
    rc = stk_dataset_open(ds, junk);
    T_CHECK(rc == STK_E_FORMAT && strstr(stk_dataset_last_error(ds), "not an LMDB file"), "junk: %d %s", rc,
            stk_dataset_last_error(ds));
    stk_dataset_destroy(ds);
    T_OK(stk_dataset_create(&ds));
    rc = stk_dataset_open(ds, "/nonexistent/x");
    T_CHECK(rc == -ENOENT && strstr(stk_dataset_last_error(ds), "/nonexistent/x"), "missing path");
    stk_dataset_destroy(ds);
    stk_dataset_destroy(NULL);
    stk_writer_destroy(NULL);

    /* a shard big enough for the parallel walk (>= 65536 records): inline and overflow values */
    {
        char big[4300];
        snprintf(big, sizeof big, "%s/big", dir);
        T_OK(stk_writer_create(&w));
        T_OK(stk_writer_open(w, big));
        const uint64_t nb = 140000;
        uint8_t pb[3000];
        for (uint64_t i = 0; i < nb; i++) {
            size_t len = i % 1000 == 5 ? 2500 : (size_t)(i % 40);
            for (size_t k = 0; k < len; k++)
                pb[k] = (uint8_t)(i * 13 + k);
            T_OK(stk_writer_add(w, pb, len, (int32_t)(i % 1000), NULL));
        }
        T_OK(stk_writer_finish(w));
        stk_writer_destroy(w);
        T_OK(stk_dataset_create(&ds));
        T_OK(stk_dataset_open(ds, big));
        T_CHECK(stk_dataset_count(ds) == nb, "big count");
        uint8_t rb[3000];
        for (uint64_t i = 0; i < nb; i += (i % 1000 == 5) ? 1 : 97) {
            size_t len, want = i % 1000 == 5 ? 2500 : (size_t)(i % 40);
            stk_record_info bi;
            T_OK(stk_dataset_read(ds, i, rb, sizeof rb, &len, &bi));
            T_CHECK(len == want && bi.label == (int32_t)(i % 1000) && bi.key == i, "big record %llu",
                    (unsigned long long)i);
            for (size_t k = 0; k < len; k++)
                T_CHECK(rb[k] == (uint8_t)(i * 13 + k), "big record %llu byte %zu", (unsigned long long)i, k);
        }
        for (uint64_t i = 1; i < nb; i++)
            T_CHECK(ds->recs[i].off != ds->recs[i - 1].off && ds->recs[i].shard == 0, "distinct offsets");
        stk_dataset_destroy(ds);
    }

    /* a foreign LMDB (main database: key -> image bytes), with STK_P_FOREIGN_LABEL */
    {
        char fpath[4300];
        snprintf(fpath, sizeof fpath, "%s/foreign.lmdb", dir);
        MDB_env *env;
        MDB_txn *txn;
        MDB_dbi dbi;
        T_CHECK(mdb_env_create(&env) == 0 && mdb_env_set_mapsize(env, 1 << 22) == 0, "env");
        T_CHECK(mdb_env_open(env, fpath, MDB_NOSUBDIR, 0644) == 0, "env open");
        T_CHECK(mdb_txn_begin(env, NULL, 0, &txn) == 0 && mdb_dbi_open(txn, NULL, 0, &dbi) == 0, "txn");
        for (int i = 0; i < 5; i++) {
            char key[16];
            uint8_t val[3000];
            snprintf(key, sizeof key, "k%d", 4 - i); /* inserted in reverse: read in key order */
            memset(val, 'a' + (4 - i), sizeof val);
            MDB_val k = {strlen(key), key}, v = {(size_t)(10 + (4 - i) * 700), val};
            T_CHECK(mdb_put(txn, dbi, &k, &v, 0) == 0, "put");
        }
        T_CHECK(mdb_txn_commit(txn) == 0, "commit");
        mdb_env_close(env);
        T_OK(stk_dataset_create(&ds));
        T_OK(stk_dataset_set(ds, STK_P_FOREIGN_LABEL, 7));
        T_CHECK(stk_dataset_set(ds, STK_P_FOREIGN_LABEL, -2) == STK_E_INVALID, "label range");
        T_OK(stk_dataset_open(ds, fpath));
        T_OK(stk_dataset_info_get(ds, &info));
        T_CHECK(info.layout == STK_LAYOUT_LMDB && info.format_version == 0 && info.records == 5, "foreign info");
        uint8_t fb[4000];
        for (uint64_t i = 0; i < 5; i++) {
            size_t len;
            stk_record_info fi;
            T_OK(stk_dataset_read(ds, i, fb, sizeof fb, &len, &fi));
            T_CHECK(len == 10 + i * 700 && fb[0] == 'a' + i && fb[len - 1] == 'a' + i && fi.label == 7 &&
                        !fi.has_crc && fi.crc32c == stk__crc32c(0, fb, len), "foreign record %llu",
                    (unsigned long long)i);
            T_CHECK(stk__dataset_static_label(ds, i) == 7, "static label");
        }
        char name[256];
        T_OK(stk_dataset_record_name(ds, 3, name, sizeof name));
        T_CHECK(!strcmp(name, "foreign.lmdb key 3"), "foreign name %s", name);
        stk_dataset_destroy(ds);
        /* asked for shards, a foreign LMDB is refused clearly */
        T_OK(stk_dataset_create(&ds));
        T_OK(stk_dataset_set(ds, STK_P_LAYOUT, STK_LAYOUT_SHARDS));
        rc = stk_dataset_open(ds, fpath);
        T_CHECK(rc == STK_E_FORMAT && strstr(stk_dataset_last_error(ds), "not a stoker shard"), "%s",
                stk_dataset_last_error(ds));
        stk_dataset_destroy(ds);
    }

    /* an ImageFolder root: files layout, torchvision labels, names = paths */
    {
        char root[4300];
        snprintf(root, sizeof root, "%s/folder", dir);
        t_make_imagefolder(root, 2, 3, 16, 40, 5);
        T_OK(stk_dataset_create(&ds));
        T_OK(stk_dataset_open(ds, root));
        T_OK(stk_dataset_info_get(ds, &info));
        T_CHECK(info.layout == STK_LAYOUT_FILES && info.records == 6 && info.classes == 2 && info.shards == 0,
                "files info");
        T_CHECK(!strcmp(stk_dataset_shard_path(ds, 0), root), "files root");
        uint8_t fb[65536];
        for (uint64_t i = 0; i < 6; i++) {
            char path[4400], name[4400];
            snprintf(path, sizeof path, "%s/class_%03d/img_%05d.jpg", root, (int)(i / 3), (int)(i % 3));
            size_t len, want;
            uint8_t *d = t_read_file(path, &want);
            stk_record_info fi;
            T_OK(stk_dataset_read(ds, i, fb, sizeof fb, &len, &fi));
            T_CHECK(len == want && !memcmp(fb, d, len) && fi.label == (int32_t)(i / 3), "file %s", path);
            T_OK(stk_dataset_record_name(ds, i, name, sizeof name));
            T_CHECK(!strcmp(name, path), "files name %s", name);
            free(d);
        }
        stk_dataset_destroy(ds);
    }

    t_rmtree(dir);
    free(dir);
    printf("ok\n");
    return 0;
}
