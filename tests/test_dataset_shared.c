/* SPDX-License-Identifier: MIT */
/* test_dataset_shared.c — many datasets on the same shards in one process (LMDB's rule: one
 * MDB_env per file per process; src/dataset/envreg.c shares it through a registry, see its
 * top comment).
 *
 *   - two datasets on the same shards share each shard's MDB_env (white box: same pointer; black
 *     box: the second open adds only the dataset's own two descriptors per shard, not LMDB's);
 *     a shard opened as a single file shares the env of the same shard opened in its directory;
 *   - a failed open (error after the env was taken) gives its reference back: descriptors return
 *     to the baseline once the other holder closes;
 *   - fork(): the child opens its own env (not the parent's, inherited in its memory), reads
 *     correct records, and the parent's dataset still reads after the child exits;
 *   - 4 threads open, read and close datasets on the same shards at once (a barrier lines up
 *     the opens), each keeping up to 3 open and closing them in random order; every dataset
 *     reads correct bytes and labels while others open and close, and thread 0's last datasets
 *     are read in full after every other thread has closed all of its own.
 *
 * Before the registry, the thread part crashed or failed within seconds: every mdb_env_open of a
 * shard already open in the process re-initialised the lock file's reader table and its robust
 * mutexes under the other environments (LMDB's fcntl lock never conflicts within a process).
 * STK_SHARED_ITERS=N sets the iterations per thread.
 *
 * stk-test: concurrency
 */
#include "testutil.h"

#include "dataset.h"

#include <pthread.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define N 240
#define NT 4
#define KEEP 3

static char *g_root;
static char g_dir[4200], g_shard0[4300];
static uint32_t g_nshards;
static pthread_barrier_t g_bar;
static unsigned g_iters;

/* Record I of the whole dataset (FIRST = 0) or of shard 0 read alone: bytes, label, name. */
static int check_record(stk_dataset *ds, uint64_t i, uint8_t *buf, char *why, size_t cap)
{
    size_t want, len;
    uint8_t *p = t_payload(i, &want);
    stk_record_info info;
    int rc = stk_dataset_read(ds, i, buf, 32768, &len, &info);
    int ok = rc == STK_OK && len == want && !memcmp(buf, p, len) && info.label == (int32_t)(i % 5);
    free(p);
    if (!ok) {
        snprintf(why, cap, "record %llu: rc %d (%s), %zu bytes (want %zu), label %d", (unsigned long long)i, rc,
                 rc ? stk_dataset_last_error(ds) : "", len, want, info.label);
        return 0;
    }
    char name[512], exp[64];
    snprintf(exp, sizeof exp, "(class_%d/img_%03d.jpg)", (int)(i % 5), (int)i);
    if (stk_dataset_record_name(ds, i, name, sizeof name) != STK_OK || !strstr(name, exp)) {
        snprintf(why, cap, "record %llu: name `%.300s`, want %s", (unsigned long long)i, name, exp);
        return 0;
    }
    return 1;
}

static stk_dataset *open_ds(const char *path)
{
    stk_dataset *ds;
    T_OK(stk_dataset_create(&ds));
    int rc = stk_dataset_open(ds, path);
    T_CHECK(rc == STK_OK, "open %s: %s", path, stk_dataset_last_error(ds));
    return ds;
}

static void check_all(stk_dataset *ds, const char *what)
{
    uint8_t *buf = malloc(32768);
    char why[600];
    uint64_t n = stk_dataset_count(ds);
    for (uint64_t i = 0; i < n; i++)
        T_CHECK(check_record(ds, i, buf, why, sizeof why), "%s: %s", what, why);
    free(buf);
}

static void make_data(void)
{
    g_root = t_tmpdir("dsshared");
    snprintf(g_dir, sizeof g_dir, "%s/ds", g_root);
    stk_writer *w;
    T_OK(stk_writer_create(&w));
    T_OK(stk_writer_set(w, STK_W_SHARD_BYTES, 1 << 20));
    T_OK(stk_writer_open(w, g_dir));
    for (uint64_t i = 0; i < N; i++) {
        size_t len;
        uint8_t *p = t_payload(i, &len);
        char src[64];
        snprintf(src, sizeof src, "class_%d/img_%03d.jpg", (int)(i % 5), (int)i);
        T_OK(stk_writer_add(w, p, len, (int32_t)(i % 5), src));
        free(p);
    }
    T_OK(stk_writer_finish(w));
    stk_writer_destroy(w);
    snprintf(g_shard0, sizeof g_shard0, "%s/shard-00000.lmdb", g_dir);
    stk_dataset *ds = open_ds(g_dir);
    stk_dataset_info info;
    T_OK(stk_dataset_info_get(ds, &info));
    T_CHECK(info.records == N && info.shards >= 3, "%llu records in %u shards", (unsigned long long)info.records,
            info.shards);
    g_nshards = info.shards;
    stk_dataset_destroy(ds);
}

