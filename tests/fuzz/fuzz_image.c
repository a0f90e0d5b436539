/* SPDX-License-Identifier: MIT */
/*
 * fuzz_image.c — a source file of any format to its shard payload (stk__transcode: the sniffer,
 * the PNG/WebP/GIF/BMP/TIFF/PPM decoders of image_in.c, the JPEG encode, the --max-side resize),
 * as `stoker pack` runs it on every source file.
 *
 * Input: the first byte picks max_side (0 = off, else 8..263) and, when odd, keep_damaged; the
 * rest is the file. Invariants:
 * only documented statuses; a failure leaves a terminated reason naming the format; success
 * gives either "store the file as it is" (JPEG sources) or a JPEG that stoker's own decoder
 * reads, whose longer side is at most max_side. One transcoder is reused across inputs, as a
 * pack's reader thread does. Nothing leaks (ASan/LSan).
 */
#include "fuzz.h"

#include "common.h"
#include "image_in.h"
#include "transcode.h"

#include <string.h>

static stk__transcoder *tc;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    if (!tc && stk__transcoder_create(&tc) != STK_OK)
        abort();
    stk__xform x = {data[0] ? 8 + data[0] : 0, 90, data[0] & 1};
    const uint8_t *out = NULL;
    size_t out_len = 0;
    int kind = -1, resized = -1, damaged = -1, dims[2] = {-1, -1};
    char reason[STK__ERRLEN];
    reason[0] = 0;
    int rc = stk__transcode(tc, &x, data + 1, size - 1, &out, &out_len, &kind, &resized, &damaged, dims, reason);
    FUZZ_CHECK(kind == stk__img_sniff(data + 1, size - 1), "kind %d", kind);
    if (rc != STK_OK) {
        FUZZ_CHECK(rc == STK_E_DECODE || rc == STK_E_TRUNCATED || rc == STK_E_TOO_LARGE || rc == STK_E_EMPTY ||
                       rc == STK_E_NOT_JPEG || rc == STK_E_UNSUPPORTED || rc == STK_E_NOMEM,
                   "rc %d (%s)", rc, reason);
        FUZZ_CHECK(memchr(reason, 0, sizeof reason) != NULL && reason[0], "no reason for rc %d", rc);
        return 0;
    }
    if (!out) {
        FUZZ_CHECK(kind == STK__IMG_JPEG && !resized, "kept a %s", stk__img_kind_name(kind));
        FUZZ_CHECK(!damaged || (x.keep_damaged && reason[0]), "kept a damaged JPEG unasked or unnamed");
        return 0;
    }
    int w = 0, h = 0;
    FUZZ_CHECK(stk_image_info(out, out_len, &w, &h, NULL) == STK_OK, "payload is not a JPEG");
    if (x.max_side)
        FUZZ_CHECK(w <= x.max_side && h <= x.max_side, "%dx%d over max_side %d", w, h, x.max_side);
    return 0;
}
