#pragma once
// The fuzz targets' invariant check: on failure, print the condition and
// mtsarray's last error, then abort so that libFuzzer keeps the input.

#include <cstdio>
#include <cstdlib>

#include "mtsarray.h"

#define FUZZ_CHECK(condition)                                                                 \
    do {                                                                                      \
        if (!(condition)) {                                                                   \
            const char* message_ = nullptr;                                                   \
            mts_last_error(&message_, nullptr, nullptr);                                      \
            std::fprintf(stderr, "%s:%d: check failed: %s\n  last error: %s\n", __FILE__,     \
                         __LINE__, #condition, message_ ? message_ : "(none)");                \
            std::abort();                                                                     \
        }                                                                                     \
    } while (false)
