/* SPDX-License-Identifier: MIT */
/* test_pack.c — stk_pack on a generated ImageFolder: every record's bytes, label and CRC equal
 * the source file's, in torchvision's order, over several shards; bad sources skipped and
 * reported; --strict names the first bad file; DST with a dataset refused without force; SRC
 * unchanged; an interrupted pack (the process killed mid-way) finishes when run again and equals
 * an uninterrupted one; a stale marker of another plan restarts from scratch.
 * stk-test: concurrency (reader threads + in-order writer) */
#include "testutil.h"

#include "common.h"
#include "folder.h"
#include "format.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* A digest of SRC's tree (paths, sizes, mtimes, contents) to show it is never modified. */
static uint64_t tree_digest(const char *root)
{
    stk__filelist l;
    char err[STK__ERRLEN];
    T_OK(stk__folder_scan(root, &l, err));
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < l.n; i++) {
        struct stat st;
        if (lstat(l.paths[i], &st) != 0)
            continue;
        h = (h ^ (uint64_t)st.st_size) * 1099511628211ull;
        h = (h ^ (uint64_t)st.st_mtim.tv_nsec) * 1099511628211ull;
        h = (h ^ (uint64_t)st.st_mode) * 1099511628211ull;
        size_t len;
        uint8_t *d = t_read_file(l.paths[i], &len);
        if (d)
            h = (h ^ stk__crc32c(0, d, len)) * 1099511628211ull;
        free(d);
    }
    stk__filelist_free(&l);
    return h;
}

/* Check DST against the source listing, skipping the paths in SKIP. Returns the record count. */
static uint64_t check_dataset(const char *src, const char *dst, const char *const *skip, size_t nskip)
{
    stk__filelist l;
    char err[STK__ERRLEN];
    T_OK(stk__folder_scan(src, &l, err));
    stk_dataset *ds;
    T_OK(stk_dataset_create(&ds));
    int rc = stk_dataset_open(ds, dst);
    T_CHECK(rc == STK_OK, "open %s: %s", dst, stk_dataset_last_error(ds));
    stk_dataset_info info;
    T_OK(stk_dataset_info_get(ds, &info));
    T_CHECK(info.classes == l.nclasses, "classes %u vs %zu", info.classes, l.nclasses);
    for (uint32_t c = 0; c < info.classes; c++)
        T_CHECK(!strcmp(stk_dataset_class_name(ds, c), l.classes[c]), "class %u", c);
    uint64_t r = 0;
    uint8_t *buf = malloc(info.max_record_bytes + 1);
    for (size_t i = 0; i < l.n; i++) {
        int skipped = 0;
        for (size_t k = 0; k < nskip; k++)
            skipped |= strstr(l.paths[i], skip[k]) != NULL;
        if (skipped)
            continue;
        T_CHECK(r < info.records, "fewer records than sources");
        size_t len, slen;
        stk_record_info ri;
        T_OK(stk_dataset_read(ds, r, buf, info.max_record_bytes + 1, &len, &ri));
        uint8_t *s = t_read_file(l.paths[i], &slen);
        T_CHECK(s && len == slen && !memcmp(s, buf, len), "record %llu bytes == %s",
                (unsigned long long)r, l.paths[i]);
        T_CHECK(ri.label == l.labels[i], "record %llu label %d vs %d", (unsigned long long)r, ri.label,
                l.labels[i]);
        T_CHECK(ri.has_crc && ri.crc32c == stk__rec_crc(2, stk__crc32c(0, s, slen), l.labels[i], NULL, 0),
                "crc (format 2: payload and label)");
        char name[4400];
        T_OK(stk_dataset_record_name(ds, r, name, sizeof name));
        char exp[4400];
        snprintf(exp, sizeof exp, "(%s)", l.rel[i]);
        T_CHECK(strstr(name, exp) != NULL, "record name %s has %s", name, exp);
        free(s);
        r++;
    }
    T_CHECK(r == info.records, "records %llu vs %llu", (unsigned long long)r,
            (unsigned long long)info.records);
    free(buf);
    stk_dataset_destroy(ds);
    stk__filelist_free(&l);
    return r;
}

static char *slurp(const char *path)
{
    size_t len;
    uint8_t *d = t_read_file(path, &len);
    if (!d)
        return NULL;
    char *s = realloc(d, len + 1);
    s[len] = 0;
    return s;
}

