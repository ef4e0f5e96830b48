#include "api/foreign_call.hpp"

namespace mtsarray::detail {

void clear_last_error() noexcept {
    (void)mts_set_last_error("", "", nullptr, nullptr);
}

std::string failure_reason() {
    const char* message = nullptr;
    mts_last_error(&message, nullptr, nullptr);
    if (message == nullptr || *message == '\0') {
        return "the callback failed without saying why";
    }
    return message;
}

}  // namespace mtsarray::detail
