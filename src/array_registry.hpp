#pragma once
// The set of live Arrays, so that a pointer handed to us (move_data's input,
// an mts_array_t given to the C API) can be recognised as one of ours without
// reading foreign memory.

namespace mtsarray {

class Array;

void register_array(const Array* array);
void unregister_array(const Array* array) noexcept;
bool is_registered_array(const void* pointer) noexcept;

}  // namespace mtsarray
