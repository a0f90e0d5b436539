/* SPDX-License-Identifier: MIT */
/*
 * s3.c — the S3 requests over libcurl. One engine (run_reqs) drives any set of requests through a
 * curl multi handle, at most c->inflight at once, each with its own retry schedule; list, ranged
 * GETs into files, PUTs and the multipart calls are all requests of that engine.
 *
 * Signing is libcurl's (CURLOPT_AWS_SIGV4 "aws:amz:REGION:s3"). libcurl 7.88 does not hash the
 * payload, so every request carries `x-amz-content-sha256: UNSIGNED-PAYLOAD` (what S3 accepts in
 * place of the hash); without it Ceph and AWS answer 403 SignatureDoesNotMatch. It signs the query
 * string as it is written, so query parameters are written sorted by name and percent-encoded
 * (RFC 3986) as SigV4's canonical form wants. XML answers (list pages, errors, multipart ids) are
 * parsed with libxml2.
 *
 * Retried (exponential backoff from 100 ms, doubling, capped at 5 s, with jitter): transport
 * failures (connect refused/reset, timeouts, a stall of c->stall_s without a byte, a body cut
 * short), HTTP 5xx, 429, and any answer whose error code is SlowDown/RequestTimeout. A ranged GET
 * must answer 206 with exactly the bytes asked for (200 only when the range is the whole object);
 * anything else is a short body and retried. Other 4xx fail at once.
 */
#include "s3.h"

#include <curl/curl.h>
#include <libxml/parser.h>
#include <libxml/tree.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define WBUF_BYTES (256u << 10) /* a download's body buffer and libcurl's receive buffer */

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static CURLcode g_init_rc;
static void global_init(void)
{
    g_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
    xmlInitParser();
}

enum { M_GET, M_PUT, M_POST, M_DELETE };
static const char *const method_name[] = {"GET", "PUT", "POST", "DELETE"};

enum { S_NEW, S_ACTIVE, S_WAIT, S_DONE };

typedef struct req {
    int method;
    char *url;
    /* response body: to OUT_FD at OUT_OFF (2xx of a GET into a file), else into MEM */
    int out_fd;
    uint64_t out_off, expect; /* expect: bytes a ranged GET must deliver (0: unchecked) */
    uint64_t range_off, range_len, object_size; /* ranged GET when range_len > 0 */
    /* request body: IN_FD from IN_OFF, IN_LEN bytes, or IN_MEM */
    int in_fd;
    uint64_t in_off, in_len, in_pos;
    const char *in_mem;
    /* state of the current attempt */
    uint64_t got;
    char *wbuf;  /* body bytes [got - wlen, got) not yet written to OUT_FD (WBUF_BYTES) */
    size_t wlen;
    char *mem;
    size_t mlen, mcap;
    long status;
    char etag[128];
    int attempts, state, io_err;
    double retry_at;
    CURL *easy;
    struct curl_slist *hdrs;
    char why[256]; /* the last attempt's failure */
} req;

/* ---- small helpers ------------------------------------------------------------------------- */

/* RFC 3986 percent-encoding; '/' kept when KEEP_SLASH (object keys in a path). */
static void uri_encode(const char *s, int keep_slash, char *out, size_t cap)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t o = 0;
    for (; *s && o + 4 < cap; s++) {
        unsigned char ch = (unsigned char)*s;
        if ((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
            ch == '-' || ch == '_' || ch == '.' || ch == '~' || (keep_slash && ch == '/'))
            out[o++] = (char)ch;
        else {
            out[o++] = '%';
            out[o++] = hex[ch >> 4];
            out[o++] = hex[ch & 15];
        }
    }
    out[o] = 0;
}

/* The URL of KEY in BUCKET (KEY may be ""), with QUERY ("" or already canonical) appended. */
static char *make_url(const stk__s3_cfg *c, const char *bucket, const char *key, const char *query)
{
    size_t kcap = strlen(key) * 3 + 1;
    char *ek = malloc(kcap);
    if (!ek)
        return NULL;
    uri_encode(key, 1, ek, kcap);
    size_t cap = strlen(c->endpoint) + strlen(bucket) + kcap + strlen(query) + 8;
    char *u = malloc(cap);
    if (u) {
        if (c->path_style) {
            snprintf(u, cap, "%s/%s%s%s%s%s", c->endpoint, bucket, *ek ? "/" : "", ek,
                     *query ? "?" : "", query);
        } else {
            const char *host = strstr(c->endpoint, "://") + 3;
            snprintf(u, cap, "%.*s%s.%s/%s%s%s", (int)(host - c->endpoint), c->endpoint, bucket,
                     host, ek, *query ? "?" : "", query);
        }
    }
    free(ek);
    return u;
}

