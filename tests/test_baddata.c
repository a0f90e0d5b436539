/* SPDX-License-Identifier: MIT */
/*
 * test_baddata.c — bad source files end to end: pack an ImageFolder that mixes
 * good JPEGs with broken files, load an epoch, and account for every file.
 *
 * CI mode (no arguments): the set is generated here (the make-imagenet-like run takes minutes):
 * good landscape JPEGs of every subsampling, progressive or not, and, per class, broken files of
 * each kind make-imagenet-like writes (zero-length, PNG named .jpg, cut inside the scan at
 * 10/50/90 %, cut inside the headers, a flipped header byte, flipped scan bytes) plus text,
 * SOI-only and a cut progressive file. The loader runs in eval mode with the resize equal to the
 * crop, so every row of a landscape image is decoded: a cut anywhere in the scan is reached.
 *
 * Bench mode (env STK_BADDATA_SRC=OUT, written by make-imagenet-like with --truncate/--corrupt;
 * bench/longrun-baddata.sh): OUT and OUT_bad are packed together from a list file and loaded in
 * eval mode 256/224 (as ImageNet validation is); the kinds come from OUT_bad/MANIFEST.tsv.
 *
 * The pack keeps damaged JPEGs (keep_damaged: a plain pack skips every JPEG that does not decode
 * fully, tests/test_pack_damaged.sh), so that the loader meets them.
 *
 * Accounting, per bad file: skipped at pack (named in pack-report.tsv), or substituted at load
 * (named, with its source path, in the loader's error list), or — the only other outcome allowed
 * — decoded: then a strict full-image stk_decode of its bytes must show why (libjpeg warnings:
 * corrupt scan data decoded anyway, counted in stats decode_warnings; or damage outside the
 * decoded window, bench mode only), or it is silently valid JPEG data (flipped coefficient bits
 * that still decode: no check can see them). Every good file must be loaded once, not
 * substituted, with its label and its byte count. The counts are printed per kind.
 *
 * stk-test: concurrency
 */
#include "testutil.h"

#include <dirent.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct item {
    char rel[256];   /* path relative to the source root (as stored in the shard's sources) */
    char kind[32];   /* "good" or the damage */
    int32_t label;
    size_t bytes;
    int skipped;     /* in pack-report.tsv */
    int substituted; /* named in the loader's error list */
    int loaded;      /* delivered (times) */
    int warned;      /* decoded, and a strict decode shows warnings */
    int undetected;  /* decoded, strict full decode fine too */
    int window;      /* decoded; full decode fails: damage outside the decoded window */
} item;

static item *g_items;
static size_t g_n, g_cap;

static void on_alarm(int sig)
{
    (void)sig;
    static const char m[] = "FAIL test_baddata: watchdog: hung\n";
    if (write(2, m, sizeof m - 1) < 0) {
    }
    _exit(1);
}

static item *add_item(const char *rel, const char *kind, int32_t label, size_t bytes)
{
    if (g_n == g_cap) {
        g_cap = g_cap ? g_cap * 2 : 256;
        g_items = realloc(g_items, g_cap * sizeof *g_items);
        T_CHECK(g_items, "oom");
    }
    item *it = &g_items[g_n++];
    memset(it, 0, sizeof *it);
    int nr = snprintf(it->rel, sizeof it->rel, "%s", rel);
    int nk = snprintf(it->kind, sizeof it->kind, "%s", kind);
    T_CHECK(nr >= 0 && (size_t)nr < sizeof it->rel && nk >= 0 && (size_t)nk < sizeof it->kind, "name too long: %s", rel);
    it->label = label;
    it->bytes = bytes;
    return it;
}

static item *find_item(const char *rel)
{
    for (size_t i = 0; i < g_n; i++) {
        size_t a = strlen(rel), b = strlen(g_items[i].rel);
        /* REL may be a full path or carry a prefix: match on the trailing relative path */
        if (a >= b && strcmp(rel + a - b, g_items[i].rel) == 0 && (a == b || rel[a - b - 1] == '/'))
            return &g_items[i];
    }
    return NULL;
}

