// What the LZW decoders of tiff_shim.c and gif_shim.c share: a table entry is a run already
// in the output (a code's string is the previous string plus one byte, written side by side)
// with its first 8 bytes kept beside it, so a short string is one store, never a load from
// output just written.
#ifndef TESSERA_LZW_RUN_H
#define TESSERA_LZW_RUN_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef struct { uint64_t head; uint32_t off, len; } ts_lzw_entry;

/// Writes entry `e`'s string at `out + op` (at most `cap - op` bytes of it). The run ends at or
/// before `op`, so 16-byte chunks loaded before they are stored only ever read finished bytes;
/// what they write past the string is rewritten by the next ones.
static inline void ts_lzw_put(uint8_t *out, size_t op, size_t cap, ts_lzw_entry e) {
    const uint8_t *src = out + e.off;
    if (op + e.len + 24 <= cap) {
        memcpy(out + op, &e.head, 8);
        for (uint32_t k = 8; k < e.len; k += 16) {
            uint64_t a, b;
            memcpy(&a, src + k, 8); memcpy(&b, src + k + 8, 8);
            memcpy(out + op + k, &a, 8); memcpy(out + op + k + 8, &b, 8);
        }
    } else {
        size_t k = e.len < cap - op ? e.len : cap - op;
        for (size_t i = 0; i < k; i++) out[op + i] = i < 8 ? (uint8_t)(e.head >> (8 * i)) : src[i];
    }
}

#endif
