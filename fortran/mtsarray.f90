! Fortran bindings of mtsarray (include/mtsarray.h) through iso_c_binding.
!
! Arrays are metatensor `mts_array_t` values: make them here, hand them to
! libmetatensor (which then owns them), or release the ones you keep with
! `mtsarray_destroy`. Every function returns an `integer(c_int32_t)` status:
! MTS_SUCCESS (0), or an error code with a message readable through
! `mtsarray_last_error()`.
!
! Shapes: mtsarray (like metatensor and DLPack) is C row-major. A Fortran
! array is column-major, so this module takes and returns shapes in FORTRAN
! order and reverses them for C: the same memory, read the natural way on
! both sides. A Fortran `positions(3, n_atoms)` is the metatensor array of
! shape [n_atoms, 3] (one row per atom, xyz as the fast axis), which is what
! a metatensor block of samples x properties wants. `mtsarray_shape` gives the
! Fortran-order shape back, so `c_f_pointer(data, fptr, shape)` maps a host
! array's memory directly.
!
! Indices in `mts_data_movement_t` are the C library's: 0-based.
!
! Devices: DLPack `DLDevice` values. MTSARRAY_CPU, or mtsarray_cuda_device(id)
! / mtsarray_rocm_device(id); a device pointer (from CUDA Fortran, OpenACC
! `acc_deviceptr`, OpenMP `use_device_ptr`, ...) is passed as `type(c_ptr)`.
!
! Streams: DLPack stream numbers (`integer(c_int64_t)`): CUDA 1 (legacy
! default), 2 (per-thread default) or a cudaStream_t handle; ROCm 0 or a
! hipStream_t; CPU arrays report -1. Work on an array is queued on its stream;
! call `mtsarray_synchronize` before reading GPU results from the host.
module mtsarray
    use, intrinsic :: iso_c_binding
    implicit none
    private

    ! ---- status codes (metatensor.h) -------------------------------------
    integer(c_int32_t), parameter, public :: MTS_SUCCESS = 0
    integer(c_int32_t), parameter, public :: MTS_INVALID_PARAMETER_ERROR = 1
    integer(c_int32_t), parameter, public :: MTS_CALLBACK_ERROR = 254

    ! ---- DLPack (metatensor/dlpack/dlpack.h) ------------------------------
    integer(c_int), parameter, public :: kDLCPU = 1
    integer(c_int), parameter, public :: kDLCUDA = 2
    integer(c_int), parameter, public :: kDLCUDAHost = 3
    integer(c_int), parameter, public :: kDLROCM = 10
    integer(c_int), parameter, public :: kDLROCMHost = 11
    integer(c_int), parameter, public :: kDLCUDAManaged = 13

    integer(c_int8_t), parameter, public :: kDLInt = 0
    integer(c_int8_t), parameter, public :: kDLUInt = 1
    integer(c_int8_t), parameter, public :: kDLFloat = 2

    type, bind(c), public :: DLDevice
        integer(c_int) :: device_type
        integer(c_int32_t) :: device_id
    end type

    ! `code` and `bits` are uint8_t in C (all supported sizes are <= 64)
    type, bind(c), public :: DLDataType
        integer(c_int8_t) :: code
        integer(c_int8_t) :: bits
        integer(c_int16_t) :: lanes
    end type

    type(DLDevice), parameter, public :: MTSARRAY_CPU = DLDevice(kDLCPU, 0_c_int32_t)
    type(DLDataType), parameter, public :: MTSARRAY_FLOAT64 = DLDataType(kDLFloat, 64_c_int8_t, 1_c_int16_t)
    type(DLDataType), parameter, public :: MTSARRAY_FLOAT32 = DLDataType(kDLFloat, 32_c_int8_t, 1_c_int16_t)
    type(DLDataType), parameter, public :: MTSARRAY_INT32 = DLDataType(kDLInt, 32_c_int8_t, 1_c_int16_t)
    type(DLDataType), parameter, public :: MTSARRAY_INT64 = DLDataType(kDLInt, 64_c_int8_t, 1_c_int16_t)

    ! ---- metatensor.h ---------------------------------------------------------
    ! The vtable of a metatensor array. `ptr` is null for an empty handle.
    type, bind(c), public :: mts_array_t
        type(c_ptr) :: ptr = c_null_ptr
        type(c_funptr) :: destroy = c_null_funptr
        type(c_funptr) :: origin = c_null_funptr
        type(c_funptr) :: device = c_null_funptr
        type(c_funptr) :: dtype = c_null_funptr
        type(c_funptr) :: as_dlpack = c_null_funptr
        type(c_funptr) :: from_dlpack = c_null_funptr
        type(c_funptr) :: shape = c_null_funptr
        type(c_funptr) :: reshape = c_null_funptr
        type(c_funptr) :: swap_axes = c_null_funptr
        type(c_funptr) :: create = c_null_funptr
        type(c_funptr) :: copy = c_null_funptr
        type(c_funptr) :: move_data = c_null_funptr
    end type

    ! Copy input[sample_in, ..., properties_start_in + x] to
    ! output[sample_out, ..., properties_start_out + x], x < properties_length
    ! (C row-major indices, 0-based).
    type, bind(c), public :: mts_data_movement_t
        integer(c_size_t) :: sample_in
        integer(c_size_t) :: sample_out
        integer(c_size_t) :: properties_start_in
        integer(c_size_t) :: properties_start_out
        integer(c_size_t) :: properties_length
    end type

    public :: mtsarray_zeros, mtsarray_full, mtsarray_wrap, mtsarray_wrap_host
    public :: mtsarray_set_stream, mtsarray_get_stream, mtsarray_synchronize, mtsarray_data
    public :: mtsarray_shape, mtsarray_dtype, mtsarray_device, mtsarray_move_data, mtsarray_copy
    public :: mtsarray_is_mtsarray, mtsarray_destroy, mtsarray_copy_into
    public :: mtsarray_move_plan_create, mtsarray_move_plan_execute, mtsarray_move_plan_free
    public :: mtsarray_backend_available, mtsarray_backend_unavailable_reason, mtsarray_device_count
    public :: mtsarray_last_error, mtsarray_version
    public :: mtsarray_set_num_threads, mtsarray_get_num_threads
    public :: mtsarray_cuda_device, mtsarray_rocm_device

    !> Array filled with `value`; its kind picks the dtype (real64, real32,
    !> int32, int64). `status = mtsarray_full(array, shape, value [, device])`
    interface mtsarray_full
        module procedure full_f64, full_f32, full_i32, full_i64
    end interface

    !> Wrap a contiguous host Fortran array (any rank) without copying; the
    !> shape comes from the array. `status = mtsarray_wrap_host(array, data)`.
    !> `data` must stay alive (and not move) until the array is destroyed.
    interface mtsarray_wrap_host
        module procedure wrap_host_f64, wrap_host_f32, wrap_host_i32, wrap_host_i64
    end interface

    ! ---- the C API, called with the shapes already in C order ----------------
    interface
        !> Work stream of `array`, as a DLPack stream number (see above).
        function mtsarray_set_stream(array, stream) bind(c, name="mtsarray_set_stream") result(status)
            import :: mts_array_t, c_int64_t, c_int32_t
            type(mts_array_t), intent(in) :: array
            integer(c_int64_t), value :: stream
            integer(c_int32_t) :: status
        end function

        function mtsarray_get_stream(array, stream) bind(c, name="mtsarray_get_stream") result(status)
            import :: mts_array_t, c_int64_t, c_int32_t
            type(mts_array_t), intent(in) :: array
            integer(c_int64_t), intent(out) :: stream
            integer(c_int32_t) :: status
        end function

        !> Block until all work queued on `array` is done.
        function mtsarray_synchronize(array) bind(c, name="mtsarray_synchronize") result(status)
            import :: mts_array_t, c_int32_t
            type(mts_array_t), intent(in) :: array
            integer(c_int32_t) :: status
        end function

        !> First element, on the array's device (a device pointer on GPUs).
        function mtsarray_data(array, data) bind(c, name="mtsarray_data") result(status)
            import :: mts_array_t, c_ptr, c_int32_t
            type(mts_array_t), intent(in) :: array
            type(c_ptr), intent(out) :: data
            integer(c_int32_t) :: status
        end function

        !> Write every element of `source` into `destination` (same dtype and
        !> shape, any devices), queued on the destination's stream; nothing is
        !> allocated, so a buffer made once can be refilled every step.
        function mtsarray_copy_into(destination, source) bind(c, name="mtsarray_copy_into") result(status)
            import :: mts_array_t, c_int32_t
            type(mts_array_t), intent(in) :: destination
            type(mts_array_t), intent(in) :: source
            integer(c_int32_t) :: status
        end function

        !> move_data of a movement plan (see mtsarray_move_plan_create) from
        !> `input` into `output`, queued on output's stream. `plan` is a c_ptr.
        function mtsarray_move_plan_execute(plan, output, input) bind(c, name="mtsarray_move_plan_execute") &
                result(status)
            import :: c_ptr, mts_array_t, c_int32_t
            type(c_ptr), value :: plan
            type(mts_array_t), intent(in) :: output
            type(mts_array_t), intent(in) :: input
            integer(c_int32_t) :: status
        end function

        function c_move_plan_create(output, input, movements, count, plan) bind(c, name="mtsarray_move_plan_create") &
                result(status)
            import :: mts_array_t, mts_data_movement_t, c_size_t, c_ptr, c_int32_t
            type(mts_array_t), intent(in) :: output
            type(mts_array_t), intent(in) :: input
            type(mts_data_movement_t), intent(in) :: movements(*)
            integer(c_size_t), value :: count
            type(c_ptr), intent(out) :: plan
            integer(c_int32_t) :: status
        end function

        function c_move_plan_free(plan) bind(c, name="mtsarray_move_plan_free") result(status)
            import :: c_ptr, c_int32_t
            type(c_ptr), value :: plan
            integer(c_int32_t) :: status
        end function

        function mtsarray_is_mtsarray(array, result) bind(c, name="mtsarray_is_mtsarray") result(status)
            import :: mts_array_t, c_bool, c_int32_t
            type(mts_array_t), intent(in) :: array
            logical(c_bool), intent(out) :: result
            integer(c_int32_t) :: status
        end function

        function c_zeros(device, dtype, shape, shape_count, array) bind(c, name="mtsarray_zeros") result(status)
            import :: DLDevice, DLDataType, c_size_t, mts_array_t, c_int32_t
            type(DLDevice), value :: device
            type(DLDataType), value :: dtype
            integer(c_size_t), intent(in) :: shape(*)
            integer(c_size_t), value :: shape_count
            type(mts_array_t), intent(out) :: array
            integer(c_int32_t) :: status
        end function

        function c_full(device, dtype, shape, shape_count, value, array) bind(c, name="mtsarray_full") result(status)
            import :: DLDevice, DLDataType, c_size_t, c_ptr, mts_array_t, c_int32_t
            type(DLDevice), value :: device
            type(DLDataType), value :: dtype
            integer(c_size_t), intent(in) :: shape(*)
            integer(c_size_t), value :: shape_count
            type(c_ptr), value :: value
            type(mts_array_t), intent(out) :: array
            integer(c_int32_t) :: status
        end function

        function c_wrap(data, device, dtype, shape, shape_count, deleter, context, array) &
                bind(c, name="mtsarray_wrap") result(status)
            import :: DLDevice, DLDataType, c_size_t, c_ptr, c_funptr, mts_array_t, c_int32_t
            type(c_ptr), value :: data
            type(DLDevice), value :: device
            type(DLDataType), value :: dtype
            integer(c_size_t), intent(in) :: shape(*)
            integer(c_size_t), value :: shape_count
            type(c_funptr), value :: deleter
            type(c_ptr), value :: context
            type(mts_array_t), intent(out) :: array
            integer(c_int32_t) :: status
        end function

        function c_backend_available(device_type, available) bind(c, name="mtsarray_backend_available") result(status)
            import :: c_int, c_bool, c_int32_t
            integer(c_int), value :: device_type
            logical(c_bool), intent(out) :: available
            integer(c_int32_t) :: status
        end function

        function c_backend_unavailable_reason(device_type) bind(c, name="mtsarray_backend_unavailable_reason")
            import :: c_int, c_ptr
            integer(c_int), value :: device_type
            type(c_ptr) :: c_backend_unavailable_reason
        end function

        !> Use up to `count` threads (the caller included) for work on host
        !> memory: move_data, copy, fill and swap_axes of 1 MiB and more are
        !> split between them, with the same results whatever the count.
        !> Without it: MTSARRAY_NUM_THREADS, else OMP_NUM_THREADS, else the
        !> CPUs of the affinity mask. A call from inside an OpenMP parallel
        !> region runs on its own thread only. Errors: count < 1 or > 4096.
        function mtsarray_set_num_threads(count) bind(c, name="mtsarray_set_num_threads") result(status)
            import :: c_int32_t
            integer(c_int32_t), value :: count
            integer(c_int32_t) :: status
        end function

        !> The number of threads host-memory work may use. Errors: an
        !> invalid MTSARRAY_NUM_THREADS / OMP_NUM_THREADS.
        function mtsarray_get_num_threads(count) bind(c, name="mtsarray_get_num_threads") result(status)
            import :: c_int32_t
            integer(c_int32_t), intent(out) :: count
            integer(c_int32_t) :: status
        end function

        !> The number of devices arrays of `device_type` can be made on (ids
        !> 0 to count - 1): 1 for kDLCPU, the runtime's count for kDLCUDA and
        !> kDLROCM (and their host memory types), 0 when that backend was not
        !> compiled in or has no driver or device. Errors (count untouched):
        !> a device type mtsarray has no backend for.
        function mtsarray_device_count(device_type, count) bind(c, name="mtsarray_device_count") result(status)
            import :: c_int, c_int32_t
            integer(c_int), value :: device_type
            integer(c_int32_t), intent(inout) :: count
            integer(c_int32_t) :: status
        end function

        function c_version() bind(c, name="mtsarray_version")
            import :: c_ptr
            type(c_ptr) :: c_version
        end function

        function c_last_error(message, origin, data) bind(c, name="mts_last_error") result(status)
            import :: c_ptr, c_int32_t
            type(c_ptr), intent(out) :: message
            type(c_ptr), intent(out) :: origin
            type(c_ptr), intent(out) :: data
            integer(c_int32_t) :: status
        end function

        function c_strlen(string) bind(c, name="strlen")
            import :: c_ptr, c_size_t
            type(c_ptr), value :: string
            integer(c_size_t) :: c_strlen
        end function
    end interface

    ! ---- the mts_array_t callbacks --------------------------------------------
    abstract interface
        subroutine destroy_callback(array) bind(c)
            import :: c_ptr
            type(c_ptr), value :: array
        end subroutine

        function shape_callback(array, shape, shape_count) bind(c) result(status)
            import :: c_ptr, c_size_t, c_int32_t
            type(c_ptr), value :: array
            type(c_ptr), intent(out) :: shape
            integer(c_size_t), intent(out) :: shape_count
            integer(c_int32_t) :: status
        end function

        function dtype_callback(array, dtype) bind(c) result(status)
            import :: c_ptr, DLDataType, c_int32_t
            type(c_ptr), value :: array
            type(DLDataType), intent(out) :: dtype
            integer(c_int32_t) :: status
        end function

        function device_callback(array, device) bind(c) result(status)
            import :: c_ptr, DLDevice, c_int32_t
            type(c_ptr), value :: array
            type(DLDevice), intent(out) :: device
            integer(c_int32_t) :: status
        end function

        function copy_callback(array, device, new_array) bind(c) result(status)
            import :: c_ptr, DLDevice, mts_array_t, c_int32_t
            type(c_ptr), value :: array
            type(DLDevice), value :: device
            type(mts_array_t), intent(out) :: new_array
            integer(c_int32_t) :: status
        end function

        function move_data_callback(output, input, movements, count) bind(c) result(status)
            import :: c_ptr, mts_data_movement_t, c_size_t, c_int32_t
            type(c_ptr), value :: output
            type(c_ptr), value :: input
            type(mts_data_movement_t), intent(in) :: movements(*)
            integer(c_size_t), value :: count
            integer(c_int32_t) :: status
        end function
    end interface