/* Write LEN bytes at byte AT of the request's part of OUT_FD; 0, or -1 with r->io_err set. */
static int write_at(req *r, const char *p, size_t len, uint64_t at)
{
    size_t off = 0;
    while (off < len) {
        ssize_t w = pwrite(r->out_fd, p + off, len - off, (off_t)(r->out_off + at + off));
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            r->io_err = w < 0 ? errno : EIO;
            return -1;
        }
        off += (size_t)w;
    }
    return 0;
}

/* Write what the body buffer holds; 0, or -1 with r->io_err set. */
static int flush_body(req *r)
{
    int rc = r->wlen ? write_at(r, r->wbuf, r->wlen, r->got - r->wlen) : 0;
    r->wlen = 0;
    return rc;
}

static size_t on_body(char *p, size_t sz, size_t n, void *ud)
{
    req *r = ud;
    size_t len = sz * n;
    if (!r->status)
        curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &r->status);
    if (r->out_fd >= 0 && r->status >= 200 && r->status < 300) {
        if (r->expect && r->got + len > r->expect)
            return 0; /* more than asked for: fail the attempt (CURLE_WRITE_ERROR) */
        /* libcurl hands the body over 16 KiB at a time: gathered into WBUF_BYTES writes */
        if (!r->wbuf)
            r->wbuf = malloc(WBUF_BYTES);
        if (r->wbuf && r->wlen + len > WBUF_BYTES && flush_body(r) != 0)
            return 0;
        if (r->wbuf && len <= WBUF_BYTES) {
            memcpy(r->wbuf + r->wlen, p, len);
            r->wlen += len;
        } else if (write_at(r, p, len, r->got) != 0) {
            return 0;
        }
        r->got += len;
        return len;
    }
    if (r->mlen + len + 1 > r->mcap) {
        size_t cap = STK__MAX(r->mcap * 2, r->mlen + len + 1 + 4096);
        if (cap > (64u << 20))
            return 0; /* an answer this large is not an S3 XML answer */
        char *m = realloc(r->mem, cap);
        if (!m)
            return 0;
        r->mem = m;
        r->mcap = cap;
    }
    memcpy(r->mem + r->mlen, p, len);
    r->mlen += len;
    r->mem[r->mlen] = 0;
    r->got += len;
    return len;
}

static size_t on_header(char *p, size_t sz, size_t n, void *ud)
{
    req *r = ud;
    size_t len = sz * n;
    if (len > 5 && strncasecmp(p, "ETag:", 5) == 0) {
        const char *v = p + 5;
        while (*v == ' ')
            v++;
        size_t vl = (size_t)(p + len - v);
        while (vl && (v[vl - 1] == '\r' || v[vl - 1] == '\n'))
            vl--;
        if (vl < sizeof r->etag) {
            memcpy(r->etag, v, vl);
            r->etag[vl] = 0;
        }
    }
    return len;
}

static size_t on_read(char *p, size_t sz, size_t n, void *ud)
{
    req *r = ud;
    size_t want = STK__MIN(sz * n, (size_t)(r->in_len - r->in_pos));
    if (!want)
        return 0;
    if (r->in_mem) {
        memcpy(p, r->in_mem + r->in_pos, want);
    } else {
        ssize_t g;
        do
            g = pread(r->in_fd, p, want, (off_t)(r->in_off + r->in_pos));
        while (g < 0 && errno == EINTR);
        if (g <= 0) {
            r->io_err = g < 0 ? errno : EIO;
            return CURL_READFUNC_ABORT;
        }
        want = (size_t)g;
    }
    r->in_pos += want;
    return want;
}

/* The text of element NAME anywhere under NODE's children (first match), or NULL. xmlFree it. */
static xmlChar *xml_child_text(xmlNode *node, const char *name)
{
    for (xmlNode *k = node ? node->children : NULL; k; k = k->next)
        if (k->type == XML_ELEMENT_NODE && xmlStrcmp(k->name, (const xmlChar *)name) == 0)
            return xmlNodeGetContent(k);
    return NULL;
}

static xmlDoc *xml_parse(const char *mem, size_t len)
{
    if (!mem || !len)
        return NULL;
    return xmlReadMemory(mem, (int)len, "s3.xml", NULL, XML_PARSE_NONET | XML_PARSE_NOERROR |
                                                         XML_PARSE_NOWARNING);
}

/* The S3 error code of an error answer ("SlowDown", "NoSuchKey", ...) into CODE. */
static void error_code(const req *r, char *code, size_t cap)
{
    code[0] = 0;
    xmlDoc *d = xml_parse(r->mem, r->mlen);
    if (!d)
        return;
    xmlChar *t = xml_child_text(xmlDocGetRootElement(d), "Code");
    if (t)
        snprintf(code, cap, "%s", (const char *)t);
    xmlFree(t);
    xmlFreeDoc(d);
}