/* Sharing: pointers and descriptors. */
static void test_share(void)
{
    int fd0 = t_count_fds();
    stk_dataset *a = open_ds(g_dir);
    int fd1 = t_count_fds();
    stk_dataset *b = open_ds(g_dir);
    int fd2 = t_count_fds();
    for (uint32_t s = 0; s < g_nshards; s++)
        T_CHECK(a->shards[s].env && a->shards[s].env == b->shards[s].env, "shard %u: two environments", s);
    T_CHECK(a->shards[0].txn != b->shards[0].txn, "each dataset keeps its own read transaction");
    /* each dataset has its own fd and fd_direct per shard; LMDB's data and lock descriptors once */
    int own = fd2 - fd1;
    T_CHECK(own <= 2 * (int)g_nshards, "second open of the same shards: %d descriptors (%d for the first)", own,
            fd1 - fd0);
    T_CHECK(fd1 - fd0 > own, "first open: %d descriptors, second %d", fd1 - fd0, own);
    stk_dataset *one = open_ds(g_shard0); /* the same shard as a single file: same file, same flags */
    T_CHECK(one->shards[0].env == a->shards[0].env, "single-file open of shard 0 has its own environment");
    stk_dataset_destroy(a); /* the others go on reading after the first closes */
    check_all(b, "b after a closed");
    check_all(one, "shard 0 alone after a closed");
    stk_dataset_destroy(b);
    check_all(one, "shard 0 alone after b closed");
    stk_dataset_destroy(one);
    T_CHECK(t_count_fds() == fd0, "all closed: %d descriptors, %d before", t_count_fds(), fd0);
    fprintf(stderr, "  share: first open %d descriptors, second %d, %u shards\n", fd1 - fd0, own, g_nshards);
}

/* A failed open after the env was taken gives its reference back. */
static void test_failed_open(void)
{
    int fd0 = t_count_fds();
    stk_dataset *hold = open_ds(g_shard0);
    for (int k = 0; k < 3; k++) {
        stk_dataset *ds;
        T_OK(stk_dataset_create(&ds));
        T_OK(stk_dataset_set(ds, STK_P_LAYOUT, STK_LAYOUT_LMDB)); /* a stoker shard: refused after the walk */
        int rc = stk_dataset_open(ds, g_shard0);
        T_CHECK(rc == STK_E_INVALID, "stoker shard as foreign LMDB: %d %s", rc, stk_dataset_last_error(ds));
        stk_dataset_destroy(ds);
    }
    check_all(hold, "holder after failed opens");
    stk_dataset_destroy(hold);
    T_CHECK(t_count_fds() == fd0, "failed opens: %d descriptors after, %d before (a reference kept?)", t_count_fds(),
            fd0);
    stk_dataset *ds;
    T_OK(stk_dataset_create(&ds));
    T_OK(stk_dataset_set(ds, STK_P_LAYOUT, STK_LAYOUT_LMDB));
    T_CHECK(stk_dataset_open(ds, g_shard0) == STK_E_INVALID, "refused again");
    stk_dataset_destroy(ds);
    T_CHECK(t_count_fds() == fd0, "failed open alone: %d descriptors after, %d before", t_count_fds(), fd0);
}

