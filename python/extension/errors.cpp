#include "errors.hpp"

#include <string>

#include <nanobind/stl/string.h>

namespace nb = nanobind;

namespace mtsarray_python {

namespace {
PyObject* error_type = nullptr;  // mtsarray.Error, alive as long as the module
}

void register_error_type(nb::module_& module) {
    // named after the module it is defined in, so that nanobind's stubgen
    // writes it into _mtsarray.pyi (mtsarray/__init__.py renames it)
    const std::string name = nb::cast<std::string>(module.attr("__name__")) + ".Error";
    error_type = PyErr_NewExceptionWithDoc(
        name.c_str(),
        "An operation of the mtsarray library failed; the message is the "
        "library's own (it names the function, the arrays and what was wrong).",
        PyExc_RuntimeError, nullptr);
    if (error_type == nullptr) {
        throw nb::python_error();
    }
    module.attr("Error") = nb::handle(error_type);
}

void raise_error(const std::string& message) {
    PyErr_SetString(error_type, message.c_str());
    throw nb::python_error();
}

void raise_last_error() {
    const char* message = nullptr;
    mts_last_error(&message, nullptr, nullptr);
    raise_error(message == nullptr || message[0] == '\0' ? "mtsarray: unknown error" : message);
}

}  // namespace mtsarray_python
