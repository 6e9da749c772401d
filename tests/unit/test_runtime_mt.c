/* test_runtime_mt.c -- placeholder */
#include "config.h"
#include "rt_util.h"
TEST(placeholder) {}
