#include "api/c_boundary.hpp"

#include <cstdio>
#include <exception>
#include <new>
#include <string>

#include "base/error.hpp"

namespace mtsarray::detail {

void check_not_null(const void* pointer, const char* name) {
    MTSARRAY_EXPECTS(pointer != nullptr, std::string(name) + " is NULL");
}

Shape shape_argument(const uintptr_t* shape, uintptr_t count) {
    MTSARRAY_EXPECTS(shape != nullptr || count == 0, "shape is NULL with shape_count = " + std::to_string(count));
    return Shape(shape, count);
}

mts_status_t set_last_error_from_current_exception(const std::string& context) noexcept {
    auto exception = std::current_exception();
    std::string message;
    try {
        try {
            std::rethrow_exception(exception);
        } catch (const std::bad_alloc&) {
            message = context + ": out of host memory";
        } catch (const std::exception& error) {
            message = context + ": " + error.what();
        } catch (...) {
            message = context + ": unknown error";
        }
    } catch (...) {
        // building the message itself failed (out of memory): say what we can
        std::fputs("mtsarray: could not build an error message\n", stderr);
        return MTS_CALLBACK_ERROR;
    }

    std::exception_ptr* data = nullptr;
    try {
        data = new std::exception_ptr(exception);
    } catch (...) {
        data = nullptr;
    }
    auto status = mts_set_last_error(message.c_str(), error_origin, data, [](void* pointer) {
        delete static_cast<std::exception_ptr*>(pointer);
    });
    if (status != MTS_SUCCESS) {
        delete data;
        std::fprintf(stderr, "mtsarray: could not set the last error (%s)\n", message.c_str());
    }
    return MTS_CALLBACK_ERROR;
}

}  // namespace mtsarray::detail
