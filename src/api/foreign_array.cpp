#include "api/foreign_array.hpp"

#include <string>

#include "api/foreign_call.hpp"
#include "base/error.hpp"
#include "operations/operations.hpp"

namespace mtsarray::detail {

std::unique_ptr<Array> borrow_foreign_array(const mts_array_t& source, const char* role) {
    MTSARRAY_EXPECTS(source.device != nullptr && source.as_dlpack != nullptr,
                     std::string(role) + " has no device or as_dlpack function");
    DLDevice own = {};
    call_foreign(std::string("reading the device of ") + role, [&] { return source.device(source.ptr, &own); });
    DLManagedTensorVersioned* tensor = nullptr;
    const DLPackVersion version = {DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION};
    // NULL stream: the producer orders its work before the device's default
    // stream, which the borrowed view then works on
    call_foreign(std::string("exporting ") + role + " through DLPack",
                 [&] { return source.as_dlpack(source.ptr, &tensor, own, nullptr, version); });
    return from_dlpack(tensor);  // takes ownership of `tensor`, and validates it
}

}  // namespace mtsarray::detail
