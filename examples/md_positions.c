/*
 * md_positions.c: how a molecular dynamics code hands its data to metatensor
 * through mtsarray, without copying it.
 *
 * The MD code owns `positions` and `forces` (n_atoms x 3 doubles). Both are
 * wrapped zero-copy with `mtsarray_wrap` into one TensorBlock each (samples =
 * atoms, components = xyz, properties = 1), collected in a TensorMap keyed by
 * "quantity", and then merged with `mts_tensormap_keys_to_properties`:
 * libmetatensor builds the merged array with mtsarray's `create` and fills it
 * with mtsarray's `move_data`. The forces of two atoms are then gathered at
 * every step by a movement plan, checked once. Every value is checked; the
 * program exits with status 1 if one is wrong.
 *
 * Build: part of the mtsarray build (MTSARRAY_BUILD_EXAMPLES=ON), or
 * standalone with examples/CMakeLists.txt and find_package(mtsarray).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <metatensor.h>
#include <mtsarray.h>

#define N_ATOMS 6

static const DLDevice CPU = {kDLCPU, 0};
static const DLDataType FLOAT64 = {kDLFloat, 64, 1};
static const DLDataType INT32 = {kDLInt, 32, 1};

/* Print metatensor's last error (set by libmetatensor or by mtsarray) and stop. */
static void fail(const char* what) {
    const char* message = NULL;
    const char* origin = NULL;
    void* data = NULL;
    mts_last_error(&message, &origin, &data);
    fprintf(stderr, "md_positions: %s failed: %s (origin: %s)\n", what,
            message != NULL ? message : "?", origin != NULL ? origin : "?");
    exit(1);
}

