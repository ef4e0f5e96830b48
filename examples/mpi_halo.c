/*
 * mpi_halo.c: the halo exchange of a domain-decomposed simulation on the rows of a
 * metatensor TensorMap, with mtsarray arrays on the CPU or a GPU and the MPI the cluster
 * already has. The ranks form a ring; each owns N atoms and keeps copies ("ghosts") of the
 * last G atoms of its left neighbour and the first G of its right one. Its TensorMap has
 * three blocks sampled by "atom": descriptor and force (N + 2G rows: the owned atoms, then
 * the ghosts) and halo_force (N rows). Each step sends descriptor rows forward (owners ->
 * ghosts) and force rows in reverse (ghosts -> the owners' halo_force): move_data packs the
 * rows into one array, MPI sends it, move_data unpacks it.
 *
 *   1. initialise MPI, pick the device   5. exchange with MPI: who waits for whom
 *   2. build the rank's TensorMap        6. unpack with move_data
 *   3. the row lists of each neighbour   7. reverse communication
 *   4. pack with move_data               8. clean up
 *
 * Every received value is checked (exit status 1 if one is wrong). Timing,
 * MPI's own answer on GPU support, and sizes as options: bench/mpi_halo_bench.c.
 * Usage: mpirun -np 4 mpi_halo [--device cpu|cuda|rocm|auto] [--transport direct|staged]
 */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <metatensor.h>
#include <mpi.h>
#include <mtsarray.h>

#include "node_local_gpu.h"

static const DLDevice CPU = {kDLCPU, 0};
static const DLDataType FLOAT64 = {kDLFloat, 64, 1};
static const DLDataType INT32 = {kDLInt, 32, 1};
enum { DESCRIPTOR, FORCE, HALO_FORCE, N_BLOCKS };
enum { ATOMS = 1000, GHOSTS = 100, FEATURES = 8, XYZ = 3, STEPS = 3 };
enum { TO_LEFT = 1, TO_RIGHT = 2 }; /* MPI tags: with 2 ranks, left == right */

/* Print metatensor's last error (from libmetatensor or mtsarray); stop every rank. */
static void fail(const char* what) {
    const char *message = NULL, *origin = NULL;
    void* data = NULL;
    mts_last_error(&message, &origin, &data);
    fprintf(stderr, "mpi_halo: %s failed: %s\n", what, message != NULL ? message : "?");
    MPI_Abort(MPI_COMM_WORLD, 1);
}
#define CHECK(call) do { if ((call) != MTS_SUCCESS) { fail(#call); } } while (0)

/* Labels with one dimension `name`, on `device` like the values they label. */
static const mts_labels_t* labels(const char* name, const int32_t* values, uintptr_t count,
                                  DLDevice device) {
    const uintptr_t shape[2] = {count, 1};
    mts_array_t host = {0}, array = {0};
    CHECK(mtsarray_wrap((void*)values, CPU, INT32, shape, 2, NULL, NULL, &host));
    CHECK(host.copy(host.ptr, device, &array)); /* the labels own the copy */
    host.destroy(host.ptr);
    const mts_labels_t* result = mts_labels(&name, 1, array);
    if (result == NULL) { fail("mts_labels"); }
    return result;
}

/* Column n of an atom's row at a step: exact, and any rank can compute it. */
static double value(int32_t atom, uintptr_t n, int step) { return 1e9 * step + 1e2 * atom + n; }

/* The simulation's own work (here move_data from host values): row first + i
 * of `block` gets sign x value() of atom[i], for i < count. */
static void write_rows(mts_array_t* block, uintptr_t first, const int32_t* atom, uintptr_t count,
                       uintptr_t width, double sign, int step, DLDevice device) {
    double values[(ATOMS + 2 * GHOSTS) * FEATURES];
    mts_data_movement_t moves[ATOMS + 2 * GHOSTS];
    for (uintptr_t i = 0; i < count; i++) {
        for (uintptr_t n = 0; n < width; n++) {
            values[i * width + n] = sign * value(atom[i], n, step);
        }
        moves[i] = (mts_data_movement_t){i, first + i, 0, 0, width};
    }
    const uintptr_t shape[2] = {count, width};
    mts_array_t host = {0}, source = {0};
    CHECK(mtsarray_wrap(values, CPU, FLOAT64, shape, 2, NULL, NULL, &host));
    CHECK(host.copy(host.ptr, device, &source)); /* `values` may go when this returns */
    CHECK(block->move_data(block->ptr, source.ptr, moves, count));
    source.destroy(source.ptr); /* freed in stream order, after the move */
    host.destroy(host.ptr);
}

