/* SPDX-License-Identifier: MIT */
/*
 * creds.c — where the S3 client's endpoint, region and credentials come from: the environment and
 * the AWS shared files, read as the AWS CLI and boto3 read them.
 *   credentials: AWS_ACCESS_KEY_ID + AWS_SECRET_ACCESS_KEY (+ AWS_SESSION_TOKEN); else the profile
 *     AWS_PROFILE (or AWS_DEFAULT_PROFILE, or "default") of AWS_SHARED_CREDENTIALS_FILE
 *     (~/.aws/credentials), then of AWS_CONFIG_FILE (~/.aws/config, "[profile NAME]"); none at all:
 *     anonymous requests (public buckets). A named profile found nowhere is an error.
 *   region: AWS_REGION, AWS_DEFAULT_REGION, the profile's `region`, else us-east-1.
 *   endpoint: AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, the profile's `endpoint_url`, else
 *     https://s3.REGION.amazonaws.com.
 *   https: the system's CAs, or AWS_CA_BUNDLE / the profile's ca_bundle (a PEM file).
 *   addressing: STOKER_S3_ADDRESSING=path|virtual; by default virtual-host on AWS's endpoint and
 *     path-style on any other (MinIO, Ceph and most S3-compatible servers expect it).
 */
#include "s3.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int stk__s3_is_url(const char *path)
{
    return path && strncmp(path, "s3://", 5) == 0;
}

int stk__s3_url_split(const char *url, char *bucket, size_t bcap, char *prefix, size_t pcap,
                      char *err)
{
    if (!stk__s3_is_url(url))
        return stk__err(err, STK_E_INVALID, "%s: not an s3://bucket/prefix URL", url ? url : "(null)");
    const char *b = url + 5, *slash = strchr(b, '/');
    size_t blen = slash ? (size_t)(slash - b) : strlen(b);
    if (blen < 3 || blen >= bcap)
        return stk__err(err, STK_E_INVALID, "%s: the bucket name must have 3 to %zu characters",
                        url, bcap - 1);
    memcpy(bucket, b, blen);
    bucket[blen] = 0;
    const char *p = slash ? slash + 1 : "";
    size_t plen = strlen(p);
    while (plen && p[plen - 1] == '/')
        plen--;
    if (plen + 2 > pcap)
        return stk__err(err, STK_E_INVALID, "%s: prefix too long", url);
    memcpy(prefix, p, plen);
    if (plen)
        prefix[plen++] = '/';
    prefix[plen] = 0;
    return STK_OK;
}

static void trim(char *s)
{
    size_t n = strlen(s);
    while (n && isspace((unsigned char)s[n - 1]))
        s[--n] = 0;
    size_t i = 0;
    while (s[i] && isspace((unsigned char)s[i]))
        i++;
    memmove(s, s + i, strlen(s + i) + 1);
}

/* Look KEY up in section SECTION of the INI file PATH; 1 found (value in OUT), 0 not, and *SEEN
 * set when the section exists. */
static int ini_get(const char *path, const char *section, const char *key, char *out, size_t cap,
                   int *seen)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    char line[4096];
    int in = 0, found = 0;
    while (!found && fgets(line, sizeof line, f)) {
        trim(line);
        if (!line[0] || line[0] == '#' || line[0] == ';')
            continue;
        if (line[0] == '[') {
            char *e = strchr(line, ']');
            if (e)
                *e = 0;
            char *name = line + 1;
            trim(name);
            in = strcmp(name, section) == 0;
            if (in && seen)
                *seen = 1;
            continue;
        }
        char *eq = strchr(line, '=');
        if (!in || !eq)
            continue;
        *eq = 0;
        char *k = line, *v = eq + 1;
        trim(k);
        trim(v);
        if (strcmp(k, key) == 0 && strlen(v) < cap) {
            strcpy(out, v);
            found = 1;
        }
    }
    fclose(f);
    return found;
}

static void aws_file(char *out, size_t cap, const char *env, const char *name)
{
    const char *e = getenv(env), *home = getenv("HOME");
    if (e && *e)
        snprintf(out, cap, "%s", e);
    else
        snprintf(out, cap, "%s/.aws/%s", home && *home ? home : "", name);
}

/* The profile's KEY: credentials file [NAME], then config file [profile NAME] ([default]). */
static int profile_get(const char *name, const char *key, char *out, size_t cap, int *seen)
{
    char cred[1024], conf[1024], sect[256];
    aws_file(cred, sizeof cred, "AWS_SHARED_CREDENTIALS_FILE", "credentials");
    aws_file(conf, sizeof conf, "AWS_CONFIG_FILE", "config");
    if (ini_get(cred, name, key, out, cap, seen))
        return 1;
    if (strcmp(name, "default") == 0)
        snprintf(sect, sizeof sect, "default");
    else
        snprintf(sect, sizeof sect, "profile %s", name);
    return ini_get(conf, sect, key, out, cap, seen);
}

