#include "lazy_open.h"

#include <dlfcn.h>

int ts_lazy_open(const char *const *sonames, size_t libraries, const ts_lazy_symbol *symbols, size_t count,
                 ts_lazy_failure *failure) {
    enum { MAX_LIBRARIES = 8 };
    void *libs[MAX_LIBRARIES];
    *failure = (ts_lazy_failure){0};
    if (libraries > MAX_LIBRARIES) libraries = MAX_LIBRARIES;
    for (size_t i = 0; i < libraries; i++) {
        libs[i] = dlopen(sonames[i], RTLD_NOW | RTLD_LOCAL);
        if (!libs[i]) {
            const char *e = dlerror();
            failure->soname = sonames[i];
            failure->reason = e ? e : "?";
            return -1;
        }
    }
    for (size_t k = 0; k < count; k++) {
        void *f = NULL;
        for (size_t i = 0; i < libraries && !f; i++) f = dlsym(libs[i], symbols[k].name);
        if (!f) {
            failure->missing = symbols[k].name;
            return -1;
        }
        *symbols[k].slot = f;
    }
    return 0;
}
