// giflib wrappers: a GIF in memory read record by record (giflib's low-level API, so no frame's
// raster is ever kept by the library), a cheap scan of the frames without decoding them, and
// the compositing of frames 0...N onto an RGBA canvas as a browser shows frame N: transparency,
// interlacing and the disposal methods. See include/tessera_shim.h.
#include "tessera_shim.h"
#include "lzw_run.h"

#include <gif_lib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct ts_gif {
    GifFileType *gif;
    const uint8_t *data;
    size_t size, pos;
    // Compositing state (ts_gif_begin / ts_gif_next).
    uint8_t *canvas, *saved, *line;
    uint32_t cw, ch;
    uint64_t max_frame_pixels;
    int prev_disposal, prev_transparent, index;
    uint32_t px0, py0, px1, py1;  ///< the previous frame's rectangle on the canvas (clipped)
    uint8_t *lzw, *indices;       ///< a frame's LZW data gathered, and its palette indices
    size_t lzw_cap, indices_cap;
    size_t whole_limit;           ///< largest frame decoded whole (else line by line by giflib)
    int lenient;                  ///< a frame cut short or damaged keeps what decoded (ts_gif_cut says so)
    int cut;                      ///< the last frame was cut short: rows from `cut_row` down are not its
    uint32_t cut_row;
    char cut_message[200];
    char message[200];
};

/// Largest frame whose indices are decoded whole (64 MB); larger ones go line by line through giflib.
enum { TS_GIF_WHOLE_FRAME = 64 << 20 };

void ts_gif_set_whole_frame_limit(ts_gif *t, size_t pixels) { t->whole_limit = pixels; }
void ts_gif_set_lenient(ts_gif *t, int lenient) { t->lenient = lenient; }

int ts_gif_cut(const ts_gif *t, uint32_t *row, const char **message) {
    if (row) *row = t->cut_row;
    if (message) *message = t->cut_message;
    return t->cut;
}

static int ts_gif_input(GifFileType *g, GifByteType *buf, int n) {
    ts_gif *t = (ts_gif *)g->UserData;
    if (n <= 0) return 0;
    size_t left = t->pos < t->size ? t->size - t->pos : 0;
    size_t k = (size_t)n < left ? (size_t)n : left;
    memcpy(buf, t->data + t->pos, k);
    t->pos += k;
    return (int)k;
}

static void ts_gif_fail(ts_gif *t, int code) {
    const char *s = GifErrorString(code);
    snprintf(t->message, sizeof t->message, "%s", s ? s : "unreadable GIF");
}

/// (Re)opens at the start: reads the signature and the logical screen.
static int ts_gif_rewind(ts_gif *t) {
    if (t->gif) { int e; DGifCloseFile(t->gif, &e); t->gif = NULL; }
    t->pos = 0;
    int err = 0;
    t->gif = DGifOpen(t, ts_gif_input, &err);
    if (!t->gif) { ts_gif_fail(t, err); return -1; }
    return 0;
}

ts_gif *ts_gif_open(const uint8_t *data, size_t size) {
    ts_gif *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    t->data = data;
    t->size = size;
    t->whole_limit = TS_GIF_WHOLE_FRAME;
    ts_gif_rewind(t);
    return t;
}

void ts_gif_close(ts_gif *t) {
    if (!t) return;
    if (t->gif) { int e; DGifCloseFile(t->gif, &e); }
    free(t->saved);
    free(t->line);
    free(t->lzw);
    free(t->indices);
    free(t);
}

int ts_gif_ok(const ts_gif *t) { return t && t->gif != NULL; }
const char *ts_gif_message(const ts_gif *t) { return t->message; }

void ts_gif_screen(const ts_gif *t, uint32_t *width, uint32_t *height) {
    *width = t->gif->SWidth > 0 ? (uint32_t)t->gif->SWidth : 0;
    *height = t->gif->SHeight > 0 ? (uint32_t)t->gif->SHeight : 0;
}

