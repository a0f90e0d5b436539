/* SPDX-License-Identifier: MIT */
/*
 * test_verdict.c — the one bottleneck classifier (stk_stats_verdict): each bottleneck on stats
 * built to sit just either side of its threshold (fetch too, since 0.5), the figures it reports, the extensible size
 * field, the names; then a real loader (STK_STAGE_READ on generated JPEGs): stk_loader_verdict
 * before start and after an epoch, and the report's verdict line naming the same bottleneck.
 */
#include "common.h"
#include "test_loader_util.h"

#include <math.h>

/* Stats of a 10 s run, 4 decode workers, 2 reader threads, a stager, that delivered batches. */
static stk_stats base(void)
{
    stk_stats s;
    memset(&s, 0, sizeof s);
    s.wall_s = 10.0;
    s.batches = 100;
    s.samples = 100 * 32;
    s.decode.threads = 4;
    s.read.threads = 2;
    s.wait_s = 5.0;
    s.decode.busy_s = 30.0; /* 75% */
    s.decode.starved_s = 8.0;
    s.read.busy_s = 4.0;
    s.read.blocked_s = 12.0;
    s.cpu_user_s = 30.0; /* 3 cores */
    s.cpu_sys_s = 1.0;
    return s;
}

static stk_verdict run(const stk_stats *s, int stage)
{
    stk_verdict v;
    memset(&v, 0xab, sizeof v);
    v.size = sizeof v;
    T_OK(stk_stats_verdict(s, stage, &v));
    T_CHECK(v.size == sizeof v, "size out %u", v.size);
    return v;
}

static void expect(const stk_stats *s, int stage, int want, const char *what)
{
    stk_verdict v = run(s, stage);
    T_CHECK(v.bottleneck == want, "%s: %s, want %s", what, stk_bottleneck_name(v.bottleneck),
            stk_bottleneck_name(want));
}

static void test_classes(void)
{
    stk_stats s = base();
    stk_verdict v = run(&s, STK_STAGE_FULL);
    T_CHECK(v.bottleneck == STK_BOTTLENECK_DECODE && !(v.flags & STK_VERDICT_CPU_STARVED), "decode");
    T_CHECK(v.decode_threads == 4 && fabs(v.decode_busy - 0.75) < 1e-12 && fabs(v.decode_starved - 0.2) < 1e-12,
            "decode shares %g %g", v.decode_busy, v.decode_starved);
    T_CHECK(fabs(v.wait_share - 0.5) < 1e-12 && fabs(v.read_busy - 0.2) < 1e-12 && fabs(v.read_blocked - 0.6) < 1e-12,
            "wait %g, read %g/%g", v.wait_share, v.read_busy, v.read_blocked);
    T_CHECK(fabs(v.cores - 3.1) < 1e-12 && v.cpus_online == (uint32_t)stk__online_cpus(), "cores %g", v.cores);
    /* the consumer: wait share under 5% */
    s.wait_s = 0.49;
    expect(&s, STK_STAGE_FULL, STK_BOTTLENECK_CONSUMER, "wait 4.9%");
    s.wait_s = 0.5;
    expect(&s, STK_STAGE_FULL, STK_BOTTLENECK_DECODE, "wait 5%");
    /* storage: decode starved more than busy, or the read stage alone */
    s.decode.starved_s = 30.5;
    expect(&s, STK_STAGE_FULL, STK_BOTTLENECK_READ, "starved > busy");
    s.decode.starved_s = 30.0;
    expect(&s, STK_STAGE_FULL, STK_BOTTLENECK_DECODE, "starved = busy");
    expect(&s, STK_STAGE_READ, STK_BOTTLENECK_READ, "STK_STAGE_READ");
    /* the stager: busy > 70% and more than decode */
    s = base();
    s.stager.threads = 1;
    s.stager.busy_s = 7.6;
    s.h2d_bytes = 4000000000ull;
    s.h2d_s = 2.0;
    v = run(&s, STK_STAGE_FULL);
    T_CHECK(v.bottleneck == STK_BOTTLENECK_STAGE && fabs(v.h2d_gbps - 2.0) < 1e-12, "stager 76%%: %s %g",
            stk_bottleneck_name(v.bottleneck), v.h2d_gbps);
    s.stager.busy_s = 7.4; /* under decode's 75% */
    expect(&s, STK_STAGE_FULL, STK_BOTTLENECK_DECODE, "stager below decode");
    s.decode.busy_s = 20.0;
    s.stager.busy_s = 7.0; /* 70%: not above */
    expect(&s, STK_STAGE_FULL, STK_BOTTLENECK_DECODE, "stager 70%");
    /* CPU-starved: cores < 0.7 x busy x workers (0.75 x 4 = 3 -> 2.1 cores) */
    s = base();
    s.cpu_user_s = 20.0;
    s.cpu_sys_s = 0.0;
    v = run(&s, STK_STAGE_FULL);
    T_CHECK(v.bottleneck == STK_BOTTLENECK_DECODE && (v.flags & STK_VERDICT_CPU_STARVED), "2 cores: starved");
    s.cpu_user_s = 22.0;
    v = run(&s, STK_STAGE_FULL);
    T_CHECK(!(v.flags & STK_VERDICT_CPU_STARVED), "2.2 cores: not starved");
    /* fetch (since 0.5): the loader waited for the fetch >= 25% of wall + that wait; tried first,
     * even when the consumer kept up after it (a download at open, before start) */
    s = base();
    s.wait_s = 0.1;
    s.fetch_starved_s = 3.34; /* 3.34 / 13.34 = 25.04% */
    s.fetch_bytes = 1000000;
    s.fetch_busy_s = 3.0;
    expect(&s, STK_STAGE_FULL, STK_BOTTLENECK_FETCH, "fetch wait 25.04%");
    expect(&s, STK_STAGE_READ, STK_BOTTLENECK_FETCH, "fetch wait 25.04%, STK_STAGE_READ");
    s.fetch_starved_s = 3.3; /* 24.8% */
    expect(&s, STK_STAGE_FULL, STK_BOTTLENECK_CONSUMER, "fetch wait 24.8%");
    s.wait_s = 5.0;
    expect(&s, STK_STAGE_FULL, STK_BOTTLENECK_DECODE, "fetch wait 24.8%, decode busy");
    /* nothing delivered */
    s.batches = 0;
    expect(&s, STK_STAGE_FULL, STK_BOTTLENECK_NONE, "no batches");
    memset(&s, 0, sizeof s);
    expect(&s, STK_STAGE_FULL, STK_BOTTLENECK_NONE, "all zero");
}