/* ---- the engine ----------------------------------------------------------------------------- */

static int setup_easy(const stk__s3_cfg *c, req *r, char *err)
{
    if (!r->easy && !(r->easy = curl_easy_init()))
        return stk__err(err, STK_E_NOMEM, "curl_easy_init failed");
    CURL *e = r->easy;
    curl_easy_reset(e);
    curl_slist_free_all(r->hdrs);
    r->hdrs = NULL;
    r->got = 0;
    r->wlen = 0; /* an earlier attempt's bytes, not written: this one writes them again */
    r->mlen = 0;
    r->status = 0;
    r->etag[0] = 0;
    r->in_pos = 0;
    r->io_err = 0;
    curl_easy_setopt(e, CURLOPT_URL, r->url);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT, c->connect_timeout_s);
    curl_easy_setopt(e, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(e, CURLOPT_LOW_SPEED_TIME, c->stall_s);
    if (r->out_fd >= 0) /* fewer, larger reads than the default 16 KiB */
        curl_easy_setopt(e, CURLOPT_BUFFERSIZE, (long)WBUF_BYTES);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, r);
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, r);
    curl_easy_setopt(e, CURLOPT_PRIVATE, r);
    if (c->ca_bundle[0])
        curl_easy_setopt(e, CURLOPT_CAINFO, c->ca_bundle);
    struct curl_slist *h = curl_slist_append(NULL, "x-amz-content-sha256:UNSIGNED-PAYLOAD");
    if (c->token[0]) {
        char tok[2100];
        snprintf(tok, sizeof tok, "x-amz-security-token:%s", c->token);
        h = curl_slist_append(h, tok);
    }
    if (c->key[0]) {
        char sig[128], up[520];
        snprintf(sig, sizeof sig, "aws:amz:%s:s3", c->region);
        snprintf(up, sizeof up, "%s:%s", c->key, c->secret);
        curl_easy_setopt(e, CURLOPT_AWS_SIGV4, sig);
        curl_easy_setopt(e, CURLOPT_USERPWD, up);
    }
    if (r->range_len) {
        char rg[80];
        snprintf(rg, sizeof rg, "%llu-%llu", (unsigned long long)r->range_off,
                 (unsigned long long)(r->range_off + r->range_len - 1));
        curl_easy_setopt(e, CURLOPT_RANGE, rg);
    }
    if (r->method == M_PUT || r->method == M_POST) {
        if (r->method == M_PUT)
            curl_easy_setopt(e, CURLOPT_UPLOAD, 1L);
        else {
            curl_easy_setopt(e, CURLOPT_POST, 1L);
            h = curl_slist_append(h, "Content-Type: application/xml");
        }
        curl_easy_setopt(e, CURLOPT_READFUNCTION, on_read);
        curl_easy_setopt(e, CURLOPT_READDATA, r);
        if (r->method == M_PUT)
            curl_easy_setopt(e, CURLOPT_INFILESIZE_LARGE, (curl_off_t)r->in_len);
        else
            curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)r->in_len);
        /* (no "Expect:" override: libcurl 7.88 signs the emptied header and the server, which
         * does not see it, refuses the signature) */
        curl_easy_setopt(e, CURLOPT_EXPECT_100_TIMEOUT_MS, 300L);
    } else if (r->method == M_DELETE) {
        curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, "DELETE");
    }
    if (!h)
        return stk__err(err, STK_E_NOMEM, "curl_slist_append failed");
    r->hdrs = h;
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, h);
    return STK_OK;
}

/* Judge a finished attempt: 0 done ok, 1 retry, <0 fatal (r->why says why). */
static int judge(req *r, CURLcode cc)
{
    curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &r->status);
    if (r->io_err) {
        snprintf(r->why, sizeof r->why, "local file: %s", strerror(r->io_err));
        return -1;
    }
    if (cc != CURLE_OK) {
        snprintf(r->why, sizeof r->why, "%s", curl_easy_strerror(cc));
        if (cc == CURLE_UNSUPPORTED_PROTOCOL || cc == CURLE_URL_MALFORMAT ||
            cc == CURLE_OUT_OF_MEMORY || cc == CURLE_ABORTED_BY_CALLBACK ||
            cc == CURLE_SSL_CACERT_BADFILE || cc == CURLE_PEER_FAILED_VERIFICATION)
            return -1;
        return 1; /* resets, timeouts, stalls, refused connections, cut bodies, unknown hosts */
    }
    long s = r->status;
    if (s >= 200 && s < 300) {
        if (r->range_len) {
            int whole = s == 200 && r->range_off == 0 && r->range_len == r->object_size;
            if ((s != 206 && !whole) || r->got != r->range_len) {
                snprintf(r->why, sizeof r->why, "short or wrong body: HTTP %ld, %llu of %llu bytes",
                         s, (unsigned long long)r->got, (unsigned long long)r->range_len);
                return 1;
            }
        }
        return 0;
    }
    char code[64];
    error_code(r, code, sizeof code);
    snprintf(r->why, sizeof r->why, "HTTP %ld%s%s", s, code[0] ? " " : "", code);
    if (s >= 500 || s == 429 || strcmp(code, "SlowDown") == 0 ||
        strcmp(code, "RequestTimeout") == 0)
        return 1;
    return -1;
}

