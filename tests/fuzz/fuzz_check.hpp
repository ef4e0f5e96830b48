#pragma once
// The fuzz targets' invariant check: on failure, print the condition and
// mtsarray's last error, then abort so that libFuzzer keeps the input.

#include <cstdint>
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

/// Whether this process was started with an invalid thread count in its
/// environment (scripts/fuzz.sh runs some targets with
/// MTSARRAY_NUM_THREADS=lots): every host data operation then fails. Its
/// first call sets the last error: make it before the call under test.
inline bool invalid_thread_count() {
    static const bool invalid = [] {
        int32_t count = 0;
        return mtsarray_get_num_threads(&count) != MTS_SUCCESS;
    }();
    return invalid;
}

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
