/* SPDX-License-Identifier: MIT */
/* testutil.c — see testutil.h. */
#include "testutil.h"

#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <turbojpeg.h>
#include <unistd.h>

char *t_tmpdir(const char *tag)
{
    const char *base = getenv("TMPDIR");
    if (!base || !*base)
        base = "/tmp";
    char tmpl[4096];
    snprintf(tmpl, sizeof tmpl, "%s/stk-%s-XXXXXX", base, tag ? tag : "t");
    if (!mkdtemp(tmpl))
        T_FAIL("mkdtemp %s: %s", tmpl, strerror(errno));
    return strdup(tmpl);
}

void t_rmtree(const char *path)
{
    if (!path || !*path || strcmp(path, "/") == 0)
        return;
    t_system("rm -rf -- '%s'", path);
}

void t_mkdirs(const char *path)
{
    t_system("mkdir -p -- '%s'", path);
}

void t_write_file(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        T_FAIL("open %s: %s", path, strerror(errno));
    if (len && fwrite(data, 1, len, f) != len)
        T_FAIL("write %s", path);
    if (fclose(f) != 0)
        T_FAIL("close %s", path);
}

uint8_t *t_read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc(n > 0 ? (size_t)n : 1);
    if (n > 0 && fread(b, 1, (size_t)n, f) != (size_t)n)
        T_FAIL("read %s", path);
    fclose(f);
    *len = (size_t)n;
    return b;
}

