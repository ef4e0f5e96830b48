/*
 * mpi_halo_bench.c: times and checks the halo exchange of examples/mpi_halo.c
 * (the same pattern, in numbered steps, is the example to learn from): a
 * domain-decomposed simulation exchanging the per-atom data of a metatensor
 * TensorMap between MPI ranks, with mtsarray arrays on the CPU or on a GPU,
 * through the MPI the cluster already has. Beside what the example does, it
 * takes the sizes as options, asks the MPI whether it takes GPU pointers,
 * picks the GPU of a rank by its node-local rank, checks every value of
 * every step (including the rows no neighbour writes) and times each phase
 * beside a plain MPI_Sendrecv of the same bytes.
 *
 * Every rank owns `--atoms` atoms. The ranks form a ring: each one also
 * holds `--ghosts` ghost atoms of its left neighbour (the last ones the
 * neighbour owns) and as many of its right neighbour (the first ones). The
 * TensorMap of a rank has four blocks (key "quantity"), all sampled by
 * "atom" (the global atom id):
 *
 *   0 descriptor   owned + ghost rows, --features properties
 *   1 charge       owned + ghost rows, 1 property
 *   2 force        owned + ghost rows, 3 properties: the ghost rows hold
 *                  this rank's contributions to its neighbours' atoms
 *   3 halo_force   owned rows, 3 properties: the contributions the
 *                  neighbours computed for this rank's atoms
 *
 * Owned atoms are stored in a scrambled order (as an MD code sorted by cell
 * would), so the rows a neighbour needs are scattered.
 *
 * Forward communication (ghosts <- owners), every step:
 *   pack      move_data gathers the rows each neighbour needs from blocks 0
 *             and 1 into ONE contiguous send array, side by side (block 1
 *             goes to property column `features`): one message per neighbour.
 *   exchange  MPI_Irecv/MPI_Isend around the ring, rows [0, G) of the send
 *             array to the left neighbour, rows [G, 2G) to the right one.
 *   unpack    move_data scatters the received rows into the ghost rows.
 * Reverse communication (owners <- ghosts): the ghost rows of block 2 are
 * packed, sent back to the ranks that own those atoms (the same exchange,
 * the same row lists with input and output swapped) and written into block
 * 3. mtsarray moves bytes, it does not add: a code that wants the total
 * force adds block 2's and block 3's owned rows in its own kernel.
 * Every received value is checked on every step against what the sending
 * rank owns (the values are a formula of the atom id, the step and, for
 * contributions, the rank that computed them); any wrong value makes the
 * program exit with status 1.
 *
 * Which pointer goes to MPI, and who waits for whom
 * --------------------------------------------------
 * All arrays of a rank (the blocks, the send and receive arrays) work on one
 * stream: the blocks' stream, given to the message arrays with
 * mtsarray_set_stream. move_data only queues work on that stream; MPI is
 * not stream-aware and reads or writes memory whenever it likes between the
 * call that posts a request and the MPI_Wait that completes it. Hence:
 *
 *  - direct (CPU arrays, or GPU arrays with a GPU-aware MPI): the data
 *    pointers of the send and receive arrays (mtsarray_data; device pointers
 *    on a GPU) go to MPI. Before posting, the HOST WAITS for the stream
 *    (mtsarray_synchronize on the send array): the pack is finished before
 *    MPI reads the send array, and so is everything queued earlier on the
 *    same stream, including the previous step's unpack that read the
 *    receive array, which MPI is about to overwrite. The unpack is queued
 *    only after MPI_Waitall returned: MPI's writes to the receive array are
 *    complete by then, and the stream reads it after that.
 *  - staged (GPU arrays, MPI not GPU-aware): three arrays made once, two
 *    page-locked host ones (mtsarray_zeros on kDLCUDAHost / kDLROCMHost)
 *    and one on the device. mtsarray_copy_into copies the send array into
 *    the first after the pack (the host waits for that copy only); MPI
 *    sends from it and receives into the second, which mtsarray_copy_into
 *    uploads into the third after MPI_Waitall; the unpack on the stream
 *    follows the upload (move_data orders the output's stream after the
 *    input's, on the device). MPI may overwrite the page-locked arrays in
 *    the next step because the host waits, before the next MPI_Irecv, for
 *    the next copy of the send array: it is queued on the same stream after
 *    this unpack, which waited for the upload. Nothing is allocated per
 *    step.
 *
 * The host waits at the end of every unpack only so that the measured time
 * includes it: a real code queues its next kernel on the stream instead.
 * With NCCL the same pattern needs no host wait at all: ncclSend/ncclRecv
 * take the data pointers and the array's stream (mtsarray_get_stream) and
 * are ordered on it like move_data (docs/guides/mpi.md, "NCCL and
 * RCCL").
 *
 * GPU-aware MPI is detected at run time with MPIX_Query_cuda_support /
 * MPIX_Query_rocm_support (Open MPI, <mpi-ext.h>) or MPIX_GPU_query_support
 * (MPICH); MTSARRAY_MPI_GPU_AWARE=1 or =0 overrides the answer for MPIs that
 * do not say. Some GPU-aware MPIs can not use CUDA IPC on memory from
 * stream-ordered pools (cudaMallocAsync), which is where mtsarray allocates
 * from: if direct transfers fail between GPUs of one node, disable the
 * MPI's CUDA IPC (e.g. OMPI_MCA_btl_smcuda_use_cuda_ipc=0, UCX_TLS without
 * cuda_ipc) or route mtsarray through cudaMalloc with
 * mtsarray_set_allocator.
 *
 * Timing: each step times pack, exchange and unpack of both directions
 * (MPI_Wtime, each direction between two barriers), and a plain
 * MPI_Sendrecv of the same bytes around the same ring from host buffers:
 * the cost of the transport alone. Rank 0 prints, per direction, the median
 * over steps of the slowest rank, the ratio halo / MPI_Sendrecv, and the
 * same for the fastest step. The movement tables are built once, outside
 * the timing, as a simulation builds its send lists at re-neighbouring.
 *
 * Usage: mpirun -np 4 mpi_halo_bench [--device cpu|cuda|rocm|auto] [--atoms N]
 *        [--ghosts G] [--features F] [--steps S]
 *        [--transport auto|direct|staged] [--gpus-per-node K]
 *   auto (the default device) picks CUDA, then ROCm, when mtsarray can use
 *   one, else the CPU. --transport staged also runs on the CPU (the staging
 *   copies are then CPU copies), which tests that code path without a GPU.
 *   Rank r uses GPU (node-local rank) % K; K = 1 by default, for launchers
 *   that give every rank its own GPU (CUDA_VISIBLE_DEVICES).
 *
 * Build: part of the mtsarray benchmarks (bench/CMakeLists.txt) when CMake
 * finds MPI (MTSARRAY_MPI); ctest runs it with 2 and 4 ranks (bench-mpi_halo-*).
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>
/* Open MPI declares its GPU-support queries in <mpi-ext.h>; MPICH in <mpi.h>. */
#if defined(__has_include)
#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h>
#endif
#endif

