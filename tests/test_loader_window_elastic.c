/* SPDX-License-Identifier: MIT */
/* test_loader_window_elastic: elastic resume inside a shard-window epoch (STK_P_SHUFFLE_WINDOW,
 * stk_loader_tell_segments / stk_loader_resume_segments) on a real dataset of shards, the ranks
 * simulated in one process: a run of world W saves mid-epoch, a run of world W' resumes it
 * (2 -> 3, 3 -> 1, 1 -> 2, and 2 -> 3 -> 1 saved again mid-way): over the runs every record of
 * the epoch is delivered exactly once with its label and payload; no two ranks of the resumed
 * run read one shard (each fetches only its own); the rest is the same with 1 and 3 workers; a
 * resume at the same world size through the segments continues each rank exactly; the epoch
 * after the resumed one is a whole epoch as a fresh run's; a resume before start is where the start
 * begins; the global order refuses the calls.
 *
 * stk-test: concurrency */
#include "test_loader_util.h"

#include "dataset.h"

#define NREC 150
#define RECBYTES (64 * 1024)
#define BS 5
#define WINDOW 2
#define EPOCH 1

static uint64_t g_first[64], g_count[64];
static uint32_t g_nshards;

static int shard_of(uint64_t idx)
{
    uint32_t s = 0;
    while (idx >= g_first[s] + g_count[s])
        s++;
    return (int)s;
}

static size_t rec_len(size_t i) { return RECBYTES - (i % 7) * 1000; }

static int g_prestart; /* resume_segments before start (else after) */

static stk_loader *open_loader_at(const char *path, int workers, uint32_t rank, uint32_t world,
                                  const uint64_t *segs, uint32_t nsegs);

static stk_loader *open_loader(const char *path, int workers, uint32_t rank, uint32_t world)
{
    return open_loader_at(path, workers, rank, world, NULL, 0);
}

/* With SEGS: resumed from them (before or after start, as g_prestart says). */
static stk_loader *open_loader_at(const char *path, int workers, uint32_t rank, uint32_t world,
                                  const uint64_t *segs, uint32_t nsegs)
{
    stk_loader *h;
    T_OK(stk_loader_create(&h));
    T_OK(stk_loader_set(h, STK_P_STAGE, STK_STAGE_READ));
    T_OK(stk_loader_set(h, STK_P_BATCH_SIZE, BS));
    T_OK(stk_loader_set(h, STK_P_WORKERS, workers));
    T_OK(stk_loader_set(h, STK_P_QUEUE_DEPTH, 8));
    T_OK(stk_loader_set(h, STK_P_SEED, 31));
    T_OK(stk_loader_set(h, STK_P_SHUFFLE_WINDOW, WINDOW));
    T_OK(stk_loader_set(h, STK_P_RANK, rank));
    T_OK(stk_loader_set(h, STK_P_WORLD_SIZE, world));
    T_OK(stk_loader_set(h, STK_P_DIST_MODE, STK_DIST_EXACT));
    T_OK(stk_loader_set(h, STK_P_EPOCH, EPOCH));
    T_OK(stk_loader_open(h, path));
    if (segs && g_prestart)
        T_OK(stk_loader_resume_segments(h, EPOCH, segs, nsegs));
    T_OK(stk_loader_start(h));
    if (segs && !g_prestart)
        T_OK(stk_loader_resume_segments(h, EPOCH, segs, nsegs));
    return h;
}

/* Every record delivered, with its label and payload; COUNT[i] += deliveries. */
static void tally(const tl_epoch *e, int *count)
{
    for (size_t i = 0; i < e->n; i++) {
        uint64_t x = e->index[i];
        T_CHECK(x < NREC, "index %llu", (unsigned long long)x);
        T_CHECK(e->label[i] == (int32_t)(x % 3) && e->payload[i] == rec_len(x),
                "record %llu: label %d payload %u", (unsigned long long)x, e->label[i],
                e->payload[i]);
        count[x]++;
    }
}

typedef struct history {
    uint64_t segs[3 * 17];
    uint32_t n;
} history;

/* A run of WORLD ranks resuming HIST (NULL: from the epoch's start); each rank takes BATCHES
 * batches (-1: to the epoch's end). Tallies the records; checks the ranks' shard sets are
 * disjoint; returns rank 0's segments in *OUT (when BATCHES >= 0). ORDER (optional): every
 * rank's records in order, concatenated. */
