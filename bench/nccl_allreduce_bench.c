/*
 * nccl_allreduce_bench.c: the reduction step of examples/nccl_tensormap.c
 * (the pattern to learn from), timed end to end against what a user writes
 * first, side by side in one run, every sum checked.
 *
 * Every rank holds the values and the position gradients of `--blocks`
 * blocks: values of (atoms, properties) and gradients of (2 atoms, 3,
 * properties), float64, all on one stream (a cudaStream_t of the rank's GPU,
 * picked by node-local rank). A step sums every array over the ranks, in
 * place. The ways timed:
 *
 *   per array          one ncclAllReduce per array, one after the other, on the
 *                      arrays' stream: a launch and a synchronisation of the
 *                      ranks per array
 *   per array, group   the same calls between ncclGroupStart and ncclGroupEnd,
 *                      which NCCL fuses into one launch
 *   packed             movement plans (made once) gather every array into one
 *                      buffer, one ncclAllReduce, plans scatter it back
 *   packed, one graph  the packed step captured once in a CUDA graph, replayed
 *   buffer alone       one ncclAllReduce of a buffer of the same size: the
 *                      transport's own cost, with nothing to pack
 *
 * Each step is timed on the host from a barrier to the stream's end
 * (cudaStreamSynchronize), between fresh contributions written outside the
 * timing; rank 0 prints the median over the steps of the slowest rank and
 * the ratios of each way to the packed one. With --device cpu, the arrays
 * are CPU arrays and MPI_Allreduce stands in for NCCL (no group, no graph):
 * the same comparison for an MPI code, and what CI runs.
 *
 * Usage: mpirun -np N nccl_allreduce_bench [--device cuda|cpu|auto]
 *        [--blocks B] [--atoms A] [--properties P] [--steps S]
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>
#include <metatensor.h>
#include <mpi.h>
#include <mtsarray.h>
#include <nccl.h>

static const DLDevice CPU = {kDLCPU, 0};
static const DLDataType FLOAT64 = {kDLFloat, 64, 1};
enum { XYZ = 3 };

static void fail(const char* what) {
    const char *message = NULL, *origin = NULL;
    void* data = NULL;
    mts_last_error(&message, &origin, &data);
    fprintf(stderr, "nccl_allreduce_bench: %s failed: %s\n", what, message != NULL ? message : "?");
    MPI_Abort(MPI_COMM_WORLD, 1);
}
#define CHECK(call) do { if ((call) != MTS_SUCCESS) { fail(#call); } } while (0)
#define CUDA_CHECK(call) do { cudaError_t status_ = (call); if (status_ != cudaSuccess) { \
    fprintf(stderr, "nccl_allreduce_bench: %s failed: %s\n", #call, cudaGetErrorString(status_)); \
    MPI_Abort(MPI_COMM_WORLD, 1); } } while (0)
#define NCCL_CHECK(call) do { ncclResult_t status_ = (call); if (status_ != ncclSuccess) { \
    fprintf(stderr, "nccl_allreduce_bench: %s failed: %s\n", #call, ncclGetErrorString(status_)); \
    MPI_Abort(MPI_COMM_WORLD, 1); } } while (0)

static double contribution(int rank, int a, uintptr_t e, int step) {
    return 1e6 * step + 1e3 * (rank + 1) + (double)((7 * (uintptr_t)a + e) % 997);
}

typedef struct {
    bool nccl;
    ncclComm_t comm;
    cudaStream_t stream;
    int rank, ranks, count;                /* count: the arrays, values and gradients */
    mts_array_t *arrays, *views, *sources; /* each array, as rows x width, its host numbers */
    uintptr_t *elements, total;
    mts_array_t buffer, alone;
    mtsarray_move_plan_t **pack, **unpack;
    cudaGraphExec_t graph;
} Bench;

enum { PER_ARRAY, GROUPED, PACKED, GRAPH, ALONE, N_WAYS };
static const char* const WAY_NAMES[N_WAYS] = {"per array", "per array, group", "packed", "packed, one graph",
                                              "buffer alone"};