static double backoff_s(int attempt)
{
    double b = 0.1;
    for (int i = 1; i < attempt && b < 5.0; i++)
        b *= 2;
    b = STK__MIN(b, 5.0);
    /* jitter 50..100 %, from a per-thread xorshift (rand() is not thread-safe) */
    static _Thread_local uint64_t x;
    if (!x)
        x = stk__now_ns() | 1;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return b * (0.5 + (double)(x % 1000) / 2000.0);
}

static void req_free(req *r)
{
    free(r->wbuf);
    if (r->easy)
        curl_easy_cleanup(r->easy);
    curl_slist_free_all(r->hdrs);
    free(r->mem);
    free(r->url);
    memset(r, 0, sizeof *r);
}

static void req_init(req *r, int method, char *url)
{
    memset(r, 0, sizeof *r);
    r->method = method;
    r->url = url;
    r->out_fd = r->in_fd = -1;
}

/* The hint that goes with a refusal of the credentials. */
static const char *auth_hint(const char *why)
{
    if (strstr(why, "InvalidAccessKeyId"))
        return " (the access key is unknown there: check AWS_ACCESS_KEY_ID / AWS_PROFILE)";
    if (strstr(why, "SignatureDoesNotMatch"))
        return " (the signature was refused: check AWS_SECRET_ACCESS_KEY and AWS_REGION)";
    if (strstr(why, "PermanentRedirect") || strstr(why, "HTTP 301"))
        return " (the bucket is elsewhere: check AWS_REGION and the endpoint, or try "
               "STOKER_S3_ADDRESSING=virtual)";
    if (strstr(why, "NoSuchBucket"))
        return " (no such bucket at this endpoint)";
    if (strstr(why, "AccessDenied") || strstr(why, "HTTP 403"))
        return " (access denied: check the credentials and the bucket's policy)";
    return "";
}

/* Whether a call that started before the call of TICKET waits for a slot of B (B->mu held). */
static int earlier_waits(const stk__s3_budget *b, uint64_t ticket)
{
    for (int i = 0; i < b->nwait; i++)
        if (b->wait_ticket[i] < ticket)
            return 1;
    return 0;
}

/* A slot of budget B for the call holding TICKET, if one is free and no call that started
 * before it waits for one (see stk__s3_budget in s3.h); else the call is listed as waiting, with
 * MULTI to wake, in the same hold of the lock (a slot given back after the failed take wakes
 * its next poll). */
static int budget_take(stk__s3_budget *b, uint64_t ticket, CURLM *multi, int *wanting)
{
    pthread_mutex_lock(&b->mu);
    int ok = b->free > 0 && !earlier_waits(b, ticket);
    b->free -= ok;
    if (!ok && !*wanting && b->nwait < STK__S3_BUDGET_WAITERS) {
        b->wait_ticket[b->nwait] = ticket;
        b->wait_multi[b->nwait++] = multi;
        *wanting = 1;
    }
    pthread_mutex_unlock(&b->mu);
    return ok;
}

/* Give N slots back to B and wake every call waiting for one (the first of them takes it). */
static void budget_give(stk__s3_budget *b, int n)
{
    if (n <= 0)
        return;
    pthread_mutex_lock(&b->mu);
    b->free += n;
    for (int i = 0; i < b->nwait; i++)
        curl_multi_wakeup(b->wait_multi[i]);
    pthread_mutex_unlock(&b->mu);
}

/* The call of TICKET waits for a slot of B no longer (see budget_take). */
static void budget_unwant(stk__s3_budget *b, uint64_t ticket, int *wanting)
{
    if (!*wanting)
        return;
    pthread_mutex_lock(&b->mu);
    for (int i = 0; i < b->nwait; i++)
        if (b->wait_ticket[i] == ticket) {
            b->nwait--;
            b->wait_ticket[i] = b->wait_ticket[b->nwait];
            b->wait_multi[i] = b->wait_multi[b->nwait];
            break;
        }
    *wanting = 0;
    pthread_mutex_unlock(&b->mu);
}

