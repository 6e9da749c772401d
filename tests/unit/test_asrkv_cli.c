#include "config.h"
#include "asr_test.h"
