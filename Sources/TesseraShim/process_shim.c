// prctl(2) is variadic, which Swift cannot call.
#include <sys/prctl.h>

#include "tessera_shim.h"

int ts_set_parent_death_signal(int sig) {
    return prctl(PR_SET_PDEATHSIG, (unsigned long)sig, 0UL, 0UL, 0UL);
}