contains

    ! ---- making arrays ----------------------------------------------------

    !> Array of `dtype` and `shape` (Fortran order) filled with zeros, on
    !> `device` (default: the CPU).
    function mtsarray_zeros(array, dtype, shape, device) result(status)
        type(mts_array_t), intent(out) :: array
        type(DLDataType), intent(in) :: dtype
        integer, intent(in) :: shape(:)
        type(DLDevice), intent(in), optional :: device
        integer(c_int32_t) :: status
        integer(c_size_t) :: c_shape(max(size(shape), 1))

        call to_c_shape(shape, c_shape)
        status = c_zeros(device_or_cpu(device), dtype, c_shape, size(shape, kind=c_size_t), array)
    end function

    function full_f64(array, shape, value, device) result(status)
        type(mts_array_t), intent(out) :: array
        integer, intent(in) :: shape(:)
        real(c_double), intent(in), target :: value
        type(DLDevice), intent(in), optional :: device
        integer(c_int32_t) :: status
        status = full_common(array, MTSARRAY_FLOAT64, shape, c_loc(value), device)
    end function

    function full_f32(array, shape, value, device) result(status)
        type(mts_array_t), intent(out) :: array
        integer, intent(in) :: shape(:)
        real(c_float), intent(in), target :: value
        type(DLDevice), intent(in), optional :: device
        integer(c_int32_t) :: status
        status = full_common(array, MTSARRAY_FLOAT32, shape, c_loc(value), device)
    end function

    function full_i32(array, shape, value, device) result(status)
        type(mts_array_t), intent(out) :: array
        integer, intent(in) :: shape(:)
        integer(c_int32_t), intent(in), target :: value
        type(DLDevice), intent(in), optional :: device
        integer(c_int32_t) :: status
        status = full_common(array, MTSARRAY_INT32, shape, c_loc(value), device)
    end function

    function full_i64(array, shape, value, device) result(status)
        type(mts_array_t), intent(out) :: array
        integer, intent(in) :: shape(:)
        integer(c_int64_t), intent(in), target :: value
        type(DLDevice), intent(in), optional :: device
        integer(c_int32_t) :: status
        status = full_common(array, MTSARRAY_INT64, shape, c_loc(value), device)
    end function

    function full_common(array, dtype, shape, value, device) result(status)
        type(mts_array_t), intent(out) :: array
        type(DLDataType), intent(in) :: dtype
        integer, intent(in) :: shape(:)
        type(c_ptr), intent(in) :: value
        type(DLDevice), intent(in), optional :: device
        integer(c_int32_t) :: status
        integer(c_size_t) :: c_shape(max(size(shape), 1))

        call to_c_shape(shape, c_shape)
        status = c_full(device_or_cpu(device), dtype, c_shape, size(shape, kind=c_size_t), value, array)
    end function

    !> Wrap existing contiguous memory (host or device pointer) without
    !> copying. `shape` is in Fortran order. mtsarray never frees `data`:
    !> `deleter(context)` (a bind(c) subroutine, passed with c_funloc) runs
    !> once when the array and every export of it are gone; without a
    !> deleter, keep the memory alive that long yourself.
    function mtsarray_wrap(array, data, dtype, shape, device, deleter, context) result(status)
        type(mts_array_t), intent(out) :: array
        type(c_ptr), intent(in) :: data
        type(DLDataType), intent(in) :: dtype
        integer, intent(in) :: shape(:)
        type(DLDevice), intent(in), optional :: device
        type(c_funptr), intent(in), optional :: deleter
        type(c_ptr), intent(in), optional :: context
        integer(c_int32_t) :: status
        integer(c_size_t) :: c_shape(max(size(shape), 1))
        type(c_funptr) :: c_deleter
        type(c_ptr) :: c_context

        c_deleter = c_null_funptr
        if (present(deleter)) c_deleter = deleter
        c_context = c_null_ptr
        if (present(context)) c_context = context
        call to_c_shape(shape, c_shape)
        status = c_wrap(data, device_or_cpu(device), dtype, c_shape, size(shape, kind=c_size_t), &
                        c_deleter, c_context, array)
    end function

    function wrap_host_f64(array, data) result(status)
        type(mts_array_t), intent(out) :: array
        real(c_double), intent(inout), target, contiguous :: data(..)
        integer(c_int32_t) :: status
        status = mtsarray_wrap(array, c_loc(data), MTSARRAY_FLOAT64, shape(data))
    end function

    function wrap_host_f32(array, data) result(status)
        type(mts_array_t), intent(out) :: array
        real(c_float), intent(inout), target, contiguous :: data(..)
        integer(c_int32_t) :: status
        status = mtsarray_wrap(array, c_loc(data), MTSARRAY_FLOAT32, shape(data))
    end function

    function wrap_host_i32(array, data) result(status)
        type(mts_array_t), intent(out) :: array
        integer(c_int32_t), intent(inout), target, contiguous :: data(..)
        integer(c_int32_t) :: status
        status = mtsarray_wrap(array, c_loc(data), MTSARRAY_INT32, shape(data))
    end function

    function wrap_host_i64(array, data) result(status)
        type(mts_array_t), intent(out) :: array
        integer(c_int64_t), intent(inout), target, contiguous :: data(..)
        integer(c_int32_t) :: status
        status = mtsarray_wrap(array, c_loc(data), MTSARRAY_INT64, shape(data))
    end function

    ! ---- queries through the mts_array_t callbacks -------------------------

    !> Shape of `array` in Fortran order (the reverse of the C shape).
    function mtsarray_shape(array, shape) result(status)
        type(mts_array_t), intent(in) :: array
        integer, allocatable, intent(out) :: shape(:)
        integer(c_int32_t) :: status
        procedure(shape_callback), pointer :: callback
        type(c_ptr) :: c_shape_ptr
        integer(c_size_t) :: count
        integer(c_size_t), pointer :: c_shape(:)
        integer :: axis

        status = require_callback(array, array%shape, "shape")
        if (status /= MTS_SUCCESS) return
        call c_f_procpointer(array%shape, callback)
        status = callback(array%ptr, c_shape_ptr, count)
        if (status /= MTS_SUCCESS) return
        allocate(shape(count))
        if (count == 0) return
        call c_f_pointer(c_shape_ptr, c_shape, [count])
        do axis = 1, int(count)
            shape(axis) = int(c_shape(int(count) - axis + 1))
        end do
    end function

    function mtsarray_dtype(array, dtype) result(status)
        type(mts_array_t), intent(in) :: array
        type(DLDataType), intent(out) :: dtype
        integer(c_int32_t) :: status
        procedure(dtype_callback), pointer :: callback

        status = require_callback(array, array%dtype, "dtype")
        if (status /= MTS_SUCCESS) return
        call c_f_procpointer(array%dtype, callback)
        status = callback(array%ptr, dtype)
    end function

    function mtsarray_device(array, device) result(status)
        type(mts_array_t), intent(in) :: array
        type(DLDevice), intent(out) :: device
        integer(c_int32_t) :: status
        procedure(device_callback), pointer :: callback

        status = require_callback(array, array%device, "device")
        if (status /= MTS_SUCCESS) return
        call c_f_procpointer(array%device, callback)
        status = callback(array%ptr, device)
    end function

    !> The `move_data` callback of `output`, queued on output's stream
    !> (which waits on input's). Movements use C 0-based indices.
    function mtsarray_move_data(output, input, movements) result(status)
        type(mts_array_t), intent(in) :: output
        type(mts_array_t), intent(in) :: input
        type(mts_data_movement_t), intent(in) :: movements(:)
        integer(c_int32_t) :: status
        procedure(move_data_callback), pointer :: callback
        type(mts_data_movement_t) :: packed(max(size(movements), 1))

        status = require_callback(output, output%move_data, "move_data")
        if (status /= MTS_SUCCESS) return
        call c_f_procpointer(output%move_data, callback)
        packed(1:size(movements)) = movements
        status = callback(output%ptr, input%ptr, packed, size(movements, kind=c_size_t))
    end function

    !> A movement plan: `movements` (C 0-based indices) checked once for
    !> arrays like `output` and `input`, then executed every step with
    !> `mtsarray_move_plan_execute(plan, output, input)` on arrays of the same
    !> dtype, device and trailing dimensions (the sample count, the LAST
    !> Fortran dimension, may differ as long as every movement fits), and
    !> released with `mtsarray_move_plan_free(plan)`. `plan` is c_null_ptr on
    !> error.
    function mtsarray_move_plan_create(output, input, movements, plan) result(status)
        type(mts_array_t), intent(in) :: output
        type(mts_array_t), intent(in) :: input
        type(mts_data_movement_t), intent(in) :: movements(:)
        type(c_ptr), intent(out) :: plan
        integer(c_int32_t) :: status
        ! contiguous, and on the heap: plans are made for long lists
        type(mts_data_movement_t), allocatable :: packed(:)

        allocate(packed(max(size(movements), 1)))
        packed(1:size(movements)) = movements
        plan = c_null_ptr
        status = c_move_plan_create(output, input, packed, size(movements, kind=c_size_t), plan)
    end function

    !> Releases `plan` and sets it to c_null_ptr (a null plan is a no-op).
    function mtsarray_move_plan_free(plan) result(status)
        type(c_ptr), intent(inout) :: plan
        integer(c_int32_t) :: status

        status = c_move_plan_free(plan)
        plan = c_null_ptr
    end function

    !> A deep copy of `array` on `device` (e.g. a GPU array brought to
    !> MTSARRAY_CPU to read its values from Fortran). The copy is complete
    !> when this returns for a host destination.
    function mtsarray_copy(array, device, copy) result(status)
        type(mts_array_t), intent(in) :: array
        type(DLDevice), intent(in) :: device
        type(mts_array_t), intent(out) :: copy
        integer(c_int32_t) :: status
        procedure(copy_callback), pointer :: callback

        status = require_callback(array, array%copy, "copy")
        if (status /= MTS_SUCCESS) return
        call c_f_procpointer(array%copy, callback)
        status = callback(array%ptr, device, copy)
    end function

    !> Release an array you own (not one handed to libmetatensor) and reset
    !> the handle. Does nothing on an empty handle.
    subroutine mtsarray_destroy(array)
        type(mts_array_t), intent(inout) :: array
        procedure(destroy_callback), pointer :: callback

        if (c_associated(array%destroy)) then
            call c_f_procpointer(array%destroy, callback)
            call callback(array%ptr)
        end if
        array = mts_array_t()
    end subroutine

    ! ---- backends, errors, version ------------------------------------------

    !> True when the backend for `device_type` was compiled in and has a
    !> usable device now (kDLCPU always).
    logical function mtsarray_backend_available(device_type)
        integer(c_int), intent(in) :: device_type
        logical(c_bool) :: available

        available = .false.
        if (c_backend_available(device_type, available) /= MTS_SUCCESS) available = .false.
        mtsarray_backend_available = logical(available)
    end function

    !> Why the backend for `device_type` can not be used ("" when it can).
    function mtsarray_backend_unavailable_reason(device_type) result(reason)
        integer(c_int), intent(in) :: device_type
        character(len=:), allocatable :: reason
        reason = from_c_string(c_backend_unavailable_reason(device_type))
    end function

    !> The message of the last error on this thread (mts_last_error).
    function mtsarray_last_error() result(message)
        character(len=:), allocatable :: message
        type(c_ptr) :: c_message, origin, data

        c_message = c_null_ptr
        if (c_last_error(c_message, origin, data) /= MTS_SUCCESS) c_message = c_null_ptr
        message = from_c_string(c_message)
    end function

    function mtsarray_version() result(version)
        character(len=:), allocatable :: version
        version = from_c_string(c_version())
    end function

    type(DLDevice) function mtsarray_cuda_device(id)
        integer, intent(in) :: id
        mtsarray_cuda_device = DLDevice(kDLCUDA, int(id, c_int32_t))
    end function

    type(DLDevice) function mtsarray_rocm_device(id)
        integer, intent(in) :: id
        mtsarray_rocm_device = DLDevice(kDLROCM, int(id, c_int32_t))
    end function

    ! ---- private: shapes, devices, callbacks and errors between C and Fortran -

    ! Fortran-order shape -> C-order shape (reversed), at least one entry so
    ! a 0-d array still passes a valid pointer.
    subroutine to_c_shape(shape, c_shape)
        integer, intent(in) :: shape(:)
        integer(c_size_t), intent(out) :: c_shape(:)
        integer :: axis

        c_shape = 0
        do axis = 1, size(shape)
            c_shape(axis) = int(shape(size(shape) - axis + 1), c_size_t)
        end do
    end subroutine

    type(DLDevice) function device_or_cpu(device)
        type(DLDevice), intent(in), optional :: device
        device_or_cpu = MTSARRAY_CPU
        if (present(device)) device_or_cpu = device
    end function

    ! An empty handle (or a foreign array without this callback) gives an
    ! error status instead of a call through a null pointer.
    function require_callback(array, callback, name) result(status)
        type(mts_array_t), intent(in) :: array
        type(c_funptr), intent(in) :: callback
        character(len=*), intent(in) :: name
        integer(c_int32_t) :: status

        status = MTS_SUCCESS
        if (.not. c_associated(array%ptr) .or. .not. c_associated(callback)) then
            status = MTS_INVALID_PARAMETER_ERROR
            call set_fortran_error("mtsarray (Fortran): the array handle is empty or has no '" &
                                   // name // "' callback")
        end if
    end function

    subroutine set_fortran_error(message)
        character(len=*), intent(in) :: message
        interface
            function c_set_last_error(message, origin, data, deleter) bind(c, name="mts_set_last_error") result(status)
                import :: c_char, c_ptr, c_funptr, c_int32_t
                character(kind=c_char), intent(in) :: message(*)
                character(kind=c_char), intent(in) :: origin(*)
                type(c_ptr), value :: data
                type(c_funptr), value :: deleter
                integer(c_int32_t) :: status
            end function
        end interface
        integer(c_int32_t) :: ignored

        ignored = c_set_last_error(message // c_null_char, "mtsarray" // c_null_char, c_null_ptr, c_null_funptr)
    end subroutine

    function from_c_string(string) result(text)
        type(c_ptr), intent(in) :: string
        character(len=:), allocatable :: text
        character(kind=c_char), pointer :: chars(:)
        integer :: i, length

        if (.not. c_associated(string)) then
            text = ""
            return
        end if
        length = int(c_strlen(string))
        call c_f_pointer(string, chars, [length])
        allocate(character(len=length) :: text)
        do i = 1, length
            text(i:i) = chars(i)
        end do
    end function

end module mtsarray
