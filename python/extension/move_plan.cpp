#include "move_plan.hpp"

namespace nb = nanobind;

namespace mtsarray_python {

MovePlan::MovePlan(const Array& output, const Array& input, nb::handle movements)
    : plan_(output.create_move_plan(input, movements)) {}

MovePlan::~MovePlan() {
    (void)mtsarray_move_plan_free(plan_);  // its own live handle (or NULL): never fails
}

void MovePlan::execute(Array& output, const Array& input) const {
    output.execute_move_plan(plan_, input);
}

}  // namespace mtsarray_python