static void test_api(void)
{
    stk_stats s = base();
    stk_verdict v;
    memset(&v, 0, sizeof v);
    v.size = sizeof v - 1;
    T_CHECK(stk_stats_verdict(&s, STK_STAGE_FULL, &v) == STK_E_INVALID, "short size refused");
    v.size = sizeof v;
    T_CHECK(stk_stats_verdict(NULL, STK_STAGE_FULL, &v) == STK_E_INVALID, "NULL stats");
    T_CHECK(stk_stats_verdict(&s, STK_STAGE_FULL, NULL) == STK_E_INVALID, "NULL verdict");
    T_CHECK(stk_loader_verdict(NULL, &v) == STK_E_INVALID, "NULL loader");
    /* a caller that knows a bigger struct (a later release's): the library fills what it knows */
    struct {
        stk_verdict v;
        char later[64];
    } big;
    memset(&big, 0x5a, sizeof big);
    big.v.size = sizeof big;
    T_OK(stk_stats_verdict(&s, STK_STAGE_FULL, &big.v));
    T_CHECK(big.v.size == sizeof(stk_verdict) && big.later[0] == 0x5a && big.later[63] == 0x5a,
            "bigger struct: size %u, tail untouched", big.v.size);
    const char *names[] = {"none", "consumer", "read", "decode", "stage", "fetch"};
    for (int i = 0; i < 6; i++)
        T_CHECK(strcmp(stk_bottleneck_name(i), names[i]) == 0, "name %d", i);
    T_CHECK(strcmp(stk_bottleneck_name(6), "unknown") == 0 && strcmp(stk_bottleneck_name(-1), "unknown") == 0,
            "unknown names");
}

static void test_loader(void)
{
    tl_data d;
    tl_data_make(&d, "verdict", 40);
    tl_write(&d);
    stk_loader *h = tl_loader(d.path, 8, 1);
    T_OK(stk_loader_set(h, STK_P_STAGE, STK_STAGE_READ));
    stk_verdict v = {.size = sizeof v};
    T_OK(stk_loader_verdict(h, &v));
    T_CHECK(v.bottleneck == STK_BOTTLENECK_NONE, "before start: %s", stk_bottleneck_name(v.bottleneck));
    T_OK(stk_loader_start(h));
    tl_epoch e;
    T_CHECK(tl_run(h, &e, -1) == STK_END, "epoch");
    T_CHECK(e.n == d.n, "%zu samples", e.n);
    tl_epoch_free(&e);
    /* the consumer asked for batches back to back: it waited, and the read stage alone runs */
    T_OK(stk_loader_verdict(h, &v));
    char rep[8192];
    stk_loader_report(h, rep, sizeof rep);
    T_CHECK(v.bottleneck == STK_BOTTLENECK_READ || v.bottleneck == STK_BOTTLENECK_CONSUMER,
            "read stage: %s", stk_bottleneck_name(v.bottleneck));
    const char *line = v.bottleneck == STK_BOTTLENECK_READ ? "verdict: storage-bound" : "verdict: the loader keeps up";
    T_CHECK(strstr(rep, line) != NULL, "report says \"%s\":\n%s", line, rep);
    stk_loader_destroy(h);
    tl_data_free(&d);
}

int main(void)
{
    test_classes();
    test_api();
    test_loader();
    printf("test_verdict: ok\n");
    return 0;
}