static void run_world(const char *path, const history *hist, uint32_t world, long batches,
                      int workers, int *count, history *out, uint64_t *order, size_t *norder)
{
    int reader[64];
    memset(reader, -1, sizeof reader);
    size_t no = 0;
    for (uint32_t r = 0; r < world; r++) {
        stk_loader *h = hist ? open_loader_at(path, workers, r, world, hist->segs, hist->n)
                             : open_loader(path, workers, r, world);
        tl_epoch e;
        int rc = tl_run(h, &e, batches);
        T_CHECK(rc == (batches < 0 ? STK_END : STK_OK), "rank %u of %u: %s: %s", r, world,
                stk_status_name(rc), stk_loader_last_error(h));
        T_CHECK(e.n == 0 || e.epoch == EPOCH, "epoch %llu", (unsigned long long)e.epoch);
        tally(&e, count);
        for (size_t i = 0; i < e.n; i++) {
            int s = shard_of(e.index[i]);
            T_CHECK(reader[s] < 0 || reader[s] == (int)r,
                    "shard %d read by ranks %d and %u of world %u (resumed: %d)", s, reader[s], r,
                    world, hist != NULL);
            reader[s] = (int)r;
            if (order)
                order[no++] = e.index[i];
        }
        if (batches >= 0) {
            history mine;
            uint64_t ep;
            T_OK(stk_loader_tell_segments(h, &ep, mine.segs, 17, &mine.n));
            T_CHECK(ep == EPOCH, "tell_segments epoch %llu", (unsigned long long)ep);
            uint32_t want = hist ? hist->n + 1 : 1;
            T_CHECK(mine.n == want, "%u segments, want %u", mine.n, want);
            const uint64_t *last = mine.segs + 3 * (mine.n - 1);
            T_CHECK(last[0] == world && last[1] == WINDOW && last[2] == e.n,
                    "last segment (%llu, %llu, %llu), want (%u, %d, %zu)",
                    (unsigned long long)last[0], (unsigned long long)last[1],
                    (unsigned long long)last[2], world, WINDOW, e.n);
            if (r == 0)
                *out = mine;
            else
                T_CHECK(memcmp(out->segs, mine.segs, 3 * mine.n * sizeof *mine.segs) == 0,
                        "rank %u saved other segments than rank 0", r);
        }
        tl_epoch_free(&e);
        stk_loader_destroy(h);
    }
    if (norder)
        *norder = no;
}

static void check_once(const int *count, const char *what)
{
    for (size_t i = 0; i < NREC; i++)
        T_CHECK(count[i] == 1, "%s: record %zu delivered %d times over the runs", what, i,
                count[i]);
}

/* W1 ranks take K1 batches, W2 ranks the rest: exactly once, disjoint shards. */
static void elastic(const char *path, uint32_t w1, long k1, uint32_t w2)
{
    int count[NREC] = {0};
    history h1;
    run_world(path, NULL, w1, k1, 2, count, &h1, NULL, NULL);
    run_world(path, &h1, w2, -1, 2, count, NULL, NULL, NULL);
    char what[64];
    snprintf(what, sizeof what, "%u -> %u after %ld batches", w1, w2, k1);
    check_once(count, what);
}