int main(void)
{
    char *dir = t_tmpdir("pack");
    char src[4200], dst[4200], p[4400];
    snprintf(src, sizeof src, "%s/src", dir);
    snprintf(dst, sizeof dst, "%s/dst", dir);
    size_t nfiles = t_make_imagefolder(src, 6, 40, 16, 160, 7);
    T_CHECK(nfiles == 240, "generated %zu", nfiles);
    /* a nested directory and an empty class */
    snprintf(p, sizeof p, "%s/class_002/sub", src);
    t_mkdirs(p);
    size_t jl;
    uint8_t *j = t_make_jpeg(40, 30, 99, T_420, 90, 0, &jl);
    snprintf(p, sizeof p, "%s/class_002/sub/nested.JPEG", src);
    t_write_file(p, j, jl);
    snprintf(p, sizeof p, "%s/class_empty", src);
    t_mkdirs(p);
    /* bad sources */
    static const uint8_t png[] = {0x89, 'P', 'N', 'G', 13, 10, 26, 10, 0, 0, 0, 13, 'I', 'H', 'D', 'R'};
    snprintf(p, sizeof p, "%s/class_001/renamed_png.jpg", src);
    t_write_file(p, png, sizeof png);
    snprintf(p, sizeof p, "%s/class_003/empty.jpg", src);
    t_write_file(p, "", 0);
    snprintf(p, sizeof p, "%s/class_004/notes.jpeg", src);
    t_write_file(p, "hello", 5);
    snprintf(p, sizeof p, "%s/class_005/dangling.jpg", src);
    T_CHECK(symlink("/nonexistent/stoker-test", p) == 0, "symlink");
    snprintf(p, sizeof p, "%s/class_000/readme.txt", src); /* not an image extension: no record, listed */
    t_write_file(p, "x", 1);
    free(j);
    static const char *const bad[] = {"renamed_png.jpg", "empty.jpg", "notes.jpeg", "dangling.jpg"};
    uint64_t before = tree_digest(src);

    /* --strict: fails naming the first bad file in dataset order */
    stk_pack_options o;
    memset(&o, 0, sizeof o);
    char err[1024];
    o.error = err;
    o.error_cap = sizeof err;
    o.strict = 1;
    o.shard_bytes = 1 << 20;
    o.threads = 3;
    int rc = stk_pack(src, dst, &o, NULL);
    /* a PNG cut after its IHDR chunk name: a PNG (packed when whole), truncated here; a build
     * without libpng says so */
    int have_png = strstr(stk_version_string(), "png") != NULL;
    T_CHECK(rc == (have_png ? STK_E_TRUNCATED : STK_E_UNSUPPORTED), "strict rc %d (%s)", rc, err);
    T_CHECK(strstr(err, "class_001/renamed_png.jpg") && strstr(err, "PNG"), "strict names the file: %s", err);
    stk_dataset *ds;
    T_OK(stk_dataset_create(&ds));
    T_CHECK(stk_dataset_open(ds, dst) == STK_E_INCOMPLETE, "a failed pack leaves an incomplete DST");
    stk_dataset_destroy(ds);

    /* normal pack: bad files skipped and reported */
    o.strict = 0;
    stk_pack_result r;
    rc = stk_pack(src, dst, &o, &r);
    T_CHECK(rc == STK_OK, "pack: %s", err);
    T_CHECK(r.skipped == 4 && r.records == 241 && r.classes == 7 && r.shards >= 2, "result %llu %llu %llu %llu",
            (unsigned long long)r.records, (unsigned long long)r.skipped, (unsigned long long)r.classes,
            (unsigned long long)r.shards);
    T_CHECK(check_dataset(src, dst, bad, 4) == 241, "dataset");
    snprintf(p, sizeof p, "%s/%s", dst, STK__PACK_REPORT);
    char *rep = slurp(p);
    T_CHECK(rep, "report exists");
    int lines = 0;
    for (char *c = rep; *c; c++)
        lines += *c == '\n';
    T_CHECK(lines == 5, "report has 5 lines:\n%s", rep);
    T_CHECK(strstr(rep, "class_000/readme.txt\textension .txt is not one of torchvision ImageFolder's image "
                        "extensions (.jpg .jpeg .png .ppm .bmp .pgm .tif .tiff .webp)\n"),
            "report names the file left out for its extension:\n%s", rep);
    T_CHECK(strstr(rep, have_png ? "renamed_png.jpg\tPNG: truncated: file ends early\n"
                                 : "renamed_png.jpg\tPNG: this build has no PNG decoder (build with libpng-dev)\n") &&
                strstr(rep, "empty.jpg\tempty file\n") &&
                strstr(rep, "notes.jpeg\tnot an image stoker reads (text (starts with \"hello\"))\n") &&
                strstr(rep, "dangling.jpg\tunreadable: "),
            "report reasons:\n%s", rep);
    free(rep);
    snprintf(p, sizeof p, "%s/%s", dst, STK__INCOMPLETE_MARK);
    T_CHECK(access(p, F_OK) != 0, "no marker after a finished pack");
    T_CHECK(tree_digest(src) == before, "SRC unchanged");

    /* DST holds a dataset: refused, then replaced with force */
    rc = stk_pack(src, dst, &o, NULL);
    T_CHECK(rc == STK_E_EXISTS && strstr(err, dst), "refused: %d %s", rc, err);
    o.force = 1;
    o.shard_bytes = 2 << 20;
    T_OK(stk_pack(src, dst, &o, &r));
    o.force = 0;
    T_CHECK(check_dataset(src, dst, bad, 4) == 241, "dataset after --force");
    /* DST inside SRC is refused */
    snprintf(p, sizeof p, "%s/class_000/packed", src);
    T_CHECK(stk_pack(src, p, &o, NULL) == STK_E_INVALID && strstr(err, "inside SRC"), "DST inside SRC: %s", err);

    /* interrupted pack: a child is SIGKILLed once two shards are complete; the same call then
     * finishes the job. A second source with bigger images gives several 1 MiB shards. */
    char src2[4200], dst2[4200], ref[4200];
    snprintf(src2, sizeof src2, "%s/src2", dir);
    snprintf(dst2, sizeof dst2, "%s/dst2", dir);
    snprintf(ref, sizeof ref, "%s/ref", dir);
    t_make_imagefolder(src2, 3, 50, 200, 420, 11);
    snprintf(p, sizeof p, "%s/class_001/zz_bad.jpg", src2);
    t_write_file(p, "not a jpeg", 10);
    static const char *const bad2[] = {"zz_bad.jpg"};
    o.shard_bytes = 1 << 20;
    T_OK(stk_pack(src2, ref, &o, &r));
    T_CHECK(r.shards >= 4, "reference has %llu shards", (unsigned long long)r.shards);
    int killed = 0;
    for (int attempt = 0; attempt < 5 && !killed; attempt++) {
        t_rmtree(dst2);
        pid_t pid = fork();
        if (pid == 0) {
            stk_pack_options co = o;
            co.threads = 1;
            _exit(stk_pack(src2, dst2, &co, NULL) == STK_OK ? 0 : 1);
        }
        char s1[4400], s3[4400];
        snprintf(s1, sizeof s1, "%s/shard-00001.lmdb", dst2);
        snprintf(s3, sizeof s3, "%s/shard-00003.lmdb", dst2);
        int st;
        for (;;) {
            if (access(s1, F_OK) == 0) {
                kill(pid, SIGKILL);
                waitpid(pid, &st, 0);
                killed = access(s3, F_OK) != 0; /* it really stopped mid-way */
                break;
            }
            if (waitpid(pid, &st, WNOHANG) == pid)
                break; /* finished before we looked: try again */
            usleep(100);
        }
    }
    T_CHECK(killed, "could not interrupt the pack");
    T_OK(stk_dataset_create(&ds));
    T_CHECK(stk_dataset_open(ds, dst2) == STK_E_INCOMPLETE, "killed pack reads as incomplete");
    stk_dataset_destroy(ds);
    T_OK(stk_dataset_create(&ds));
    T_OK(stk_dataset_set(ds, STK_P_ALLOW_INCOMPLETE, 1));
    T_OK(stk_dataset_open(ds, dst2)); /* the complete shards are readable */
    T_CHECK(stk_dataset_count(ds) > 0, "complete shards have records");
    stk_dataset_destroy(ds);
    /* a kept shard damaged after the interruption is not trusted: packed again from there */
    {
        char s1[4400];
        snprintf(s1, sizeof s1, "%s/shard-00001.lmdb", dst2);
        struct stat st1;
        T_CHECK(stat(s1, &st1) == 0 && truncate(s1, st1.st_size / 2) == 0, "damage shard 1");
    }
    rc = stk_pack(src2, dst2, &o, &r);
    T_CHECK(rc == STK_OK, "resume: %s", err);
    T_CHECK(r.resumed_records > 0 && r.records == 150 && r.skipped == 1, "resumed %llu, total %llu, skipped %llu",
            (unsigned long long)r.resumed_records, (unsigned long long)r.records, (unsigned long long)r.skipped);
    T_CHECK(check_dataset(src2, dst2, bad2, 1) == 150, "resumed dataset");
    /* the resumed report is complete and equal to the uninterrupted one */
    snprintf(p, sizeof p, "%s/%s", dst2, STK__PACK_REPORT);
    char *r2 = slurp(p);
    snprintf(p, sizeof p, "%s/%s", ref, STK__PACK_REPORT);
    char *r1 = slurp(p);
    T_CHECK(r1 && r2 && !strcmp(r1, r2) && strstr(r1, "zz_bad.jpg"), "reports equal:\n%s\n--\n%s", r1, r2);
    free(r1);
    free(r2);
    /* the same records in the same shards and keys as the uninterrupted pack */
    stk_dataset *a, *b;
    T_OK(stk_dataset_create(&a));
    T_OK(stk_dataset_create(&b));
    T_OK(stk_dataset_open(a, ref));
    T_OK(stk_dataset_open(b, dst2));
    T_CHECK(stk_dataset_count(a) == stk_dataset_count(b), "counts");
    for (uint64_t i = 0; i < stk_dataset_count(a); i++) {
        stk_record_info x, y;
        T_OK(stk_dataset_record(a, i, &x));
        T_OK(stk_dataset_record(b, i, &y));
        T_CHECK(x.crc32c == y.crc32c && x.label == y.label && x.length == y.length && x.shard == y.shard &&
                    x.key == y.key, "record %llu equal", (unsigned long long)i);
    }
    stk_dataset_destroy(a);
    stk_dataset_destroy(b);

    /* a marker from another plan (SRC changed): started over, not mixed */
    snprintf(p, sizeof p, "%s/%s", dst2, STK__INCOMPLETE_MARK);
    t_write_file(p, "stoker-pack 1\nsource\t/elsewhere\ndigest\t0123\n", 45);
    rc = stk_pack(src2, dst2, &o, &r);
    T_CHECK(rc == STK_OK && r.resumed_records == 0 && r.records == 150, "restart: %d %s", rc, err);
    T_CHECK(check_dataset(src2, dst2, bad2, 1) == 150, "restarted dataset");

    /* list file source */
    char list[4200], dst3[4200];
    snprintf(list, sizeof list, "%s/list.txt", dir);
    snprintf(dst3, sizeof dst3, "%s/dst3", dir);
    FILE *f = fopen(list, "w");
    fprintf(f, "# comment\nsrc/class_003/img_00001.jpg\t7\n\n%s/class_000/img_00002.jpg\t0\r\nsrc/class_003/empty.jpg\t1\n",
            src);
    fclose(f);
    T_OK(stk_pack(list, dst3, &o, &r));
    T_CHECK(r.records == 2 && r.skipped == 1 && r.classes == 0, "list pack");
    T_OK(stk_dataset_create(&ds));
    T_OK(stk_dataset_open(ds, dst3));
    stk_record_info ri;
    T_OK(stk_dataset_record(ds, 0, &ri));
    T_CHECK(ri.label == 7, "list label");
    T_OK(stk_dataset_record(ds, 1, &ri));
    T_CHECK(ri.label == 0, "list label 2");
    stk_dataset_destroy(ds);
    /* a bad list line is set aside and named in the report (the rest is packed); --strict fails on it */
    f = fopen(list, "w");
    fprintf(f, "a.jpg\tseven\nsrc/class_003/img_00001.jpg\t7\n");
    fclose(f);
    o.force = 1;
    T_OK(stk_pack(list, dst3, &o, &r));
    T_CHECK(r.records == 1 && r.skipped == 0, "bad line set aside: %llu records", (unsigned long long)r.records);
    snprintf(p, sizeof p, "%s/pack-report.tsv", dst3);
    size_t rl = 0;
    char *rtext = (char *)t_read_file(p, &rl);
    T_CHECK(rtext && strstr(rtext, "list.txt line 1\tlabel `seven`"), "report names the line: %s", rtext ? rtext : "");
    free(rtext);
    o.strict = 1;
    rc = stk_pack(list, dst3, &o, NULL);
    T_CHECK(rc == STK_E_FORMAT && strstr(err, "list.txt line 1: label `seven`") && strstr(err, "--strict"),
            "bad list names the line: %s", err);
    o.strict = 0;
    o.force = 0;

    T_CHECK(tree_digest(src) == before, "SRC unchanged at the end");
    t_rmtree(dir);
    free(dir);
    printf("ok\n");
    return 0;
}