static void all_reduce(const Bench* b, const mts_array_t* array, uintptr_t count) {
    void* data = NULL;
    CHECK(mtsarray_data(array, &data));
    if (b->nccl) {
        NCCL_CHECK(ncclAllReduce(data, data, count, ncclFloat64, ncclSum, b->comm, b->stream));
    } else {
        MPI_Allreduce(MPI_IN_PLACE, data, (int)count, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    }
}

static void packed_step(const Bench* b) {
    for (int a = 0; a < b->count; a++) { CHECK(mtsarray_move_plan_execute(b->pack[a], &b->buffer, &b->views[a])); }
    all_reduce(b, &b->buffer, b->total);
    for (int a = 0; a < b->count; a++) { CHECK(mtsarray_move_plan_execute(b->unpack[a], &b->views[a], &b->buffer)); }
}

static void run_way(const Bench* b, int way) {
    switch (way) {
    case PER_ARRAY:
        for (int a = 0; a < b->count; a++) { all_reduce(b, &b->arrays[a], b->elements[a]); }
        break;
    case GROUPED:
        NCCL_CHECK(ncclGroupStart());
        for (int a = 0; a < b->count; a++) { all_reduce(b, &b->arrays[a], b->elements[a]); }
        NCCL_CHECK(ncclGroupEnd());
        break;
    case PACKED: packed_step(b); break;
    case GRAPH: CUDA_CHECK(cudaGraphLaunch(b->graph, b->stream)); break;
    case ALONE: all_reduce(b, &b->alone, b->total); break;
    }
}

static void write_contributions(const Bench* b, int step) {
    for (int a = 0; a < b->count; a++) {
        void* data = NULL;
        CHECK(mtsarray_data(&b->sources[a], &data));
        for (uintptr_t e = 0; e < b->elements[a]; e++) { ((double*)data)[e] = contribution(b->rank, a, e, step); }
        CHECK(mtsarray_copy_into(&b->arrays[a], &b->sources[a]));
    }
    CHECK(mtsarray_synchronize(&b->arrays[0])); /* one stream: everything is there */
}

static void check_sums(const Bench* b, int step, const char* way) {
    for (int a = 0; a < b->count; a++) {
        mts_array_t copy = {0};
        void* data = NULL;
        CHECK(b->arrays[a].copy(b->arrays[a].ptr, CPU, &copy));
        CHECK(mtsarray_data(&copy, &data));
        for (uintptr_t e = 0; e < b->elements[a]; e++) {
            double expected = 0.0;
            for (int rank = 0; rank < b->ranks; rank++) { expected += contribution(rank, a, e, step); }
            if (((const double*)data)[e] != expected) {
                fprintf(stderr, "nccl_allreduce_bench: WRONG SUM %.17g (expected %.17g), %s, array %d, element %lu\n",
                        ((const double*)data)[e], expected, way, a, (unsigned long)e);
                MPI_Abort(MPI_COMM_WORLD, 1);
            }
        }
        copy.destroy(copy.ptr);
    }
}

static int compare_doubles(const void* x, const void* y) {
    const double a = *(const double*)x, b = *(const double*)y;
    return (a > b) - (a < b);
}

static uintptr_t option(int argc, char** argv, const char* name, uintptr_t fallback) {
    for (int i = 1; i + 1 < argc; i++) {
        if (strcmp(argv[i], name) == 0) {
            char* end = NULL;
            const unsigned long long value = strtoull(argv[i + 1], &end, 10);
            if (*end != '\0' || value == 0) {
                fprintf(stderr, "nccl_allreduce_bench: %s wants a positive whole number, got '%s'\n", name, argv[i + 1]);
                MPI_Abort(MPI_COMM_WORLD, 2);
            }
            return (uintptr_t)value;
        }
    }
    return fallback;
}

int main(int argc, char** argv) {
    MPI_Init(&argc, &argv);
    Bench b = {0};
    MPI_Comm_rank(MPI_COMM_WORLD, &b.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &b.ranks);
    const char* device_name = "auto";
    for (int i = 1; i + 1 < argc; i++) {
        if (strcmp(argv[i], "--device") == 0) { device_name = argv[i + 1]; }
    }
    const uintptr_t blocks = option(argc, argv, "--blocks", 16), atoms = option(argc, argv, "--atoms", 512),
                    properties = option(argc, argv, "--properties", 32);
    const int steps = (int)option(argc, argv, "--steps", 20);
    bool cuda = false;
    CHECK(mtsarray_backend_available(kDLCUDA, &cuda));
    if (strcmp(device_name, "cuda") == 0 && !cuda) {
        if (b.rank == 0) { fprintf(stderr, "nccl_allreduce_bench: --device cuda: %s\n", mtsarray_backend_unavailable_reason(kDLCUDA)); }
        MPI_Finalize();
        return 2;
    }
    cuda = strcmp(device_name, "cuda") == 0 || (strcmp(device_name, "auto") == 0 && cuda);
    if (!cuda && strcmp(device_name, "cpu") != 0 && strcmp(device_name, "auto") != 0) {
        if (b.rank == 0) { fprintf(stderr, "usage: nccl_allreduce_bench [--device cuda|cpu|auto] [--blocks B] "
                                           "[--atoms A] [--properties P] [--steps S]\n"); }
        MPI_Finalize();
        return 2;
    }

    b.nccl = cuda;
    DLDevice device = CPU;
    int64_t stream = -1;
    if (cuda) {
        MPI_Comm node = MPI_COMM_NULL;
        int local_rank = 0, local_ranks = 0, gpus = 0;
        MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, b.rank, MPI_INFO_NULL, &node);
        MPI_Comm_rank(node, &local_rank);
        MPI_Comm_size(node, &local_ranks);
        MPI_Comm_free(&node);
        CUDA_CHECK(cudaGetDeviceCount(&gpus));
        if (local_ranks > gpus) {
            fprintf(stderr, "nccl_allreduce_bench: %d ranks on a node with %d GPUs: NCCL needs a GPU per rank\n",
                    local_ranks, gpus);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
        device = (DLDevice){kDLCUDA, local_rank};
        CUDA_CHECK(cudaSetDevice(local_rank));
        ncclUniqueId id;
        if (b.rank == 0) { NCCL_CHECK(ncclGetUniqueId(&id)); }
        MPI_Bcast(&id, (int)sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
        NCCL_CHECK(ncclCommInitRank(&b.comm, b.ranks, id, b.rank));
        CUDA_CHECK(cudaStreamCreateWithFlags(&b.stream, cudaStreamNonBlocking));
        stream = (int64_t)(intptr_t)b.stream;
    }

    /* the arrays, their flat views, the buffer and the plans, made once */
    b.count = (int)(2 * blocks);
    b.arrays = calloc((size_t)b.count, sizeof(mts_array_t));
    b.views = calloc((size_t)b.count, sizeof(mts_array_t));
    b.sources = calloc((size_t)b.count, sizeof(mts_array_t));
    b.elements = calloc((size_t)b.count, sizeof(uintptr_t));
    b.pack = calloc((size_t)b.count, sizeof(mtsarray_move_plan_t*));
    b.unpack = calloc((size_t)b.count, sizeof(mtsarray_move_plan_t*));
    uintptr_t* rows = calloc((size_t)b.count, sizeof(uintptr_t));
    uintptr_t* offsets = calloc((size_t)b.count, sizeof(uintptr_t));
    for (int a = 0; a < b.count; a++) {
        const bool gradient = a % 2 == 1;
        const uintptr_t shape[3] = {gradient ? 2 * atoms : atoms, gradient ? XYZ : properties, properties};
        const uintptr_t axes = gradient ? 3 : 2;
        rows[a] = shape[0];
        const uintptr_t width = gradient ? XYZ * properties : properties;
        b.elements[a] = rows[a] * width;
        offsets[a] = b.total;
        b.total += b.elements[a];
        void* data = NULL;
        const uintptr_t flat[2] = {rows[a], width};
        CHECK(mtsarray_zeros(device, FLOAT64, shape, axes, &b.arrays[a]));
        CHECK(mtsarray_set_stream(&b.arrays[a], stream));
        CHECK(mtsarray_data(&b.arrays[a], &data));
        CHECK(mtsarray_wrap(data, device, FLOAT64, flat, 2, NULL, NULL, &b.views[a]));
        CHECK(mtsarray_set_stream(&b.views[a], stream));
        CHECK(mtsarray_zeros(CPU, FLOAT64, shape, axes, &b.sources[a]));
    }
    const uintptr_t buffer_shape[2] = {1, b.total};
    CHECK(mtsarray_zeros(device, FLOAT64, buffer_shape, 2, &b.buffer));
    CHECK(mtsarray_set_stream(&b.buffer, stream));
    CHECK(mtsarray_zeros(device, FLOAT64, buffer_shape, 2, &b.alone));
    CHECK(mtsarray_set_stream(&b.alone, stream));
    for (int a = 0; a < b.count; a++) {
        const uintptr_t width = b.elements[a] / rows[a];
        mts_data_movement_t* moves = malloc(rows[a] * sizeof(mts_data_movement_t));
        for (uintptr_t i = 0; i < rows[a]; i++) { moves[i] = (mts_data_movement_t){i, 0, 0, offsets[a] + i * width, width}; }
        CHECK(mtsarray_move_plan_create(&b.buffer, &b.views[a], moves, rows[a], &b.pack[a]));
        for (uintptr_t i = 0; i < rows[a]; i++) { moves[i] = (mts_data_movement_t){0, i, offsets[a] + i * width, 0, width}; }
        CHECK(mtsarray_move_plan_create(&b.views[a], &b.buffer, moves, rows[a], &b.unpack[a]));
        free(moves);
    }
    free(rows);
    free(offsets);
    CHECK(mtsarray_synchronize(&b.buffer));
    if (b.nccl) {
        cudaGraph_t captured = NULL;
        CUDA_CHECK(cudaStreamBeginCapture(b.stream, cudaStreamCaptureModeThreadLocal));
        packed_step(&b);
        CUDA_CHECK(cudaStreamEndCapture(b.stream, &captured));
        CUDA_CHECK(cudaGraphInstantiate(&b.graph, captured, 0));
        CUDA_CHECK(cudaGraphDestroy(captured));
    }

    if (b.rank == 0) {
        printf("nccl_allreduce_bench: mtsarray %s, %d ranks, %s, NCCL %d.%d.%d\n", mtsarray_version(), b.ranks,
               b.nccl ? "GPU arrays, ncclAllReduce" : "CPU arrays, MPI_Allreduce standing in for NCCL",
               NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH);
        printf("per rank: %d arrays (%ju blocks: values %ju x %ju, gradients %ju x 3 x %ju), float64, %.2f MB\n",
               b.count, (uintmax_t)blocks, (uintmax_t)atoms, (uintmax_t)properties, (uintmax_t)(2 * atoms),
               (uintmax_t)properties, (double)b.total * sizeof(double) / 1e6);
    }

    /* the ways in turns (each step goes through every way), so that a slow
     * moment of the machine falls on all of them alike; the first turn warms up */
    double* seconds = calloc((size_t)(N_WAYS * steps), sizeof(double));
    for (int step = -1; step < steps; step++) {
        for (int way = 0; way < N_WAYS; way++) {
            if (!b.nccl && (way == GROUPED || way == GRAPH)) { continue; }
            write_contributions(&b, step + 1);
            MPI_Barrier(MPI_COMM_WORLD);
            const double start = MPI_Wtime();
            run_way(&b, way);
            if (b.nccl) { CUDA_CHECK(cudaStreamSynchronize(b.stream)); }
            double elapsed = MPI_Wtime() - start, slowest = 0.0;
            MPI_Allreduce(&elapsed, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
            if (step >= 0) { seconds[way * steps + step] = slowest; }
            if (way != ALONE && (step == -1 || step == steps - 1)) { check_sums(&b, step + 1, WAY_NAMES[way]); }
        }
    }

    if (b.rank == 0) {
        double medians[N_WAYS] = {0};
        for (int way = 0; way < N_WAYS; way++) {
            qsort(seconds + way * steps, (size_t)steps, sizeof(double), compare_doubles);
            medians[way] = seconds[way * steps + steps / 2];
        }
        printf("%-20s %12s %14s\n", "way", "median (us)", "time / packed");
        for (int way = 0; way < N_WAYS; way++) {
            if (!b.nccl && (way == GROUPED || way == GRAPH)) {
                printf("%-20s %12s %14s\n", WAY_NAMES[way], "-", "(NCCL only)");
                continue;
            }
            printf("%-20s %12.1f %13.2fx\n", WAY_NAMES[way], 1e6 * medians[way], medians[way] / medians[PACKED]);
        }
        printf("== ratios: per array / packed %.2fx, %s; packed / buffer alone %.2fx (the cost of packing); "
               "every sum checked\n",
               medians[PER_ARRAY] / medians[PACKED],
               b.nccl ? "per array / packed graph" : "graph: NCCL only", medians[PACKED] / medians[ALONE]);
        if (b.nccl) {
            printf("== per array / packed graph %.2fx, per array group / packed graph %.2fx\n",
                   medians[PER_ARRAY] / medians[GRAPH], medians[GROUPED] / medians[GRAPH]);
        }
    }

    if (b.nccl) {
        CUDA_CHECK(cudaStreamSynchronize(b.stream));
        CUDA_CHECK(cudaGraphExecDestroy(b.graph));
    }
    for (int a = 0; a < b.count; a++) {
        CHECK(mtsarray_move_plan_free(b.pack[a]));
        CHECK(mtsarray_move_plan_free(b.unpack[a]));
        b.views[a].destroy(b.views[a].ptr);
        b.arrays[a].destroy(b.arrays[a].ptr);
        b.sources[a].destroy(b.sources[a].ptr);
    }
    b.buffer.destroy(b.buffer.ptr);
    b.alone.destroy(b.alone.ptr);
    if (b.nccl) {
        CUDA_CHECK(cudaStreamSynchronize(b.stream));
        NCCL_CHECK(ncclCommFinalize(b.comm));
        NCCL_CHECK(ncclCommDestroy(b.comm));
        CUDA_CHECK(cudaStreamDestroy(b.stream));
    }
    free(seconds);
    free(b.arrays), free(b.views), free(b.sources), free(b.elements), free(b.pack), free(b.unpack);
    MPI_Finalize();
    return 0;
}
