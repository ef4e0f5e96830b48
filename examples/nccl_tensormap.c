/*
 * nccl_tensormap.c: the reduction step of data-parallel training across GPUs,
 * on a metatensor TensorMap. Every rank owns one GPU (picked by its node-local
 * rank) and holds its own contribution to the same TensorMap: per-atom values
 * and their gradients with respect to positions. Each step sums them over the
 * ranks, the way DistributedDataParallel sums gradients, with one NCCL call:
 *
 *   pack    movement plans, made once, gather every block's values and
 *           gradients into ONE contiguous buffer (one plan per array: a plan
 *           reads one input);
 *   reduce  one ncclAllReduce of the whole buffer, in place, queued on the
 *           arrays' own stream (the number mtsarray_get_stream gives);
 *   unpack  a second set of plans scatters the sums back into the blocks.
 *
 * Nothing of a step waits on the host, so the whole step is captured once in
 * a CUDA graph and replayed: one launch per step for every kernel and the
 * NCCL call. bench/nccl_allreduce_bench.c times this against one NCCL call
 * per array.
 *
 *   1. MPI, this rank's GPU and the NCCL communicator
 *   2. the TensorMap of this rank, moved to the GPU
 *   3. the buffer and the plans, made once
 *   4. one step: pack, reduce, unpack
 *   5. the step captured in a CUDA graph, replayed
 *   6. every value checked against a reduction on the host
 *   7. clean up
 *
 * --window (NCCL 2.27 and later): the buffer comes from ncclMemAlloc, handed
 * out through mtsarray_set_allocator, and is registered as a symmetric NCCL
 * window, which lets NCCL reduce it in place without its own staging.
 *
 * --device cpu runs the same steps on CPU arrays, with MPI_Allreduce standing
 * in for NCCL and no graph: what CI checks on machines without a GPU.
 *
 * Usage: mpirun -np N nccl_tensormap [--device cuda|cpu|auto] [--window] [--steps S]
 *   N ranks per node at most the node's GPUs (NCCL gives each rank its own).
 *   Exit status 1 when a value is wrong.
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

#include "node_local_gpu.h"

static const DLDevice CPU = {kDLCPU, 0};
static const DLDataType FLOAT64 = {kDLFloat, 64, 1};
static const DLDataType INT32 = {kDLInt, 32, 1};
enum { N_BLOCKS = 3, PROPERTIES = 8, XYZ = 3, N_ARRAYS = 2 * N_BLOCKS };
static const int32_t SPECIES[N_BLOCKS] = {1, 6, 8};
static const uintptr_t ATOMS[N_BLOCKS] = {40, 25, 17}; /* atoms of each species */

static void fail(const char* what) {
    const char *message = NULL, *origin = NULL;
    void* data = NULL;
    mts_last_error(&message, &origin, &data);
    fprintf(stderr, "nccl_tensormap: %s failed: %s\n", what, message != NULL ? message : "?");
    MPI_Abort(MPI_COMM_WORLD, 1);
}
#define CHECK(call) do { if ((call) != MTS_SUCCESS) { fail(#call); } } while (0)
#define CUDA_CHECK(call) do { cudaError_t status_ = (call); if (status_ != cudaSuccess) { \
    fprintf(stderr, "nccl_tensormap: %s failed: %s\n", #call, cudaGetErrorString(status_)); \
    MPI_Abort(MPI_COMM_WORLD, 1); } } while (0)
#define NCCL_CHECK(call) do { ncclResult_t status_ = (call); if (status_ != ncclSuccess) { \
    fprintf(stderr, "nccl_tensormap: %s failed: %s\n", #call, ncclGetErrorString(status_)); \
    MPI_Abort(MPI_COMM_WORLD, 1); } } while (0)

/* Element e of array a (a = 2b: block b's values, 2b + 1: its gradients) as
 * rank `rank` computes it at `step`: whole numbers, so that their sum over
 * the ranks is exact in any order of addition. */