#include <metatensor.h>
#include <mtsarray.h>

static const DLDevice CPU = {kDLCPU, 0};
static const DLDataType FLOAT64 = {kDLFloat, 64, 1};
static const DLDataType INT32 = {kDLInt, 32, 1};

/* Tags name the direction a message travels, so that the two messages
 * between the same pair of ranks (2 ranks: left == right) stay apart. */
enum { TAG_TO_LEFT = 1, TAG_TO_RIGHT = 2 };
enum { DESCRIPTOR = 0, CHARGE = 1, FORCE = 2, HALO_FORCE = 3, N_BLOCKS = 4 };
#define N_XYZ 3

static int RANK = -1; /* for messages; -1 before MPI_Init */

/* ---- errors: every failure stops every rank -------------------------------- */

static void stop(const char* format, ...) {
    /* one write per message: the ranks' stderr lines stay whole */
    char message[2048];
    va_list arguments;
    va_start(arguments, format);
    vsnprintf(message, sizeof(message), format, arguments);
    va_end(arguments);
    fprintf(stderr, "mpi_halo_bench [rank %d]: %s\n", RANK, message);
    fflush(stderr);
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (initialized) {
        /* the other ranks may be waiting for us in MPI: take them down too */
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    exit(1);
}

static void mts_failed(const char* call, int line) {
    const char* message = NULL;
    const char* origin = NULL;
    void* data = NULL;
    mts_last_error(&message, &origin, &data);
    stop("line %d: %s failed: %s (origin: %s)", line, call, message != NULL ? message : "?",
         origin != NULL ? origin : "?");
}

static void mpi_failed(const char* call, int code, int line) {
    char message[MPI_MAX_ERROR_STRING];
    int length = 0;
    if (MPI_Error_string(code, message, &length) != MPI_SUCCESS) {
        snprintf(message, sizeof(message), "MPI error code %d", code);
    }
    stop("line %d: %s failed: %s", line, call, message);
}

#define MTS_CHECK(call)                           \
    do {                                          \
        if ((call) != MTS_SUCCESS) {              \
            mts_failed(#call, __LINE__);          \
        }                                         \
    } while (0)

#define MPI_CHECK(call)                           \
    do {                                          \
        const int mpi_code_ = (call);             \
        if (mpi_code_ != MPI_SUCCESS) {           \
            mpi_failed(#call, mpi_code_, __LINE__); \
        }                                         \
    } while (0)

static void* allocate(size_t count, size_t size) {
    void* data = calloc(count == 0 ? 1 : count, size);
    if (data == NULL) {
        stop("out of host memory (%zu x %zu bytes)", count, size);
    }
    return data;
}

/* ---- options ----------------------------------------------------------------- */

typedef enum { TRANSPORT_AUTO, TRANSPORT_DIRECT, TRANSPORT_STAGED } Transport;

typedef struct {
    const char* device;
    uintptr_t atoms;    /* owned atoms per rank */
    uintptr_t ghosts;   /* ghost atoms from each neighbour */
    uintptr_t features; /* descriptor width */
    int steps;
    int warmup_steps;   /* run and checked, not timed */
    Transport transport;
    int gpus_per_node;
} Options;

static void usage(FILE* out) {
    fprintf(out,
            "usage: mpirun -np P mpi_halo_bench [--device cpu|cuda|rocm|auto] [--atoms N] [--ghosts G]\n"
            "                          [--features F] [--steps S] [--transport auto|direct|staged]\n"
            "                          [--gpus-per-node K]\n"
            "  P >= 2 ranks in a ring; each owns N atoms (default 4096) and holds G ghost atoms\n"
            "  (default 512, 2G <= N) of each neighbour; F descriptor features (default 32);\n"
            "  S timed steps (default 20, after 2 warm-up steps); every value is checked.\n"
            "  MTSARRAY_MPI_GPU_AWARE=0|1 overrides the detection of GPU-aware MPI.\n");
}

/* Bad input is explained by rank 0 only: every rank parses the same
 * arguments and reaches the same verdict. */
static void complain(const char* format, ...) {
    if (RANK != 0) {
        return;
    }
    va_list arguments;
    va_start(arguments, format);
    fprintf(stderr, "mpi_halo_bench: ");
    vfprintf(stderr, format, arguments);
    fprintf(stderr, "\n");
    va_end(arguments);
}

/* A whole decimal number in [minimum, maximum], or a message and false. */
static bool parse_count(const char* name, const char* text, long long minimum, long long maximum,
                        long long* value) {
    if (text == NULL) {
        complain("%s needs a value", name);
        return false;
    }
    char* end = NULL;
    errno = 0;
    const long long parsed = strtoll(text, &end, 10);
    if (errno != 0 || end == text || *end != '\0' || parsed < minimum || parsed > maximum) {
        complain("%s must be a whole number in [%lld, %lld], got '%s'", name, minimum, maximum,
                 text);
        return false;
    }
    *value = parsed;
    return true;
}

/* Returns 0 when the options are good, 1 after --help, 2 for bad input. */
static int parse_options(int argc, char** argv, Options* options) {
    options->device = "auto";
    options->atoms = 4096;
    options->ghosts = 512;
    options->features = 32;
    options->steps = 20;
    options->warmup_steps = 2;
    options->transport = TRANSPORT_AUTO;
    options->gpus_per_node = 1;

    int status = 0;
    for (int i = 1; i < argc && status == 0; i++) {
        const char* name = argv[i];
        const char* value = i + 1 < argc ? argv[i + 1] : NULL;
        long long number = 0;
        if (strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0) {
            if (RANK == 0) {
                usage(stdout);
            }
            status = 1;
        } else if (strcmp(name, "--device") == 0) {
            if (value == NULL || (strcmp(value, "cpu") != 0 && strcmp(value, "cuda") != 0 &&
                                  strcmp(value, "rocm") != 0 && strcmp(value, "auto") != 0)) {
                complain("--device must be cpu, cuda, rocm or auto, got '%s'",
                         value != NULL ? value : "");
                status = 2;
            } else {
                options->device = value;
            }
            i++;
        } else if (strcmp(name, "--transport") == 0) {
            if (value != NULL && strcmp(value, "auto") == 0) {
                options->transport = TRANSPORT_AUTO;
            } else if (value != NULL && strcmp(value, "direct") == 0) {
                options->transport = TRANSPORT_DIRECT;
            } else if (value != NULL && strcmp(value, "staged") == 0) {
                options->transport = TRANSPORT_STAGED;
            } else {
                complain("--transport must be auto, direct or staged, got '%s'",
                         value != NULL ? value : "");
                status = 2;
            }
            i++;
        } else if (strcmp(name, "--atoms") == 0) {
            status = parse_count(name, value, 2, 1 << 24, &number) ? 0 : 2;
            options->atoms = (uintptr_t)number;
            i++;
        } else if (strcmp(name, "--ghosts") == 0) {
            status = parse_count(name, value, 1, 1 << 23, &number) ? 0 : 2;
            options->ghosts = (uintptr_t)number;
            i++;
        } else if (strcmp(name, "--features") == 0) {
            status = parse_count(name, value, 1, 4096, &number) ? 0 : 2;
            options->features = (uintptr_t)number;
            i++;
        } else if (strcmp(name, "--steps") == 0) {
            status = parse_count(name, value, 1, 100000, &number) ? 0 : 2;
            options->steps = (int)number;
            i++;
        } else if (strcmp(name, "--gpus-per-node") == 0) {
            status = parse_count(name, value, 1, 1024, &number) ? 0 : 2;
            options->gpus_per_node = (int)number;
            i++;
        } else {
            complain("unknown argument '%s'", name);
            status = 2;
        }
    }
    if (status == 0 && 2 * options->ghosts > options->atoms) {
        complain("2 x --ghosts (%ju) must not exceed --atoms (%ju): the atoms sent to the left "
                 "and to the right neighbour must differ",
                 (uintmax_t)(2 * options->ghosts), (uintmax_t)options->atoms);
        status = 2;
    }
    /* one message is ghosts x (features + 1) doubles: an int count for MPI */
    if (status == 0 && options->ghosts * (options->features + 1) > (uintptr_t)INT_MAX) {
        complain("--ghosts x (--features + 1) must be at most %d", INT_MAX);
        status = 2;
    }
    if (status == 2 && RANK == 0) {
        usage(stderr);
    }
    return status;
}

/* ---- what every rank owns: values as a formula of the atom ------------------- */
/* Whole numbers (and quarters) below 2^53: exact in double, on every rank. */

static double descriptor_value(int64_t atom, uintptr_t n, int step) {
    return 1e9 * step + 1e3 * (double)atom + (double)n;
}

static double charge_value(int64_t atom, int step) {
    return -(1e9 * step + 1e3 * (double)atom) - 0.5;
}

/* The force that rank `computed_by` contributes to `atom`. */
static double force_value(int64_t atom, int xyz, int computed_by, int step) {
    return 1e9 * step + 1e3 * (double)atom + 10.0 * xyz + 0.25 * (computed_by % 8);
}

/* ---- the layout of a rank's rows ------------------------------------------------ */

typedef struct {
    int rank, size, left, right;
    uintptr_t owned;     /* N */
    uintptr_t ghosts;    /* G per neighbour */
    uintptr_t rows;      /* N + 2G */
    int32_t* atom_of_row;  /* global atom id of every row */
    /* send_rows[j]: the owned row that goes to row j of a forward message,
     * j < G to the left neighbour (offsets 0..G-1), else to the right one
     * (offsets N-G..N-1); the reverse messages come back in the same order. */
    uintptr_t* send_rows;
    /* ghost_rows[j]: the block row that receives row j of the forward
     * messages, j < G from the left neighbour, else from the right one. */
    uintptr_t* ghost_rows;
} Layout;

static uintptr_t greatest_common_divisor(uintptr_t a, uintptr_t b) {
    while (b != 0) {
        const uintptr_t rest = a % b;
        a = b;
        b = rest;
    }
    return a;
}

static Layout make_layout(int rank, int size, uintptr_t owned, uintptr_t ghosts) {
    Layout layout;
    layout.rank = rank;
    layout.size = size;
    layout.left = (rank + size - 1) % size;
    layout.right = (rank + 1) % size;
    layout.owned = owned;
    layout.ghosts = ghosts;
    layout.rows = owned + 2 * ghosts;
    layout.atom_of_row = allocate(layout.rows, sizeof(int32_t));
    layout.send_rows = allocate(2 * ghosts, sizeof(uintptr_t));
    layout.ghost_rows = allocate(2 * ghosts, sizeof(uintptr_t));

    /* owned row i holds the atom at offset (i * stride) % N of this rank's
     * range: a permutation, as long as stride and N are coprime */
    uintptr_t stride = owned / 3 + 1;
    while (greatest_common_divisor(stride, owned) != 1) {
        stride++;
    }
    uintptr_t* row_of_offset = allocate(owned, sizeof(uintptr_t));
    for (uintptr_t row = 0; row < owned; row++) {
        const uintptr_t offset = (row * stride) % owned;
        layout.atom_of_row[row] = (int32_t)((uintptr_t)rank * owned + offset);
        row_of_offset[offset] = row;
    }
    for (uintptr_t j = 0; j < 2 * ghosts; j++) {
        const uintptr_t offset = j < ghosts ? j : owned - 2 * ghosts + j;
        layout.send_rows[j] = row_of_offset[offset];
        /* ghosts are stored in the reverse order of arrival: the unpack
         * scatters, with the labels saying which atom is where */
        const uintptr_t ghost_row = owned + 2 * ghosts - 1 - j;
        layout.ghost_rows[j] = ghost_row;
        layout.atom_of_row[ghost_row] =
            j < ghosts ? (int32_t)((uintptr_t)layout.left * owned + owned - ghosts + j)
                       : (int32_t)((uintptr_t)layout.right * owned + (j - ghosts));
    }
    free(row_of_offset);
    return layout;
}

static void free_layout(Layout* layout) {
    free(layout->atom_of_row);
    free(layout->send_rows);
    free(layout->ghost_rows);
}

/* ---- mtsarray arrays and labels ------------------------------------------------ */

static bool is_cpu(DLDevice device) {
    return device.device_type == kDLCPU;
}

/* A (rows, width) array on `device` holding `values` (host, row-major):
 * wrapped without a copy on the CPU, copied to the device otherwise (the copy
 * is queued on the device's default stream; `values` may be reused when
 * the call returns). */
static mts_array_t array_from_host(const void* values, DLDataType dtype, uintptr_t rows,
                                   uintptr_t width, DLDevice device) {
    const uintptr_t shape[2] = {rows, width};
    mts_array_t host = {0};
    MTS_CHECK(mtsarray_wrap((void*)values, CPU, dtype, shape, 2, NULL, NULL, &host));
    if (is_cpu(device)) {
        return host;
    }
    mts_array_t copy = {0};
    MTS_CHECK(host.copy(host.ptr, device, &copy));
    host.destroy(host.ptr);
    return copy;
}

/* Labels with one dimension `name`, values on `device` (libmetatensor wants
 * a block's labels on its values' device). */
static const mts_labels_t* make_labels(const char* name, const int32_t* values, uintptr_t count,
                                       DLDevice device) {
    const uintptr_t shape[2] = {count, 1};
    mts_array_t array = {0};
    MTS_CHECK(mtsarray_zeros(CPU, INT32, shape, 2, &array));
    void* data = NULL;
    MTS_CHECK(mtsarray_data(&array, &data));
    if (count != 0) {
        memcpy(data, values, count * sizeof(int32_t));
    }
    if (!is_cpu(device)) {
        mts_array_t copy = {0};
        MTS_CHECK(array.copy(array.ptr, device, &copy));
        array.destroy(array.ptr);
        array = copy;
    }
    const mts_labels_t* labels = mts_labels(&name, 1, array); /* owns the array */
    if (labels == NULL) {
        mts_failed("mts_labels", __LINE__);
    }
    return labels;
}

static const mts_labels_t* range_labels(const char* name, uintptr_t count, DLDevice device) {
    int32_t* values = allocate(count, sizeof(int32_t));
    for (uintptr_t i = 0; i < count; i++) {
        values[i] = (int32_t)i;
    }
    const mts_labels_t* labels = make_labels(name, values, count, device);
    free(values);
    return labels;
}

/* Writes `values` (host, rows x width) into rows `first_row...` of `output`
 * (on `device`) with move_data: how "the model" of this program produces
 * new values on the device without a kernel of its own. */
static void write_rows(mts_array_t* output, uintptr_t first_row, uintptr_t rows, uintptr_t width,
                       const double* values, DLDevice device) {
    mts_array_t source = array_from_host(values, FLOAT64, rows, width, device);
    mts_data_movement_t* moves = allocate(rows, sizeof(mts_data_movement_t));
    for (uintptr_t i = 0; i < rows; i++) {
        mts_data_movement_t move = {i, first_row + i, 0, 0, width};
        moves[i] = move;
    }
    MTS_CHECK(output->move_data(output->ptr, source.ptr, moves, rows));
    free(moves);
    source.destroy(source.ptr); /* freed after the move, in stream order */
}

/* Host-readable values of `array`: itself on the CPU, else a copy (the host
 * waits for it). `*copy` is to be destroyed when it is not empty. */
static const double* host_values(const mts_array_t* array, mts_array_t* copy) {
    DLDevice device;
    MTS_CHECK(array->device(array->ptr, &device));
    const mts_array_t* readable = array;
    if (!is_cpu(device)) {
        MTS_CHECK(array->copy(array->ptr, CPU, copy));
        readable = copy;
    }
    void* data = NULL;
    MTS_CHECK(mtsarray_data(readable, &data));
    return (const double*)data;
}

static void release(mts_array_t* array) {
    if (array->ptr != NULL && array->destroy != NULL) {
        array->destroy(array->ptr);
    }
    memset(array, 0, sizeof(*array));
}

/* ---- the TensorMap -------------------------------------------------------------- */

typedef struct {
    mts_tensormap_t* tensor;
    /* views of the blocks' values, owned by `tensor` */
    mts_array_t values[N_BLOCKS];
    uintptr_t widths[N_BLOCKS];
} Blocks;

static Blocks make_blocks(const Layout* layout, uintptr_t features, DLDevice device) {
    Blocks blocks;
    memset(&blocks, 0, sizeof(blocks));
    blocks.widths[DESCRIPTOR] = features;
    blocks.widths[CHARGE] = 1;
    blocks.widths[FORCE] = N_XYZ;
    blocks.widths[HALO_FORCE] = N_XYZ;

    const mts_labels_t* all_atoms = make_labels("atom", layout->atom_of_row, layout->rows, device);
    const mts_labels_t* owned_atoms = make_labels("atom", layout->atom_of_row, layout->owned, device);
    mts_block_t* block_list[N_BLOCKS];
    for (int b = 0; b < N_BLOCKS; b++) {
        const uintptr_t rows = b == HALO_FORCE ? layout->owned : layout->rows;
        const uintptr_t shape[2] = {rows, blocks.widths[b]};
        mts_array_t values = {0};
        /* NaN: a row nobody wrote stays visibly wrong; halo_force starts at
         * zero, as the rows no neighbour contributes to must stay */
        const double fill = b == HALO_FORCE ? 0.0 : (double)NAN;
        MTS_CHECK(mtsarray_full(device, FLOAT64, shape, 2, &fill, &values));
        const mts_labels_t* properties = range_labels("n", blocks.widths[b], device);
        block_list[b] = mts_block(values, b == HALO_FORCE ? owned_atoms : all_atoms, NULL, 0,
                                  properties); /* owns `values` */
        if (block_list[b] == NULL) {
            mts_failed("mts_block", __LINE__);
        }
        mts_labels_free(properties);
    }
    mts_labels_free(all_atoms);
    mts_labels_free(owned_atoms);

    const mts_labels_t* keys = range_labels("quantity", N_BLOCKS, device);
    blocks.tensor = mts_tensormap(keys, block_list, N_BLOCKS); /* owns the blocks */
    if (blocks.tensor == NULL) {
        mts_failed("mts_tensormap", __LINE__);
    }
    mts_labels_free(keys);

    for (int b = 0; b < N_BLOCKS; b++) {
        mts_block_t* block = NULL;
        MTS_CHECK(mts_tensormap_block_by_id(blocks.tensor, &block, (uintptr_t)b));
        MTS_CHECK(mts_block_data(block, &blocks.values[b]));
    }
    return blocks;
}

/* ---- one direction of communication -------------------------------------------- */

/* One direction of communication: the movement tables, built once (a
 * simulation rebuilds them when atoms migrate, not every step), and the
 * message arrays. Up to two blocks share a message side by side: pack[i]
 * gathers rows of block pack_block[i] into its columns of the send array,
 * unpack[i] scatters those columns of the received rows into unpack_block[i]. */
typedef struct {
    int blocks;
    int pack_block[2];
    int unpack_block[2];
    mts_data_movement_t* pack[2];
    mts_data_movement_t* unpack[2];
    uintptr_t width;    /* doubles per row: the blocks' widths added */
    uintptr_t ghosts;   /* G: rows per message */
    mts_array_t send;   /* (2G, width) on the device: packed here */
    /* (2G, width): on the device (direct), or page-locked host memory
     * (staged) that MPI writes and mtsarray_copy_into uploads */
    mts_array_t receive;
    /* staged only, (2G, width): the page-locked copy of `send` that MPI
     * reads, and the device copy of `receive` that the unpack reads */
    mts_array_t host_send;
    mts_array_t uploaded;
    /* the MPI_Sendrecv baseline: plain host buffers, same bytes */
    double* baseline_send;
    double* baseline_receive;
} Channel;

typedef struct {
    DLDevice device;
    bool staged;
    DLDevice staging; /* where the staged path receives: page-locked host memory */
    int64_t stream;   /* the blocks' stream: every array of this rank works on it */
} Route;

/* `pack_rows[j]`: the row of the pack blocks that goes to row j of the
 * send array; `unpack_rows[j]`: the row of the unpack blocks that row j of
 * the received array goes to. */
static Channel make_channel(const Route* route, const Blocks* blocks, uintptr_t ghosts,
                            int count, const int* pack_block, const int* unpack_block,
                            const uintptr_t* pack_rows, const uintptr_t* unpack_rows) {
    Channel channel;
    memset(&channel, 0, sizeof(channel));
    channel.blocks = count;
    channel.ghosts = ghosts;
    for (int i = 0; i < count; i++) {
        const uintptr_t width = blocks->widths[pack_block[i]];
        channel.pack_block[i] = pack_block[i];
        channel.unpack_block[i] = unpack_block[i];
        channel.pack[i] = allocate(2 * ghosts, sizeof(mts_data_movement_t));
        channel.unpack[i] = allocate(2 * ghosts, sizeof(mts_data_movement_t));
        for (uintptr_t j = 0; j < 2 * ghosts; j++) {
            /* sample_in, sample_out, properties_start_in, _start_out, _length */
            const mts_data_movement_t pack = {pack_rows[j], j, 0, channel.width, width};
            const mts_data_movement_t unpack = {j, unpack_rows[j], channel.width, 0, width};
            channel.pack[i][j] = pack;
            channel.unpack[i][j] = unpack;
        }
        channel.width += width;
    }
    const uintptr_t shape[2] = {2 * ghosts, channel.width};
    MTS_CHECK(mtsarray_zeros(route->device, FLOAT64, shape, 2, &channel.send));
    MTS_CHECK(mtsarray_set_stream(&channel.send, route->stream));
    if (route->staged) {
        /* host memory: no stream of its own, the host writes it (MPI) */
        MTS_CHECK(mtsarray_zeros(route->staging, FLOAT64, shape, 2, &channel.receive));
        MTS_CHECK(mtsarray_zeros(route->staging, FLOAT64, shape, 2, &channel.host_send));
        MTS_CHECK(mtsarray_zeros(route->device, FLOAT64, shape, 2, &channel.uploaded));
        MTS_CHECK(mtsarray_set_stream(&channel.uploaded, route->stream));
    } else {
        MTS_CHECK(mtsarray_zeros(route->device, FLOAT64, shape, 2, &channel.receive));
        MTS_CHECK(mtsarray_set_stream(&channel.receive, route->stream));
    }
    /* mtsarray_zeros queued the zeroing on the device's default stream and
     * set_stream ordered the arrays' stream after it; the host must not let
     * MPI write them before that is done */
    MTS_CHECK(mtsarray_synchronize(&channel.send));
    MTS_CHECK(mtsarray_synchronize(&channel.receive));
    channel.baseline_send = allocate(2 * ghosts * channel.width, sizeof(double));
    channel.baseline_receive = allocate(2 * ghosts * channel.width, sizeof(double));
    return channel;
}

static void free_channel(Channel* channel) {
    for (int i = 0; i < channel->blocks; i++) {
        free(channel->pack[i]);
        free(channel->unpack[i]);
    }
    release(&channel->send);
    release(&channel->receive);
    release(&channel->host_send);
    release(&channel->uploaded);
    free(channel->baseline_send);
    free(channel->baseline_receive);
}

/* Sends rows [0, G) of `send` to the left neighbour and rows [G, 2G) to the
 * right one; receives rows [0, G) of `receive` from the left, [G, 2G) from
 * the right. Blocks until all four messages are done. */
static void ring_exchange(const Layout* layout, const double* send, double* receive,
                          uintptr_t width) {
    const int count = (int)(layout->ghosts * width);
    const uintptr_t half = layout->ghosts * width;
    MPI_Request requests[4];
    MPI_CHECK(MPI_Irecv(receive, count, MPI_DOUBLE, layout->left, TAG_TO_RIGHT, MPI_COMM_WORLD,
                        &requests[0]));
    MPI_CHECK(MPI_Irecv(receive + half, count, MPI_DOUBLE, layout->right, TAG_TO_LEFT,
                        MPI_COMM_WORLD, &requests[1]));
    MPI_CHECK(MPI_Isend(send, count, MPI_DOUBLE, layout->left, TAG_TO_LEFT, MPI_COMM_WORLD,
                        &requests[2]));
    MPI_CHECK(MPI_Isend(send + half, count, MPI_DOUBLE, layout->right, TAG_TO_RIGHT,
                        MPI_COMM_WORLD, &requests[3]));
    MPI_CHECK(MPI_Waitall(4, requests, MPI_STATUSES_IGNORE));
}

/* The baseline: the same bytes around the same ring with MPI_Sendrecv. */
static void baseline_exchange(const Layout* layout, Channel* channel) {
    const int count = (int)(layout->ghosts * channel->width);
    const uintptr_t half = layout->ghosts * channel->width;
    MPI_CHECK(MPI_Sendrecv(channel->baseline_send, count, MPI_DOUBLE, layout->left, TAG_TO_LEFT,
                           channel->baseline_receive + half, count, MPI_DOUBLE, layout->right,
                           TAG_TO_LEFT, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    MPI_CHECK(MPI_Sendrecv(channel->baseline_send + half, count, MPI_DOUBLE, layout->right,
                           TAG_TO_RIGHT, channel->baseline_receive, count, MPI_DOUBLE,
                           layout->left, TAG_TO_RIGHT, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
}

typedef struct {
    double pack, exchange, unpack;
} PhaseTimes;

/* Everything between a packed send array and received rows on the device:
 * returns the array to unpack from, on the device. */
static const mts_array_t* transfer(const Layout* layout, const Route* route, Channel* channel,
                                   PhaseTimes* times, double start) {
    const mts_array_t* readable = &channel->send;
    if (route->staged) {
        /* queued on the send array's stream after the pack; the host waits
         * for this copy (and what precedes it) only */
        MTS_CHECK(mtsarray_copy_into(&channel->host_send, &channel->send));
        readable = &channel->host_send;
    } else {
        /* MPI reads the send array whenever it likes: the pack must be done.
         * This also finishes the previous unpack (same stream), which read
         * the receive array that MPI is about to write. */
        MTS_CHECK(mtsarray_synchronize(&channel->send));
    }
    void* send_data = NULL;
    void* receive_data = NULL;
    MTS_CHECK(mtsarray_data(readable, &send_data));
    MTS_CHECK(mtsarray_data(&channel->receive, &receive_data));
    const double packed = MPI_Wtime();
    times->pack += packed - start;

    ring_exchange(layout, send_data, receive_data, channel->width);
    const double exchanged = MPI_Wtime();
    times->exchange += exchanged - packed;

    if (!route->staged) {
        return &channel->receive; /* MPI_Waitall returned: the bytes are there */
    }
    /* upload to the device; the next MPI_Irecv into the page-locked array
     * comes after the next step's host wait on the blocks' stream, which
     * the unpack of this step (ordered after this upload) precedes */
    MTS_CHECK(mtsarray_copy_into(&channel->uploaded, &channel->receive));
    return &channel->uploaded;
}

/* pack (move_data, one call per block) -> transfer -> unpack (move_data, one
 * call per block) */
static void communicate(const Layout* layout, const Route* route, Blocks* blocks, Channel* channel,
                        PhaseTimes* times) {
    const uintptr_t count = 2 * layout->ghosts;
    const double start = MPI_Wtime();

    /* pack: gather scattered rows into rows 0..2G-1 of the send array */
    for (int i = 0; i < channel->blocks; i++) {
        const mts_array_t* input = &blocks->values[channel->pack_block[i]];
        MTS_CHECK(channel->send.move_data(channel->send.ptr, input->ptr, channel->pack[i], count));
    }

    const mts_array_t* received = transfer(layout, route, channel, times, start);

    const double unpack_start = MPI_Wtime();
    /* unpack: scatter rows 0..2G-1 of the received array into the blocks
     * (queued on the blocks' stream after the upload, if any) */
    for (int i = 0; i < channel->blocks; i++) {
        mts_array_t* output = &blocks->values[channel->unpack_block[i]];
        MTS_CHECK(output->move_data(output->ptr, received->ptr, channel->unpack[i], count));
    }
    /* only so that the time includes the unpack (see the top of the file) */
    MTS_CHECK(mtsarray_synchronize(&blocks->values[channel->unpack_block[0]]));
    times->unpack += MPI_Wtime() - unpack_start;
}

/* ---- the simulation's own work (untimed) ---------------------------------------- */

/* New owned descriptors and charges, and new forces (owned rows: this rank's
 * own; ghost rows: its contributions to the neighbours' atoms). */
static void compute_step(const Layout* layout, Blocks* blocks, int step, DLDevice device) {
    const uintptr_t features = blocks->widths[DESCRIPTOR];
    double* values = allocate(layout->rows * (features > N_XYZ ? features : N_XYZ), sizeof(double));

    for (uintptr_t row = 0; row < layout->owned; row++) {
        for (uintptr_t n = 0; n < features; n++) {
            values[row * features + n] = descriptor_value(layout->atom_of_row[row], n, step);
        }
    }
    write_rows(&blocks->values[DESCRIPTOR], 0, layout->owned, features, values, device);
    for (uintptr_t row = 0; row < layout->owned; row++) {
        values[row] = charge_value(layout->atom_of_row[row], step);
    }
    write_rows(&blocks->values[CHARGE], 0, layout->owned, 1, values, device);
    for (uintptr_t row = 0; row < layout->rows; row++) {
        for (int xyz = 0; xyz < N_XYZ; xyz++) {
            const double own = -force_value(layout->atom_of_row[row], xyz, layout->rank, step);
            values[row * N_XYZ + (uintptr_t)xyz] =
                row < layout->owned ? own
                                    : force_value(layout->atom_of_row[row], xyz, layout->rank, step);
        }
    }
    write_rows(&blocks->values[FORCE], 0, layout->rows, N_XYZ, values, device);
    free(values);
}

static long long n_wrong = 0;

static void expect(double actual, double expected, const char* what, int64_t atom, uintptr_t column,
                   int step) {
    if (actual != expected) {
        if (n_wrong < 10) {
            fprintf(stderr,
                    "mpi_halo_bench [rank %d]: WRONG VALUE step %d: %s of atom %lld, column %ju: %.17g, "
                    "expected %.17g\n",
                    RANK, step, what, (long long)atom, (uintmax_t)column, actual, expected);
        }
        n_wrong++;
    }
}

/* Ghost rows of blocks 0 and 1: what the owning neighbour holds this step. */
static void check_forward(const Layout* layout, Blocks* blocks, int step) {
    const uintptr_t features = blocks->widths[DESCRIPTOR];
    mts_array_t copies[2] = {{0}, {0}};
    const double* descriptor = host_values(&blocks->values[DESCRIPTOR], &copies[0]);
    const double* charge = host_values(&blocks->values[CHARGE], &copies[1]);
    for (uintptr_t row = layout->owned; row < layout->rows; row++) {
        const int32_t atom = layout->atom_of_row[row];
        for (uintptr_t n = 0; n < features; n++) {
            expect(descriptor[row * features + n], descriptor_value(atom, n, step), "ghost descriptor",
                   atom, n, step);
        }
        expect(charge[row], charge_value(atom, step), "ghost charge", atom, 0, step);
    }
    release(&copies[0]);
    release(&copies[1]);
}

/* Block 3: the contributions of the neighbour that holds each boundary atom
 * as a ghost; zero for the atoms no neighbour sees. */
static void check_reverse(const Layout* layout, Blocks* blocks, int step) {
    mts_array_t copy = {0};
    const double* halo_force = host_values(&blocks->values[HALO_FORCE], &copy);
    int* computed_by = allocate(layout->owned, sizeof(int));
    for (uintptr_t row = 0; row < layout->owned; row++) {
        computed_by[row] = -1;
    }
    for (uintptr_t j = 0; j < 2 * layout->ghosts; j++) {
        computed_by[layout->send_rows[j]] = j < layout->ghosts ? layout->left : layout->right;
    }
    for (uintptr_t row = 0; row < layout->owned; row++) {
        const int32_t atom = layout->atom_of_row[row];
        for (int xyz = 0; xyz < N_XYZ; xyz++) {
            const double expected =
                computed_by[row] < 0 ? 0.0 : force_value(atom, xyz, computed_by[row], step);
            expect(halo_force[row * N_XYZ + (uintptr_t)xyz], expected, "halo force", atom,
                   (uintptr_t)xyz, step);
        }
    }
    free(computed_by);
    release(&copy);
}

/* ---- device and transport choice ------------------------------------------------ */

typedef struct {
    bool aware;
    const char* how;
} GpuAwareness;

/* Can this MPI take device pointers of `type`? Asked at run time. */
static GpuAwareness mpi_gpu_awareness(DLDeviceType type) {
    GpuAwareness result = {false, "no query for it in this MPI (set MTSARRAY_MPI_GPU_AWARE=1 if it is)"};
    const char* forced = getenv("MTSARRAY_MPI_GPU_AWARE");
    if (forced != NULL && forced[0] != '\0') {
        if (strcmp(forced, "1") == 0) {
            result.aware = true;
            result.how = "MTSARRAY_MPI_GPU_AWARE=1";
        } else if (strcmp(forced, "0") == 0) {
            result.how = "MTSARRAY_MPI_GPU_AWARE=0";
        } else {
            stop("MTSARRAY_MPI_GPU_AWARE must be 0 or 1, got '%s'", forced);
        }
        return result;
    }
    if (type == kDLCUDA) {
#if defined(MPIX_CUDA_AWARE_SUPPORT)
        result.aware = MPIX_Query_cuda_support() == 1;
        result.how = "MPIX_Query_cuda_support()";
#elif defined(MPIX_GPU_SUPPORT_CUDA)
        int supported = 0;
        MPI_CHECK(MPIX_GPU_query_support(MPIX_GPU_SUPPORT_CUDA, &supported));
        result.aware = supported != 0;
        result.how = "MPIX_GPU_query_support(CUDA)";
#endif
    } else if (type == kDLROCM) {
#if defined(MPIX_ROCM_AWARE_SUPPORT)
        result.aware = MPIX_Query_rocm_support() == 1;
        result.how = "MPIX_Query_rocm_support()";
#elif defined(MPIX_GPU_SUPPORT_HIP)
        int supported = 0;
        MPI_CHECK(MPIX_GPU_query_support(MPIX_GPU_SUPPORT_HIP, &supported));
        result.aware = supported != 0;
        result.how = "MPIX_GPU_query_support(HIP)";
#endif
    }
    return result;
}

static bool backend_available(DLDeviceType type) {
    bool available = false;
    MTS_CHECK(mtsarray_backend_available(type, &available));
    return available;
}

static DLDevice pick_device(const Options* options, int local_rank) {
    DLDeviceType type = kDLCPU;
    if (strcmp(options->device, "cuda") == 0) {
        type = kDLCUDA;
    } else if (strcmp(options->device, "rocm") == 0) {
        type = kDLROCM;
    } else if (strcmp(options->device, "auto") == 0) {
        type = backend_available(kDLCUDA) ? kDLCUDA : backend_available(kDLROCM) ? kDLROCM : kDLCPU;
    }
    if (type != kDLCPU && !backend_available(type)) {
        stop("--device %s: %s", options->device, mtsarray_backend_unavailable_reason(type));
    }
    DLDevice device = {type, type == kDLCPU ? 0 : local_rank % options->gpus_per_node};
    return device;
}

static Route pick_route(const Options* options, DLDevice device, GpuAwareness awareness) {
    Route route;
    memset(&route, 0, sizeof(route));
    route.device = device;
    route.staging = CPU;
    if (device.device_type == kDLCUDA) {
        route.staging.device_type = kDLCUDAHost;
    } else if (device.device_type == kDLROCM) {
        route.staging.device_type = kDLROCMHost;
    }
    switch (options->transport) {
    case TRANSPORT_STAGED:
        route.staged = true;
        break;
    case TRANSPORT_DIRECT:
        if (!is_cpu(device) && !awareness.aware) {
            stop("--transport direct hands device pointers to MPI, but this MPI is not GPU-aware "
                 "(%s); use --transport staged, or MTSARRAY_MPI_GPU_AWARE=1 if it is",
                 awareness.how);
        }
        route.staged = false;
        break;
    case TRANSPORT_AUTO:
        route.staged = !is_cpu(device) && !awareness.aware;
        break;
    }
    return route;
}

/* ---- timing report ------------------------------------------------------------- */

static int compare_doubles(const void* a, const void* b) {
    const double x = *(const double*)a;
    const double y = *(const double*)b;
    return (x > y) - (x < y);
}

static double median(const double* values, int count) {
    double* sorted = allocate((size_t)count, sizeof(double));
    memcpy(sorted, values, (size_t)count * sizeof(double));
    qsort(sorted, (size_t)count, sizeof(double), compare_doubles);
    const double result =
        count % 2 == 1 ? sorted[count / 2] : 0.5 * (sorted[count / 2 - 1] + sorted[count / 2]);
    free(sorted);
    return result;
}

enum { T_PACK, T_EXCHANGE, T_UNPACK, T_TOTAL, T_BASELINE, N_TIMES };

/* per direction and per timed step */
typedef struct {
    double* samples[N_TIMES];
} Timings;

static double smallest(const double* values, int count) {
    double result = values[0];
    for (int i = 1; i < count; i++) {
        result = values[i] < result ? values[i] : result;
    }
    return result;
}

/* Per rank the median (and the best) step, then the slowest rank: a step is
 * as fast as its slowest rank. The best step shows what the exchange costs
 * when no rank was descheduled, which a busy machine hides in the median. */
static void report(const char* direction, const Timings* timings, int steps, uintptr_t bytes) {
    double local[N_TIMES + 2];
    double slowest[N_TIMES + 2];
    for (int t = 0; t < N_TIMES; t++) {
        local[t] = median(timings->samples[t], steps);
    }
    local[N_TIMES] = smallest(timings->samples[T_TOTAL], steps);
    local[N_TIMES + 1] = smallest(timings->samples[T_BASELINE], steps);
    MPI_CHECK(MPI_Reduce(local, slowest, N_TIMES + 2, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD));
    if (RANK == 0) {
        const double ms = 1e3;
        printf("%-8s %8ju B | pack %7.3f  exchange %7.3f  unpack %7.3f  total %7.3f | "
               "MPI_Sendrecv %7.3f | ratio %5.2fx | best: %7.3f / %7.3f = %5.2fx\n",
               direction, (uintmax_t)bytes, ms * slowest[T_PACK], ms * slowest[T_EXCHANGE],
               ms * slowest[T_UNPACK], ms * slowest[T_TOTAL], ms * slowest[T_BASELINE],
               slowest[T_TOTAL] / slowest[T_BASELINE], ms * slowest[N_TIMES],
               ms * slowest[N_TIMES + 1], slowest[N_TIMES] / slowest[N_TIMES + 1]);
    }
}

/* ---- main ----------------------------------------------------------------------- */

int main(int argc, char** argv) {
    if (MPI_Init(&argc, &argv) != MPI_SUCCESS) {
        fprintf(stderr, "mpi_halo_bench: MPI_Init failed\n");
        return 1;
    }
    /* errors come back as codes, checked at every call */
    MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    int size = 0;
    MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &RANK));
    MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &size));

    Options options;
    const int parsed = parse_options(argc, argv, &options);
    if (parsed == 0 && size < 2) {
        if (RANK == 0) {
            fprintf(stderr, "mpi_halo_bench: needs at least 2 MPI ranks (a ring of one rank has no "
                            "neighbour), got %d: mpirun -np 2 ...\n", size);
        }
    }
    if (parsed != 0 || size < 2) {
        MPI_CHECK(MPI_Finalize());
        return parsed == 1 ? 0 : 2;
    }
    if ((uintmax_t)size * options.atoms > (uintmax_t)INT32_MAX) {
        stop("%d ranks x %ju atoms do not fit int32 atom ids", size, (uintmax_t)options.atoms);
    }

    /* which GPU: node-local rank modulo --gpus-per-node */
    MPI_Comm node = MPI_COMM_NULL;
    int local_rank = 0;
    MPI_CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, RANK, MPI_INFO_NULL, &node));
    MPI_CHECK(MPI_Comm_rank(node, &local_rank));
    MPI_CHECK(MPI_Comm_free(&node));

    const DLDevice device = pick_device(&options, local_rank);
    const GpuAwareness awareness = mpi_gpu_awareness(is_cpu(device) ? kDLCUDA : device.device_type);
    Route route = pick_route(&options, device, awareness);

    Layout layout = make_layout(RANK, size, options.atoms, options.ghosts);
    Blocks blocks = make_blocks(&layout, options.features, device);
    /* the message arrays work on the blocks' stream (see the top of the file) */
    MTS_CHECK(mtsarray_get_stream(&blocks.values[DESCRIPTOR], &route.stream));
    /* forward: descriptor and charge of the owned rows the neighbours need
     * (one message: descriptor in columns [0, F), charge in column F) into
     * the ghost rows; reverse: the force on the ghost rows back into the
     * owners' halo_force rows */
    const int forward_blocks[2] = {DESCRIPTOR, CHARGE};
    const int reverse_pack[1] = {FORCE};
    const int reverse_unpack[1] = {HALO_FORCE};
    Channel forward = make_channel(&route, &blocks, options.ghosts, 2, forward_blocks,
                                   forward_blocks, layout.send_rows, layout.ghost_rows);
    Channel reverse = make_channel(&route, &blocks, options.ghosts, 1, reverse_pack,
                                   reverse_unpack, layout.ghost_rows, layout.send_rows);

    if (RANK == 0) {
        printf("mpi_halo_bench: mtsarray %s, metatensor %s, %d ranks\n", mtsarray_version(), mts_version(),
               size);
        printf("device: %s:%d (stream %lld); MPI GPU support for %s: %s (%s)\n",
               is_cpu(device) ? "cpu" : device.device_type == kDLCUDA ? "cuda" : "rocm",
               device.device_id, (long long)route.stream,
               device.device_type == kDLROCM ? "ROCm" : "CUDA", awareness.aware ? "yes" : "no",
               awareness.how);
        printf("transport: %s\n",
               route.staged ? (is_cpu(device) ? "staged through host copies (on the CPU: a test of that path)"
                                              : "staged through page-locked host memory")
                            : (is_cpu(device) ? "direct: host pointers to MPI"
                                              : "direct: device pointers to MPI"));
        printf("per rank: %ju owned atoms, 2 x %ju ghost atoms; forward: %ju features + 1 charge "
               "per atom, reverse: %d force components\n",
               (uintmax_t)options.atoms, (uintmax_t)options.ghosts, (uintmax_t)options.features,
               N_XYZ);
    }

    Timings timings[2];
    for (int d = 0; d < 2; d++) {
        for (int t = 0; t < N_TIMES; t++) {
            timings[d].samples[t] = allocate((size_t)options.steps, sizeof(double));
        }
    }
    Channel* channels[2] = {&forward, &reverse};

    const int total_steps = options.warmup_steps + options.steps;
    for (int step = 0; step < total_steps; step++) {
        const int timed = step - options.warmup_steps; /* < 0: warm-up */
        compute_step(&layout, &blocks, step, device);
        MTS_CHECK(mtsarray_synchronize(&blocks.values[FORCE])); /* keep the model out of the timing */

        /* Each timed phase sits between two barriers: all ranks start it
         * together, and none starts untimed work (checks, the next step)
         * that would take a core from a rank still in the phase. */
        PhaseTimes phases[2];
        memset(phases, 0, sizeof(phases));
        MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
        communicate(&layout, &route, &blocks, &forward, &phases[0]);
        MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
        check_forward(&layout, &blocks, step);

        MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
        communicate(&layout, &route, &blocks, &reverse, &phases[1]);
        MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
        check_reverse(&layout, &blocks, step);

        double baseline[2];
        for (int d = 0; d < 2; d++) {
            MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
            const double start = MPI_Wtime();
            baseline_exchange(&layout, channels[d]);
            baseline[d] = MPI_Wtime() - start;
        }
        MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
        if (timed >= 0) {
            for (int d = 0; d < 2; d++) {
                timings[d].samples[T_PACK][timed] = phases[d].pack;
                timings[d].samples[T_EXCHANGE][timed] = phases[d].exchange;
                timings[d].samples[T_UNPACK][timed] = phases[d].unpack;
                timings[d].samples[T_TOTAL][timed] = phases[d].pack + phases[d].exchange + phases[d].unpack;
                timings[d].samples[T_BASELINE][timed] = baseline[d];
            }
        }
    }

    if (RANK == 0) {
        printf("per step, in ms: median over %d steps of the slowest rank (best: the fastest step);\n"
               "bytes sent (= received) per rank and step; ratio = halo total / MPI_Sendrecv of the "
               "same bytes\n",
               options.steps);
    }
    const uintptr_t message_rows = 2 * options.ghosts * sizeof(double);
    report("forward", &timings[0], options.steps, message_rows * forward.width);
    report("reverse", &timings[1], options.steps, message_rows * reverse.width);

    long long all_wrong = 0;
    MPI_CHECK(MPI_Allreduce(&n_wrong, &all_wrong, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD));

    for (int d = 0; d < 2; d++) {
        for (int t = 0; t < N_TIMES; t++) {
            free(timings[d].samples[t]);
        }
    }
    free_channel(&forward);
    free_channel(&reverse);
    mts_tensormap_free(blocks.tensor);
    free_layout(&layout);

    if (RANK == 0) {
        if (all_wrong != 0) {
            fprintf(stderr, "mpi_halo_bench: %lld wrong value(s) over all ranks\n", all_wrong);
        } else {
            printf("mpi_halo_bench: %d steps, every received value checked on every rank, ok\n",
                   total_steps);
        }
    }
    MPI_CHECK(MPI_Finalize());
    return all_wrong == 0 ? 0 : 1;
}
