! A molecular-dynamics code handing its data to metatensor through mtsarray.
!
! The MD code owns positions(3, n_atoms) and forces(3, n_atoms) (Fortran
! column-major, xyz fastest). mtsarray wraps them without copying as
! metatensor arrays of C shape [n_atoms, 3]. A "model" then works on the
! metatensor side (move_data gathers the atoms of a neighbour list into a
! new array, and writes forces back), and the MD code reads the results in
! its own arrays. Every value is checked; the program stops with a non-zero
! exit code on the first mismatch.
program example_md
    use, intrinsic :: iso_c_binding
    use mtsarray
    implicit none

    integer, parameter :: n_atoms = 6
    real(c_double), target :: positions(3, n_atoms)
    real(c_double), target :: forces(3, n_atoms)
    type(mts_array_t) :: positions_array, forces_array, neighbours, scratch
    type(mts_array_t) :: neighbours_gpu, on_host
    type(mts_data_movement_t) :: movements(3)
    integer, allocatable :: shape(:)
    type(c_ptr) :: data
    real(c_double), pointer :: gathered(:, :)
    integer(c_int64_t) :: stream
    type(DLDataType) :: dtype
    type(DLDevice) :: device
    integer :: atom, xyz
    integer(c_int32_t) :: threads, gpus
    type(c_ptr) :: plan
    integer :: step

    print '(a, a)', "mtsarray ", mtsarray_version()

    ! host work may use 2 threads (an MPI rank passes its share of the cores)
    call check(mtsarray_set_num_threads(2_c_int32_t), "set_num_threads")
    call check(mtsarray_get_num_threads(threads), "get_num_threads")
    call expect(threads == 2, "two threads for host work")
    call expect(mtsarray_set_num_threads(0_c_int32_t) /= MTS_SUCCESS, "zero threads is an error")

    do atom = 1, n_atoms
        do xyz = 1, 3
            positions(xyz, atom) = 10.0d0 * atom + xyz
        end do
    end do
    forces = 0.0d0

    ! ---- wrap the MD arrays, zero-copy ---------------------------------------
    call check(mtsarray_wrap_host(positions_array, positions), "wrap positions")
    call check(mtsarray_wrap_host(forces_array, forces), "wrap forces")

    call check(mtsarray_data(positions_array, data), "data")
    call expect(c_associated(data, c_loc(positions)), "positions are wrapped without a copy")
    call check(mtsarray_shape(positions_array, shape), "shape")
    call expect(size(shape) == 2 .and. all(shape == [3, n_atoms]), "Fortran-order shape is (3, n_atoms)")
    call check(mtsarray_dtype(positions_array, dtype), "dtype")
    call expect(dtype%code == kDLFloat .and. dtype%bits == 64 .and. dtype%lanes == 1, "dtype is float64")
    call check(mtsarray_device(positions_array, device), "device")
    call expect(device%device_type == kDLCPU, "positions live on the CPU")

    ! the MD step moves an atom: metatensor sees it at once (same memory)
    positions(2, 3) = -7.5d0
    call c_f_pointer(data, gathered, [3, n_atoms])
    call expect(gathered(2, 3) == -7.5d0, "an MD update is visible through the metatensor array")

    ! ---- the model side: gather the neighbours of atom 1 ----------------------
    ! neighbours[i, :] = positions[j, :] for (i, j) in (0, 4), (1, 1), (2, 2), 0-based C rows
    call check(mtsarray_zeros(neighbours, MTSARRAY_FLOAT64, [3, 3]), "zeros")
    movements(1) = mts_data_movement_t(4, 0, 0, 0, 3)
    movements(2) = mts_data_movement_t(1, 1, 0, 0, 3)
    movements(3) = mts_data_movement_t(2, 2, 0, 0, 3)
    call check(mtsarray_move_data(neighbours, positions_array, movements), "move_data gather")
    call check(mtsarray_synchronize(neighbours), "synchronize")
    call check(mtsarray_data(neighbours, data), "data")
    call c_f_pointer(data, gathered, [3, 3])
    call expect(all(gathered(:, 1) == positions(:, 5)), "neighbour 1 is atom 5")
    call expect(all(gathered(:, 2) == positions(:, 2)), "neighbour 2 is atom 2")
    call expect(all(gathered(:, 3) == positions(:, 3)), "neighbour 3 is atom 3 (moved)")

    ! the model computes forces for the neighbours (harmonic: f = -2 x) ...
    gathered = -2.0d0 * gathered
    ! ... and scatters them back into the MD code's forces, zero-copy
    movements(1) = mts_data_movement_t(0, 4, 0, 0, 3)
    movements(2) = mts_data_movement_t(1, 1, 0, 0, 3)
    movements(3) = mts_data_movement_t(2, 2, 0, 0, 3)
    call check(mtsarray_move_data(forces_array, neighbours, movements), "move_data scatter")
    call check(mtsarray_synchronize(forces_array), "synchronize")
    do atom = 1, n_atoms
        if (atom == 2 .or. atom == 3 .or. atom == 5) then
            call expect(all(forces(:, atom) == -2.0d0 * positions(:, atom)), "forces written back")
        else
            call expect(all(forces(:, atom) == 0.0d0), "other atoms untouched")
        end if
    end do

    ! ---- the same gather every step: a movement plan, checked once ----------------
    movements(1) = mts_data_movement_t(4, 0, 0, 0, 3)
    movements(2) = mts_data_movement_t(1, 1, 0, 0, 3)
    movements(3) = mts_data_movement_t(2, 2, 0, 0, 3)
    call check(mtsarray_move_plan_create(neighbours, positions_array, movements, plan), "move_plan_create")
    do step = 1, 3
        positions(1, 5) = real(step, c_double)
        call check(mtsarray_move_plan_execute(plan, neighbours, positions_array), "move_plan_execute")
        call check(mtsarray_data(neighbours, data), "data")
        call c_f_pointer(data, gathered, [3, 3])
        call expect(all(gathered(:, 1) == positions(:, 5)), "the plan gathers atom 5 at every step")
    end do
    positions(1, 5) = 51.0d0
    ! an output with more samples (C shape [5, 3]) than the plan was made for
    call check(mtsarray_zeros(scratch, MTSARRAY_FLOAT64, [3, 5]), "zeros")
    call check(mtsarray_move_plan_execute(plan, scratch, positions_array), "move_plan_execute, 5 samples")
    call check(mtsarray_data(scratch, data), "data")
    call c_f_pointer(data, gathered, [3, 5])
    call expect(all(gathered(:, 1) == positions(:, 5)) .and. all(gathered(:, 4:5) == 0.0d0), &
                "a plan runs on an output with more samples")
    call mtsarray_destroy(scratch)
    call expect(mtsarray_move_plan_execute(plan, neighbours, scratch) /= MTS_SUCCESS, &
                "a plan refuses an empty input handle")
    call check(mtsarray_move_plan_free(plan), "move_plan_free")
    call expect(.not. c_associated(plan), "a freed plan is null")

    ! ---- filled arrays of every dtype -------------------------------------------
    call check(mtsarray_full(scratch, [4, 2], 1.5_c_float), "full float32")
    call check(mtsarray_shape(scratch, shape), "shape")
    call expect(all(shape == [4, 2]), "float32 shape")
    call check(mtsarray_data(scratch, data), "data")
    block
        real(c_float), pointer :: values(:, :)
        call c_f_pointer(data, values, shape)
        call expect(all(values == 1.5_c_float), "float32 values")
    end block
    call mtsarray_destroy(scratch)

    call check(mtsarray_full(scratch, [5], 42_c_int32_t), "full int32")
    call check(mtsarray_data(scratch, data), "data")
    block
        integer(c_int32_t), pointer :: values(:)
        call c_f_pointer(data, values, [5])
        call expect(all(values == 42), "int32 values")
    end block
    call mtsarray_destroy(scratch)

    ! ---- streams and errors ---------------------------------------------------------
    call check(mtsarray_get_stream(positions_array, stream), "get_stream")
    call expect(stream == -1, "CPU arrays report stream -1")
    call check(mtsarray_set_stream(positions_array, -1_c_int64_t), "set_stream(-1)")
    call expect(mtsarray_set_stream(positions_array, 5_c_int64_t) /= MTS_SUCCESS, &
                "a GPU stream number on a CPU array is an error")
    call expect(index(mtsarray_last_error(), "mtsarray") > 0, "the error message names mtsarray")
    print '(a, a)', "expected error: ", mtsarray_last_error()
    call expect(mtsarray_move_data(neighbours, scratch, movements) /= MTS_SUCCESS, &
                "move_data from an empty handle is refused")

    ! ---- a GPU, when there is one ------------------------------------------------------
    call expect(mtsarray_backend_available(kDLCPU), "the CPU backend is available")
    call check(mtsarray_device_count(kDLCPU, gpus), "device_count(kDLCPU)")
    call expect(gpus == 1, "one CPU device")
    ! GPU ids are 0 to gpus - 1 (an MPI rank takes its node-local rank modulo gpus)
    call check(mtsarray_device_count(kDLCUDA, gpus), "device_count(kDLCUDA)")
    call expect((gpus > 0) .eqv. mtsarray_backend_available(kDLCUDA), "CUDA devices exactly when CUDA is available")
    print '(a, i0)', "CUDA devices: ", gpus
    gpus = -7
    call expect(mtsarray_device_count(4_c_int, gpus) /= MTS_SUCCESS, "device_count(kDLOpenCL) is an error")
    call expect(gpus == -7, "and leaves the count untouched")
    if (mtsarray_backend_available(kDLCUDA)) then
        ! positions on the GPU (C shape [n_atoms, 3]), gathered there on the
        ! per-thread default stream, then copied back to read them
        call check(mtsarray_full(scratch, [3, n_atoms], 0.0d0, mtsarray_cuda_device(0)), "full on CUDA")
        call check(mtsarray_copy(positions_array, mtsarray_cuda_device(0), neighbours_gpu), "copy to CUDA")
        call check(mtsarray_set_stream(scratch, 2_c_int64_t), "per-thread stream")
        call check(mtsarray_move_data(scratch, neighbours_gpu, movements), "move_data on CUDA")
        call check(mtsarray_device(scratch, device), "device")
        call expect(device%device_type == kDLCUDA, "the array lives on the GPU")
        call check(mtsarray_copy(scratch, MTSARRAY_CPU, on_host), "copy to the host")
        call check(mtsarray_data(on_host, data), "data")
        call c_f_pointer(data, gathered, [3, n_atoms])
        ! the scatter movements: rows 0, 1, 2 -> 4, 1, 2
        call expect(all(gathered(:, 5) == positions(:, 1)) .and. all(gathered(:, 2) == positions(:, 2)) &
                    .and. all(gathered(:, 1) == 0.0d0), "values moved on the GPU")
        call mtsarray_destroy(on_host)
        call mtsarray_destroy(neighbours_gpu)
        call mtsarray_destroy(scratch)
        print '(a)', "CUDA: checked"
    else
        print '(a, a)', "CUDA skipped: ", mtsarray_backend_unavailable_reason(kDLCUDA)
    end if

    call mtsarray_destroy(neighbours)
    call mtsarray_destroy(forces_array)
    call mtsarray_destroy(positions_array)
    call expect(.not. c_associated(positions_array%ptr), "destroy resets the handle")
    print '(a)', "example_md: all checks passed"

contains

    subroutine check(status, what)
        integer(c_int32_t), intent(in) :: status
        character(len=*), intent(in) :: what
        if (status /= MTS_SUCCESS) then
            print '(a, a, a, i0, a, a)', "FAILED: ", what, " (status ", status, "): ", mtsarray_last_error()
            error stop 1
        end if
    end subroutine

    subroutine expect(condition, what)
        logical, intent(in) :: condition
        character(len=*), intent(in) :: what
        if (.not. condition) then
            print '(a, a)', "FAILED: ", what
            error stop 1
        end if
    end subroutine

end program example_md
