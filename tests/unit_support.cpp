// The one function of src/array.cpp that the unit-tested sources
// (move_plan.cpp) use. array.cpp itself pulls in the whole dispatch layer and
// the backends, which the shared library keeps hidden, so the unit tests carry
// this copy; it must match src/array.cpp (checked through the messages the
// unit tests assert).

#include <string>
#include <vector>

#include "array.hpp"

namespace mtsarray {

std::string describe_shape(const std::vector<uintptr_t>& shape) {
    std::string text = "[";
    for (size_t i = 0; i < shape.size(); i++) {
        text += (i == 0 ? "" : ", ") + std::to_string(shape[i]);
    }
    return text + "]";
}

}  // namespace mtsarray
