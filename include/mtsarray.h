#ifndef MTSARRAY_H
#define MTSARRAY_H
/*
 * mtsarray: metatensor arrays (mts_array_t) whose data lives on the CPU, on
 * NVIDIA GPUs (CUDA) or on AMD GPUs (HIP/ROCm).
 *
 * Every array made here is a complete `mts_array_t` (see metatensor.h): hand
 * it to libmetatensor (mts_block, mts_labels, mts_tensormap, ...) which then
 * owns it and calls its `destroy`. An array you keep yourself must be
 * released with `array.destroy(array.ptr)`.
 *
 * Errors: every function returns MTS_SUCCESS, or MTS_CALLBACK_ERROR /
 * MTS_INVALID_PARAMETER_ERROR after setting a message readable with
 * `mts_last_error` (origin "mtsarray"). On error, output parameters and
 * every array involved are left untouched.
 *
 * Streams: every array has a work stream, named by its DLPack stream number
 * (CUDA: 1 legacy default, 2 per-thread default, >2 a cudaStream_t; ROCm: 0
 * default, >2 a hipStream_t; CPU arrays have no stream and report -1). Work
 * on an array (fill, copy, move_data, swap_axes, free) is queued on its work
 * stream and the call returns without waiting for the device. Use
 * `mtsarray_synchronize` or `as_dlpack` to see the results.
 *
 * Thread safety: every function may be called from any thread; an array
 * that is being modified (reshape, swap_axes, move_data output, set_stream)
 * must not be used by another thread at the same time.
 */

#include <stdbool.h>
#include <stdint.h>

#include <metatensor.h>

#include "mtsarray/config.h"

#if defined(_WIN32)
#  if defined(MTSARRAY_BUILDING_LIBRARY)
#    define MTSARRAY_EXPORT __declspec(dllexport)
#  else
#    define MTSARRAY_EXPORT __declspec(dllimport)
#  endif
#else
#  define MTSARRAY_EXPORT __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
extern "C" {
#endif

/**
 * Create an array of the given `dtype` and `shape` on `device`, filled with
 * zeros. `shape` has `shape_count` entries (`shape` may be NULL when
 * `shape_count` is 0, a 0-d scalar). The memory is allocated on the default
 * stream of `device` and zeroed there; the call does not wait for the device.
 * Errors: unsupported dtype (sub-byte, lanes != 1), a backend not compiled
 * in or without a device, out of memory.
 */
MTSARRAY_EXPORT mts_status_t mtsarray_zeros(DLDevice device, DLDataType dtype,
                                            const uintptr_t* shape, uintptr_t shape_count,
                                            mts_array_t* array);

/**
 * Like `mtsarray_zeros`, filled with `value`: a host pointer to one element
 * of `dtype` (its bytes are copied before the call returns).
 */
MTSARRAY_EXPORT mts_status_t mtsarray_full(DLDevice device, DLDataType dtype,
                                           const uintptr_t* shape, uintptr_t shape_count,
                                           const void* value, mts_array_t* array);

/**
 * Wrap existing C-contiguous memory without copying. `data` points at the
 * first element on `device` (a host pointer for kDLCPU, a device pointer for
 * kDLCUDA/kDLROCM, ...). mtsarray never frees `data` itself:
 * `deleter(context)` runs exactly once, when the array and every DLPack
 * export of it are gone (pass NULL for memory you manage yourself, and keep
 * it alive that long). `data` may be NULL only when the array is empty.
 * On error, `deleter` is not called and the memory stays the caller's.
 */
MTSARRAY_EXPORT mts_status_t mtsarray_wrap(void* data, DLDevice device, DLDataType dtype,
                                           const uintptr_t* shape, uintptr_t shape_count,
                                           void (*deleter)(void* context), void* context,
                                           mts_array_t* array);

/**
 * Make an array from a DLPack tensor, taking ownership of `tensor` in every
 * case (its deleter runs exactly once, also when this function fails).
 * Zero-copy when the tensor is C-contiguous (NULL strides count as
 * contiguous) and writable; otherwise the data is copied into a new
 * C-contiguous buffer on the same device and the tensor is released at
 * once. `byte_offset` is honoured. The tensor's version.major must be 1.
 */
MTSARRAY_EXPORT mts_status_t mtsarray_from_dlpack(DLManagedTensorVersioned* tensor,
                                                  mts_array_t* array);

/**
 * Set the work stream of an array, as a DLPack stream number for its device
 * type (see the stream rules above; -1 is the only value CPU arrays take).
 * Work already queued on the previous stream is ordered before later work on
 * the new one (the new stream waits on an event, the host does not block).
 * The caller keeps the stream alive as long as the array uses it.
 */
MTSARRAY_EXPORT mts_status_t mtsarray_set_stream(const mts_array_t* array, int64_t stream);

/** Get the DLPack stream number of the array's work stream (-1 on CPU). */
MTSARRAY_EXPORT mts_status_t mtsarray_get_stream(const mts_array_t* array, int64_t* stream);

/** Block the calling thread until all work queued on the array is done. */
MTSARRAY_EXPORT mts_status_t mtsarray_synchronize(const mts_array_t* array);

/**
 * Pointer to the array's first element, on the array's device (a device
 * pointer for GPU arrays). It stays valid until the array is destroyed,
 * reshaped in place excepted; swap_axes moves the data to a new buffer.
 * Work queued on the array may still be running: synchronise or order your
 * own stream after the array's work stream before reading.
 */
MTSARRAY_EXPORT mts_status_t mtsarray_data(const mts_array_t* array, void** data);

/**
 * `*result` is true when `array` was made by mtsarray and is still alive,
 * including the borrowed views libmetatensor hands out (destroy = NULL).
 */
MTSARRAY_EXPORT mts_status_t mtsarray_is_mtsarray(const mts_array_t* array, bool* result);

/**
 * `*available` is true when the backend for `device_type` was compiled in
 * AND at least one device can be used at run time (a driver and a GPU are
 * present). kDLCPU is always available; host-accessible GPU memory types
 * (kDLCUDAHost, kDLCUDAManaged, kDLROCMHost) follow their GPU backend.
 */
MTSARRAY_EXPORT mts_status_t mtsarray_backend_available(DLDeviceType device_type,
                                                        bool* available);

/**
 * Why the backend for `device_type` can not be used: a NUL-terminated
 * message owned by mtsarray (valid until the program ends), or "" when it is
 * available.
 */
MTSARRAY_EXPORT const char* mtsarray_backend_unavailable_reason(DLDeviceType device_type);

/**
 * Copy `tensor` to `device`: every block's values and gradients become
 * mtsarray arrays on `device` working on `stream` (a DLPack stream number
 * for `device`: 1, 2 or a cudaStream_t on CUDA, 0 or a hipStream_t on ROCm,
 * -1 on the CPU), and the keys and every block's labels are copied there
 * too, as libmetatensor requires. The copies are queued on `stream`; the
 * call does not wait for a GPU destination. Arrays of any origin are read
 * through DLPack, `tensor` is left untouched. Labels values on a GPU keep a
 * host copy, so libmetatensor reading them back costs no device transfer.
 * On success `*result` is a new tensor map to release with
 * `mts_tensormap_free`.
 */
MTSARRAY_EXPORT mts_status_t mtsarray_tensormap_to(const mts_tensormap_t* tensor, DLDevice device,
                                                   int64_t stream, mts_tensormap_t** result);

/** The version of this library, "MAJOR.MINOR.PATCH". */
MTSARRAY_EXPORT const char* mtsarray_version(void);

#ifdef __cplusplus
}
#endif

#endif /* MTSARRAY_H */