static uint64_t mix(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

void t_make_rgb(uint8_t *rgb, int w, int h, uint64_t seed)
{
    uint64_t s = mix(seed);
    int cx = (int)(s % (uint64_t)(w > 0 ? w : 1)), cy = (int)((s >> 20) % (uint64_t)(h > 0 ? h : 1));
    int r0 = (int)(s >> 40) & 0xff;
    for (int y = 0; y < h; y++) {
        for (int x = 0; x < w; x++) {
            uint8_t *p = rgb + ((size_t)y * (size_t)w + (size_t)x) * 3;
            int dx = x - cx, dy = y - cy;
            int ring = ((dx * dx + dy * dy) / (16 + (int)(s & 63))) & 1;
            uint64_t n = mix(s ^ (uint64_t)(y * 7919 + x));
            p[0] = (uint8_t)((x * 255) / (w > 1 ? w - 1 : 1) ^ (ring ? 0x40 : 0));
            p[1] = (uint8_t)((y * 255) / (h > 1 ? h - 1 : 1) + (int)(n & 15));
            p[2] = (uint8_t)(r0 + ((x / 8 + y / 8) & 1) * 60 + (int)((n >> 8) & 7));
        }
    }
}

uint8_t *t_encode_jpeg(const uint8_t *rgb, int w, int h, int subsamp, int quality, int flags, size_t *len)
{
    tjhandle tj = tjInitCompress();
    if (!tj)
        T_FAIL("tjInitCompress");
    int ss = TJSAMP_444;
    switch (subsamp) {
    case T_422: ss = TJSAMP_422; break;
    case T_420: ss = TJSAMP_420; break;
    case T_GRAY: ss = TJSAMP_GRAY; break;
    case T_440: ss = TJSAMP_440; break;
    case T_411: ss = TJSAMP_411; break;
    default: break;
    }
    int tjflags = TJFLAG_ACCURATEDCT;
    if (flags & T_PROGRESSIVE)
        tjflags |= TJFLAG_PROGRESSIVE;
    unsigned char *out = NULL;
    unsigned long outlen = 0;
    const uint8_t *src = rgb;
    uint8_t *gray = NULL;
    int pf = TJPF_RGB;
    if (subsamp == T_GRAY) {
        gray = malloc((size_t)w * (size_t)h);
        for (size_t i = 0; i < (size_t)w * (size_t)h; i++)
            gray[i] = (uint8_t)((rgb[3 * i] * 77 + rgb[3 * i + 1] * 150 + rgb[3 * i + 2] * 29) >> 8);
        src = gray;
        pf = TJPF_GRAY;
    }
    if (tjCompress2(tj, src, w, 0, h, pf, &out, &outlen, ss, quality, tjflags) != 0)
        T_FAIL("tjCompress2: %s", tjGetErrorStr2(tj));
    tjDestroy(tj);
    free(gray);
    uint8_t *res = malloc(outlen);
    memcpy(res, out, outlen);
    tjFree(out);
    *len = outlen;
    (void)T_RESTART;
    return res;
}

uint8_t *t_make_jpeg(int w, int h, uint64_t seed, int subsamp, int quality, int flags, size_t *len)
{
    uint8_t *rgb = malloc((size_t)w * (size_t)h * 3);
    t_make_rgb(rgb, w, h, seed);
    uint8_t *j = t_encode_jpeg(rgb, w, h, subsamp, quality, flags, len);
    free(rgb);
    return j;
}

uint8_t *t_decode_ref(const uint8_t *jpeg, size_t len, int *w, int *h)
{
    tjhandle tj = tjInitDecompress();
    int ss, cs;
    if (tjDecompressHeader3(tj, jpeg, (unsigned long)len, w, h, &ss, &cs) != 0 || *w <= 0 || *h <= 0) {
        tjDestroy(tj);
        return NULL;
    }
    uint8_t *out = malloc((size_t)*w * (size_t)*h * 3);
    if (tjDecompress2(tj, jpeg, (unsigned long)len, out, *w, 0, *h, TJPF_RGB, 0) != 0) {
        free(out);
        out = NULL;
    }
    tjDestroy(tj);
    return out;
}

size_t t_make_imagefolder(const char *root, int nclasses, int per_class, int minside, int maxside,
                          uint64_t seed)
{
    static const int subs[] = {T_420, T_422, T_444, T_GRAY, T_420};
    size_t count = 0;
    for (int c = 0; c < nclasses; c++) {
        char dir[4096];
        snprintf(dir, sizeof dir, "%s/class_%03d", root, c);
        t_mkdirs(dir);
        for (int i = 0; i < per_class; i++) {
            uint64_t s = mix(seed + (uint64_t)count);
            int span = maxside - minside + 1;
            int w = minside + (int)(s % (uint64_t)span);
            int h = minside + (int)((s >> 16) % (uint64_t)span);
            size_t len;
            uint8_t *j = t_make_jpeg(w, h, s, subs[count % 5], 75 + (int)(count % 20),
                                     (count % 7 == 3) ? T_PROGRESSIVE : 0, &len);
            char path[4200];
            snprintf(path, sizeof path, "%s/img_%05d.jpg", dir, i);
            t_write_file(path, j, len);
            free(j);
            count++;
        }
    }
    return count;
}

int t_system(const char *fmt, ...)
{
    char cmd[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    int rc = system(cmd);
    if (rc == -1)
        return -1;
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : 128 + WTERMSIG(rc);
}

const char *t_stoker_cli(void)
{
    const char *s = getenv("STOKER");
    return (s && *s) ? s : NULL;
}

int t_count_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return -1;
    int n = 0;
    while (readdir(d))
        n++;
    closedir(d);
    return n;
}

long t_rss_kb(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    long pages = 0, rss = 0;
    if (f) {
        if (fscanf(f, "%ld %ld", &pages, &rss) != 2)
            rss = 0;
        fclose(f);
    }
    return rss * (sysconf(_SC_PAGESIZE) / 1024);
}

uint64_t t_xorshift(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *s = x;
}

uint8_t *t_payload(uint64_t i, size_t *len)
{
    size_t n = (size_t)((i * 7919) % 20000);
    if (i % 50 == 7)
        n = 0;
    uint8_t *p = malloc(n ? n : 1);
    T_CHECK(p, "oom");
    for (size_t k = 0; k < n; k++)
        p[k] = (uint8_t)(i * 31 + k * 7 + (k >> 8));
    *len = n;
    return p;
}
