// GIF out: frames quantised here (a palette per frame: median cut over a 5-5-5 histogram,
// refined by two rounds of k-means, then Floyd–Steinberg error diffusion in serpentine order),
// written by giflib's encoder (its LZW). A frame with transparent pixels reserves index 255 for
// them and is disposed to the background after it shows, so no earlier frame shows through.
#include "tessera_shim.h"

#include <gif_lib.h>
#include <stdlib.h>
#include <string.h>

struct ts_gif_enc {
    GifFileType *gif;
    uint8_t *out;
    size_t size, cap;
    int width, height;
    int failed;
    int16_t *errors;   // two rows of RGB error, 3 x (width + 2) each
    uint8_t *indices;  // one frame
    uint8_t *shown;    // RGB of the canvas as the last frame left it (NULL: not known)
};

static int write_bytes(GifFileType *g, const GifByteType *buf, int n) {
    struct ts_gif_enc *e = g->UserData;
    if (e->size + (size_t)n > e->cap) {
        size_t cap = e->cap ? e->cap : 65536;
        while (cap < e->size + (size_t)n) cap *= 2;
        uint8_t *p = realloc(e->out, cap);
        if (!p) { e->failed = 1; return 0; }
        e->out = p;
        e->cap = cap;
    }
    memcpy(e->out + e->size, buf, (size_t)n);
    e->size += (size_t)n;
    return n;
}

ts_gif_enc *ts_gif_enc_new(int width, int height, int loop) {
    if (width <= 0 || height <= 0 || width > 65535 || height > 65535) return NULL;
    struct ts_gif_enc *e = calloc(1, sizeof *e);
    if (!e) return NULL;
    e->width = width;
    e->height = height;
    e->errors = calloc((size_t)(width + 2) * 6, sizeof(int16_t));
    e->indices = malloc((size_t)width * height);
    int err = 0;
    e->gif = (e->errors && e->indices) ? EGifOpen(e, write_bytes, &err) : NULL;
    if (!e->gif) { ts_gif_enc_free(e); return NULL; }
    EGifSetGifVersion(e->gif, true);
    if (EGifPutScreenDesc(e->gif, width, height, 8, 0, NULL) == GIF_ERROR) { ts_gif_enc_free(e); return NULL; }
    // NETSCAPE2.0: how many times to play (0: forever); none when it plays once.
    if (loop != 1) {
        unsigned char sub[3] = {1, (unsigned char)(loop & 0xFF), (unsigned char)(loop >> 8 & 0xFF)};
        if (loop < 0 || loop > 65535) sub[1] = sub[2] = 0;
        if (EGifPutExtensionLeader(e->gif, APPLICATION_EXT_FUNC_CODE) == GIF_ERROR
            || EGifPutExtensionBlock(e->gif, 11, "NETSCAPE2.0") == GIF_ERROR
            || EGifPutExtensionBlock(e->gif, 3, sub) == GIF_ERROR
            || EGifPutExtensionTrailer(e->gif) == GIF_ERROR) { ts_gif_enc_free(e); return NULL; }
    }
    return e;
}

typedef struct { int lo[3], hi[3]; long count; } box_t;

// The histogram bins (5-5-5) inside a box, their count and the channel with the widest spread.
static void shrink(box_t *b, const uint32_t *hist) {
    int lo[3] = {31, 31, 31}, hi[3] = {0, 0, 0};
    long n = 0;
    for (int r = b->lo[0]; r <= b->hi[0]; r++)
        for (int g = b->lo[1]; g <= b->hi[1]; g++)
            for (int bl = b->lo[2]; bl <= b->hi[2]; bl++) {
                uint32_t c = hist[r << 10 | g << 5 | bl];
                if (!c) continue;
                n += c;
                if (r < lo[0]) lo[0] = r; if (r > hi[0]) hi[0] = r;
                if (g < lo[1]) lo[1] = g; if (g > hi[1]) hi[1] = g;
                if (bl < lo[2]) lo[2] = bl; if (bl > hi[2]) hi[2] = bl;
            }
    b->count = n;
    if (n) { memcpy(b->lo, lo, sizeof lo); memcpy(b->hi, hi, sizeof hi); }
}