/* earlier_waits, taking B's lock. */
static int budget_earlier_waits(stk__s3_budget *b, uint64_t ticket)
{
    pthread_mutex_lock(&b->mu);
    int w = earlier_waits(b, ticket);
    pthread_mutex_unlock(&b->mu);
    return w;
}

static uint64_t budget_ticket(stk__s3_budget *b)
{
    pthread_mutex_lock(&b->mu);
    uint64_t t = b->tickets++;
    pthread_mutex_unlock(&b->mu);
    return t;
}

struct stk__s3_pool {
    CURLM *multi; /* made by the first call that uses the pool */
};

stk__s3_pool *stk__s3_pool_new(void)
{
    return calloc(1, sizeof(stk__s3_pool));
}

void stk__s3_pool_free(stk__s3_pool *p)
{
    if (!p)
        return;
    if (p->multi)
        curl_multi_cleanup(p->multi);
    free(p);
}

/* Run the N requests (each until done or out of retries), at most c->inflight at once, in their
 * order; with c->budget, each request also holds one of its slots while in flight, kept for this
 * call's next request when there is one to issue (s3.h). On a fatal failure of one request the
 * rest are abandoned and ERR names the failed one. */
static int run_reqs(const stk__s3_cfg *c, req *rs, size_t n, stk__s3_stats *st, char *err)
{
    pthread_once(&g_once, global_init);
    if (g_init_rc != CURLE_OK)
        return stk__err(err, STK_E_IO, "curl_global_init: %s", curl_easy_strerror(g_init_rc));
    CURLM *m = c->pool ? c->pool->multi : NULL;
    if (!m && !(m = curl_multi_init()))
        return stk__err(err, STK_E_NOMEM, "curl_multi_init failed");
    if (c->pool)
        c->pool->multi = m;
    curl_multi_setopt(m, CURLMOPT_MAX_HOST_CONNECTIONS, (long)c->inflight);
    curl_multi_setopt(m, CURLMOPT_MAXCONNECTS, (long)c->inflight);
    double t0 = stk__now();
    size_t done = 0, first = 0; /* rs[0..first) are all done */
    int active = 0, held = 0, rc = STK_OK; /* held: slots of c->budget, >= active */
    uint64_t ticket = c->budget ? budget_ticket(c->budget) : 0;
    int wanting = 0; /* listed in c->budget as waiting for a slot */
    while (done < n && rc == STK_OK) {
        if (c->cancel && atomic_load(c->cancel)) {
            rc = stk__err(err, STK_E_CANCELLED, "S3 requests cancelled (endpoint %s)", c->endpoint);
            break;
        }
        double now = stk__now(), next_retry = 0;
        while (first < n && rs[first].state == S_DONE)
            first++;
        for (size_t i = first; i < n && active < c->inflight; i++) {
            req *r = &rs[i];
            if (r->state == S_WAIT && r->retry_at > now) {
                next_retry = next_retry == 0 ? r->retry_at : STK__MIN(next_retry, r->retry_at);
                continue;
            }
            if (r->state != S_NEW && r->state != S_WAIT)
                continue;
            if (c->budget && held == active) {
                if (!budget_take(c->budget, ticket, m, &wanting))
                    break;
                held++;
            }
            if ((rc = setup_easy(c, r, err)) != STK_OK)
                break;
            if (curl_multi_add_handle(m, r->easy) != CURLM_OK) {
                rc = stk__err(err, STK_E_IO, "curl_multi_add_handle failed");
                break;
            }
            r->state = S_ACTIVE;
            r->attempts++;
            active++;
            if (st)
                st->requests++;
        }
        if (rc != STK_OK)
            break;
        int still = 0;
        curl_multi_perform(m, &still);
        CURLMsg *msg;
        int q;
        while ((msg = curl_multi_info_read(m, &q)) != NULL) {
            if (msg->msg != CURLMSG_DONE)
                continue;
            CURL *e = msg->easy_handle;
            CURLcode cc = msg->data.result;
            req *r = NULL;
            curl_easy_getinfo(e, CURLINFO_PRIVATE, (char **)&r);
            curl_multi_remove_handle(m, e);
            active--;
            if (cc == CURLE_OK)
                flush_body(r); /* a failed write is judged below (r->io_err) */
            int j = judge(r, cc);
            if (st) {
                if (r->method == M_GET)
                    st->bytes_in += r->got;
                else
                    st->bytes_out += r->in_pos;
            }
            if (j == 0) {
                r->state = S_DONE;
                done++;
                if (r->out_fd >= 0) { /* a finished ranged GET needs its handle no more */
                    curl_easy_cleanup(r->easy);
                    r->easy = NULL;
                    free(r->wbuf);
                    r->wbuf = NULL;
                }
            } else if (j > 0 && r->attempts <= c->retries) {
                r->state = S_WAIT;
                r->retry_at = stk__now() + backoff_s(r->attempts);
                if (st)
                    st->retries++;
            } else if (rc == STK_OK) {
                r->state = S_DONE;
                int code = strstr(r->why, "HTTP 404") ? -ENOENT
                           : strstr(r->why, "HTTP 403") ? -EACCES : STK_E_IO;
                char tries[64] = "";
                if (j > 0)
                    snprintf(tries, sizeof tries, ", gave up after %d attempts", r->attempts);
                rc = stk__err(err, code, "S3 %s %s (endpoint %s): %s%s%s", method_name[r->method],
                              r->url, c->endpoint, r->why, tries, auth_hint(r->why));
            }
        }
        if (rc != STK_OK || done == n)
            break;
        int fresh = 0; /* requests to issue now (a retry waiting for its time is not) */
        if (c->budget) {
            double t = stk__now();
            for (size_t i = first; i < n; i++)
                fresh += rs[i].state == S_NEW || (rs[i].state == S_WAIT && rs[i].retry_at <= t);
            /* a slot kept for our next request, unless an earlier call waits for one */
            int keep = active;
            if (fresh && !budget_earlier_waits(c->budget, ticket))
                keep += STK__MIN(fresh, c->inflight - active);
            budget_give(c->budget, held - keep); /* nothing of ours to ask for: to the others */
            held = STK__MIN(held, keep);
            if (!fresh || active >= c->inflight) /* no slot wanted now */
                budget_unwant(c->budget, ticket, &wanting);
        }
        int wait_ms = 100; /* a slot given back to us wakes the poll (budget_give) */
        if (!active && next_retry > 0)
            wait_ms = (int)STK__MAX(1.0, STK__MIN(5000.0, (next_retry - stk__now()) * 1000.0));
        curl_multi_poll(m, NULL, 0, wait_ms, NULL);
    }
    if (c->budget) {
        budget_unwant(c->budget, ticket, &wanting);
        budget_give(c->budget, held);
    }
    for (size_t i = 0; i < n; i++)
        if (rs[i].state == S_ACTIVE && rs[i].easy)
            curl_multi_remove_handle(m, rs[i].easy);
    if (!c->pool)
        curl_multi_cleanup(m);
    if (st)
        st->seconds += stk__now() - t0;
    return rc;
}

