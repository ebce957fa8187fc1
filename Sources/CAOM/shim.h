#include <aom/aom_encoder.h>
#include <aom/aomcx.h>