#define CHECK(call)                       \
    do {                                  \
        if ((call) != MTS_SUCCESS) {      \
            fail(#call);                  \
        }                                 \
    } while (0)

static int n_errors = 0;

static void expect_equal(double actual, double expected, const char* what, int atom, int xyz) {
    if (fabs(actual - expected) > 1e-12) {
        fprintf(stderr, "WRONG VALUE: %s[atom %d][%c] = %g, expected %g\n", what, atom,
                "xyz"[xyz], actual, expected);
        n_errors++;
    }
}

/* Labels with one dimension `name` and `count` entries, from an mtsarray
 * int32 array of shape (count, 1). The labels take ownership of the array. */
static const mts_labels_t* make_labels(const char* name, const int32_t* values, uintptr_t count) {
    uintptr_t shape[2] = {count, 1};
    mts_array_t array = {0};
    CHECK(mtsarray_zeros(CPU, INT32, shape, 2, &array));
    void* data = NULL;
    CHECK(mtsarray_data(&array, &data));
    if (count != 0) {
        memcpy(data, values, count * sizeof(int32_t));
    }

    const mts_labels_t* labels = mts_labels(&name, 1, array);
    if (labels == NULL) {
        fail("mts_labels");
    }
    return labels;
}

/* A block of shape (N_ATOMS, 3, 1) whose values are `buffer` itself. */
static mts_block_t* wrap_in_block(double* buffer, const mts_labels_t* atoms,
                                  const mts_labels_t* xyz, const mts_labels_t* property) {
    uintptr_t shape[3] = {N_ATOMS, 3, 1};
    mts_array_t array = {0};
    /* No deleter: the MD code keeps owning (and later frees) the buffer. */
    CHECK(mtsarray_wrap(buffer, CPU, FLOAT64, shape, 3, NULL, NULL, &array));
    mts_block_t* block = mts_block(array, atoms, &xyz, 1, property);
    if (block == NULL) {
        fail("mts_block");
    }
    return block;
}

/* Read a CPU array through its DLPack export (the way any consumer would). */
static DLManagedTensorVersioned* export_to_host(mts_array_t array) {
    DLManagedTensorVersioned* tensor = NULL;
    DLPackVersion version = {DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION};
    CHECK(array.as_dlpack(array.ptr, &tensor, CPU, NULL, version));
    if (tensor->dl_tensor.strides != NULL) {
        /* mtsarray arrays are C-contiguous; check anyway, as a consumer should. */
        int64_t expected = 1;
        for (int axis = tensor->dl_tensor.ndim - 1; axis >= 0; axis--) {
            if (tensor->dl_tensor.shape[axis] > 1 && tensor->dl_tensor.strides[axis] != expected) {
                fprintf(stderr, "md_positions: exported tensor is not C-contiguous\n");
                exit(1);
            }
            expected *= tensor->dl_tensor.shape[axis];
        }
    }
    return tensor;
}

int main(void) {
    printf("mtsarray %s, metatensor %s\n", mtsarray_version(), mts_version());

    /* ---- the MD code's own memory ---------------------------------------- */
    double* positions = malloc(N_ATOMS * 3 * sizeof(double));
    double* forces = malloc(N_ATOMS * 3 * sizeof(double));
    if (positions == NULL || forces == NULL) {
        return 1;
    }
    for (int atom = 0; atom < N_ATOMS; atom++) {
        for (int x = 0; x < 3; x++) {
            positions[3 * atom + x] = 1.5 * atom + 0.1 * x;
            forces[3 * atom + x] = -0.5 * positions[3 * atom + x]; /* harmonic well */
        }
    }

    /* ---- metadata -------------------------------------------------------- */
    int32_t atom_ids[N_ATOMS];
    for (int atom = 0; atom < N_ATOMS; atom++) {
        atom_ids[atom] = atom;
    }
    const int32_t xyz_ids[3] = {0, 1, 2};
    const int32_t property_ids[1] = {0};
    const int32_t quantity_ids[2] = {0, 1}; /* 0: positions, 1: forces */

    const mts_labels_t* atoms = make_labels("atom", atom_ids, N_ATOMS);
    const mts_labels_t* xyz = make_labels("xyz", xyz_ids, 3);
    const mts_labels_t* property = make_labels("n", property_ids, 1);
    const mts_labels_t* keys = make_labels("quantity", quantity_ids, 2);

    /* ---- zero-copy blocks, one TensorMap --------------------------------- */
    mts_block_t* blocks[2] = {
        wrap_in_block(positions, atoms, xyz, property),
        wrap_in_block(forces, atoms, xyz, property),
    };
    /* The blocks hold their own references to the labels. */
    mts_labels_free(atoms);
    mts_labels_free(xyz);
    mts_labels_free(property);

    mts_tensormap_t* tensor = mts_tensormap(keys, blocks, 2); /* owns the blocks now */
    if (tensor == NULL) {
        fail("mts_tensormap");
    }
    mts_labels_free(keys);

    /* One MD step: the MD code updates its buffer in place... */
    const double dt = 0.01;
    for (int i = 0; i < 3 * N_ATOMS; i++) {
        positions[i] += dt * dt * forces[i];
    }
    /* ...and the block sees it, because it IS that buffer. */
    mts_block_t* positions_block = NULL;
    CHECK(mts_tensormap_block_by_id(tensor, &positions_block, 0));
    /* mts_block_data overwrites (and first releases) its output: start from zeros. */
    mts_array_t positions_array = {0}; /* a view owned by the block: not destroyed here */
    CHECK(mts_block_data(positions_block, &positions_array));
    void* block_data = NULL;
    CHECK(mtsarray_data(&positions_array, &block_data));
    if (block_data != (void*)positions) {
        fprintf(stderr, "WRONG: the block's data is not the MD buffer (zero-copy broken)\n");
        n_errors++;
    }

    /* ---- merge: keys_to_properties runs mtsarray's create + move_data ---- */
    const mts_labels_t* keys_to_move = make_labels("quantity", NULL, 0); /* no entries */
    mts_array_t fill_value = {0}; /* a 0-d scalar, owned by the call below */
    CHECK(mtsarray_zeros(CPU, FLOAT64, NULL, 0, &fill_value));
    mts_tensormap_t* merged = mts_tensormap_keys_to_properties(tensor, keys_to_move, fill_value, true);
    if (merged == NULL) {
        fail("mts_tensormap_keys_to_properties");
    }
    mts_labels_free(keys_to_move);

    mts_block_t* merged_block = NULL;
    CHECK(mts_tensormap_block_by_id(merged, &merged_block, 0));
    mts_array_t merged_array = {0};
    CHECK(mts_block_data(merged_block, &merged_array));
    bool made_by_mtsarray = false;
    CHECK(mtsarray_is_mtsarray(&merged_array, &made_by_mtsarray));
    if (!made_by_mtsarray) {
        fprintf(stderr, "WRONG: the merged array was not created by mtsarray\n");
        n_errors++;
    }

    /* Which property column holds which quantity: ask the labels. */
    const mts_labels_t* merged_properties = mts_block_labels(merged_block, 2);
    if (merged_properties == NULL) {
        fail("mts_block_labels");
    }
    int64_t column[2] = {-1, -1};
    for (int q = 0; q < 2; q++) {
        int32_t entry[2] = {q, 0}; /* (quantity, n) */
        CHECK(mts_labels_position(merged_properties, entry, 2, &column[q]));
    }
    mts_labels_free(merged_properties);

    DLManagedTensorVersioned* values = export_to_host(merged_array);
    const DLTensor* dl = &values->dl_tensor;
    const double* merged_values = (const double*)((const char*)dl->data + dl->byte_offset);
    printf("merged block: shape (%lld, %lld, %lld), properties (quantity, n)\n",
           (long long)dl->shape[0], (long long)dl->shape[1], (long long)dl->shape[2]);
    if (dl->ndim != 3 || dl->shape[0] != N_ATOMS || dl->shape[1] != 3 || dl->shape[2] != 2 ||
        column[0] < 0 || column[1] < 0) {
        fprintf(stderr, "WRONG: unexpected merged shape or property labels\n");
        return 1;
    }
    printf("atom   position (x, y, z)              force (x, y, z)\n");
    for (int atom = 0; atom < N_ATOMS; atom++) {
        const double* row = merged_values + atom * 3 * 2;
        printf("%4d   % .4f % .4f % .4f   % .4f % .4f % .4f\n", atom, row[0 * 2 + column[0]],
               row[1 * 2 + column[0]], row[2 * 2 + column[0]], row[0 * 2 + column[1]],
               row[1 * 2 + column[1]], row[2 * 2 + column[1]]);
        for (int x = 0; x < 3; x++) {
            expect_equal(row[x * 2 + column[0]], positions[3 * atom + x], "position", atom, x);
            expect_equal(row[x * 2 + column[1]], forces[3 * atom + x], "force", atom, x);
        }
    }
    values->deleter(values);

    /* ---- move_data by hand: gather the forces on atoms 4 and 1 ----------- */
    mts_block_t* forces_block = NULL;
    CHECK(mts_tensormap_block_by_id(tensor, &forces_block, 1));
    mts_array_t forces_array = {0};
    CHECK(mts_block_data(forces_block, &forces_array));

    mts_array_t nan_value = {0};
    const double not_a_number = NAN; /* anything not moved stays visibly wrong */
    CHECK(mtsarray_full(CPU, FLOAT64, NULL, 0, &not_a_number, &nan_value));
    uintptr_t selected_shape[3] = {2, 3, 1};
    mts_array_t selected = {0}; /* ours: destroyed at the end */
    CHECK(forces_array.create(forces_array.ptr, selected_shape, 3, nan_value, &selected));
    mts_data_movement_t movements[2] = {
        {.sample_in = 4, .sample_out = 0, .properties_start_in = 0, .properties_start_out = 0,
         .properties_length = 1},
        {.sample_in = 1, .sample_out = 1, .properties_start_in = 0, .properties_start_out = 0,
         .properties_length = 1},
    };
    /* The same gather at every MD step: a plan checks the movements once,
     * then each step only copies (on the selected array's stream). */
    mtsarray_move_plan_t* gather = NULL;
    CHECK(mtsarray_move_plan_create(&selected, &forces_array, movements, 2, &gather));
    void* selected_data = NULL;
    CHECK(mtsarray_data(&selected, &selected_data));
    const double* gathered = (const double*)selected_data;
    for (int step = 0; step < 3; step++) {
        for (int i = 0; i < 3 * N_ATOMS; i++) {
            forces[i] = 0.5 * forces[i] + step; /* the MD code's new forces, in place */
        }
        CHECK(mtsarray_move_plan_execute(gather, &selected, &forces_array));
        CHECK(mtsarray_synchronize(&selected)); /* a no-op on the CPU, needed on GPUs */
        for (int x = 0; x < 3; x++) {
            expect_equal(gathered[x], forces[3 * 4 + x], "gathered force", 4, x);
            expect_equal(gathered[3 + x], forces[3 * 1 + x], "gathered force", 1, x);
        }
    }
    CHECK(mtsarray_move_plan_free(gather));
    printf("forces on atoms 4 and 1, gathered by a move plan: (% .4f % .4f % .4f) (% .4f % .4f % .4f)\n",
           gathered[0], gathered[1], gathered[2], gathered[3], gathered[4], gathered[5]);
    selected.destroy(selected.ptr);

    /* Which GPU backends this build and machine can use. */
    const DLDeviceType gpu_types[2] = {kDLCUDA, kDLROCM};
    const char* gpu_names[2] = {"CUDA", "ROCm"};
    for (int i = 0; i < 2; i++) {
        bool available = false;
        CHECK(mtsarray_backend_available(gpu_types[i], &available));
        printf("%s backend: %s%s\n", gpu_names[i], available ? "available" : "unavailable: ",
               available ? "" : mtsarray_backend_unavailable_reason(gpu_types[i]));
    }

    mts_tensormap_free(merged);
    mts_tensormap_free(tensor);
    /* The blocks are gone: only now may the MD code free its buffers. */
    free(positions);
    free(forces);

    if (n_errors != 0) {
        fprintf(stderr, "md_positions: %d wrong value(s)\n", n_errors);
        return 1;
    }
    printf("md_positions: all values checked, ok\n");
    return 0;
}