static void put(const char *root, const char *rel, const char *kind, int32_t label, const uint8_t *p, size_t n)
{
    char path[4400], dir[4400];
    snprintf(path, sizeof path, "%s/%s", root, rel);
    snprintf(dir, sizeof dir, "%s", path);
    *strrchr(dir, '/') = 0;
    t_mkdirs(dir);
    t_write_file(path, p, n);
    add_item(rel, kind, label, n);
}

/* Offset of the first SOS marker (FF DA), or LEN. */
static size_t sos_offset(const uint8_t *p, size_t len)
{
    for (size_t i = 2; i + 1 < len; i++)
        if (p[i] == 0xFF && p[i + 1] == 0xDA)
            return i;
    return len;
}

/* The generated set (CI). */
static void generate(const char *root)
{
    static const int subs[] = {T_444, T_422, T_420, T_GRAY, T_440};
    int g = 0;
    for (int c = 0; c < 4; c++) {
        for (int k = 0; k < 6; k++, g++) {
            int w = 64 + (g * 13) % 57, h = 40 + (g * 7) % 24; /* landscape: w > h */
            size_t len;
            uint8_t *j = t_make_jpeg(w, h, 100 + (uint64_t)g, subs[g % 5], 80 + g % 15, g % 4 == 3 ? T_PROGRESSIVE : 0,
                                     &len);
            char rel[64];
            snprintf(rel, sizeof rel, "c%d/good_%02d.jpg", c, g);
            put(root, rel, "good", c, j, len);
            free(j);
        }
        /* broken files, one family per class, so that labels vary */
        size_t len, plen;
        uint8_t *j = t_make_jpeg(96, 56, 900 + (uint64_t)c, subs[c], 85, 0, &len);
        uint8_t *pj = t_make_jpeg(96, 56, 950 + (uint64_t)c, T_420, 85, T_PROGRESSIVE, &plen);
        size_t sos = sos_offset(j, len);
        char rel[64];
#define BAD(name, kind, ptr, n)                                                                    \
    do {                                                                                       \
        snprintf(rel, sizeof rel, "c%d/" name, c);                                            \
        put(root, rel, kind, c, ptr, n);                                                      \
    } while (0)
        BAD("zero.jpg", "zero", j, 0);
        static const uint8_t png[] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0, 0, 13, 'I', 'H', 'D', 'R'};
        BAD("png.jpg", "png", png, sizeof png);
        BAD("text.jpg", "text", (const uint8_t *)"hello, not an image\n", 20);
        BAD("soi_only.jpg", "soi_only", j, 2);
        BAD("cut_header.jpg", "cut_header", j, sos / 2);
        BAD("cut_scan10.jpg", "cut_scan", j, sos + (len - sos) / 10);
        BAD("cut_scan50.jpg", "cut_scan", j, sos + (len - sos) / 2);
        BAD("cut_scan90.jpg", "cut_scan", j, sos + (len - sos) * 9 / 10);
        BAD("cut_progressive.jpg", "cut_progressive", pj, plen * 7 / 10);
        /* SOF0's height set to 0 (libjpeg: DNL not supported) */
        uint8_t *h0 = malloc(len);
        memcpy(h0, j, len);
        for (size_t i = 2; i + 8 < sos; i++)
            if (h0[i] == 0xFF && (h0[i + 1] == 0xC0 || h0[i + 1] == 0xC2)) {
                h0[i + 5] = 0;
                h0[i + 6] = 0;
                break;
            }
        BAD("flip_header.jpg", "flip_header", h0, len);
        /* bytes in the middle of the scan replaced (as make-imagenet-like's flip_scan) */
        memcpy(h0, j, len);
        for (size_t i = sos + (len - sos) / 3, k = 0; k < 24 && i + 2 < len; i += 7, k++)
            h0[i] = (uint8_t)(h0[i] ^ 0x5A) == 0xFF ? 0x00 : (uint8_t)(h0[i] ^ 0x5A);
        BAD("flip_scan.jpg", "flip_scan", h0, len);
#undef BAD
        free(h0);
        free(j);
        free(pj);
    }
}

