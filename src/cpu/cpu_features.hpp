#pragma once
// What the CPU running the library can do, for the kernels that have a
// faster variant than the baseline x86-64 build the library is compiled for
// (AVX2 copies and transposes, AVX-512 transposes, chosen at run time).

namespace mtsarray::detail::cpu {

/// For the kernels with a faster variant: `best` uses what the CPU running
/// it has; `baseline` keeps to what the library is compiled for, so that the
/// tests check both variants on one machine.
enum class InstructionSet { baseline, best };

/// Whether the CPU has AVX2 (false off x86-64 or without GCC/Clang builtins).
inline bool cpu_has_avx2() noexcept {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    static const bool has = __builtin_cpu_supports("avx2");
    return has;
#else
    return false;
#endif
}

/// Whether the CPU has AVX-512 Foundation (false off x86-64 or without
/// GCC/Clang builtins).
inline bool cpu_has_avx512f() noexcept {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    static const bool has = __builtin_cpu_supports("avx512f");
    return has;
#else
    return false;
#endif
}

}  // namespace mtsarray::detail::cpu
