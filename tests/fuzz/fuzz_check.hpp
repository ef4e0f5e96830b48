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

#if defined(MTSARRAY_TEST_HOOKS) && MTSARRAY_TEST_HOOKS
#include <cstdint>

#include "support/test_hooks_api.h"

/// Declared first in a fuzz iteration, so that it is destroyed last: the
/// iteration must leave as many live arrays as it found (no leak on any
/// error path, no double destroy).
class LiveArraysUnchanged {
public:
    LiveArraysUnchanged() : before_(mtsarray_test_live_arrays()) {}
    ~LiveArraysUnchanged() { FUZZ_CHECK(mtsarray_test_live_arrays() == before_); }
    LiveArraysUnchanged(const LiveArraysUnchanged&) = delete;
    LiveArraysUnchanged& operator=(const LiveArraysUnchanged&) = delete;

private:
    int64_t before_;
};
#else
class LiveArraysUnchanged {};
#endif
