// prctl(2) is variadic, which Swift cannot call; mallopt(3) lives in <malloc.h>, which
// Swift's Glibc module does not export.
#include <malloc.h>
#include <sys/prctl.h>

#include "tessera_shim.h"

int ts_set_parent_death_signal(int sig) {
    return prctl(PR_SET_PDEATHSIG, (unsigned long)sig, 0UL, 0UL, 0UL);
}

int ts_limit_malloc_arenas(int arenas) {
    return mallopt(M_ARENA_MAX, arenas);
}

int ts_keep_freed_buffers(long mmap_threshold, long trim_threshold) {
    return mallopt(M_MMAP_THRESHOLD, (int)mmap_threshold) == 1 && mallopt(M_TRIM_THRESHOLD, (int)trim_threshold) == 1;
}