/* Bench mode: OUT (make-imagenet-like) and OUT_bad with its MANIFEST.tsv into a list file. */
static void from_manifest(const char *out, const char *list)
{
    char bad[4400], mf[4500];
    snprintf(bad, sizeof bad, "%s_bad", out);
    snprintf(mf, sizeof mf, "%s/MANIFEST.tsv", bad);
    FILE *lf = fopen(list, "w");
    T_CHECK(lf, "write %s", list);
    /* good files: every file under OUT/nXXXX/ */
    DIR *d = opendir(out);
    T_CHECK(d, "open %s", out);
    struct dirent *e;
    char **classes = NULL;
    size_t nc = 0;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] != 'n')
            continue;
        classes = realloc(classes, (nc + 1) * sizeof *classes);
        classes[nc++] = strdup(e->d_name);
    }
    closedir(d);
    for (size_t i = 0; i < nc; i++)
        for (size_t k = i + 1; k < nc; k++)
            if (strcmp(classes[k], classes[i]) < 0) {
                char *t = classes[i];
                classes[i] = classes[k];
                classes[k] = t;
            }
    for (size_t c = 0; c < nc; c++) {
        char cd[4400];
        snprintf(cd, sizeof cd, "%s/%s", out, classes[c]);
        DIR *dd = opendir(cd);
        T_CHECK(dd, "open %s", cd);
        while ((e = readdir(dd)) != NULL) {
            if (e->d_name[0] == '.')
                continue;
            char rel[300], full[4800];
            snprintf(rel, sizeof rel, "%s/%s", classes[c], e->d_name);
            snprintf(full, sizeof full, "%s/%s", out, rel);
            struct stat st;
            T_CHECK(stat(full, &st) == 0, "stat %s", full);
            fprintf(lf, "%s\t%zu\n", full, c);
            add_item(full, "good", (int32_t)c, (size_t)st.st_size);
        }
        closedir(dd);
    }
    FILE *m = fopen(mf, "r");
    T_CHECK(m, "open %s", mf);
    char line[1024];
    T_CHECK(fgets(line, sizeof line, m), "manifest header");
    while (fgets(line, sizeof line, m)) {
        char *path = strtok(line, "\t"), *kind = strtok(NULL, "\t");
        T_CHECK(path && kind, "manifest line");
        char cls[64];
        snprintf(cls, sizeof cls, "%.*s", (int)(strchr(path, '/') ? strchr(path, '/') - path : 0), path);
        size_t c = 0;
        while (c < nc && strcmp(classes[c], cls) != 0)
            c++;
        T_CHECK(c < nc, "class of %s", path);
        char full[4800];
        snprintf(full, sizeof full, "%s/%s", bad, path);
        struct stat st;
        T_CHECK(stat(full, &st) == 0, "stat %s", full);
        fprintf(lf, "%s\t%zu\n", full, c);
        add_item(full, kind, (int32_t)c, (size_t)st.st_size);
    }
    fclose(m);
    fclose(lf);
    for (size_t c = 0; c < nc; c++)
        free(classes[c]);
    free(classes);
}

static void read_report(const char *dst)
{
    char p[4600];
    snprintf(p, sizeof p, "%s/pack-report.tsv", dst);
    FILE *f = fopen(p, "r");
    if (!f)
        return; /* no report: nothing skipped */
    char line[8192];
    while (fgets(line, sizeof line, f)) {
        char *tab = strchr(line, '\t');
        if (!tab || line[0] == '#')
            continue;
        *tab = 0;
        item *it = find_item(line);
        T_CHECK(it, "pack-report names `%s`, which is not a source file", line);
        T_CHECK(strcmp(it->kind, "good") != 0, "pack skipped a good file: %s: %s", line, tab + 1);
        if (strncmp(tab + 1, "kept-damaged: ", 14) != 0) /* else a record, listed */
            it->skipped++;
    }
    fclose(f);
}

