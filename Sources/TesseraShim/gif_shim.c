// giflib wrappers: a GIF in memory read record by record (giflib's low-level API, so no frame's
// raster is ever kept by the library), a cheap scan of the frames without decoding them, and
// the compositing of frames 0...N onto an RGBA canvas as a browser shows frame N: transparency,
// interlacing and the disposal methods. See include/tessera_shim.h.
#include "tessera_shim.h"

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
    char message[200];
};

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
    ts_gif_rewind(t);
    return t;
}

void ts_gif_close(ts_gif *t) {
    if (!t) return;
    if (t->gif) { int e; DGifCloseFile(t->gif, &e); }
    free(t->saved);
    free(t->line);
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
        if (DGifGetRecordType(t->gif, &type) == GIF_ERROR) { out->unreadable_after = 1; break; }
        if (type == TERMINATE_RECORD_TYPE) break;
        if (type == EXTENSION_RECORD_TYPE) {
            if (ts_gif_extension(t, &gcb, &out->loop) != 0) { out->unreadable_after = 1; break; }
            continue;
        }
        if (type != IMAGE_DESC_RECORD_TYPE) { out->unreadable_after = 1; break; }
        if (DGifGetImageDesc(t->gif) == GIF_ERROR) { out->unreadable_after = 1; break; }
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
        if (DGifGetCode(t->gif, &size, &block) == GIF_ERROR) { out->unreadable_after = 1; break; }
        int bad = 0;
        while (block) {
            if (DGifGetCodeNext(t->gif, &block) == GIF_ERROR) { bad = 1; break; }
        }
        if (bad) { out->unreadable_after = 1; break; }
        out->frames++;
    }
    return 0;
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
    if (DGifGetImageDesc(g) == GIF_ERROR) { ts_gif_fail(t, g->Error); return -1; }
    const GifImageDesc *d = &g->Image;
    int index = t->index;
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
    // Rows in file order; interlaced frames come in four passes.
    static const int start[4] = {0, 4, 2, 1}, step[4] = {8, 8, 4, 2};
    int passes = d->Interlace ? 4 : 1;
    for (int p = 0; p < passes; p++) {
        int first = d->Interlace ? start[p] : 0, by = d->Interlace ? step[p] : 1;
        for (int r = first; r < d->Height; r += by) {
            if (DGifGetLine(g, line, d->Width) == GIF_ERROR) {
                ts_gif_fail(t, g->Error);
                return g->Error == D_GIF_ERR_READ_FAILED || g->Error == D_GIF_ERR_EOF_TOO_SOON ? -4 : -1;
            }
            uint32_t y = (uint32_t)d->Top + (uint32_t)r;
            if (y < y0 || y >= y1) continue;
            uint8_t *out = canvas + ((size_t)y * cw + x0) * 4;
            for (uint32_t x = x0; x < x1; x++, out += 4) {
                int i = line[x - (uint32_t)d->Left];
                if (i == transparent) continue;
                if (map && i < colours) {
                    out[0] = map->Colors[i].Red; out[1] = map->Colors[i].Green; out[2] = map->Colors[i].Blue;
                } else if (map) {
                    out[0] = out[1] = out[2] = 0;  // an index past the table: black, as browsers draw it
                } else {
                    out[0] = out[1] = out[2] = (uint8_t)i;  // no colour table at all: gray levels
                }
                out[3] = 255;
            }
        }
    }
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
