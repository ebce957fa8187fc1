// Little CMS allocations with a ceiling: a damaged profile's declared counts (a 'desc'
// or 'mluc' tag saying it holds 400 MB) must not become allocations. lcms's own ceiling
// is 512 MB per allocation; real profiles need a few MB (a 33^4 CLUT is 7 MB).
#include <lcms2_plugin.h>
#include <stdlib.h>
#include "tessera_shim.h"

#define TS_LCMS_MAX_ALLOCATION (64u << 20)

static void *ts_lcms_malloc(cmsContext context, cmsUInt32Number size) {
    (void)context;
    return size > TS_LCMS_MAX_ALLOCATION ? NULL : malloc(size);
}

static void ts_lcms_free(cmsContext context, void *p) {
    (void)context;
    free(p);
}

static void *ts_lcms_realloc(cmsContext context, void *p, cmsUInt32Number size) {
    (void)context;
    return size > TS_LCMS_MAX_ALLOCATION ? NULL : realloc(p, size);
}

static cmsPluginMemHandler ts_lcms_memory = {
    {cmsPluginMagicNumber, LCMS_VERSION, cmsPluginMemHandlerSig, NULL},
    ts_lcms_malloc, ts_lcms_free, ts_lcms_realloc, NULL, NULL, NULL,
};

int ts_lcms_limit_allocations(void) {
    return cmsPlugin(&ts_lcms_memory) ? 1 : 0;
}