static double contribution(int rank, int a, uintptr_t e, int step) {
    return 1e6 * step + 1e3 * (rank + 1) + (double)((7 * (uintptr_t)a + e) % 997);
}

/* Labels with dimensions `names` and `count` rows of `values`, on the CPU. */
static const mts_labels_t* labels(const char* const* names, uintptr_t size, const int32_t* values,
                                  uintptr_t count) {
    const uintptr_t shape[2] = {count, size};
    mts_array_t array = {0};
    void* data = NULL;
    CHECK(mtsarray_zeros(CPU, INT32, shape, 2, &array));
    CHECK(mtsarray_data(&array, &data));
    if (count * size != 0) { memcpy(data, values, count * size * sizeof(int32_t)); }
    const mts_labels_t* result = mts_labels(names, size, array); /* owns `array` */
    if (result == NULL) { fail("mts_labels"); }
    return result;
}

static const mts_labels_t* range(const char* name, uintptr_t count) {
    int32_t* values = malloc((count + 1) * sizeof(int32_t));
    for (uintptr_t i = 0; i < count; i++) { values[i] = (int32_t)i; }
    const mts_labels_t* result = labels(&name, 1, values, count);
    free(values);
    return result;
}

/* A block of zeros on the CPU: `rows` samples, PROPERTIES properties and, for
 * a gradient, the xyz component between them. */
static mts_block_t* zero_block(const mts_labels_t* samples, uintptr_t rows, bool gradient) {
    const uintptr_t shape[3] = {rows, gradient ? XYZ : PROPERTIES, PROPERTIES};
    mts_array_t values = {0};
    CHECK(mtsarray_zeros(CPU, FLOAT64, shape, gradient ? 3 : 2, &values));
    const mts_labels_t* properties = range("n", PROPERTIES);
    const mts_labels_t* xyz = range("xyz", XYZ);
    /* mts_block owns `values` (even on error) and copies the labels */
    mts_block_t* block = mts_block(values, samples, gradient ? &xyz : NULL, gradient ? 1 : 0, properties);
    if (block == NULL) { fail("mts_block"); }
    mts_labels_free(properties);
    mts_labels_free(xyz);
    return block;
}

/* What a rank keeps for its steps: everything here is made once. */
typedef struct {
    bool nccl; /* false: CPU arrays and MPI_Allreduce */
    ncclComm_t comm;
    cudaStream_t stream;
    DLDevice device;
    mts_tensormap_t* tensor;
    mts_array_t arrays[N_ARRAYS];   /* the values and gradients, owned by `tensor` */
    mts_array_t views[N_ARRAYS];    /* each array seen as rows x (components x properties) */
    mts_array_t sources[N_ARRAYS];  /* host arrays the "training" writes each step's numbers into */
    uintptr_t offset[N_ARRAYS], count[N_ARRAYS], total;
    mts_array_t buffer; /* 1 x total: every array side by side */
    mtsarray_move_plan_t *pack[N_ARRAYS], *unpack[N_ARRAYS];
} Rank;

/* ---- the memory of an NCCL window (NCCL 2.27 and later) ----------------------- */
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 27, 0)
#define HAVE_WINDOWS 1
#ifndef NCCL_WIN_REQUIRED_ALIGNMENT /* named in nccl.h from 2.28 on */
#define NCCL_WIN_REQUIRED_ALIGNMENT 4096
#endif
/* One ncclMemAlloc region per rank, made and registered once, handed out in
 * order by the allocator: every rank makes the same arrays from it, so each
 * one sits at the same offset of every rank's window, as symmetric windows
 * require. Nothing is given back before the end (deallocate is a no-op, which
 * keeps the stream-ordered contract trivially); the region goes whole, once
 * the device is done with it. Installed only while this thread makes the
 * arrays NCCL reduces, so no other thread calls it. */
typedef struct {
    char* base;
    size_t size, used;
} WindowArena;