/// Reads an extension's blocks; a Graphics Control Extension fills `gcb`, NETSCAPE2.0's loop
/// count `loop`. -1 on a read error.
static int ts_gif_extension(ts_gif *t, GraphicsControlBlock *gcb, int *loop) {
    int code = 0;
    GifByteType *block = NULL;
    if (DGifGetExtension(t->gif, &code, &block) == GIF_ERROR) return -1;
    int app_netscape = 0;
    if (code == GRAPHICS_EXT_FUNC_CODE && block && block[0] >= 4 && gcb) {
        DGifExtensionToGCB(block[0], block + 1, gcb);
    } else if (code == APPLICATION_EXT_FUNC_CODE && block && block[0] >= 11) {
        app_netscape = memcmp(block + 1, "NETSCAPE2.0", 11) == 0 || memcmp(block + 1, "ANIMEXTS1.0", 11) == 0;
    }
    while (block) {
        if (DGifGetExtensionNext(t->gif, &block) == GIF_ERROR) return -1;
        if (app_netscape && block && block[0] >= 3 && block[1] == 1 && loop) *loop = block[2] | block[3] << 8;
    }
    return 0;
}

int ts_gif_scan(ts_gif *t, ts_gif_scan_result *out) {
    memset(out, 0, sizeof *out);
    out->loop = -1;
    if (ts_gif_rewind(t) != 0) return -1;
    GraphicsControlBlock gcb = {0, false, 0, NO_TRANSPARENT_COLOR};
    for (;;) {
        GifRecordType type;
        if (DGifGetRecordType(t->gif, &type) == GIF_ERROR) { out->unreadable_after = 1; out->ends_early = t->pos >= t->size; break; }
        if (type == TERMINATE_RECORD_TYPE) break;
        if (type == EXTENSION_RECORD_TYPE) {
            if (ts_gif_extension(t, &gcb, &out->loop) != 0) { out->unreadable_after = 1; out->ends_early = t->pos >= t->size; break; }
            continue;
        }
        if (type != IMAGE_DESC_RECORD_TYPE) { out->unreadable_after = 1; break; }
        if (DGifGetImageDesc(t->gif) == GIF_ERROR) { out->unreadable_after = 1; out->ends_early = t->pos >= t->size; break; }
        const GifImageDesc *d = &t->gif->Image;
        if (d->Left < 0 || d->Top < 0 || d->Width <= 0 || d->Height <= 0) { out->unreadable_after = 1; break; }
        uint32_t right = (uint32_t)d->Left + (uint32_t)d->Width, bottom = (uint32_t)d->Top + (uint32_t)d->Height;
        if (right > out->extent_width) out->extent_width = right;
        if (bottom > out->extent_height) out->extent_height = bottom;
        uint64_t area = (uint64_t)d->Width * (uint64_t)d->Height;
        if (area > out->largest_frame) out->largest_frame = area;
        if (gcb.TransparentColor != NO_TRANSPARENT_COLOR) out->transparency = 1;
        if (d->Interlace) out->interlaced = 1;
        out->duration_cs += gcb.DelayTime > 0 ? (uint64_t)gcb.DelayTime : 0;
        gcb = (GraphicsControlBlock){0, false, 0, NO_TRANSPARENT_COLOR};
        // Skip the frame's data without decoding it.
        int size = 0;
        GifByteType *block = NULL;
        if (DGifGetCode(t->gif, &size, &block) == GIF_ERROR) { out->unreadable_after = 1; out->ends_early = t->pos >= t->size; break; }
        int bad = 0;
        while (block) {
            if (DGifGetCodeNext(t->gif, &block) == GIF_ERROR) { bad = 1; break; }
        }
        if (bad) { out->unreadable_after = 1; out->ends_early = t->pos >= t->size; break; }
        out->frames++;
    }
    return 0;
}