static item *item_of_record(const stk_dataset *ds, uint64_t index)
{
    char name[4600];
    T_OK(stk_dataset_record_name(ds, index, name, sizeof name));
    char *open = strchr(name, '(');
    T_CHECK(open && name[strlen(name) - 1] == ')', "record %llu has no source name: %s",
            (unsigned long long)index, name);
    name[strlen(name) - 1] = 0;
    item *it = find_item(open + 1);
    T_CHECK(it, "record %llu: source `%s` unknown", (unsigned long long)index, open + 1);
    return it;
}

int main(void)
{
    signal(SIGALRM, on_alarm);
    const char *src = getenv("STK_BADDATA_SRC");
    int bench = src && *src;
    alarm(bench ? 3600 : (getenv("STOKER_SANITIZE") && *getenv("STOKER_SANITIZE") ? 400 : 120));
    char *tmp = t_tmpdir("baddata");
    char root[4400], dst[4400], list[4400];
    snprintf(root, sizeof root, "%s/src", tmp);
    snprintf(dst, sizeof dst, "%s/ds", tmp);
    snprintf(list, sizeof list, "%s/list.tsv", tmp);
    if (bench)
        from_manifest(src, list);
    else
        generate(root);

    stk_pack_options po = {0};
    char perr[1024] = "";
    po.threads = 2;
    po.error = perr;
    po.error_cap = sizeof perr;
    stk_pack_result pr;
    stk_pack_ext_options pext = {.size = sizeof pext, .keep_damaged = 1};
    int rc = stk_pack_ext(bench ? list : root, dst, &po, &pext, &pr);
    T_CHECK(rc == STK_OK, "pack: %s", perr);
    read_report(dst);
    size_t nskipped = 0;
    for (size_t i = 0; i < g_n; i++)
        nskipped += g_items[i].skipped;
    T_CHECK(pr.skipped == nskipped && pr.records + pr.skipped == g_n, "pack: %llu records + %llu skipped, "
            "%zu files, %zu named in the report", (unsigned long long)pr.records, (unsigned long long)pr.skipped,
            g_n, nskipped);

    /* one epoch, eval: every row of the generated landscape images is decoded */
    stk_loader *h;
    T_OK(stk_loader_create(&h));
    T_OK(stk_loader_set(h, STK_P_MODE, STK_MODE_EVAL));
    T_OK(stk_loader_set(h, STK_P_RESIZE, bench ? 256 : 32));
    T_OK(stk_loader_set(h, STK_P_OUT_HEIGHT, bench ? 224 : 32));
    T_OK(stk_loader_set(h, STK_P_OUT_WIDTH, bench ? 224 : 32));
    T_OK(stk_loader_set(h, STK_P_BATCH_SIZE, 16));
    T_OK(stk_loader_set_double(h, STK_P_MAX_BAD_FRACTION, 1.0)); /* bad records are the subject */
    T_OK(stk_loader_set(h, STK_P_WORKERS, 2));
    T_OK(stk_loader_set(h, STK_P_SHUFFLE, 0));
    if (stk_loader_open(h, dst) != STK_OK)
        T_FAIL("open: %s", stk_loader_last_error(h));
    T_OK(stk_loader_start(h));
    const stk_dataset *ds = stk_loader_dataset(h);
    T_CHECK(stk_dataset_count(ds) == pr.records, "dataset holds %llu records, pack wrote %llu",
            (unsigned long long)stk_dataset_count(ds), (unsigned long long)pr.records);
    uint64_t nsub = 0, delivered = 0;
    const stk_batch *b;
    while ((rc = stk_loader_next(h, NULL, 60000, &b)) == STK_OK) {
        for (uint32_t i = 0; i < b->size; i++) {
            item *it = item_of_record(ds, b->indices[i]);
            it->loaded++;
            if (!b->substituted[i]) {
                T_CHECK(b->labels[i] == it->label, "%s: label %d, want %d", it->rel, b->labels[i], it->label);
                T_CHECK(b->payload_bytes[i] == it->bytes, "%s: %u bytes loaded, file has %zu", it->rel,
                        b->payload_bytes[i], it->bytes);
            }
            nsub += b->substituted[i];
        }
        delivered += b->size;
        T_OK(stk_loader_release(h, b, NULL));
    }
    T_CHECK(rc == STK_END, "epoch ended with %s: %s", stk_status_name(rc), stk_loader_last_error(h));
    T_CHECK(delivered == pr.records, "%llu samples delivered, %llu records", (unsigned long long)delivered,
            (unsigned long long)pr.records);
    /* the error list names each substituted record by its source path */
    uint64_t nerr = stk_loader_error_count(h);
    uint64_t mine = 0;
    for (uint64_t k = 0; k < nerr && k < 1024; k++) {
        stk_record_error re;
        T_OK(stk_loader_error_get(h, k, &re));
        if (re.epoch != 0)
            continue; /* the next epoch is being prefetched */
        mine++;
        item *it = item_of_record(ds, re.index);
        T_CHECK(strstr(re.where, strrchr(it->rel, '/') + 1), "error where `%s` lacks the file name", re.where);
        T_CHECK(strcmp(it->kind, "good") != 0, "a good file failed: %s: %s", re.where, re.reason);
        it->substituted++;
    }
    T_CHECK(mine == nsub, "%llu errors reported for epoch 0, %llu samples substituted", (unsigned long long)mine,
            (unsigned long long)nsub);
    stk_stats st;
    T_OK(stk_loader_stats(h, &st));

    /* decoded bad files: why (strict full decode of the stored bytes) */
    size_t cap = 64 << 20;
    uint8_t *buf = malloc(cap), *px = malloc((size_t)8192 * 8192 * 3);
    for (uint64_t r = 0; r < stk_dataset_count(ds); r++) {
        item *it = item_of_record(ds, r);
        if (strcmp(it->kind, "good") == 0 || it->substituted)
            continue;
        size_t len;
        T_OK(stk_dataset_read((stk_dataset *)ds, r, buf, cap, &len, NULL));
        stk_decode_args a = {.strict = 1};
        int w, hh, warn = 0;
        int drc = stk_decode(NULL, buf, len, &a, px, (size_t)8192 * 8192 * 3, &w, &hh, &warn);
        stk_decode_args lax = {0};
        int lrc = stk_decode(NULL, buf, len, &lax, px, (size_t)8192 * 8192 * 3, &w, &hh, &warn);
        if (drc == STK_OK)
            it->undetected = 1;
        else if (lrc == STK_OK && warn > 0)
            it->warned = 1;
        else
            it->window = 1;
    }
    free(buf);
    free(px);

    /* the accounting */
    static const char *kinds[] = {"good", "zero", "png", "text", "soi_only", "cut_header", "cut_scan",
                                  "cut_progressive", "flip_header", "flip_scan", "truncate", "flip_hdr", NULL};
    printf("kind              files  skipped@pack  substituted@load  decoded+warnings  decoded(window)  "
           "undetectable\n");
    size_t tot_bad = 0, tot_acc = 0, tot_warn_sub = 0;
    for (int k = 0; kinds[k]; k++) {
        size_t n = 0, s = 0, sub = 0, w = 0, win = 0, u = 0;
        for (size_t i = 0; i < g_n; i++) {
            item *it = &g_items[i];
            if (strcmp(it->kind, kinds[k]) != 0)
                continue;
            n++;
            s += it->skipped != 0;
            sub += it->substituted != 0;
            w += it->warned;
            win += it->window;
            u += it->undetected;
        }
        if (!n)
            continue;
        printf("%-16s %6zu %13zu %17zu %17zu %16zu %13zu\n", kinds[k], n, s, sub, w, win, u);
        if (k > 0) {
            tot_bad += n;
            tot_acc += s + sub;
            tot_warn_sub += w + win + u;
        }
    }
    for (size_t i = 0; i < g_n; i++) {
        item *it = &g_items[i];
        int good = strcmp(it->kind, "good") == 0;
        int known = 0;
        for (int k = 0; kinds[k]; k++)
            known |= strcmp(it->kind, kinds[k]) == 0;
        T_CHECK(known, "%s: kind %s not counted", it->rel, it->kind);
        T_CHECK(it->skipped + it->loaded == 1, "%s: skipped %d, loaded %d times", it->rel, it->skipped, it->loaded);
        if (good) {
            T_CHECK(!it->skipped && !it->substituted, "good file %s lost", it->rel);
            continue;
        }
        T_CHECK(it->skipped + it->substituted + it->warned + it->window + it->undetected == 1,
                "%s (%s) not accounted for", it->rel, it->kind);
        if (!bench) {
            /* generated set: the damage is always reached, only flipped scan bytes may decode */
            if (strcmp(it->kind, "flip_scan") != 0)
                T_CHECK(it->skipped || it->substituted, "%s (%s): decoded (warned %d, window %d, undetected %d)",
                        it->rel, it->kind, it->warned, it->window, it->undetected);
            if (!strcmp(it->kind, "zero") || !strcmp(it->kind, "png") || !strcmp(it->kind, "text") ||
                !strcmp(it->kind, "soi_only"))
                T_CHECK(it->skipped, "%s (%s): not skipped at pack", it->rel, it->kind);
        }
    }
    printf("bad files: %zu; skipped at pack or substituted at load, named: %zu; decoded (warnings %llu in "
           "stats): %zu; good files: %zu, all loaded\n", tot_bad, tot_acc, (unsigned long long)st.decode_warnings,
           tot_warn_sub, g_n - tot_bad);
    if (st.decode_warnings == 0)
        for (size_t i = 0; i < g_n; i++)
            T_CHECK(!g_items[i].warned, "%s decoded with warnings, but stats count none", g_items[i].rel);

    /* strict: the first bad record stops the epoch, named by its source */
    stk_loader_destroy(h);
    T_OK(stk_loader_create(&h));
    T_OK(stk_loader_set(h, STK_P_MODE, STK_MODE_EVAL));
    T_OK(stk_loader_set(h, STK_P_RESIZE, bench ? 256 : 32));
    T_OK(stk_loader_set(h, STK_P_OUT_HEIGHT, bench ? 224 : 32));
    T_OK(stk_loader_set(h, STK_P_OUT_WIDTH, bench ? 224 : 32));
    T_OK(stk_loader_set(h, STK_P_BATCH_SIZE, 16));
    T_OK(stk_loader_set_double(h, STK_P_MAX_BAD_FRACTION, 1.0)); /* bad records are the subject */
    T_OK(stk_loader_set(h, STK_P_SHUFFLE, 0));
    T_OK(stk_loader_set(h, STK_P_STRICT, 1));
    T_OK(stk_loader_open(h, dst));
    T_OK(stk_loader_start(h));
    while ((rc = stk_loader_next(h, NULL, 60000, &b)) == STK_OK)
        T_OK(stk_loader_release(h, b, NULL));
    T_CHECK(rc != STK_END && rc != STK_TIMEOUT, "strict: the epoch ended with %s", stk_status_name(rc));
    const char *le = stk_loader_last_error(h);
    T_CHECK(strstr(le, "strict") && (strstr(le, ".jpg") || strstr(le, ".JPEG")), "strict error `%s`", le);
    printf("strict: %s\n", le);
    stk_loader_destroy(h);
    free(g_items);
    t_rmtree(tmp);
    free(tmp);
    printf("test_baddata: ok\n");
    return 0;
}