static void* window_allocate(void* context, DLDevice device, int64_t stream, size_t bytes) {
    (void)device;
    (void)stream;
    WindowArena* arena = context;
    const size_t rounded = (bytes + NCCL_WIN_REQUIRED_ALIGNMENT - 1) / NCCL_WIN_REQUIRED_ALIGNMENT *
                           NCCL_WIN_REQUIRED_ALIGNMENT;
    if (rounded > arena->size - arena->used) { return NULL; } /* mtsarray reports out of memory */
    void* data = arena->base + arena->used;
    arena->used += rounded;
    return data;
}

static void window_deallocate(void* context, DLDevice device, int64_t stream, void* data, size_t bytes) {
    (void)context, (void)device, (void)stream, (void)data, (void)bytes;
}
#else
#define HAVE_WINDOWS 0
#endif

/* ---- 4. one step: pack, reduce, unpack ----------------------------------------- */
/* Queues the step on the arrays' stream and returns: nothing here waits on the
 * host (on the CPU, each call is done when it returns). */
static void reduce_step(Rank* r) {
    for (int a = 0; a < N_ARRAYS; a++) {
        CHECK(mtsarray_move_plan_execute(r->pack[a], &r->buffer, &r->views[a]));
    }
    void* data = NULL;
    CHECK(mtsarray_data(&r->buffer, &data));
    if (r->nccl) {
        /* in place, on the stream every array works on: ordered after the pack,
         * before the unpack, with no event and no host wait */
        NCCL_CHECK(ncclAllReduce(data, data, r->total, ncclFloat64, ncclSum, r->comm, r->stream));
    } else {
        MPI_Allreduce(MPI_IN_PLACE, data, (int)r->total, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    }
    for (int a = 0; a < N_ARRAYS; a++) {
        CHECK(mtsarray_move_plan_execute(r->unpack[a], &r->views[a], &r->buffer));
    }
}

/* The training code's own work before a reduction: this step's numbers into
 * every array (copy_into queues the upload on the arrays' stream). */
static void write_contributions(Rank* r, int rank, int step) {
    for (int a = 0; a < N_ARRAYS; a++) {
        void* data = NULL;
        CHECK(mtsarray_data(&r->sources[a], &data));
        for (uintptr_t e = 0; e < r->count[a]; e++) { ((double*)data)[e] = contribution(rank, a, e, step); }
        CHECK(mtsarray_copy_into(&r->arrays[a], &r->sources[a]));
    }
}

/* 6. Every element against the sum of every rank's contribution, on the host. */
static void check_sums(const Rank* r, int ranks, int step) {
    for (int a = 0; a < N_ARRAYS; a++) {
        mts_array_t copy = {0};
        void* data = NULL;
        CHECK(r->arrays[a].copy(r->arrays[a].ptr, CPU, &copy)); /* waits for this array's work */
        CHECK(mtsarray_data(&copy, &data));
        for (uintptr_t e = 0; e < r->count[a]; e++) {
            double expected = 0.0;
            for (int rank = 0; rank < ranks; rank++) { expected += contribution(rank, a, e, step); }
            if (((const double*)data)[e] != expected) {
                fprintf(stderr, "nccl_tensormap: WRONG SUM %.17g (expected %.17g) in array %d, element %lu, step %d\n",
                        ((const double*)data)[e], expected, a, (unsigned long)e, step);
                MPI_Abort(MPI_COMM_WORLD, 1);
            }
        }
        copy.destroy(copy.ptr);
    }
}

int main(int argc, char** argv) {
    /* 1. MPI, this rank's GPU and the NCCL communicator -------------------------- */
    MPI_Init(&argc, &argv);
    int rank = 0, ranks = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    const char* device_name = "auto";
    bool window = false, good = true;
    int steps = 5;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--device") == 0 && i + 1 < argc) {
            device_name = argv[++i];
        } else if (strcmp(argv[i], "--steps") == 0 && i + 1 < argc) {
            steps = atoi(argv[++i]);
            good = good && steps >= 2;
        } else if (strcmp(argv[i], "--window") == 0) {
            window = true;
        } else {
            good = false;
        }
    }
    bool cuda = false;
    CHECK(mtsarray_backend_available(kDLCUDA, &cuda));
    if (strcmp(device_name, "cuda") == 0 && !cuda) {
        if (rank == 0) { fprintf(stderr, "nccl_tensormap: --device cuda: %s\n", mtsarray_backend_unavailable_reason(kDLCUDA)); }
        MPI_Finalize();
        return 2;
    }
    cuda = strcmp(device_name, "cuda") == 0 || (strcmp(device_name, "auto") == 0 && cuda);
    good = good && (cuda || strcmp(device_name, "cpu") == 0 || strcmp(device_name, "auto") == 0);
    if (!good || (window && (!cuda || !HAVE_WINDOWS))) {
        if (rank == 0) {
            fprintf(stderr, "usage: mpirun -np N nccl_tensormap [--device cuda|cpu|auto] [--window] [--steps S>=2]\n"
                            "  (--window: CUDA and NCCL 2.27 or later; this build has NCCL %d.%d.%d)\n",
                    NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH);
        }
        MPI_Finalize();
        return 2;
    }

    Rank r = {0};
    r.nccl = cuda;
    r.device = CPU;
    int64_t stream_number = -1; /* CPU arrays have no stream */
    if (cuda) {
        /* the node-local rank picks the GPU; NCCL wants one GPU per rank */
        int local_ranks = 0;
        int32_t gpus = 0;
        const int local_rank = node_local_rank(MPI_COMM_WORLD, &local_ranks);
        r.device = node_local_gpu(kDLCUDA, local_rank, &gpus);
        if (local_ranks > gpus) {
            fprintf(stderr, "nccl_tensormap: %d ranks on a node with %d GPUs: NCCL needs a GPU per rank\n",
                    local_ranks, (int)gpus);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
        /* before any other CUDA or NCCL call: ncclCommInitRank binds the
         * communicator to the current device */
        CUDA_CHECK(cudaSetDevice(r.device.device_id));
        ncclUniqueId id;
        if (rank == 0) { NCCL_CHECK(ncclGetUniqueId(&id)); }
        MPI_Bcast(&id, (int)sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
        NCCL_CHECK(ncclCommInitRank(&r.comm, ranks, id, rank));
        /* a stream of our own: graphs are captured on it (never on the legacy
         * stream), and every array of the rank works on it */
        CUDA_CHECK(cudaStreamCreateWithFlags(&r.stream, cudaStreamNonBlocking));
        stream_number = (int64_t)(intptr_t)r.stream;
    }

    /* 2. The TensorMap of this rank, moved to the GPU ------------------------------ */
    /* Built on the host as a code would read it, then moved whole: values and
     * gradients become mtsarray arrays on the device, working on our stream. */
    mts_block_t* blocks[N_BLOCKS];
    for (int b = 0; b < N_BLOCKS; b++) {
        const mts_labels_t* samples = range("atom", ATOMS[b]);
        blocks[b] = zero_block(samples, ATOMS[b], false);
        mts_labels_free(samples);
        /* the gradient of atom i's row with respect to atoms i and i + 1 */
        const uintptr_t rows = 2 * ATOMS[b];
        int32_t* pairs = malloc(2 * rows * sizeof(int32_t));
        for (uintptr_t g = 0; g < rows; g++) {
            pairs[2 * g] = (int32_t)(g / 2);
            pairs[2 * g + 1] = (int32_t)((g / 2 + g % 2) % ATOMS[b]);
        }
        const char* names[2] = {"sample", "atom"};
        const mts_labels_t* gradient_samples = labels(names, 2, pairs, rows);
        free(pairs);
        mts_block_t* gradient = zero_block(gradient_samples, rows, true);
        mts_labels_free(gradient_samples);
        CHECK(mts_block_add_gradient(blocks[b], "positions", gradient)); /* owns `gradient` */
    }
    const char* species = "species";
    const mts_labels_t* keys = labels(&species, 1, SPECIES, N_BLOCKS);
    mts_tensormap_t* host = mts_tensormap(keys, blocks, N_BLOCKS); /* owns the blocks */
    if (host == NULL) { fail("mts_tensormap"); }
    mts_labels_free(keys);
    CHECK(mtsarray_tensormap_to(host, r.device, stream_number, &r.tensor));
    mts_tensormap_free(host);

    /* 3. The buffer and the plans, made once ---------------------------------------- */
    for (int b = 0; b < N_BLOCKS; b++) {
        mts_block_t *block = NULL, *gradient = NULL;
        CHECK(mts_tensormap_block_by_id(r.tensor, &block, (uintptr_t)b));
        CHECK(mts_block_data(block, &r.arrays[2 * b]));
        CHECK(mts_block_gradient(block, "positions", &gradient));
        CHECK(mts_block_data(gradient, &r.arrays[2 * b + 1]));
    }
    uintptr_t widths[N_ARRAYS], rows[N_ARRAYS];
    for (int a = 0; a < N_ARRAYS; a++) {
        const uintptr_t* shape = NULL;
        uintptr_t axes = 0;
        CHECK(r.arrays[a].shape(r.arrays[a].ptr, &shape, &axes));
        rows[a] = shape[0];
        widths[a] = 1;
        for (uintptr_t axis = 1; axis < axes; axis++) { widths[a] *= shape[axis]; }
        r.count[a] = rows[a] * widths[a];
        r.offset[a] = r.total;
        r.total += r.count[a];
        /* A view of the array as rows x (components x properties), without a
         * copy: a plan copies between arrays of the same component axes, and
         * the buffer has none. It borrows the block's memory (no deleter):
         * destroyed before the TensorMap is. */
        void* data = NULL;
        const uintptr_t flat[2] = {rows[a], widths[a]};
        CHECK(mtsarray_data(&r.arrays[a], &data));
        CHECK(mtsarray_wrap(data, r.device, FLOAT64, flat, 2, NULL, NULL, &r.views[a]));
        CHECK(mtsarray_set_stream(&r.views[a], stream_number));
        CHECK(mtsarray_zeros(CPU, FLOAT64, shape, axes, &r.sources[a]));
    }
    const uintptr_t buffer_shape[2] = {1, r.total};
#if HAVE_WINDOWS
    WindowArena arena = {0};
    ncclWindow_t registered = NULL;
    if (window) {
        /* the same size on every rank: registering a window is collective */
        arena.size = (r.total * sizeof(double) + NCCL_WIN_REQUIRED_ALIGNMENT - 1) / NCCL_WIN_REQUIRED_ALIGNMENT *
                     NCCL_WIN_REQUIRED_ALIGNMENT;
        NCCL_CHECK(ncclMemAlloc((void**)&arena.base, arena.size));
        NCCL_CHECK(ncclCommWindowRegister(r.comm, arena.base, arena.size, &registered, NCCL_WIN_COLL_SYMMETRIC));
        const mtsarray_allocator_t allocator = {&arena, window_allocate, window_deallocate};
        CHECK(mtsarray_set_allocator(kDLCUDA, &allocator));
    }
#endif
    CHECK(mtsarray_zeros(r.device, FLOAT64, buffer_shape, 2, &r.buffer));
#if HAVE_WINDOWS
    if (window) {
        CHECK(mtsarray_set_allocator(kDLCUDA, NULL)); /* the rest from mtsarray's pool again */
    }
#endif
    CHECK(mtsarray_set_stream(&r.buffer, stream_number));
    for (int a = 0; a < N_ARRAYS; a++) {
        /* row i of array a <-> columns [offset + i * width, offset + (i + 1) * width)
         * of the buffer's one row: (sample_in, sample_out, properties_start_in,
         * properties_start_out, properties_length) */
        mts_data_movement_t* moves = malloc((rows[a] + 1) * sizeof(mts_data_movement_t));
        for (uintptr_t i = 0; i < rows[a]; i++) {
            moves[i] = (mts_data_movement_t){i, 0, 0, r.offset[a] + i * widths[a], widths[a]};
        }
        CHECK(mtsarray_move_plan_create(&r.buffer, &r.views[a], moves, rows[a], &r.pack[a]));
        for (uintptr_t i = 0; i < rows[a]; i++) {
            moves[i] = (mts_data_movement_t){0, i, r.offset[a] + i * widths[a], 0, widths[a]};
        }
        CHECK(mtsarray_move_plan_create(&r.views[a], &r.buffer, moves, rows[a], &r.unpack[a]));
        free(moves); /* the plans keep their own copies */
    }

    /* Step 0 eagerly: one call after the other, each queued and returned */
    write_contributions(&r, rank, 0);
    reduce_step(&r);
    check_sums(&r, ranks, 0);

    /* 5. The step captured in a CUDA graph, replayed --------------------------------- */
    /* Every rank captures the same step (NCCL counts a captured collective as
     * captured on all ranks) and replays it the same number of times. The plans'
     * tables and NCCL's work are inside the graph; the arrays outlive it.
     * Thread-local capture: NCCL's and mtsarray's own threads may keep calling
     * CUDA meanwhile. */
    cudaGraphExec_t replay = NULL;
    if (r.nccl) {
        cudaGraph_t graph = NULL;
        CUDA_CHECK(cudaStreamBeginCapture(r.stream, cudaStreamCaptureModeThreadLocal));
        reduce_step(&r);
        CUDA_CHECK(cudaStreamEndCapture(r.stream, &graph));
        CUDA_CHECK(cudaGraphInstantiate(&replay, graph, 0));
        CUDA_CHECK(cudaGraphDestroy(graph)); /* the executable graph keeps what it needs */
    }
    for (int step = 1; step < steps; step++) {
        write_contributions(&r, rank, step); /* queued on the stream, before the launch */
        if (r.nccl) {
            CUDA_CHECK(cudaGraphLaunch(replay, r.stream));
        } else {
            reduce_step(&r);
        }
        check_sums(&r, ranks, step);
    }

    /* 7. Clean up ----------------------------------------------------------------------- */
    if (r.nccl) {
        CUDA_CHECK(cudaStreamSynchronize(r.stream));
        CUDA_CHECK(cudaGraphExecDestroy(replay));
    }
    for (int a = 0; a < N_ARRAYS; a++) {
        CHECK(mtsarray_move_plan_free(r.pack[a]));
        CHECK(mtsarray_move_plan_free(r.unpack[a]));
        r.views[a].destroy(r.views[a].ptr);
        r.sources[a].destroy(r.sources[a].ptr);
    }
    r.buffer.destroy(r.buffer.ptr);
    mts_tensormap_free(r.tensor);
    if (r.nccl) {
        CUDA_CHECK(cudaStreamSynchronize(r.stream)); /* the frees queued on it have run */
#if HAVE_WINDOWS
        if (window) {
            NCCL_CHECK(ncclCommWindowDeregister(r.comm, registered));
            NCCL_CHECK(ncclMemFree(arena.base));
        }
#endif
        NCCL_CHECK(ncclCommFinalize(r.comm)); /* flushes NCCL's work, then frees its resources */
        NCCL_CHECK(ncclCommDestroy(r.comm));
        CUDA_CHECK(cudaStreamDestroy(r.stream));
    }
    MPI_Barrier(MPI_COMM_WORLD); /* every rank has checked its values */
    if (rank == 0) {
        printf("nccl_tensormap: %d ranks, %s, %d arrays (%lu values) reduced in one %s per step, %d steps%s, "
               "every value checked, ok\n",
               ranks, r.nccl ? "GPU arrays" : "CPU arrays", N_ARRAYS, (unsigned long)r.total,
               r.nccl ? "ncclAllReduce" : "MPI_Allreduce", steps,
               r.nccl ? (window ? " as CUDA graph replays, buffer in an NCCL window" : " as CUDA graph replays") : "");
    }
    MPI_Finalize();
    return 0;
}