/* fork: the child must not use the parent's env. */
static void test_fork(void)
{
    stk_dataset *parent = open_ds(g_dir);
    fflush(NULL);
    pid_t pid = fork();
    T_CHECK(pid >= 0, "fork");
    if (pid == 0) {
        stk_dataset *ds;
        int code = 0;
        if (stk_dataset_create(&ds) != STK_OK || stk_dataset_open(ds, g_dir) != STK_OK) {
            fprintf(stderr, "FAIL child open: %s\n", stk_dataset_last_error(ds));
            _exit(1);
        }
        for (uint32_t s = 0; s < g_nshards; s++)
            if (ds->shards[s].env == parent->shards[s].env) {
                fprintf(stderr, "FAIL child reuses the parent's environment of shard %u\n", s);
                code = 1;
            }
        uint8_t *buf = malloc(32768);
        char why[600];
        for (uint64_t i = 0; i < N && !code; i++)
            if (!check_record(ds, i, buf, why, sizeof why)) {
                fprintf(stderr, "FAIL child: %s\n", why);
                code = 1;
            }
        free(buf);
        stk_dataset_destroy(ds);
        _exit(code);
    }
    int st;
    T_CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0, "child failed (status %d)", st);
    check_all(parent, "parent after the child");
    stk_dataset_destroy(parent);
}

typedef struct thr {
    int id;
    uint64_t rng;
    unsigned opens, reads;
    stk_dataset *last[KEEP]; /* thread 0: kept past the end, read after the others closed */
} thr;

static void *thread_main(void *arg)
{
    thr *t = arg;
    stk_dataset *held[KEEP] = {0};
    uint8_t *buf = malloc(32768);
    char why[600];
    for (unsigned it = 0; it < g_iters; it++) {
        pthread_barrier_wait(&g_bar); /* all threads open at the same moment */
        unsigned delay = (unsigned)(t_xorshift(&t->rng) % 4);
        if (delay)
            usleep(delay * 50);
        int slot = (int)(t_xorshift(&t->rng) % KEEP);
        if (held[slot]) { /* close one of those held, at random */
            stk_dataset_destroy(held[slot]);
            held[slot] = NULL;
        }
        int single = t_xorshift(&t->rng) % 4 == 0;
        held[slot] = open_ds(single ? g_shard0 : g_dir);
        t->opens++;
        for (int s = 0; s < KEEP; s++) { /* read from every dataset held, new and old */
            if (!held[s])
                continue;
            uint64_t n = stk_dataset_count(held[s]);
            for (int k = 0; k < 4; k++) {
                uint64_t i = t_xorshift(&t->rng) % n;
                T_CHECK(check_record(held[s], i, buf, why, sizeof why), "thread %d iteration %u: %s", t->id, it,
                        why);
                t->reads++;
            }
        }
    }
    pthread_barrier_wait(&g_bar);
    if (t->id == 0) {
        memcpy(t->last, held, sizeof held);
    } else {
        for (int s = 0; s < KEEP; s++)
            stk_dataset_destroy(held[s]);
    }
    free(buf);
    return NULL;
}

static void test_threads(void)
{
    int fd0 = t_count_fds();
    thr t[NT];
    pthread_t tid[NT];
    T_CHECK(pthread_barrier_init(&g_bar, NULL, NT) == 0, "barrier");
    for (int i = 0; i < NT; i++) {
        t[i] = (thr){.id = i, .rng = 0x9e3779b97f4a7c15ull * (uint64_t)(i + 1)};
        T_CHECK(pthread_create(&tid[i], NULL, thread_main, &t[i]) == 0, "pthread_create");
    }
    unsigned opens = 0, reads = 0;
    for (int i = 0; i < NT; i++) {
        pthread_join(tid[i], NULL);
        opens += t[i].opens;
        reads += t[i].reads;
    }
    pthread_barrier_destroy(&g_bar);
    for (int s = 0; s < KEEP; s++) { /* the others have all closed theirs */
        if (!t[0].last[s])
            continue;
        check_all(t[0].last[s], "thread 0's dataset after every other closed");
        stk_dataset_destroy(t[0].last[s]);
    }
    T_CHECK(t_count_fds() == fd0, "threads: %d descriptors after, %d before", t_count_fds(), fd0);
    fprintf(stderr, "  %d threads x %u iterations: %u opens, %u record reads, all correct\n", NT, g_iters, opens,
            reads);
}

int main(void)
{
    const char *it = getenv("STK_SHARED_ITERS");
    const char *san = getenv("STOKER_SANITIZE");
    g_iters = it && *it ? (unsigned)atoi(it) : san && *san ? 60 : 300;
    make_data();
    test_share();
    test_failed_open();
    test_fork();
    test_threads();
    t_rmtree(g_root);
    free(g_root);
    printf("test_dataset_shared: ok\n");
    return 0;
}