// GIF's LZW (LSB-first codes of min+1 to 12 bits, Clear and End after the literals, a full
// table kept until the next Clear) decoded in one pass over a frame's gathered data, each
// code one copy of a run already in the output (as the TIFF decoder does). Returns the
// indices written (at most `cap`), or -1 for a code that cannot be.
static long ts_gif_lzw_decode(const uint8_t *in, size_t n, int min_size, uint8_t *out, size_t cap, size_t *good) {
    ts_lzw_entry e[4096];
    const uint32_t clear = 1u << min_size, end = clear + 1;
    for (uint32_t c = 0; c < clear; c++) { e[c].head = c; e[c].len = 1; e[c].off = 0; }
    uint64_t bits = 0;
    int have = 0, width = min_size + 1;
    size_t ip = 0, op = 0, prev_pos = 0;
    uint32_t next = clear + 2, prev_len = 0;
    uint64_t prev_head = 0;
    int prev = -1;
    if (cap > UINT32_MAX) return -1;
    while (op < cap) {
        if (have < width) {
            if (ip + 8 <= n) {
                uint64_t v;
                memcpy(&v, in + ip, 8);  // little-endian: the next bits above those held
                int take = (63 - have) >> 3;
                bits |= (take * 8 == 64 ? v : v & ((1ull << (take * 8)) - 1)) << have;
                ip += (size_t)take;
                have += take * 8;
            } else {
                while (have <= 56 && ip < n) { bits |= (uint64_t)in[ip++] << have; have += 8; }
                if (have < width) break;  // the data ends first
            }
        }
        uint32_t code = (uint32_t)bits & ((1u << width) - 1);
        bits >>= width;
        have -= width;
        if (code == clear) { width = min_size + 1; next = clear + 2; prev = -1; continue; }
        if (code == end) break;
        if (code > next || (code == next && prev < 0) || (code > end && prev < 0 && code >= next)) { *good = op < cap ? op : cap; return -1; }
        if (prev >= 0 && next < 4096) {
            uint64_t first = (code == next ? prev_head : e[code].head) & 0xff;
            e[next].head = prev_len >= 8 ? prev_head : prev_head | first << (8 * prev_len);
            e[next].off = (uint32_t)prev_pos;
            e[next].len = prev_len + 1;
            next++;
            if (next == (1u << width) && width < 12) width++;
        } else if (code == next) {
            *good = op < cap ? op : cap;
            return -1;  // a full table: the code being defined cannot be
        }
        uint32_t l = e[code].len;
        uint64_t h = e[code].head;
        ts_lzw_put(out, op, cap, e[code]);
        prev = (int)code;
        prev_pos = op;
        prev_len = l;
        prev_head = h;
        op += l;
    }
    return (long)(op < cap ? op : cap);
}

int ts_gif_begin(ts_gif *t, uint8_t *canvas, uint32_t cw, uint32_t ch, uint64_t max_frame_pixels) {
    free(t->saved); t->saved = NULL;
    if (!t->line) t->line = malloc(65536);
    if (!t->line) { snprintf(t->message, sizeof t->message, "out of memory"); return -1; }
    if (ts_gif_rewind(t) != 0) return -1;
    t->canvas = canvas; t->cw = cw; t->ch = ch; t->max_frame_pixels = max_frame_pixels;
    t->prev_disposal = DISPOSAL_UNSPECIFIED; t->prev_transparent = 0;
    t->px0 = t->py0 = t->px1 = t->py1 = 0;
    t->index = 0;
    return 0;
}