// Median cut: split the box with the most pixels times extent along its widest channel at
// the median, until `want` boxes. Returns how many boxes there are.
static int median_cut(const uint32_t *hist, box_t *boxes, int want) {
    boxes[0] = (box_t){{0, 0, 0}, {31, 31, 31}, 0};
    shrink(&boxes[0], hist);
    if (!boxes[0].count) return 0;
    int n = 1;
    while (n < want) {
        int best = -1;
        long score = 0;
        for (int i = 0; i < n; i++) {
            int ext = 0;
            for (int c = 0; c < 3; c++) if (boxes[i].hi[c] - boxes[i].lo[c] > ext) ext = boxes[i].hi[c] - boxes[i].lo[c];
            long s = ext == 0 ? 0 : boxes[i].count * (long)ext;
            if (s > score) { score = s; best = i; }
        }
        if (best < 0) break;
        box_t *b = &boxes[best];
        int axis = 0;
        for (int c = 1; c < 3; c++) if (b->hi[c] - b->lo[c] > b->hi[axis] - b->lo[axis]) axis = c;
        // Counts along the axis, to find the median plane.
        long along[32] = {0};
        for (int r = b->lo[0]; r <= b->hi[0]; r++)
            for (int g = b->lo[1]; g <= b->hi[1]; g++)
                for (int bl = b->lo[2]; bl <= b->hi[2]; bl++) {
                    int v[3] = {r, g, bl};
                    along[v[axis]] += hist[r << 10 | g << 5 | bl];
                }
        long half = b->count / 2, acc = 0;
        int cut = b->lo[axis];
        for (int v = b->lo[axis]; v < b->hi[axis]; v++) {
            acc += along[v];
            cut = v;
            if (acc >= half) break;
        }
        box_t upper = *b;
        b->hi[axis] = cut;
        upper.lo[axis] = cut + 1;
        shrink(b, hist);
        shrink(&upper, hist);
        boxes[n++] = upper;
    }
    return n;
}

static inline int nearest(const int (*pal)[3], int n, int r, int g, int b) {
    int best = 0, bd = 1 << 30;
    for (int i = 0; i < n; i++) {
        int dr = r - pal[i][0], dg = g - pal[i][1], db = b - pal[i][2];
        int d = 2 * dr * dr + 4 * dg * dg + 3 * db * db;
        if (d < bd) { bd = d; best = i; }
    }
    return best;
}

static inline int clamp255(int v) { return v < 0 ? 0 : v > 255 ? 255 : v; }

// Whether pixel p (RGB) looks as the canvas already shows it: within 4 levels in each channel.
static inline int unchanged(const uint8_t *p, const uint8_t *s) {
    return abs(p[0] - s[0]) <= 4 && abs(p[1] - s[1]) <= 4 && abs(p[2] - s[2]) <= 4;
}