/* ---- the operations ------------------------------------------------------------------------ */

void stk__s3_objs_free(stk__s3_obj *objs, size_t n)
{
    for (size_t i = 0; objs && i < n; i++)
        free(objs[i].key);
    free(objs);
}

/* Parse one ListObjectsV2 page into the growing array; *TOKEN gets the next continuation token
 * ("" when the listing is complete). */
static int parse_list(const req *r, stk__s3_obj **objs, size_t *n, size_t *cap, char *token,
                      size_t tcap, char *err)
{
    xmlDoc *d = xml_parse(r->mem, r->mlen);
    xmlNode *root = d ? xmlDocGetRootElement(d) : NULL;
    if (!root || xmlStrcmp(root->name, (const xmlChar *)"ListBucketResult") != 0) {
        xmlFreeDoc(d);
        return stk__err(err, STK_E_FORMAT, "S3 GET %s: not a ListBucketResult answer", r->url);
    }
    int rc = STK_OK;
    token[0] = 0;
    for (xmlNode *k = root->children; k && rc == STK_OK; k = k->next) {
        if (k->type != XML_ELEMENT_NODE)
            continue;
        if (xmlStrcmp(k->name, (const xmlChar *)"NextContinuationToken") == 0) {
            xmlChar *t = xmlNodeGetContent(k);
            snprintf(token, tcap, "%s", t ? (const char *)t : "");
            xmlFree(t);
        } else if (xmlStrcmp(k->name, (const xmlChar *)"Contents") == 0) {
            xmlChar *key = xml_child_text(k, "Key"), *size = xml_child_text(k, "Size"),
                    *etag = xml_child_text(k, "ETag");
            if (!key || !size) {
                rc = stk__err(err, STK_E_FORMAT, "S3 GET %s: a Contents entry without Key/Size",
                              r->url);
            } else if (*n == *cap) {
                size_t nc = *cap ? *cap * 2 : 64;
                stk__s3_obj *o = realloc(*objs, nc * sizeof *o);
                if (!o)
                    rc = STK_E_NOMEM;
                else {
                    *objs = o;
                    *cap = nc;
                }
            }
            if (rc == STK_OK) {
                stk__s3_obj *o = &(*objs)[*n];
                memset(o, 0, sizeof *o);
                o->key = stk__strdup((const char *)key);
                o->size = strtoull((const char *)size, NULL, 10);
                snprintf(o->etag, sizeof o->etag, "%s", etag ? (const char *)etag : "");
                if (!o->key)
                    rc = STK_E_NOMEM;
                else
                    (*n)++;
            }
            xmlFree(key);
            xmlFree(size);
            xmlFree(etag);
        }
    }
    xmlFreeDoc(d);
    return rc;
}

