#ifndef MTSARRAY_H
#define MTSARRAY_H
/**
 * @file mtsarray.h
 * @brief The C API of mtsarray.
 *
 * Metatensor arrays (`mts_array_t`) whose data lives on the CPU, on NVIDIA
 * GPUs (CUDA) or on AMD GPUs (HIP/ROCm).
 *
 * Every array made here is a complete `mts_array_t` (see metatensor.h): hand
 * it to libmetatensor (mts_block, mts_labels, mts_tensormap, ...) which then
 * owns it and calls its `destroy`. An array you keep yourself must be
 * released with `array.destroy(array.ptr)`.
 *
 * **Errors.** Every function returns MTS_SUCCESS, or MTS_CALLBACK_ERROR /
 * MTS_INVALID_PARAMETER_ERROR after setting a message readable with
 * `mts_last_error` (origin "mtsarray"). On error, output parameters and every
 * array involved are left untouched.
 *
 * **Streams.** Every array has a work stream, named by its DLPack stream
 * number (CUDA: 1 legacy default, 2 per-thread default, >2 a cudaStream_t;
 * ROCm: 0 default, >2 a hipStream_t; CPU arrays have no stream and report -1;
 * CUDA managed memory accepts the CUDA numbers and, being computed on by the
 * host, has no stream). CUDA stream 2 is the per-thread default stream of the
 * thread that set it: only that thread may queue work on an array using it
 * (another thread gets an error; give arrays shared between threads a
 * cudaStream_t or stream 1), while any thread may release it: its memory is
 * then freed on the legacy default stream, after the owner's work. Work on an
 * array (fill, copy, move_data, swap_axes, free) is queued on its work stream
 * and the call returns without waiting for the device: no operation on device
 * memory blocks the host. Only a host consumer waits, and only for the work
 * it reads: `mtsarray_synchronize`, `as_dlpack` or `copy` to host memory. The
 * one exception is a copy between a CUDA and a ROCm device in one process,
 * which goes through the host. When two arrays on different streams meet
 * (move_data, copy), the writing stream first waits for the other's queued
 * work with an event (on the device, not the host). A stream belongs to one
 * device: a stream handle of another device than the array's is an error
 * wherever a stream is given (set_stream, as_dlpack, tensormap_to). A copy
 * between two GPUs is queued on the destination's stream after the source's
 * pending work; the source's stream does not wait for the destination's.
 *
 * **Lifetimes across streams.** Memory is freed (or, for memory you wrapped
 * or imported, handed back to its owner) only after every use queued on it by
 * mtsarray, on any stream. A read of array A on another stream (A as the
 * input of a move_data into an array on stream B, a copy onto stream B)
 * records an event on B, and A's free waits for it. A DLPack export read on a
 * default stream of the consumer's (CUDA 1 or 2, ROCm 0) is ordered the same
 * way: the consumer calls the export's deleter after queuing its last use
 * there, and the free is ordered after that use. A stream the consumer made
 * itself (a handle) is never named again once `as_dlpack` has returned, since
 * its owner may destroy it at any time: such a consumer finishes its reads of
 * the export (or makes the array's stream wait for them) before calling the
 * deleter, as for any DLPack producer; so does a consumer that passed stream
 * -1 (not ordered). Copies exported to another device are made on the
 * consumer's stream and freed on that device's default stream, after the
 * copy. The deleters of wrapped memory and of imported DLPack tensors may
 * therefore run later than the destroy call, on another thread (an mtsarray
 * thread), once the device is done with the memory.
 *
 * **Overlapping writes.** Two movements of one move_data call that write the
 * same output element: on a GPU one of them wins (which one is unspecified);
 * on the CPU the last one in the list wins.
 *
 * **The movement list.** move_data reads its movement list once, before
 * anything is written, into memory of its own (on a GPU: the table of the
 * copy), checking each movement as it reads it; the copy then uses these
 * values only. The list may therefore live in memory the call writes (the
 * output array's own), and a list that another thread edits while the call
 * runs gives, for each movement, either a value from before or one from after
 * the edit: the call checks and applies that value, and never writes outside
 * the output. The list may be changed or freed once move_data has returned.
 *
 * **CUDA graphs.** These calls may be captured on a stream that is capturing a
 * graph (torch.cuda.graph, cudaStreamBeginCapture), and every replay does
 * their work again:
 *  - move_data (its movement table travels inside the graph, so every
 *    replay reads the right one) and mtsarray_move_plan_execute (the graph
 *    keeps the plan's table: the plan may be freed before the graph);
 *  - mtsarray_copy_into between device arrays, and from host memory into a
 *    device array: a replay copies what the host source holds at that
 *    replay, as a captured copy from page-locked memory does (write the
 *    next batch into the same host array, then replay); the graph keeps
 *    the source array alive. A capture on a cold pool may page-lock a
 *    buffer for the graph (a host wait, at capture only). The graph reads
 *    the memory the source has at the capture: after swap_axes (which
 *    gives the array a new buffer) replays still upload the old one.
 *    Another library's source is read through its export, which must be
 *    C-contiguous and writable: one that mtsarray must copy first
 *    (strided, read-only) is refused, as a replay could only upload that
 *    copy. HIP graphs can not keep the source (ROCm 5 has no user
 *    objects): there the copy is refused with an error saying so.
 * In every case the arrays must outlive the graph's launches, and both
 * arrays' streams must be the capturing stream or streams in the same
 * capture. A capture never leaves mtsarray's own state (its page-locked
 * staging buffers, its events) unusable after it ends. Operations that
 * allocate a new array (create, zeros/full, copy, swap_axes, from_dlpack of
 * a strided tensor, an export to another device, tensormap_to,
 * mtsarray_move_plan_create) and host consumers (mtsarray_synchronize, an
 * export or copy to host memory) fail with a clear error while the stream
 * is capturing: make those arrays before capturing.
 *
 * **Device faults.** After a GPU fault that the runtime keeps for the rest of
 * the process (an illegal address, an assert or a launch failure in any
 * library's kernel: "to continue using CUDA, the process must be
 * terminated"), the first mtsarray call that meets it fails with the
 * runtime's error, and every later call on that runtime's devices fails at
 * once with an error naming that first fault: on every device of that
 * runtime, not only the one that faulted, since the runtime asks for the
 * process to end; a fault of the CUDA runtime does not stop calls on ROCm
 * devices, nor the reverse. mtsarray then stops freeing
 * device memory and handing memory back to its owners (the device may never
 * finish with it), and says so once on stderr; nothing is retried.
 *
 * **Arrays of other libraries.** mtsarray reads a foreign mts_array_t (a source
 * of copy_into, a plan's input, an array of a TensorMap, create's fill
 * value) through its own `as_dlpack`. When that export fails, its error is
 * quoted; a tensor it handed out anyway is released at once (its deleter
 * called) and nothing of it is read.
 *
 * **Handles.** The `ptr` of an mtsarray array is a handle (a slot of a table
 * and that slot's generation), not the address of an object. Once the array
 * is destroyed, its `ptr` names no array: a second `destroy` does nothing,
 * and every other callback or function given it fails with an error saying
 * that the array was not made by mtsarray (or was already destroyed), even
 * when a newer array was made in the same memory or the same slot. This holds
 * until that slot has been reused 2^28 times (2^28 destroys of other arrays
 * at the very least). A pointer that mtsarray did not make is recognised
 * without being read.
 *
 * **Thread safety.** Every function may be called from any thread; an array
 * that is being modified (reshape, swap_axes, move_data output, set_stream)
 * must not be used by another thread at the same time.

 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <metatensor.h>

#include "mtsarray/config.h"

/**
 * Marks the functions the shared library exports (dllexport / dllimport on
 * Windows, default visibility elsewhere). Not for use in your own code.
 */
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
 * in or without a device, out of memory, an invalid host thread count in
 * the environment (host memory, see `mtsarray_set_num_threads`).
 *
 * Graph capture: refused with an error while the device's default stream is
 * capturing a graph (the memory would outlive a replay): make arrays before
 * capturing.
 *
 * Host arrays of 4 MiB or more (from every function that makes one) ask
 * Linux for transparent huge pages; MTSARRAY_HUGE_PAGES=0 turns that off, and
 * any value other than 0 or 1 makes their allocation fail
 * (docs/guides/host-threads.md).
 *
 * \param device where the array lives (`kDLCPU`, `kDLCUDA`, `kDLROCM`, ...)
 * \param dtype its elements' type (`{kDLFloat, 64, 1}`: float64)
 * \param shape `shape_count` sizes, the first axis first
 * \param shape_count the number of axes
 * \param[out] array the new array, the caller's: release it with its
 *        `destroy`, or hand it to libmetatensor, which does
 * \return `MTS_SUCCESS`, or an error status (the errors above) with its
 *         message in `mts_last_error`; `*array` is untouched then
 *
 * Used in: [Quick start in C, step 1](../guides/quick-start-c.html#arrays-on-a-device).
 */
MTSARRAY_EXPORT mts_status_t mtsarray_zeros(DLDevice device, DLDataType dtype,
                                            const uintptr_t* shape, uintptr_t shape_count,
                                            mts_array_t* array);

/**
 * Like `mtsarray_zeros`, filled with `value`: a host pointer to one element
 * of `dtype` (its bytes are copied before the call returns). The fill is
 * queued on the device's default stream; the call does not wait for it.
 * Errors and graph capture: as `mtsarray_zeros`, and a NULL `value`.
 *
 * \param device where the array lives, as in `mtsarray_zeros`
 * \param dtype its elements' type
 * \param shape `shape_count` sizes, the first axis first
 * \param shape_count the number of axes
 * \param value a host pointer to one element of `dtype`
 * \param[out] array the new array, the caller's
 * \return `MTS_SUCCESS`, or an error status with its message in
 *         `mts_last_error`
 *
 * Used in: [Arrays, devices and ownership](../guides/arrays.html#making-arrays).
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
 *
 * The array works on the device's default stream (`mtsarray_set_stream`
 * changes it): order your own writes to `data` before that stream's use of
 * it. Nothing is queued or allocated, so it may be called during a graph
 * capture. Errors: unsupported dtype, a backend not compiled in or without
 * a device, NULL `data` for a non-empty array, NULL `array`.
 *
 * \param data the first element, on `device`; the caller's memory
 * \param device where the array lives, as in `mtsarray_zeros`
 * \param dtype its elements' type
 * \param shape `shape_count` sizes, the first axis first
 * \param shape_count the number of axes
 * \param deleter called once with `context` when nothing uses `data` any
 *        more, or NULL
 * \param context passed to `deleter`
 * \param[out] array the new array, the caller's
 * \return `MTS_SUCCESS`, or an error status (the errors above) with its
 *         message in `mts_last_error`
 *
 * Used in: [Quick start in C, step 2](../guides/quick-start-c.html#memory-you-own-without-a-copy).
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
 *
 * The new array works on the device's default stream: a producer that
 * queued work on another stream orders it first (or, from Python,
 * `mtsarray.from_dlpack(x, stream=...)` asks it to). The copy made for a
 * strided or read-only tensor is queued there and refused during a graph
 * capture; a zero-copy import queues nothing. Errors: NULL arguments, a
 * version.major other than 1, an unsupported dtype or device, a shape or
 * strides that do not fit the data, out of memory.
 *
 * \param tensor a DLPack tensor; mtsarray owns it from this call on
 * \param[out] array the new array, the caller's
 * \return `MTS_SUCCESS`, or an error status (the errors above) with its
 *         message in `mts_last_error`
 *
 * Used in: [Arrays, devices and ownership: DLPack in](../guides/arrays.html#dlpack-in).
 */
MTSARRAY_EXPORT mts_status_t mtsarray_from_dlpack(DLManagedTensorVersioned* tensor,
                                                  mts_array_t* array);

/**
 * Set the work stream of an array, as a DLPack stream number for its device
 * type (see the stream rules above; -1 is the only value CPU arrays take).
 * Work already queued on the previous stream is ordered before later work on
 * the new one (the new stream waits on an event, the host does not block).
 * The caller keeps the stream alive as long as the array uses it: until the
 * array is destroyed and, when it is destroyed while the stream captures a
 * graph, until that capture has ended (the free of its memory waits for the
 * end of the capture, then is queued on the stream).
 *
 * Errors (the stream is left as it was): a number that is not valid for
 * the array's device type (CUDA 0, ROCm 1 or 2, anything but -1 on the
 * CPU), a stream handle of another device than the array's (the message
 * names both; CUDA 12.8 or later and ROCm can tell), an array that is not
 * an mtsarray array. Call it outside graph capture: the new stream
 * waits on an event recorded outside the capture.
 *
 * \param array an mtsarray array
 * \param stream a DLPack stream number for the array's device type
 * \return `MTS_SUCCESS`, or an error status (the errors above) with its
 *         message in `mts_last_error`
 *
 * Used in: [Streams](../guides/streams.html#stream-numbers).
 */
MTSARRAY_EXPORT mts_status_t mtsarray_set_stream(const mts_array_t* array, int64_t stream);

/**
 * Get the DLPack stream number of the array's work stream in `*stream` (-1
 * on the CPU and for managed memory). Host only: queues nothing, may be
 * called at any time. Errors: NULL arguments, not an mtsarray array.
 *
 * \param array an mtsarray array
 * \param[out] stream its work stream's DLPack number
 * \return `MTS_SUCCESS`, or an error status (the errors above) with its
 *         message in `mts_last_error`
 */
MTSARRAY_EXPORT mts_status_t mtsarray_get_stream(const mts_array_t* array, int64_t* stream);

/**
 * Block the calling thread until all work queued on the array's work stream
 * is done (nothing for CPU arrays, whose work is done when a call returns).
 * Errors: not an mtsarray array, a device error reported by the runtime,
 * and a stream that is capturing a graph (its work runs when the graph is
 * launched: the host can not wait for it).
 *
 * \param array an mtsarray array
 * \return `MTS_SUCCESS`, or an error status (the errors above) with its
 *         message in `mts_last_error`
 *
 * Used in: [Streams](../guides/streams.html#when-two-streams-meet).
 */
MTSARRAY_EXPORT mts_status_t mtsarray_synchronize(const mts_array_t* array);

/**
 * Pointer to the array's first element, on the array's device (a device
 * pointer for GPU arrays). It stays valid until the array is destroyed,
 * reshaped in place excepted; swap_axes moves the data to a new buffer.
 * Work queued on the array may still be running: synchronise or order your
 * own stream after the array's work stream before reading. Host only:
 * queues nothing, may be called at any time. Errors: NULL arguments, not an
 * mtsarray array.
 *
 * \param array an mtsarray array
 * \param[out] data the address of its first element, on its device
 * \return `MTS_SUCCESS`, or an error status (the errors above) with its
 *         message in `mts_last_error`
 */
MTSARRAY_EXPORT mts_status_t mtsarray_data(const mts_array_t* array, void** data);

/**
 * Copy every element of `source` into `destination`, an array that already
 * exists: same dtype and shape, any two devices mtsarray serves (CPU,
 * page-locked and managed host memory, CUDA, ROCm, another GPU of the same
 * kind). `destination` must be an mtsarray array; `source` may be any
 * mts_array_t (another library's is read through its own as_dlpack on its
 * own device, strided or not). Nothing is allocated on the destination's
 * device, so a buffer made once (a page-locked staging array, a device batch
 * buffer) can be refilled every step.
 *
 * Ordering: the copy is queued on the destination's work stream after the
 * work pending on both arrays. It does not block the host between two
 * device arrays (same device, or peer), nor from host memory to a device:
 * pageable bytes are staged first, so the source may be reused at once, but
 * a page-locked or managed source (kDLCUDAHost, kDLCUDAManaged, kDLROCMHost)
 * is read by the device after the call returns, as cudaMemcpyAsync reads
 * it: do not write into it before the destination's stream has passed the
 * copy (mtsarray_synchronize on the destination, or later work ordered
 * after it);
 * when the destination is host memory (kDLCPU, kDLCUDAHost, kDLCUDAManaged,
 * kDLROCMHost: arrays the host computes on) the call returns once the bytes
 * are there, waiting for that copy and the source's pending work only.
 *
 * Errors (nothing is written): NULL arguments, a destination that is not an
 * mtsarray array, another dtype or shape, a device that can not be used, a
 * source whose export fails.
 *
 * Graph capture: a copy between device arrays, or from host memory into a
 * device array, may be captured; a replay copies what the host source holds
 * then (see "CUDA graphs" above). A copy into host memory waits on the host,
 * and a copy between two views of one buffer, or from another library's
 * array whose export mtsarray must copy first (strided or read-only), needs
 * a snapshot, which a replay would upload again: all are refused while the
 * destination's stream captures.
 *
 * Writes and other streams: like every write mtsarray makes into an array
 * (move_data, movement plans), the copy is queued after the reads of the
 * destination that mtsarray queued on other streams, of any device (an
 * event wait each, no host block). What a DLPack consumer queues on the
 * memory after an export is the consumer's to order.
 *
 * Between two GPUs of one runtime the copy is a peer copy. Where the two
 * devices can reach each other (cudaDeviceCanAccessPeer), the first copy
 * between them opens mtsarray's memory pools of each to the other
 * (cudaMemPoolSetAccess; hipMemPoolSetAccess on ROCm), so that copies go
 * over the link; where they can not, copies still work, staged through the
 * host by the driver. Memory mtsarray does not own (wrapped, imported, or
 * from an allocator set with mtsarray_set_allocator) follows its owner's
 * peer settings: mtsarray never calls cudaDeviceEnablePeerAccess.
 * MTSARRAY_PEER_ACCESS=0 in the environment turns the opening off (every
 * copy between devices staged); a value other than 0 or 1 makes such
 * copies fail with an error naming the variable (docs/guides/streams.md).
 *
 * \param destination an mtsarray array, written
 * \param source any `mts_array_t` of the same dtype and shape, read
 * \return `MTS_SUCCESS`, or an error status (the errors above) with its
 *         message in `mts_last_error`
 *
 * Used in: [Quick start in C, step 4](../guides/quick-start-c.html#reading-the-result).
 */
MTSARRAY_EXPORT mts_status_t mtsarray_copy_into(const mts_array_t* destination, const mts_array_t* source);

/**
 * A movement plan: the movements of a move_data call checked once, for
 * arrays shaped, typed and placed like the ones it was made for, then
 * executed any number of times. An MD code exchanging the same halo rows
 * every step, or a training loop gathering batches of one layout, pays the
 * checks (and, on the CPU, the planning of the copy) once instead of at
 * every call.
 *
 * Handles: an `mtsarray_move_plan_t*` is a handle, like an array's `ptr`
 * (see above), never the address of the plan, and is never dereferenced by
 * the caller. Once a plan is freed, its handle names no plan: a second
 * `mtsarray_move_plan_free`, or an `mtsarray_move_plan_execute` given it,
 * fails with "plan was not made by mtsarray_move_plan_create, or was
 * already freed" and touches nothing, even when newer plans were made
 * since. The same error answers an array's handle or any other pointer
 * passed as a plan, which is recognised without being read.
 */
typedef struct mtsarray_move_plan_t mtsarray_move_plan_t;

/**
 * Check `movements` (`movements_count` of them, read once; the plan keeps
 * its own copy, so the list may be freed or changed afterwards) for
 * `output` and `input` as move_data does, and make a plan of them in
 * `*plan`, to be released with `mtsarray_move_plan_free`. `output` must be
 * an mtsarray array; `input` may be any mts_array_t (another library's is
 * read through its own as_dlpack), which the plan does not keep.
 *
 * Which arrays a plan accepts afterwards: the same dtype and device as
 * `output` and `input` (the same device id), the same number of axes, the
 * same component axes and the same number of properties as each; the
 * number of samples (the first axis) may differ, as long as it is more
 * than the highest `sample_out` of the movements for the output and the
 * highest `sample_in` for the input (any number, 0 included, for a plan of
 * no movements).
 *
 * On host memory (kDLCPU, kDLCUDAHost, kDLCUDAManaged, kDLROCMHost), the
 * plan also decides once how to copy: consecutive movements merged into
 * runs, the single copy of movements that form one run, and the split
 * between threads for the current thread count (`mtsarray_set_num_threads`;
 * a later change of the count is followed at execution).
 *
 * Errors (no plan is made): NULL arguments (`movements` may be NULL when
 * `movements_count` is 0), an output that is not an mtsarray array, another
 * dtype or device, other component axes, fewer than two axes, a movement
 * out of range (named by its index and field), an invalid thread count in
 * the environment (host memory), out of host memory, and a stream of
 * `output` that is capturing a graph (on a GPU the table is uploaded on
 * that stream: make plans before capturing).
 *
 * \param output an mtsarray array the plan will write into
 * \param input any `mts_array_t` the plan will read from
 * \param movements `movements_count` movements, as move_data's
 * \param movements_count the number of movements
 * \param[out] plan the new plan, the caller's (`mtsarray_move_plan_free`)
 * \return `MTS_SUCCESS`, or an error status (the errors above) with its
 *         message in `mts_last_error`
 *
 * Used in: [move_data and movement plans](../guides/move-data.html#movement-plans).
 */
MTSARRAY_EXPORT mts_status_t mtsarray_move_plan_create(const mts_array_t* output, const mts_array_t* input,
                                                      const mts_data_movement_t* movements,
                                                      uintptr_t movements_count, mtsarray_move_plan_t** plan);

/**
 * The same effect as `output.move_data(output.ptr, input.ptr, movements,
 * movements_count)` with the plan's movements, on any arrays the plan
 * accepts (see `mtsarray_move_plan_create`): `output` must be an mtsarray
 * array, `input` may be any mts_array_t. Movements that write the same
 * output element, and arrays sharing memory, behave as in move_data.
 *
 * Streams: as move_data, the copy is queued on `output`'s work stream,
 * which first waits (on the device) for the work queued on `input`'s. On
 * host memory the copy is done when the call returns, and no movement is
 * checked again. On a GPU the plan keeps its table in device memory,
 * uploaded once when it is made (on `output`'s stream then): an execution
 * is one kernel launch, with no host-to-device transfer, no allocation and
 * no host wait, and it may be captured in a CUDA graph (the graph replays
 * it and keeps the plan's table, so the plan may be freed before the graph;
 * the arrays must outlive the graph). Arrays that
 * share memory go through move_data's snapshot instead. Plans are made
 * outside graph capture.
 *
 * Thread safety: a plan is never modified by an execution: any number of
 * threads may execute one plan at once, each on its own output.
 *
 * Errors (nothing is written): NULL arguments, a plan that was freed (or
 * is not a plan), an output that is not an mtsarray array, arrays the plan
 * does not accept (another dtype, device, component axes or properties,
 * too few samples), an input whose export fails, an invalid thread count in
 * the environment.
 *
 * \param plan a plan of `mtsarray_move_plan_create`
 * \param output an mtsarray array the plan accepts, written
 * \param input an array the plan accepts, read
 * \return `MTS_SUCCESS`, or an error status (the errors above) with its
 *         message in `mts_last_error`
 *
 * Used in: [move_data and movement plans](../guides/move-data.html#movement-plans).
 */
MTSARRAY_EXPORT mts_status_t mtsarray_move_plan_execute(const mtsarray_move_plan_t* plan, const mts_array_t* output,
                                                       const mts_array_t* input);

/**
 * Release `plan` (NULL is a no-op, as for free()), in stream order: a GPU
 * plan's table is given back once every execution queued so far has run
 * (without blocking the caller), so the plan may be freed right after its
 * last execution returns; on host memory executions are finished when they
 * return. A plan must not be freed while another thread is executing it.
 * A graph that captured one of its executions owns what it reads: it may
 * be launched after the plan is freed.
 *
 * Errors: a plan already freed, or anything that is not a plan (see the
 * handles above); nothing is freed then. Of several threads freeing one
 * plan at once, exactly one frees it and the others get this error.
 *
 * \param plan a plan of `mtsarray_move_plan_create`, or NULL
 * \return `MTS_SUCCESS`, or an error status (the errors above) with its
 *         message in `mts_last_error`
 */
MTSARRAY_EXPORT mts_status_t mtsarray_move_plan_free(mtsarray_move_plan_t* plan);

/**
 * `*result` is true when `array` was made by mtsarray and is still alive,
 * including the borrowed views libmetatensor hands out (destroy = NULL).
 * The handle is looked up without being read; host only, may be called at
 * any time. Errors: NULL arguments.
 *
 * \param array any `mts_array_t`
 * \param[out] result whether mtsarray made it
 * \return `MTS_SUCCESS`, or an error status (the errors above) with its
 *         message in `mts_last_error`
 */
MTSARRAY_EXPORT mts_status_t mtsarray_is_mtsarray(const mts_array_t* array, bool* result);

/**
 * `*available` is true when the backend for `device_type` was compiled in
 * AND at least one device can be used at run time (a driver and a GPU are
 * present). kDLCPU is always available; host-accessible GPU memory types
 * (kDLCUDAHost, kDLCUDAManaged, kDLROCMHost) follow their GPU backend.
 * For a GPU device type this asks the runtime whether it has a device.
 * Host only, queues nothing. Errors: NULL `available`.
 *
 * \param device_type the kind of device (`kDLCUDA`, `kDLROCM`, ...)
 * \param[out] available whether mtsarray can make arrays there
 * \return `MTS_SUCCESS`, or an error status with its message in
 *         `mts_last_error`; `mtsarray_backend_unavailable_reason` says why
 *         a backend is not available
 *
 * Used in: [Quick start in C, the helpers](../guides/quick-start-c.html#the-includes-and-the-helpers).
 */
MTSARRAY_EXPORT mts_status_t mtsarray_backend_available(DLDeviceType device_type,
                                                        bool* available);

/**
 * Counts the devices arrays of `device_type` can be made on: `*count` is
 * the number of valid device ids, 0 to `*count - 1`.
 *
 * - kDLCPU: 1.
 * - kDLCUDA, kDLROCM: the devices the runtime reports (after
 *   CUDA_VISIBLE_DEVICES or HIP_VISIBLE_DEVICES), counted once, on the
 *   first call of the process that needs them; 0 when the backend was not
 *   compiled in or the runtime has no driver or no device, exactly when
 *   mtsarray_backend_available() says false for want of them
 *   (mtsarray_backend_unavailable_reason() says why).
 * - kDLCUDAHost, kDLCUDAManaged, kDLROCMHost: the same count as their GPU
 *   backend's device type.
 *
 * A device fault does not change the count, although every later call on
 * that backend's devices fails with it and mtsarray_backend_available()
 * then says false (see "Device faults" above). Host only, queues nothing,
 * makes no context on any device.
 *
 * \param device_type a DLPack device type
 * \param count where the count is written; left untouched on error
 * \return MTS_SUCCESS, or MTS_CALLBACK_ERROR with a message (mts_last_error)
 *   for a NULL `count` or a `device_type` that mtsarray has no backend for
 *   in any build (kDLOpenCL, kDLVulkan, a value that is no DLPack device
 *   type, ...): the message names the type and lists the supported ones.
 */
MTSARRAY_EXPORT mts_status_t mtsarray_device_count(DLDeviceType device_type, int32_t* count);

/**
 * Why the backend for `device_type` can not be used: a NUL-terminated
 * message owned by mtsarray (valid until the program ends), or "" when it is
 * available. Never fails: a device type no backend serves gets a message
 * saying so.
 *
 * \param device_type the kind of device (`kDLCUDA`, `kDLROCM`, ...)
 * \return the reason, or "" when the backend is available
 *
 * Used in: [Errors and troubleshooting](../guides/errors.html).
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
 *
 * Errors (no tensor map is made): NULL arguments, an invalid stream number
 * for `device`, a backend not compiled in or without a device, a dtype
 * mtsarray does not store, an array whose export fails, out of memory, and
 * a `stream` that is capturing a graph (the call makes new arrays).
 *
 * \param tensor a TensorMap, read
 * \param device where the new TensorMap's arrays live
 * \param stream a DLPack stream number for `device` the arrays work on
 * \param[out] result the new TensorMap, the caller's (`mts_tensormap_free`)
 * \return `MTS_SUCCESS`, or an error status (the errors above) with its
 *         message in `mts_last_error`
 *
 * Used in: [Arrays, devices and ownership](../guides/arrays.html).
 */
MTSARRAY_EXPORT mts_status_t mtsarray_tensormap_to(const mts_tensormap_t* tensor, DLDevice device,
                                                   int64_t stream, mts_tensormap_t** result);

/**
 * Where mtsarray gets device memory from. `allocate(context, device, stream,
 * bytes)` returns `bytes` bytes on `device` usable by work queued on `stream`
 * (a DLPack stream number) from now on, or NULL when it can not; it is never
 * asked for zero bytes. `deallocate(context, device, stream, data, bytes)`
 * gives memory back in stream order (after the work queued on `stream`), and
 * must not fail. Both may be called from any thread, at any time until the
 * last array they made is gone (the allocator must outlive them).
 */
typedef struct mtsarray_allocator_t {
    /** Passed as the first argument of both functions, never read by mtsarray. */
    void* context;
    /** `bytes` bytes on `device` for work on `stream`, or NULL when there are none. */
    void* (*allocate)(void* context, DLDevice device, int64_t stream, size_t bytes);
    /** Gives back `data` (`bytes` bytes from `allocate`) after the work queued on `stream`. */
    void (*deallocate)(void* context, DLDevice device, int64_t stream, void* data, size_t bytes);
} mtsarray_allocator_t;

/**
 * Use `allocator` (copied) for every later allocation of `device_type`
 * memory (kDLCUDA or kDLROCM), or mtsarray's own again when it is NULL.
 * Memory is always freed by the allocator that made it. By default mtsarray
 * allocates stream-ordered from a memory pool of its own per device, which
 * keeps freed memory for reuse instead of giving it back at every
 * synchronisation (see `mtsarray_release_cached_memory`); a program that
 * already has a caching allocator (PyTorch, RMM, ...) can route mtsarray
 * through it with this. Errors: another device type, NULL functions, the
 * backend not compiled in. Arrays made before the call keep their memory
 * from the allocator that made it. Call it outside graph capture.
 *
 * \param device_type the GPU device type whose memory the allocator makes
 * \param allocator the callbacks, copied; NULL for mtsarray's own pool
 * \return `MTS_SUCCESS`, or an error status (the errors above) with its
 *         message in `mts_last_error`
 *
 * Used in: [GPU use inside training loops: memory](../guides/training-loops.html#memory).
 */
MTSARRAY_EXPORT mts_status_t mtsarray_set_allocator(DLDeviceType device_type,
                                                    const mtsarray_allocator_t* allocator);

/**
 * Give the memory that mtsarray's own pool keeps for reuse on `device` back
 * to the device (for another library that needs it). Memory still in use, or
 * whose free is still queued on a stream, stays. No-op for the CPU and for
 * a device type whose backend has no device; errors for a backend not
 * compiled in. The call does not wait for any stream. Call it outside graph
 * capture: trimming a pool is one of the calls a capture forbids.
 *
 * Memory pressure: mtsarray shares each GPU with the other libraries of
 * the process (PyTorch's caching allocator keeps what it frees, and trims
 * its own cache only when it runs out). mtsarray's pool keeps up to its
 * release threshold (`mtsarray_set_release_threshold`) of freed memory
 * across synchronisations and gives what it keeps beyond back at the next
 * stream, event or device synchronisation of the process, anyone's. An
 * allocation of mtsarray's that does not fit gives everything the pool
 * keeps back and tries once more; if that fails too the error says so
 * (out of memory, with the sizes). Memory another library keeps cached is
 * that library's to give back (torch.cuda.empty_cache()).
 *
 * \param device the GPU whose pool gives its cached memory back
 * \return `MTS_SUCCESS`, or an error status (the errors above) with its
 *         message in `mts_last_error`
 *
 * Used in: [GPU use inside training loops: memory](../guides/training-loops.html#memory).
 */
MTSARRAY_EXPORT mts_status_t mtsarray_release_cached_memory(DLDevice device);

/**
 * How much freed memory mtsarray's pool keeps cached on `device` (a CUDA or
 * ROCm device) across synchronisations: beyond it, cached memory goes back
 * to the device at the next stream, event or device synchronisation. The
 * default, 1/16 of the device's memory, keeps the arrays of a typical step
 * for reuse (a step that makes and frees larger arrays maps memory again
 * each time, at a third of memset's speed on an H100) and leaves the rest
 * to other libraries; a program that makes and drops larger arrays every step (and
 * has the room) may raise it to avoid mapping memory again, and 0 gives
 * everything back at every synchronisation. Applies from now on, to
 * memory already cached too. No-op for the CPU; `mtsarray_get_release_threshold`
 * answers 0 there. Errors: a device that can not be used (`bytes` NULL for
 * the getter).
 *
 * \param device the GPU whose pool this sets
 * \param bytes how much freed memory the pool may keep
 * \return `MTS_SUCCESS`, or an error status (the errors above) with its
 *         message in `mts_last_error`
 *
 * Used in: [GPU use inside training loops: memory](../guides/training-loops.html#memory).
 */
MTSARRAY_EXPORT mts_status_t mtsarray_set_release_threshold(DLDevice device, uint64_t bytes);

/**
 * The release threshold of `device` (see `mtsarray_set_release_threshold`), in `*bytes`.
 *
 * \param device the GPU whose pool this reads (0 for the CPU)
 * \param[out] bytes the threshold
 * \return `MTS_SUCCESS`, or an error status with its message in `mts_last_error`
 */
MTSARRAY_EXPORT mts_status_t mtsarray_get_release_threshold(DLDevice device, uint64_t* bytes);

/**
 * Use up to `count` threads, the calling thread included, for work on host
 * memory (kDLCPU, and the host-accessible kDLCUDAHost, kDLCUDAManaged and
 * kDLROCMHost): move_data, copy, create / zeros / full (the fill) and
 * swap_axes split work of 1 MiB and more between threads; smaller work, and
 * everything with `count` = 1, runs on the calling thread. The results are
 * the same bytes whatever the count (move_data is split only where no two
 * movements write the same output sample).
 *
 * Threads: no thread is created per call. mtsarray keeps a pool of at most
 * `count` - 1 threads, started the first time work needs them; an idle pool
 * thread spins for about 50 microseconds, then sleeps without using the
 * CPU. Pool threads block every signal. Lowering the count stops the idle
 * pool threads beyond it; those busy with another thread's call then stop
 * when that call ends.
 *
 * No oversubscription: at most `count` threads do mtsarray host work at
 * once in the whole process, the calling threads included. A call made
 * while other threads already use the pool gets only the pool threads left
 * (none when the callers alone reach `count`: 8 threads calling move_data
 * at once each run on their own thread). A call from inside an active
 * OpenMP parallel region (of the OpenMP runtime the program loaded) runs on
 * the calling thread only: the region's threads have the cores already.
 *
 * Without this call, the count comes from the environment variable
 * MTSARRAY_NUM_THREADS, else OMP_NUM_THREADS (its first entry: "8,2" is 8),
 * else the number of CPUs in the process's affinity mask; the environment
 * is read once, the first time the count is needed. An environment value
 * that is not a whole number in [1, 4096] makes every host data operation
 * (and mtsarray_get_num_threads) fail with an error naming the variable,
 * until this function sets a count. A host data operation is any call that
 * reads or writes the elements of an array in host-accessible memory
 * (kDLCPU, kDLCUDAHost, kDLCUDAManaged, kDLROCMHost), whatever its size
 * (an empty array, no movement): mtsarray_zeros, mtsarray_full, create,
 * copy, mtsarray_copy_into, mtsarray_tensormap_to, move_data,
 * mtsarray_move_plan_create and _execute, swap_axes, and the DLPack imports
 * and exports that copy (a strided or read-only tensor, an export to
 * another device). The operation checks it before it looks at its
 * arrays' dtypes, shapes or movements.
 *
 * Thread safety: may be called at any time from any thread; operations
 * already running keep the threads they started with.
 *
 * fork(): the child of a fork inherits the parent's count (set or decided)
 * and none of its pool threads; it may make, use and destroy host arrays
 * and set the count, whatever the parent's other threads were doing at the
 * fork (making or destroying arrays, setting the count, running pool work).
 * Its pool starts again when work needs it. GPU arrays are not usable in
 * the child (the GPU runtimes do not support it).
 * Errors: `count` < 1 or `count` > 4096.
 *
 * \param count the number of threads, the calling one included
 * \return `MTS_SUCCESS`, or an error status (the errors above) with its
 *         message in `mts_last_error`
 *
 * Used in: [Host threads](../guides/host-threads.html).
 */
MTSARRAY_EXPORT mts_status_t mtsarray_set_num_threads(int32_t count);

/**
 * The number of threads host-memory work may use (see
 * `mtsarray_set_num_threads`), in `*count`. Reads the environment the first
 * time. Errors: `count` is NULL; MTSARRAY_NUM_THREADS or OMP_NUM_THREADS
 * (the one in use) is not a whole number in [1, 4096].
 *
 * \param[out] count the number of threads
 * \return `MTS_SUCCESS`, or an error status (the errors above) with its
 *         message in `mts_last_error`
 *
 * Used in: [Host threads](../guides/host-threads.html).
 */
MTSARRAY_EXPORT mts_status_t mtsarray_get_num_threads(int32_t* count);

/**
 * The version of this library, "MAJOR.MINOR.PATCH" (a static string, the
 * same as `MTSARRAY_VERSION` in mtsarray/config.h of the headers it was built
 * with). Never fails.
 *
 * \return the version, a static string
 *
 * Used in: [Quick start in C](../guides/quick-start-c.html#arrays-on-a-device).
 */
MTSARRAY_EXPORT const char* mtsarray_version(void);

#ifdef __cplusplus
}
#endif

#endif /* MTSARRAY_H */
