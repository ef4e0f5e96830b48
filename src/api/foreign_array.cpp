#include "api/foreign_array.hpp"

#include <string>

#include "api/foreign_call.hpp"
#include "base/dlpack_owner.hpp"
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
    // stream, which the borrowed view then works on. A tensor handed out by
    // an export that reports a failure is ours all the same: released.
    DLPackOwner owner(nullptr);
    call_foreign(std::string("exporting ") + role + " through DLPack", [&] {
        const auto status = source.as_dlpack(source.ptr, &tensor, own, nullptr, version);
        owner.adopt(tensor);
        return status;
    });
    return from_dlpack(owner.release());  // takes ownership of the tensor, and validates it
}

}  // namespace mtsarray::detail