int stk__s3_list(const stk__s3_cfg *c, const char *bucket, const char *prefix, stk__s3_obj **out,
                 size_t *n, char *err)
{
    *out = NULL;
    *n = 0;
    size_t cap = 0;
    char token[2048] = "";
    size_t plen = strlen(prefix) * 3 + 1;
    char *ep = malloc(plen), *q = malloc(plen + 3 * sizeof token + 64),
         *et = malloc(3 * sizeof token);
    int rc = ep && q && et ? STK_OK : STK_E_NOMEM;
    if (rc == STK_OK)
        uri_encode(prefix, 0, ep, plen);
    do {
        if (rc != STK_OK)
            break;
        uri_encode(token, 0, et, 3 * sizeof token);
        /* canonical order: parameters sorted by name */
        sprintf(q, "%s%s%slist-type=2&prefix=%s", token[0] ? "continuation-token=" : "", et,
                token[0] ? "&" : "", ep);
        req r;
        req_init(&r, M_GET, make_url(c, bucket, "", q));
        if (!r.url)
            rc = STK_E_NOMEM;
        else if ((rc = run_reqs(c, &r, 1, NULL, err)) == STK_OK)
            rc = parse_list(&r, out, n, &cap, token, sizeof token, err);
        req_free(&r);
    } while (rc == STK_OK && token[0]);
    free(ep);
    free(q);
    free(et);
    if (rc != STK_OK) {
        stk__s3_objs_free(*out, *n);
        *out = NULL;
        *n = 0;
    }
    return rc;
}

int stk__s3_get_many(const stk__s3_cfg *c, const char *bucket, const stk__s3_fetch *f, size_t n,
                     stk__s3_stats *st, char *err)
{
    size_t parts = 0;
    for (size_t i = 0; i < n; i++)
        parts += (size_t)((f[i].size + c->part_bytes - 1) / c->part_bytes);
    if (!parts)
        return STK_OK;
    req *rs = calloc(parts, sizeof *rs);
    if (!rs)
        return STK_E_NOMEM;
    int rc = STK_OK;
    size_t k = 0;
    for (size_t i = 0; i < n && rc == STK_OK; i++) {
        char *url = NULL;
        uint64_t end = f[i].offset + f[i].size;
        for (uint64_t off = f[i].offset; off < end; off += c->part_bytes) {
            /* one URL string per part: req_free frees each */
            url = make_url(c, bucket, f[i].key, "");
            if (!url) {
                rc = STK_E_NOMEM;
                break;
            }
            req *r = &rs[k++];
            req_init(r, M_GET, url);
            r->out_fd = f[i].fd;
            r->out_off = r->range_off = off;
            r->range_len = r->expect = STK__MIN(c->part_bytes, end - off);
            r->object_size = f[i].size;
        }
    }
    if (rc == STK_OK)
        rc = run_reqs(c, rs, parts, st, err);
    for (size_t i = 0; i < k; i++)
        req_free(&rs[i]);
    free(rs);
    return rc;
}

static int simple(const stk__s3_cfg *c, int method, const char *bucket, const char *key,
                  const char *query, const char *body, req *r, char *err)
{
    req_init(r, method, make_url(c, bucket, key, query));
    if (!r->url)
        return STK_E_NOMEM;
    if (method == M_PUT || method == M_POST) {
        r->in_mem = body ? body : "";
        r->in_len = strlen(r->in_mem);
    }
    return run_reqs(c, r, 1, NULL, err);
}

int stk__s3_make_bucket(const stk__s3_cfg *c, const char *bucket, char *err)
{
    req r;
    int rc = simple(c, M_PUT, bucket, "", "", "", &r, err);
    if (rc != STK_OK && strstr(err, "BucketAlreadyOwnedByYou"))
        rc = STK_OK;
    req_free(&r);
    return rc;
}