static const char *env_nonempty(const char *name)
{
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

static long env_long(const char *name, long def, long lo, long hi)
{
    const char *v = env_nonempty(name);
    if (!v)
        return def;
    char *end;
    long x = strtol(v, &end, 10);
    return *end || x < lo || x > hi ? def : x;
}

int stk__s3_cfg_from_env(stk__s3_cfg *c, char *err)
{
    memset(c, 0, sizeof *c);
    const char *prof = env_nonempty("AWS_PROFILE");
    if (!prof)
        prof = env_nonempty("AWS_DEFAULT_PROFILE");
    int named = prof != NULL, seen = 0;
    if (!prof)
        prof = "default";
    const char *k = env_nonempty("AWS_ACCESS_KEY_ID"), *s = env_nonempty("AWS_SECRET_ACCESS_KEY");
    if (k && s) {
        snprintf(c->key, sizeof c->key, "%s", k);
        snprintf(c->secret, sizeof c->secret, "%s", s);
        const char *t = env_nonempty("AWS_SESSION_TOKEN");
        if (t)
            snprintf(c->token, sizeof c->token, "%s", t);
    } else {
        profile_get(prof, "aws_access_key_id", c->key, sizeof c->key, &seen);
        profile_get(prof, "aws_secret_access_key", c->secret, sizeof c->secret, &seen);
        profile_get(prof, "aws_session_token", c->token, sizeof c->token, &seen);
        if (named && !seen)
            return stk__err(err, STK_E_INVALID,
                            "AWS profile '%s' is in neither the credentials nor the config file "
                            "(~/.aws, AWS_SHARED_CREDENTIALS_FILE, AWS_CONFIG_FILE)", prof);
        if (!c->key[0] != !c->secret[0])
            return stk__err(err, STK_E_INVALID, "AWS profile '%s' has only one of "
                            "aws_access_key_id and aws_secret_access_key", prof);
        if (c->key[0])
            snprintf(c->profile, sizeof c->profile, "%s", prof);
    }
    const char *r = env_nonempty("AWS_REGION");
    if (!r)
        r = env_nonempty("AWS_DEFAULT_REGION");
    if (r)
        snprintf(c->region, sizeof c->region, "%s", r);
    else if (!profile_get(prof, "region", c->region, sizeof c->region, NULL))
        snprintf(c->region, sizeof c->region, "us-east-1");
    const char *e = env_nonempty("AWS_ENDPOINT_URL_S3");
    if (!e)
        e = env_nonempty("AWS_ENDPOINT_URL");
    int custom = 1;
    if (e)
        snprintf(c->endpoint, sizeof c->endpoint, "%s", e);
    else if (!profile_get(prof, "endpoint_url", c->endpoint, sizeof c->endpoint, NULL)) {
        snprintf(c->endpoint, sizeof c->endpoint, "https://s3.%s.amazonaws.com", c->region);
        custom = 0;
    }
    size_t n = strlen(c->endpoint);
    while (n && c->endpoint[n - 1] == '/')
        c->endpoint[--n] = 0;
    if (strncmp(c->endpoint, "http://", 7) != 0 && strncmp(c->endpoint, "https://", 8) != 0)
        return stk__err(err, STK_E_INVALID, "S3 endpoint '%s' must start with http:// or https://",
                        c->endpoint);
    const char *ca = env_nonempty("AWS_CA_BUNDLE");
    if (ca)
        snprintf(c->ca_bundle, sizeof c->ca_bundle, "%s", ca);
    else
        profile_get(prof, "ca_bundle", c->ca_bundle, sizeof c->ca_bundle, NULL);
    const char *a = env_nonempty("STOKER_S3_ADDRESSING");
    if (a && strcmp(a, "path") == 0)
        c->path_style = 1;
    else if (a && strcmp(a, "virtual") == 0)
        c->path_style = 0;
    else if (a)
        return stk__err(err, STK_E_INVALID, "STOKER_S3_ADDRESSING='%s': path or virtual", a);
    else
        c->path_style = custom;
    c->connect_timeout_s = env_long("STOKER_S3_CONNECT_TIMEOUT_S", 10, 1, 3600);
    c->stall_s = env_long("STOKER_S3_STALL_S", 30, 1, 3600);
    c->retries = (int)env_long("STOKER_S3_RETRIES", 6, 0, 100);
    c->inflight = (int)env_long("STOKER_S3_INFLIGHT", 16, 1, 1024);
    c->part_bytes = (uint64_t)env_long("STOKER_S3_PART_MB", 8, 5, 4096) << 20;
    c->shards = (int)env_long("STOKER_S3_SHARDS", 4, 1, 64);
    return STK_OK;
}
