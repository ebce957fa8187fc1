// Libraries opened at their first use instead of linked (docs/decisions/026-lazy-ffmpeg.md):
// FFmpeg (video_shim.c), libcurl (curl_shim.c), libheif and libjxl (lazy_codecs.c).
#ifndef TESSERA_LAZY_OPEN_H
#define TESSERA_LAZY_OPEN_H

#include <stddef.h>

/// A function to resolve, and where its address goes.
typedef struct {
    const char *name;
    void **slot;
} ts_lazy_symbol;

/// What `ts_lazy_open` could not do, for its caller's message.
typedef struct {
    const char *soname;   ///< the library that could not be loaded (NULL: they all were)
    const char *reason;   ///< dlerror's words for it
    const char *missing;  ///< the first function none of them has (NULL: all found)
} ts_lazy_failure;

/// Opens `sonames` (`RTLD_NOW | RTLD_LOCAL`, in order) and fills every slot of `symbols`
/// from the first of them that has it. 0, or -1 with `failure` saying what was missing.
int ts_lazy_open(const char *const *sonames, size_t libraries, const ts_lazy_symbol *symbols, size_t count,
                 ts_lazy_failure *failure);

#endif