static int put_multipart(const stk__s3_cfg *c, const char *bucket, const char *key, int fd,
                         uint64_t size, stk__s3_stats *st, char *err)
{
    req r;
    int rc = simple(c, M_POST, bucket, key, "uploads=", "", &r, err);
    char id[512] = "";
    if (rc == STK_OK) {
        xmlDoc *d = xml_parse(r.mem, r.mlen);
        xmlChar *t = d ? xml_child_text(xmlDocGetRootElement(d), "UploadId") : NULL;
        if (t)
            snprintf(id, sizeof id, "%s", (const char *)t);
        xmlFree(t);
        xmlFreeDoc(d);
        if (!id[0])
            rc = stk__err(err, STK_E_FORMAT, "S3 POST %s: no UploadId in the answer", r.url);
    }
    req_free(&r);
    if (rc != STK_OK)
        return rc;
    char eid[1600];
    uri_encode(id, 0, eid, sizeof eid);
    size_t parts = (size_t)((size + c->part_bytes - 1) / c->part_bytes);
    req *rs = calloc(parts, sizeof *rs);
    char *body = NULL;
    if (!rs)
        rc = STK_E_NOMEM;
    for (size_t i = 0; i < parts && rc == STK_OK; i++) {
        char q[1700];
        snprintf(q, sizeof q, "partNumber=%zu&uploadId=%s", i + 1, eid);
        req_init(&rs[i], M_PUT, make_url(c, bucket, key, q));
        if (!rs[i].url)
            rc = STK_E_NOMEM;
        rs[i].in_fd = fd;
        rs[i].in_off = (uint64_t)i * c->part_bytes;
        rs[i].in_len = STK__MIN(c->part_bytes, size - rs[i].in_off);
    }
    if (rc == STK_OK)
        rc = run_reqs(c, rs, parts, st, err);
    if (rc == STK_OK) {
        size_t cap = 128 + parts * 200, o = 0;
        body = malloc(cap);
        if (!body)
            rc = STK_E_NOMEM;
        else {
            o += (size_t)snprintf(body + o, cap - o, "<CompleteMultipartUpload>");
            for (size_t i = 0; i < parts; i++)
                o += (size_t)snprintf(body + o, cap - o,
                                      "<Part><PartNumber>%zu</PartNumber><ETag>%s</ETag></Part>",
                                      i + 1, rs[i].etag);
            snprintf(body + o, cap - o, "</CompleteMultipartUpload>");
        }
    }
    for (size_t i = 0; rs && i < parts; i++)
        req_free(&rs[i]);
    free(rs);
    char q[1700];
    snprintf(q, sizeof q, "uploadId=%s", eid);
    if (rc == STK_OK) {
        rc = simple(c, M_POST, bucket, key, q, body, &r, err);
        /* a 200 answer may still carry an error (S3's documented behaviour for Complete) */
        xmlDoc *d = rc == STK_OK ? xml_parse(r.mem, r.mlen) : NULL;
        xmlNode *root = d ? xmlDocGetRootElement(d) : NULL;
        if (root && xmlStrcmp(root->name, (const xmlChar *)"Error") == 0)
            rc = stk__err(err, STK_E_IO, "S3 POST %s (endpoint %s): completing the upload failed",
                          r.url, c->endpoint);
        xmlFreeDoc(d);
        req_free(&r);
    }
    free(body);
    if (rc != STK_OK) { /* abort: no half-written object stays (best effort) */
        char ignore[STK__ERRLEN];
        simple(c, M_DELETE, bucket, key, q, NULL, &r, ignore);
        req_free(&r);
    }
    return rc;
}

int stk__s3_put_file(const stk__s3_cfg *c, const char *bucket, const char *key, const char *path,
                     stk__s3_stats *st, char *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return stk__err(err, -errno, "%s: %s", path, strerror(errno));
    struct stat sb;
    int rc = STK_OK;
    if (fstat(fd, &sb) != 0)
        rc = stk__err(err, -errno, "%s: %s", path, strerror(errno));
    else if ((uint64_t)sb.st_size > c->part_bytes)
        rc = put_multipart(c, bucket, key, fd, (uint64_t)sb.st_size, st, err);
    else {
        req r;
        req_init(&r, M_PUT, make_url(c, bucket, key, ""));
        r.in_fd = fd;
        r.in_len = (uint64_t)sb.st_size;
        rc = r.url ? run_reqs(c, &r, 1, st, err) : STK_E_NOMEM;
        req_free(&r);
    }
    close(fd);
    return rc;
}

int stk__s3_delete(const stk__s3_cfg *c, const char *bucket, const char *key, char *err)
{
    req r;
    int rc = simple(c, M_DELETE, bucket, key, "", NULL, &r, err);
    if (rc == -ENOENT)
        rc = STK_OK;
    req_free(&r);
    return rc;
}

int stk__s3_put_mem(const stk__s3_cfg *c, const char *bucket, const char *key, const char *data,
                    char *err)
{
    req r;
    int rc = simple(c, M_PUT, bucket, key, "", data, &r, err);
    req_free(&r);
    return rc;
}
