#include "base/dtype.hpp"

#include <string>

#include "base/error.hpp"

namespace mtsarray::detail {

namespace {

const char* code_name(uint8_t code) noexcept {
    switch (code) {
    case kDLInt: return "int";
    case kDLUInt: return "uint";
    case kDLFloat: return "float";
    case kDLOpaqueHandle: return "opaque_handle";
    case kDLBfloat: return "bfloat";
    case kDLComplex: return "complex";
    case kDLBool: return "bool";
    case kDLFloat8_e3m4: return "float8_e3m4";
    case kDLFloat8_e4m3: return "float8_e4m3";
    case kDLFloat8_e4m3b11fnuz: return "float8_e4m3b11fnuz";
    case kDLFloat8_e4m3fn: return "float8_e4m3fn";
    case kDLFloat8_e4m3fnuz: return "float8_e4m3fnuz";
    case kDLFloat8_e5m2: return "float8_e5m2";
    case kDLFloat8_e5m2fnuz: return "float8_e5m2fnuz";
    case kDLFloat8_e8m0fnu: return "float8_e8m0fnu";
    case kDLFloat6_e2m3fn: return "float6_e2m3fn";
    case kDLFloat6_e3m2fn: return "float6_e3m2fn";
    case kDLFloat4_e2m1fn: return "float4_e2m1fn";
    default: return nullptr;
    }
}

bool is_float8(uint8_t code) noexcept {
    return code >= kDLFloat8_e3m4 && code <= kDLFloat8_e8m0fnu;
}

bool bits_supported(uint8_t code, uint8_t bits) noexcept {
    switch (code) {
    case kDLInt:
    case kDLUInt: return bits == 8 || bits == 16 || bits == 32 || bits == 64;
    case kDLFloat: return bits == 16 || bits == 32 || bits == 64;
    case kDLBfloat: return bits == 16;
    case kDLComplex: return bits == 64 || bits == 128;
    case kDLBool: return bits == 8;
    default: return is_float8(code) && bits == 8;
    }
}

}  // namespace

std::string dtype_name(DLDataType dtype) {
    const char* name = code_name(dtype.code);
    std::string text;
    if (name == nullptr) {
        text = "unknown dtype (code " + std::to_string(dtype.code) + ", " +
               std::to_string(dtype.bits) + " bits)";
    } else if (dtype.code >= kDLFloat8_e3m4 || dtype.code == kDLBool) {
        // these names carry their width already; say so when the bits disagree
        text = name;
        const unsigned natural = dtype.code == kDLFloat6_e2m3fn || dtype.code == kDLFloat6_e3m2fn ? 6
                                 : dtype.code == kDLFloat4_e2m1fn                                 ? 4
                                                                                                  : 8;
        if (dtype.bits != natural) {
            text += "(" + std::to_string(dtype.bits) + " bits)";
        }
    } else {
        text = name + std::to_string(dtype.bits);
    }
    if (dtype.lanes != 1) {
        text += "x" + std::to_string(dtype.lanes);
    }
    return text;
}

void check_any_dtype(DLDataType dtype) {
    if (code_name(dtype.code) == nullptr || dtype.code == kDLOpaqueHandle) {
        throw Error("unsupported dtype " + dtype_name(dtype) +
                    ": mtsarray stores int, uint, float, bfloat, complex, bool and float8 data");
    }
    if (dtype.bits < 8 || dtype.bits % 8 != 0 || dtype.code == kDLFloat6_e2m3fn ||
        dtype.code == kDLFloat6_e3m2fn || dtype.code == kDLFloat4_e2m1fn) {
        throw Error("unsupported dtype " + dtype_name(dtype) +
                    ": sub-byte types (fewer than 8 bits per element) are not supported");
    }
    if (dtype.lanes != 1) {
        throw Error("unsupported dtype " + dtype_name(dtype) + ": only lanes == 1 is supported");
    }
    if (!bits_supported(dtype.code, dtype.bits)) {
        throw Error("unsupported dtype " + dtype_name(dtype) + ": this width does not exist for " +
                    code_name(dtype.code) + " data");
    }
}

}  // namespace mtsarray::detail