/* The check of received rows: the values write_rows wrote, or exit status 1. */
static void check_rows(const mts_array_t* block, uintptr_t first, const int32_t* atom,
                       uintptr_t count, uintptr_t width, double sign, int step) {
    mts_array_t copy = {0};
    void* data = NULL;
    CHECK(block->copy(block->ptr, CPU, &copy)); /* the host waits for the work queued on it */
    CHECK(mtsarray_data(&copy, &data));
    const double* actual = (const double*)data + first * width;
    for (uintptr_t i = 0; i < count * width; i++) {
        if (actual[i] != sign * value(atom[i / width], i % width, step)) {
            fprintf(stderr, "mpi_halo: WRONG VALUE %.17g in row %lu, step %d\n", actual[i],
                    (unsigned long)(first + i / width), step);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
    }
    copy.destroy(copy.ptr);
}

typedef struct {
    DLDevice device;
    bool staged;    /* through host memory, for an MPI that takes no device pointers */
    int64_t stream; /* the blocks' stream: every array of the rank works on it */
    int left, right;
} Route;

/* One direction: its movements and message arrays, made once. Message rows
 * [0, G) go to (come from) the left neighbour, [G, 2G) the right one. */
typedef struct {
    uintptr_t width;
    mts_data_movement_t pack[2 * GHOSTS], unpack[2 * GHOSTS]; /* block row <-> message row */
    mts_array_t send, receive;
    mts_array_t host_send, uploaded; /* staged: page-locked copy of send, device copy of receive */
} Message;

static void make_message(Message* m, const Route* route, const uintptr_t* from_rows,
                         const uintptr_t* to_rows, uintptr_t width) {
    m->width = width;
    for (uintptr_t j = 0; j < 2 * GHOSTS; j++) {
        /* sample_in, sample_out, properties_start_in, properties_start_out,
         * properties_length: a start other than 0 puts blocks side by side */
        m->pack[j] = (mts_data_movement_t){from_rows[j], j, 0, 0, width};
        m->unpack[j] = (mts_data_movement_t){j, to_rows[j], 0, 0, width};
    }
    const uintptr_t shape[2] = {2 * GHOSTS, width};
    CHECK(mtsarray_zeros(route->device, FLOAT64, shape, 2, &m->send));
    CHECK(mtsarray_set_stream(&m->send, route->stream));
    if (route->staged) {
        /* host arrays made once (page-locked for a GPU): MPI reads host_send and writes
         * receive; mtsarray_copy_into refills them and `uploaded` every step */
        const DLDeviceType type = route->device.device_type;
    const DLDevice host = {type == kDLCUDA ? kDLCUDAHost : type == kDLROCM ? kDLROCMHost : kDLCPU, 0};
        CHECK(mtsarray_zeros(host, FLOAT64, shape, 2, &m->receive));
        CHECK(mtsarray_zeros(host, FLOAT64, shape, 2, &m->host_send));
        CHECK(mtsarray_zeros(route->device, FLOAT64, shape, 2, &m->uploaded));
        CHECK(mtsarray_set_stream(&m->uploaded, route->stream));
    } else {
        CHECK(mtsarray_zeros(route->device, FLOAT64, shape, 2, &m->receive));
        CHECK(mtsarray_set_stream(&m->receive, route->stream));
    }
    CHECK(mtsarray_synchronize(&m->send)); /* zeroed before MPI may touch them */
    CHECK(mtsarray_synchronize(&m->receive));
}

/* Steps 4 to 6 for one direction: rows of `from` -> send -> MPI -> receive -> rows of `to`. */
static void communicate(Message* m, const mts_array_t* from, mts_array_t* to, const Route* route) {
    /* 4. Pack: the rows the neighbours need into the send array (queued on its stream) */
    CHECK(m->send.move_data(m->send.ptr, from->ptr, m->pack, 2 * GHOSTS));
    /* 5. Exchange. MPI is not stream-aware: between posting a request and MPI_Waitall it
     *    reads and writes the buffers whenever it likes, so the host waits before posting. */
    const bool staged = m->host_send.ptr != NULL;
    if (staged) {
        /* Staged: the send array copied into the page-locked one, after the pack; the host
         * waits for this copy (and the work before it) only. */
        CHECK(mtsarray_copy_into(&m->host_send, &m->send));
    } else {
        /* Direct: MPI gets the arrays' own (device) pointers. The host waits for the stream:
         * the pack is done, and so is the previous unpack that read the receive array. */
        CHECK(mtsarray_synchronize(&m->send));
    }
    void *send = NULL, *receive = NULL;
    CHECK(mtsarray_data(staged ? &m->host_send : &m->send, &send));
    CHECK(mtsarray_data(&m->receive, &receive));
    const int count = GHOSTS * (int)m->width; /* doubles per neighbour */
    double *out = send, *in = receive;
    MPI_Request requests[4];
    MPI_Irecv(in, count, MPI_DOUBLE, route->left, TO_RIGHT, MPI_COMM_WORLD, &requests[0]);
    MPI_Irecv(in + count, count, MPI_DOUBLE, route->right, TO_LEFT, MPI_COMM_WORLD, &requests[1]);
    MPI_Isend(out, count, MPI_DOUBLE, route->left, TO_LEFT, MPI_COMM_WORLD, &requests[2]);
    MPI_Isend(out + count, count, MPI_DOUBLE, route->right, TO_RIGHT, MPI_COMM_WORLD, &requests[3]);
    MPI_Waitall(4, requests, MPI_STATUSES_IGNORE);
    /* 6. Unpack, queued now that MPI_Waitall returned. Staged: the page-locked array is
     *    uploaded first, on the stream; MPI writes it again only after the host waited
     *    for a later send copy, queued after this upload and this unpack. */
    if (staged) {
        CHECK(mtsarray_copy_into(&m->uploaded, &m->receive));
    }
    CHECK(to->move_data(to->ptr, (staged ? m->uploaded : m->receive).ptr, m->unpack, 2 * GHOSTS));
}

int main(int argc, char** argv) {
    /* 1. Initialise MPI and pick the device ------------------------------------- */
    MPI_Init(&argc, &argv);
    int rank = 0, size = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const char *device_name = "auto", *transport = "";
    bool good = size >= 2 && argc % 2 == 1; /* options come in pairs */
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--device") == 0) {
            device_name = argv[i + 1];
        } else if (strcmp(argv[i], "--transport") == 0) {
            transport = argv[i + 1];
            good = good && (strcmp(transport, "direct") == 0 || strcmp(transport, "staged") == 0);
        } else {
            good = false;
        }
    }
    /* auto: CUDA, then ROCm, when mtsarray can use one, else the CPU. Each rank
     * takes the GPU of its node-local rank, modulo the GPUs (node_local_gpu.h) */
    bool cuda = false, rocm = false;
    CHECK(mtsarray_backend_available(kDLCUDA, &cuda));
    CHECK(mtsarray_backend_available(kDLROCM, &rocm));
    const bool any = strcmp(device_name, "auto") == 0;
    cuda = strcmp(device_name, "cuda") == 0 || (any && cuda);
    rocm = !cuda && (strcmp(device_name, "rocm") == 0 || (any && rocm));
    const int local_rank = node_local_rank(MPI_COMM_WORLD, NULL);
    const DLDevice device = node_local_gpu(cuda ? kDLCUDA : rocm ? kDLROCM : kDLCPU, local_rank, NULL);
    good = good && (any || cuda || rocm || strcmp(device_name, "cpu") == 0);
    if (!good) {
        if (rank == 0) { fprintf(stderr, "usage: mpirun -np P>=2 mpi_halo [--device "
                                         "cpu|cuda|rocm|auto] [--transport direct|staged]\n"); }
        MPI_Finalize();
        return 2;
    }
    /* Direct hands the arrays' pointers to MPI: on a GPU, declare a GPU-aware MPI
     * with MTSARRAY_MPI_GPU_AWARE=1 (the bench asks the MPI). Staged also runs on the CPU. */
    const char* aware = getenv("MTSARRAY_MPI_GPU_AWARE");
    const bool direct = device.device_type == kDLCPU || (aware != NULL && strcmp(aware, "1") == 0);
    Route route = {device, transport[0] != '\0' ? strcmp(transport, "staged") == 0 : !direct, 0,
                   (rank + size - 1) % size, (rank + 1) % size};

    /* 2. Build the TensorMap of this rank --------------------------------------- */
    const uintptr_t N = ATOMS, G = GHOSTS, rows = N + 2 * G;
    int32_t atom[ATOMS + 2 * GHOSTS]; /* the atom of each row */
    for (uintptr_t r = 0; r < rows; r++) {
        const uintptr_t j = r - N; /* the ghosts: left's last G atoms, right's first G */
        atom[r] = (int32_t)(r < N   ? (uintptr_t)rank * N + r
                            : j < G ? (uintptr_t)route.left * N + N - G + j
                                    : (uintptr_t)route.right * N + j - G);
    }
    const int32_t ids[FEATURES] = {0, 1, 2, 3, 4, 5, 6, 7};
    mts_block_t* blocks[N_BLOCKS];
    for (int b = 0; b < N_BLOCKS; b++) {
        /* NaN shows a row nobody wrote; halo_force rows no neighbour holds stay 0 */
        const double start = b == HALO_FORCE ? 0.0 : (double)NAN;
        const uintptr_t shape[2] = {b == HALO_FORCE ? N : rows, b == DESCRIPTOR ? FEATURES : XYZ};
        mts_array_t values = {0};
        CHECK(mtsarray_full(device, FLOAT64, shape, 2, &start, &values));
        const mts_labels_t* samples = labels("atom", atom, shape[0], device);
        const mts_labels_t* properties = labels("n", ids, shape[1], device);
        blocks[b] = mts_block(values, samples, NULL, 0, properties); /* owns `values` */
        if (blocks[b] == NULL) { fail("mts_block"); }
        mts_labels_free(samples);
        mts_labels_free(properties);
    }
    const mts_labels_t* keys = labels("quantity", ids, N_BLOCKS, device);
    mts_tensormap_t* tensor = mts_tensormap(keys, blocks, N_BLOCKS); /* owns the blocks */
    if (tensor == NULL) { fail("mts_tensormap"); }
    mts_labels_free(keys);
    mts_array_t values[N_BLOCKS] = {{0}}; /* views of the values, owned by `tensor` */
    for (int b = 0; b < N_BLOCKS; b++) {
        mts_block_t* block = NULL;
        CHECK(mts_tensormap_block_by_id(tensor, &block, (uintptr_t)b));
        CHECK(mts_block_data(block, &values[b]));
    }
    /* the message arrays work on the blocks' stream: one host wait covers all */
    CHECK(mtsarray_get_stream(&values[DESCRIPTOR], &route.stream));

    /* 3. The row lists of each neighbour ---------------------------------------- */
    /* the owned rows the neighbours need (first G atoms to the left, last G to the right), the
     * rows received ones go to; any rows would do (an MD code's are scattered) */
    uintptr_t send_rows[2 * GHOSTS], ghost_rows[2 * GHOSTS];
    for (uintptr_t j = 0; j < 2 * G; j++) {
        send_rows[j] = j < G ? j : N - 2 * G + j;
        ghost_rows[j] = N + j;
    }
    Message forward = {0}, reverse = {0};
    make_message(&forward, &route, send_rows, ghost_rows, FEATURES);
    make_message(&reverse, &route, ghost_rows, send_rows, XYZ);

    for (int step = 0; step < STEPS; step++) {
        /* the simulation: new descriptors of the owned atoms, forces on the ghosts */
        write_rows(&values[DESCRIPTOR], 0, atom, N, FEATURES, 1.0, step, device);
        write_rows(&values[FORCE], N, atom + N, 2 * G, XYZ, -1.0, step, device);
        /* Steps 4 to 6, forward: the owners' descriptors into the ghost rows */
        communicate(&forward, &values[DESCRIPTOR], &values[DESCRIPTOR], &route);
        check_rows(&values[DESCRIPTOR], N, atom + N, 2 * G, FEATURES, 1.0, step);
        /* 7. Reverse communication: the forces on the ghost rows into the owners' halo_force
         *    (for the first and last G atoms; move_data copies, a code that sums adds them) */
        communicate(&reverse, &values[FORCE], &values[HALO_FORCE], &route);
        check_rows(&values[HALO_FORCE], 0, atom, G, XYZ, -1.0, step);
        check_rows(&values[HALO_FORCE], N - G, atom + N - G, G, XYZ, -1.0, step);
    }

    /* 8. Clean up --------------------------------------------------------------- */
    mts_array_t* arrays[] = {&forward.send, &forward.receive, &forward.host_send, &forward.uploaded,
                             &reverse.send, &reverse.receive, &reverse.host_send, &reverse.uploaded};
    for (size_t i = 0; i < 8; i++) { if (arrays[i]->destroy) { arrays[i]->destroy(arrays[i]->ptr); } }
    mts_tensormap_free(tensor);
    MPI_Barrier(MPI_COMM_WORLD); /* every rank has checked its values */
    if (rank == 0) {
        printf("mpi_halo: %d ranks, %s arrays, %s transport, every value checked, ok\n", size,
               device.device_type == kDLCPU ? "CPU" : "GPU", route.staged ? "staged" : "direct");
    }
    MPI_Finalize();
    return 0;
}