int main(void)
{
    char *dir = t_tmpdir("loader_window_elastic");
    char path[4200];
    snprintf(path, sizeof path, "%s/ds", dir);
    stk_writer *w;
    T_OK(stk_writer_create(&w));
    T_OK(stk_writer_set(w, STK_W_SHARD_BYTES, 1 << 20));
    T_OK(stk_writer_open(w, path));
    uint8_t *rec = malloc(RECBYTES);
    for (size_t i = 0; i < NREC; i++) {
        for (size_t b = 0; b < RECBYTES; b++)
            rec[b] = (uint8_t)(i * 31 + b * 7);
        T_OK(stk_writer_add(w, rec, rec_len(i), (int32_t)(i % 3), NULL));
    }
    T_OK(stk_writer_finish(w));
    stk_writer_destroy(w);
    free(rec);

    stk_dataset *ds;
    T_OK(stk_dataset_create(&ds));
    T_OK(stk_dataset_open(ds, path));
    stk_dataset_info info;
    T_OK(stk_dataset_info_get(ds, &info));
    g_nshards = info.shards;
    T_CHECK(g_nshards >= 8 && g_nshards < 64, "%u shards", g_nshards);
    for (uint32_t s = 0; s < g_nshards; s++) {
        g_first[s] = ds->shards[s].first;
        g_count[s] = ds->shards[s].count;
    }
    stk_dataset_destroy(ds);

    /* one save, another world size; save points inside a window and at the start */
    elastic(path, 2, 3, 3);
    g_prestart = 1; /* the next start begins at the resumed position */
    elastic(path, 3, 4, 1);
    g_prestart = 0;
    elastic(path, 1, 7, 2);
    elastic(path, 2, 0, 3);
    elastic(path, 3, 1, 2);

    /* 2 -> 3 -> 1: the resumed run saved again mid-way */
    {
        int count[NREC] = {0};
        history h1, h2;
        run_world(path, NULL, 2, 4, 2, count, &h1, NULL, NULL);
        run_world(path, &h1, 3, 2, 2, count, &h2, NULL, NULL);
        T_CHECK(h2.n == 2 && memcmp(h2.segs, h1.segs, 3 * sizeof *h1.segs) == 0,
                "the resumed run's history does not start with the first run's");
        run_world(path, &h2, 1, -1, 2, count, NULL, NULL, NULL);
        check_once(count, "2 -> 3 -> 1");
    }

    /* the rest does not depend on the worker count */
    {
        int c1[NREC] = {0}, c3[NREC] = {0};
        history h1;
        uint64_t o1[NREC], o3[NREC];
        size_t n1, n3;
        run_world(path, NULL, 2, 3, 1, c1, &h1, NULL, NULL);
        run_world(path, &h1, 3, -1, 1, c1, NULL, o1, &n1);
        run_world(path, &h1, 3, -1, 3, c3, NULL, o3, &n3);
        T_CHECK(n1 == n3 && memcmp(o1, o3, n1 * sizeof *o1) == 0,
                "the resumed rest differs between 1 and 3 workers");
    }

    /* same world size through the segments: each rank continues exactly */
    {
        for (uint32_t r = 0; r < 2; r++) {
            stk_loader *a = open_loader(path, 2, r, 2);
            tl_epoch whole;
            T_CHECK(tl_run(a, &whole, -1) == STK_END, "whole epoch");
            stk_loader_destroy(a);
            stk_loader *b = open_loader(path, 2, r, 2);
            tl_epoch part;
            T_OK(tl_run(b, &part, 3));
            history hs;
            uint64_t ep;
            T_OK(stk_loader_tell_segments(b, &ep, hs.segs, 17, &hs.n));
            stk_loader_destroy(b);
            stk_loader *c = open_loader(path, 3, r, 2);
            T_OK(stk_loader_resume_segments(c, EPOCH, hs.segs, hs.n));
            tl_epoch rest;
            T_CHECK(tl_run(c, &rest, -1) == STK_END, "rest");
            T_CHECK(part.n + rest.n == whole.n, "rank %u: %zu + %zu of %zu", r, part.n, rest.n,
                    whole.n);
            for (size_t i = 0; i < part.n; i++)
                T_CHECK(part.index[i] == whole.index[i], "rank %u position %zu", r, i);
            for (size_t i = 0; i < rest.n; i++)
                T_CHECK(rest.index[i] == whole.index[part.n + i],
                        "rank %u: same-world resume differs at position %zu", r, part.n + i);
            /* the next epoch is whole again: as a fresh loader's */
            tl_epoch next;
            T_CHECK(tl_run(c, &next, -1) == STK_END, "next epoch");
            stk_loader *f = open_loader(path, 2, r, 2);
            T_OK(stk_loader_set_epoch(f, EPOCH + 1));
            tl_epoch fresh;
            T_CHECK(tl_run(f, &fresh, -1) == STK_END, "fresh");
            T_CHECK(next.epoch == EPOCH + 1 && next.n == fresh.n &&
                        memcmp(next.index, fresh.index, next.n * sizeof *next.index) == 0,
                    "rank %u: the epoch after the resumed one differs from a fresh run's", r);
            tl_epoch_free(&whole);
            tl_epoch_free(&part);
            tl_epoch_free(&rest);
            tl_epoch_free(&next);
            tl_epoch_free(&fresh);
            stk_loader_destroy(c);
            stk_loader_destroy(f);
        }
    }

    /* after an elastic resume, the next epoch is a whole epoch of the new world */
    {
        int count[NREC] = {0};
        history h1;
        run_world(path, NULL, 2, 3, 2, count, &h1, NULL, NULL);
        stk_loader *c = open_loader(path, 2, 1, 3);
        T_OK(stk_loader_resume_segments(c, EPOCH, h1.segs, h1.n));
        tl_epoch rest, next, fresh;
        T_CHECK(tl_run(c, &rest, -1) == STK_END, "rest");
        T_CHECK(tl_run(c, &next, -1) == STK_END, "next");
        stk_loader *f = open_loader(path, 2, 1, 3);
        T_OK(stk_loader_set_epoch(f, EPOCH + 1));
        T_CHECK(tl_run(f, &fresh, -1) == STK_END, "fresh");
        T_CHECK(next.n == fresh.n && memcmp(next.index, fresh.index, next.n * 8) == 0,
                "the epoch after an elastic resume is not a whole epoch");
        /* a plain seek back into the resumed epoch forgets the history: the whole epoch */
        T_OK(stk_loader_seek(c, EPOCH, 0));
        tl_epoch again;
        T_CHECK(tl_run(c, &again, -1) == STK_END, "again");
        stk_loader *g = open_loader(path, 2, 1, 3);
        tl_epoch whole;
        T_CHECK(tl_run(g, &whole, -1) == STK_END, "whole");
        T_CHECK(again.n == whole.n && memcmp(again.index, whole.index, again.n * 8) == 0,
                "a seek after a resume kept the resumed rest");
        tl_epoch_free(&rest);
        tl_epoch_free(&next);
        tl_epoch_free(&fresh);
        tl_epoch_free(&again);
        tl_epoch_free(&whole);
        stk_loader_destroy(c);
        stk_loader_destroy(f);
        stk_loader_destroy(g);
    }

    /* refused: the global order; a history taking past every share; a bad world size; the old
     * call across world sizes names the new one */
    {
        stk_loader *h;
        T_OK(stk_loader_create(&h));
        T_OK(stk_loader_set(h, STK_P_STAGE, STK_STAGE_READ));
        T_OK(stk_loader_open(h, path));
        T_OK(stk_loader_start(h));
        uint64_t segs[3] = {2, WINDOW, 1};
        uint32_t n;
        T_CHECK(stk_loader_tell_segments(h, NULL, segs, 1, &n) == STK_E_INVALID, "global tell");
        T_CHECK(stk_loader_resume_segments(h, 0, segs, 1) == STK_E_INVALID &&
                    strstr(stk_loader_last_error(h), "shard-window"),
                "global resume: %s", stk_loader_last_error(h));
        stk_loader_destroy(h);
        h = open_loader(path, 1, 0, 3);
        uint64_t big[3] = {2, WINDOW, NREC};
        int rc = stk_loader_resume_segments(h, EPOCH, big, 1);
        T_CHECK(rc == STK_E_RANGE && strstr(stk_loader_last_error(h), "segment 0"),
                "k past the shares: %s: %s", stk_status_name(rc), stk_loader_last_error(h));
        uint64_t bad[3] = {0, WINDOW, 1};
        T_CHECK(stk_loader_resume_segments(h, EPOCH, bad, 1) == STK_E_INVALID, "world 0");
        rc = stk_loader_resume(h, EPOCH, 4, 0);
        T_CHECK(rc == STK_E_RANGE && strstr(stk_loader_last_error(h), "resume_segments"),
                "old call: %s", stk_loader_last_error(h));
        /* 16 segments to split the rest of at most (a 17th of this world size continues) */
        uint64_t many[3 * 18];
        for (int i = 0; i < 18; i++) {
            many[3 * i] = 2;
            many[3 * i + 1] = WINDOW;
            many[3 * i + 2] = 0;
        }
        T_CHECK(stk_loader_resume_segments(h, EPOCH, many, 18) == STK_E_RANGE, "18 segments");
        T_CHECK(stk_loader_resume_segments(h, EPOCH, many, 17) == STK_E_RANGE, "17 to split");
        many[3 * 16] = 3;
        T_OK(stk_loader_resume_segments(h, EPOCH, many, 17));
        uint64_t back[3 * 17];
        T_OK(stk_loader_tell_segments(h, NULL, back, 17, &n));
        T_CHECK(n == 17 && back[3 * 16] == 3, "17 segments told back: %u", n);
        uint64_t small[3];
        T_CHECK(stk_loader_tell_segments(h, NULL, small, 1, &n) == STK_E_RANGE && n == 17,
                "no room: %u", n);
        stk_loader_destroy(h);
    }
    t_rmtree(dir);
    free(dir);
    printf("test_loader_window_elastic: ok (%u shards)\n", g_nshards);
    return 0;
}
