// LibRaw's C API (Debian libraw-dev): camera raw files. Its header only; the library is
// opened at the first raw file (Sources/TesseraShim/raw_shim.c).
#include <libraw/libraw.h>