int ts_gif_enc_add(ts_gif_enc *e, const uint8_t *pixels, int channels, int stride, int delay_cs, int dither) {
    if (!e || e->failed || (channels != 3 && channels != 4)) return -1;
    const int w = e->width, h = e->height;
    // An opaque frame after an opaque one keeps what has not changed: those pixels are
    // transparent over the last frame (not disposed), and the frame is cropped to the rest.
    int opaque = 1;
    if (channels == 4)
        for (int y = 0; y < h && opaque; y++)
            for (int x = 0; x < w; x++) if (pixels[(size_t)y * stride + (size_t)x * 4 + 3] < 255) { opaque = 0; break; }
    uint8_t *keep = NULL;
    int left = 0, top = 0, right = w - 1, bottom = h - 1;
    if (opaque && e->shown) {
        keep = malloc((size_t)w * h);
        if (!keep) return -1;
        left = w; top = h; right = -1; bottom = -1;
        for (int y = 0; y < h; y++)
            for (int x = 0; x < w; x++) {
                int same = unchanged(pixels + (size_t)y * stride + (size_t)x * channels, e->shown + ((size_t)y * w + x) * 3);
                keep[(size_t)y * w + x] = (uint8_t)same;
                if (!same) {
                    if (x < left) left = x; if (x > right) right = x;
                    if (y < top) top = y; if (y > bottom) bottom = y;
                }
            }
        if (right < 0) { left = top = right = bottom = 0; }  // nothing changed: one kept pixel
    }
    // 1. The histogram of the opaque pixels, with their sums per bin (for the means).
    uint32_t *hist = calloc(32768, sizeof(uint32_t));
    uint64_t (*sums)[3] = calloc(32768, sizeof *sums);
    if (!hist || !sums) { free(hist); free(sums); return -1; }
    int transparent = 0;
    for (int y = 0; y < h; y++) {
        const uint8_t *p = pixels + (size_t)y * stride;
        for (int x = 0; x < w; x++, p += channels) {
            if (keep && keep[(size_t)y * w + x]) { transparent = 1; continue; }
            if (channels == 4 && p[3] < 128) { transparent = 1; continue; }
            int bin = (p[0] >> 3) << 10 | (p[1] >> 3) << 5 | p[2] >> 3;
            hist[bin]++;
            sums[bin][0] += p[0]; sums[bin][1] += p[1]; sums[bin][2] += p[2];
        }
    }
    // 2. Median cut to at most 255 colours (256 without transparency), the boxes' means.
    int want = transparent ? 255 : 256;
    box_t boxes[256];
    int n = median_cut(hist, boxes, want);
    int pal[256][3];
    for (int i = 0; i < n; i++) {
        uint64_t s[3] = {0, 0, 0}, c = 0;
        for (int r = boxes[i].lo[0]; r <= boxes[i].hi[0]; r++)
            for (int g = boxes[i].lo[1]; g <= boxes[i].hi[1]; g++)
                for (int bl = boxes[i].lo[2]; bl <= boxes[i].hi[2]; bl++) {
                    int bin = r << 10 | g << 5 | bl;
                    c += hist[bin]; s[0] += sums[bin][0]; s[1] += sums[bin][1]; s[2] += sums[bin][2];
                }
        for (int k = 0; k < 3; k++) pal[i][k] = c ? (int)((s[k] + c / 2) / c) : 0;
    }
    // 3. Two rounds of k-means over the bins: each colour the mean of the bins nearest to it.
    int16_t *owner = malloc(32768 * sizeof(int16_t));
    if (!owner) { free(hist); free(sums); return -1; }
    for (int round = 0; round < 2 && n > 1; round++) {
        uint64_t acc[256][4];
        memset(acc, 0, sizeof acc);
        for (int bin = 0; bin < 32768; bin++) {
            if (!hist[bin]) continue;
            int r = (int)(sums[bin][0] / hist[bin]), g = (int)(sums[bin][1] / hist[bin]), b = (int)(sums[bin][2] / hist[bin]);
            int k = nearest((const int (*)[3])pal, n, r, g, b);
            acc[k][0] += sums[bin][0]; acc[k][1] += sums[bin][1]; acc[k][2] += sums[bin][2]; acc[k][3] += hist[bin];
        }
        for (int k = 0; k < n; k++)
            if (acc[k][3]) for (int c = 0; c < 3; c++) pal[k][c] = (int)((acc[k][c] + acc[k][3] / 2) / acc[k][3]);
    }
    // Nearest colour per 5-5-5 bin, found once, used for every pixel (the bin's centre).
    for (int bin = 0; bin < 32768; bin++) owner[bin] = -1;
    free(sums);
    free(hist);
    // 4. Map, with Floyd–Steinberg diffusion (7/16, 3/16, 5/16, 1/16), serpentine.
    int16_t *cur = e->errors, *next = e->errors + (size_t)(w + 2) * 3;
    memset(e->errors, 0, (size_t)(w + 2) * 6 * sizeof(int16_t));
    for (int y = 0; y < h; y++) {
        const uint8_t *row = pixels + (size_t)y * stride;
        uint8_t *out = e->indices + (size_t)y * w;
        int ltr = (y & 1) == 0, step = ltr ? 1 : -1;
        memset(next, 0, (size_t)(w + 2) * 3 * sizeof(int16_t));
        for (int i = 0; i < w; i++) {
            int x = ltr ? i : w - 1 - i;
            const uint8_t *p = row + (size_t)x * channels;
            if ((keep && keep[(size_t)y * w + x]) || (channels == 4 && p[3] < 128)) { out[x] = 255; continue; }
            int16_t *ec = cur + (x + 1) * 3;
            int r = p[0], g = p[1], b = p[2];
            if (dither) { r = clamp255(r + ec[0] / 16); g = clamp255(g + ec[1] / 16); b = clamp255(b + ec[2] / 16); }
            int bin = (r >> 3) << 10 | (g >> 3) << 5 | b >> 3;
            int k = owner[bin];
            if (k < 0) k = owner[bin] = (int16_t)nearest((const int (*)[3])pal, n, (r & ~7) + 4, (g & ~7) + 4, (b & ~7) + 4);
            out[x] = (uint8_t)k;
            if (!dither) continue;
            int d[3] = {r - pal[k][0], g - pal[k][1], b - pal[k][2]};
            int16_t *ahead = cur + (x + 1 + step) * 3, *below = next + (x + 1) * 3;
            int16_t *behind_below = next + (x + 1 - step) * 3, *ahead_below = next + (x + 1 + step) * 3;
            for (int c = 0; c < 3; c++) {
                ahead[c] += (int16_t)(d[c] * 7);
                behind_below[c] += (int16_t)(d[c] * 3);
                below[c] += (int16_t)(d[c] * 5);
                ahead_below[c] += (int16_t)(d[c]);
            }
        }
        int16_t *t = cur; cur = next; next = t;
    }
    free(owner);
    // What the canvas shows after this frame (opaque frames only: a frame with transparency
    // is disposed to the background, and the next is written whole).
    if (opaque) {
        if (!e->shown) e->shown = malloc((size_t)w * h * 3);
        if (e->shown)
            for (int y = 0; y < h; y++)
                for (int x = 0; x < w; x++) {
                    uint8_t k = e->indices[(size_t)y * w + x];
                    if (keep && keep[(size_t)y * w + x]) continue;
                    uint8_t *d = e->shown + ((size_t)y * w + x) * 3;
                    d[0] = (uint8_t)pal[k][0]; d[1] = (uint8_t)pal[k][1]; d[2] = (uint8_t)pal[k][2];
                }
    } else {
        free(e->shown);
        e->shown = NULL;
    }
    free(keep);
    // 5. The frame: its graphics control (delay, transparency, disposal), palette and indices.
    GraphicsControlBlock gcb = {0};
    gcb.DisposalMode = opaque ? DISPOSE_DO_NOT : DISPOSE_BACKGROUND;
    gcb.DelayTime = delay_cs < 0 ? 0 : delay_cs > 65535 ? 65535 : delay_cs;
    gcb.TransparentColor = transparent ? 255 : NO_TRANSPARENT_COLOR;
    GifByteType ext[4];
    size_t len = EGifGCBToExtension(&gcb, ext);
    GifColorType colors[256];
    memset(colors, 0, sizeof colors);
    for (int i = 0; i < n; i++) {
        colors[i].Red = (GifByteType)pal[i][0]; colors[i].Green = (GifByteType)pal[i][1]; colors[i].Blue = (GifByteType)pal[i][2];
    }
    ColorMapObject *map = GifMakeMapObject(256, colors);
    if (!map) return -1;
    int ok = EGifPutExtension(e->gif, GRAPHICS_EXT_FUNC_CODE, (int)len, ext) != GIF_ERROR
        && EGifPutImageDesc(e->gif, left, top, right - left + 1, bottom - top + 1, false, map) != GIF_ERROR;
    for (int y = top; ok && y <= bottom; y++) ok = EGifPutLine(e->gif, e->indices + (size_t)y * w + left, right - left + 1) != GIF_ERROR;
    GifFreeMapObject(map);
    if (!ok || e->failed) { e->failed = 1; return -1; }
    return 0;
}

const uint8_t *ts_gif_enc_finish(ts_gif_enc *e, size_t *size) {
    if (!e || !e->gif) return NULL;
    int err = 0;
    int ok = EGifCloseFile(e->gif, &err) != GIF_ERROR;
    e->gif = NULL;
    if (!ok || e->failed) return NULL;
    *size = e->size;
    return e->out;
}

void ts_gif_enc_free(ts_gif_enc *e) {
    if (!e) return;
    if (e->gif) { int err; EGifCloseFile(e->gif, &err); }
    free(e->out);
    free(e->errors);
    free(e->indices);
    free(e->shown);
    free(e);
}