int ts_gif_next(ts_gif *t, int *delay_cs) {
    GifFileType *g = t->gif;
    uint8_t *canvas = t->canvas, *line = t->line;
    uint32_t cw = t->cw, ch = t->ch;
    if (!g || !canvas) { snprintf(t->message, sizeof t->message, "not started"); return -1; }
    GraphicsControlBlock gcb = {0, false, 0, NO_TRANSPARENT_COLOR};
    for (;;) {
        GifRecordType type;
        if (DGifGetRecordType(g, &type) == GIF_ERROR) { ts_gif_fail(t, g->Error); return -1; }
        if (type == TERMINATE_RECORD_TYPE) {
            snprintf(t->message, sizeof t->message, "%d frame%s", t->index, t->index == 1 ? "" : "s");
            return -2;
        }
        if (type == EXTENSION_RECORD_TYPE) {
            if (ts_gif_extension(t, &gcb, NULL) != 0) { ts_gif_fail(t, g->Error); return -1; }
            continue;
        }
        if (type != IMAGE_DESC_RECORD_TYPE) { snprintf(t->message, sizeof t->message, "unknown record in the GIF"); return -1; }
        break;
    }
    if (DGifGetImageDesc(g) == GIF_ERROR) { ts_gif_fail(t, g->Error); return t->pos >= t->size ? -4 : -1; }
    const GifImageDesc *d = &g->Image;
    int index = t->index;
    t->cut = 0;
    t->cut_message[0] = 0;
    if (d->Left < 0 || d->Top < 0 || d->Width <= 0 || d->Height <= 0 || d->Width > 65535 || d->Height > 65535) {
        snprintf(t->message, sizeof t->message, "frame %d has an empty or impossible rectangle", index);
        return -1;
    }
    if ((uint64_t)d->Width * (uint64_t)d->Height > t->max_frame_pixels) {
        snprintf(t->message, sizeof t->message, "frame %d declares %dx%d pixels, over the limit", index, d->Width, d->Height);
        return -3;
    }
    // What the previous frame asked for, now that the next one comes.
    uint32_t px0 = t->px0, py0 = t->py0, px1 = t->px1, py1 = t->py1;
    if (t->prev_disposal == DISPOSE_BACKGROUND) {
        // A frame with a transparent index clears to transparent; one without, to the
        // screen's background colour (as libnsgif — vips — and Pillow do).
        uint8_t fill[4] = {0, 0, 0, 0};
        const ColorMapObject *global = g->SColorMap;
        if (!t->prev_transparent && global && g->SBackGroundColor >= 0 && g->SBackGroundColor < global->ColorCount) {
            fill[0] = global->Colors[g->SBackGroundColor].Red;
            fill[1] = global->Colors[g->SBackGroundColor].Green;
            fill[2] = global->Colors[g->SBackGroundColor].Blue;
            fill[3] = 255;
        }
        for (uint32_t y = py0; y < py1; y++) {
            uint8_t *o = canvas + ((size_t)y * cw + px0) * 4;
            for (uint32_t x = px0; x < px1; x++, o += 4) memcpy(o, fill, 4);
        }
    } else if (t->prev_disposal == DISPOSE_PREVIOUS && t->saved) {
        for (uint32_t y = py0; y < py1; y++)
            memcpy(canvas + ((size_t)y * cw + px0) * 4, t->saved + (size_t)(y - py0) * (px1 - px0) * 4, (size_t)(px1 - px0) * 4);
    }
    uint32_t x0 = (uint32_t)d->Left < cw ? (uint32_t)d->Left : cw;
    uint32_t y0 = (uint32_t)d->Top < ch ? (uint32_t)d->Top : ch;
    uint32_t x1 = (uint32_t)d->Left + (uint32_t)d->Width < cw ? (uint32_t)d->Left + (uint32_t)d->Width : cw;
    uint32_t y1 = (uint32_t)d->Top + (uint32_t)d->Height < ch ? (uint32_t)d->Top + (uint32_t)d->Height : ch;
    free(t->saved);
    t->saved = NULL;
    if (gcb.DisposalMode == DISPOSE_PREVIOUS && x1 > x0 && y1 > y0) {
        t->saved = malloc((size_t)(x1 - x0) * (y1 - y0) * 4);
        if (!t->saved) { snprintf(t->message, sizeof t->message, "out of memory"); return -1; }
        for (uint32_t y = y0; y < y1; y++)
            memcpy(t->saved + (size_t)(y - y0) * (x1 - x0) * 4, canvas + ((size_t)y * cw + x0) * 4, (size_t)(x1 - x0) * 4);
    }
    const ColorMapObject *map = d->ColorMap ? d->ColorMap : g->SColorMap;
    int colours = map ? map->ColorCount : 256;
    int transparent = gcb.TransparentColor;
    // Each index's RGBA: the table's colour; past the table black (as browsers draw it);
    // without a table at all, gray levels.
    uint8_t pal[256][4];
    for (int i = 0; i < 256; i++) {
        if (map && i < colours) { pal[i][0] = map->Colors[i].Red; pal[i][1] = map->Colors[i].Green; pal[i][2] = map->Colors[i].Blue; }
        else if (map) { pal[i][0] = pal[i][1] = pal[i][2] = 0; }
        else { pal[i][0] = pal[i][1] = pal[i][2] = (uint8_t)i; }
        pal[i][3] = 255;
    }
    size_t area = (size_t)d->Width * (size_t)d->Height;
    if (area <= t->whole_limit) {
        // The frame's data gathered, decoded whole by Tessera's LZW decoder.
        int min_size = 0;
        GifByteType *block = NULL;
        if (DGifGetCode(g, &min_size, &block) == GIF_ERROR) { ts_gif_fail(t, g->Error); return g->Error == D_GIF_ERR_READ_FAILED ? -4 : -1; }
        size_t n = 0;
        int ended = 0;  // lenient: the data ended inside the frame
        while (block) {
            size_t k = block[0];
            if (n + k > t->lzw_cap) {
                size_t cap = t->lzw_cap ? t->lzw_cap * 2 : 65536;
                while (cap < n + k) cap *= 2;
                uint8_t *grown = realloc(t->lzw, cap);
                if (!grown) { snprintf(t->message, sizeof t->message, "out of memory"); return -1; }
                t->lzw = grown;
                t->lzw_cap = cap;
            }
            memcpy(t->lzw + n, block + 1, k);
            n += k;
            if (DGifGetCodeNext(g, &block) == GIF_ERROR) {
                ts_gif_fail(t, g->Error);
                if (!t->lenient) return -4;
                ended = 1;
                break;
            }
        }
        if (min_size < 1 || min_size > 8) {
            snprintf(t->message, sizeof t->message, "frame %d: LZW code size %d (1 to 8)", index, min_size);
            if (!t->lenient || min_size > 11) return -1;
            // As gifsicle reads it: a size below 2 as 2 (the smallest encoders write).
            snprintf(t->cut_message, sizeof t->cut_message, "frame %d: LZW code size %d, read as %d", index, min_size,
                     min_size < 2 ? 2 : min_size);
            t->cut = 1;
            t->cut_row = ch;
            if (min_size < 2) min_size = 2;
        }
        if (area > t->indices_cap) {
            uint8_t *grown = realloc(t->indices, area);
            if (!grown) { snprintf(t->message, sizeof t->message, "out of memory"); return -1; }
            t->indices = grown;
            t->indices_cap = area;
        }
        size_t good = 0;
        long got = ts_gif_lzw_decode(t->lzw, n, min_size, t->indices, area, &good);
        if (got < 0) {
            snprintf(t->message, sizeof t->message, "frame %d: corrupt LZW data after %zu of its %zu pixels", index, good, area);
            if (!t->lenient) return -1;
            snprintf(t->cut_message, sizeof t->cut_message, "%s", t->message);
            got = (long)good;
        } else if ((size_t)got < area) {
            snprintf(t->message, sizeof t->message, "frame %d: the data ends after %ld of its %zu pixels", index, got, area);
            if (!t->lenient) return -4;
            snprintf(t->cut_message, sizeof t->cut_message, "%s", t->message);
        } else if (ended) {
            snprintf(t->cut_message, sizeof t->cut_message, "frame %d: the data ends after its pixels (%s)", index, t->message);
        }
        if ((size_t)got < area) {
            // Only the rows decoded whole are drawn: what follows is the canvas as it was.
            t->cut = 1;
            size_t rows = (size_t)got / (size_t)d->Width;
            if (d->Interlace) {
                // Interlaced rows come in four passes: every row may be partly drawn.
                t->cut_row = y1;
            } else {
                t->cut_row = (uint32_t)d->Top + (uint32_t)rows < y1 ? (uint32_t)d->Top + (uint32_t)rows : y1;
            }
            memset(t->indices + (size_t)got, transparent >= 0 ? transparent : 0, area - (size_t)got);
            if (!d->Interlace) area = rows * (size_t)d->Width;
        } else if (ended) {
            t->cut = 1;
            t->cut_row = ch;
        }
        static const int start[4] = {0, 4, 2, 1}, step[4] = {8, 8, 4, 2};
        int passes = d->Interlace ? 4 : 1;
        const uint8_t *row = t->indices;
        int height = d->Interlace ? d->Height : (int)(area / (size_t)d->Width);
        for (int p = 0; p < passes; p++) {
            int first = d->Interlace ? start[p] : 0, by = d->Interlace ? step[p] : 1;
            for (int r = first; r < height; r += by, row += d->Width) {
                uint32_t y = (uint32_t)d->Top + (uint32_t)r;
                if (y < y0 || y >= y1) continue;
                uint8_t *out = canvas + ((size_t)y * cw + x0) * 4;
                const uint8_t *src = row + (x0 - (uint32_t)d->Left);
                if (transparent < 0) {
                    for (uint32_t x = x0; x < x1; x++, out += 4) memcpy(out, pal[*src++], 4);
                } else {
                    for (uint32_t x = x0; x < x1; x++, out += 4, src++) if (*src != transparent) memcpy(out, pal[*src], 4);
                }
            }
        }
    } else {
    // Rows in file order; interlaced frames come in four passes.
    static const int start[4] = {0, 4, 2, 1}, step[4] = {8, 8, 4, 2};
    int passes = d->Interlace ? 4 : 1;
    for (int p = 0; p < passes; p++) {
        int first = d->Interlace ? start[p] : 0, by = d->Interlace ? step[p] : 1;
        for (int r = first; r < d->Height; r += by) {
            if (DGifGetLine(g, line, d->Width) == GIF_ERROR) {
                ts_gif_fail(t, g->Error);
                int rc = g->Error == D_GIF_ERR_READ_FAILED || g->Error == D_GIF_ERR_EOF_TOO_SOON ? -4 : -1;
                if (!t->lenient) return rc;
                snprintf(t->cut_message, sizeof t->cut_message, "frame %d: %s at its row %d", index, t->message, r);
                t->cut = 1;
                uint32_t at = (uint32_t)d->Top + (uint32_t)r;
                t->cut_row = d->Interlace ? y1 : (at < y1 ? at : y1);
                goto drawn;
            }
            uint32_t y = (uint32_t)d->Top + (uint32_t)r;
            if (y < y0 || y >= y1) continue;
            uint8_t *out = canvas + ((size_t)y * cw + x0) * 4;
            for (uint32_t x = x0; x < x1; x++, out += 4) {
                int i = line[x - (uint32_t)d->Left];
                if (i != transparent) memcpy(out, pal[i], 4);
            }
        }
    }
    }
drawn:
    t->prev_disposal = gcb.DisposalMode;
    t->prev_transparent = transparent != NO_TRANSPARENT_COLOR;
    t->px0 = x0; t->py0 = y0; t->px1 = x1 > x0 ? x1 : x0; t->py1 = y1 > y0 ? y1 : y0;
    if (delay_cs) *delay_cs = gcb.DelayTime;
    t->index++;
    return index;
}

int ts_gif_render(ts_gif *t, int frame, uint8_t *canvas, uint32_t cw, uint32_t ch, uint64_t max_frame_pixels) {
    if (ts_gif_begin(t, canvas, cw, ch, max_frame_pixels) != 0) return -1;
    for (;;) {
        int rc = ts_gif_next(t, NULL);
        if (rc == -2) {
            snprintf(t->message, sizeof t->message, "frame %d of a GIF with %d frame%s", frame, t->index, t->index == 1 ? "" : "s");
            return -2;
        }
        if (rc < 0) return rc;
        if (rc == frame) return frame + 1;
    }
}

int ts_rgba_to_rgb_if_opaque(const uint8_t *rgba, size_t pixels, uint8_t *rgb) {
    uint8_t all = 255;
    for (size_t i = 0; i < pixels; i++) all &= rgba[i * 4 + 3];
    if (all != 255) return 0;
    for (size_t i = 0; i < pixels; i++) { rgb[i * 3] = rgba[i * 4]; rgb[i * 3 + 1] = rgba[i * 4 + 1]; rgb[i * 3 + 2] = rgba[i * 4 + 2]; }
    return 1;
}
