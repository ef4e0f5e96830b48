#pragma once
// mtsarray.MovePlan: a movement plan (mtsarray_move_plan_t) owned by a
// Python object, freed when the object dies.

#include <cstdint>

#include <nanobind/nanobind.h>

#include "mtsarray.h"

#include "array.hpp"

namespace mtsarray_python {

class MovePlan {
public:
    /// mtsarray_move_plan_create(output, input, movements).
    MovePlan(const Array& output, const Array& input, nanobind::handle movements);
    ~MovePlan();
    MovePlan(const MovePlan&) = delete;
    MovePlan& operator=(const MovePlan&) = delete;

    /// mtsarray_move_plan_execute(plan, output, input), the GIL released.
    void execute(Array& output, const Array& input) const;

private:
    mtsarray_move_plan_t* plan_ = nullptr;
};

}  // namespace mtsarray_python
