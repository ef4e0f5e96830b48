/*
 * node_local_gpu.h: the GPU of an MPI rank. A launcher (mpirun, srun) starts
 * several ranks per node; each takes the GPU of its rank among the ranks of
 * its node (the node-local rank: MPI_COMM_TYPE_SHARED groups the ranks that
 * share memory), modulo the GPUs it sees (mtsarray_device_count). A launcher
 * that gives every rank a GPU of its own (CUDA_VISIBLE_DEVICES,
 * ROCR_VISIBLE_DEVICES) leaves one visible: device 0, as it should. Used by
 * examples/mpi_halo.c and examples/nccl_tensormap.c.
 */
#ifndef MTSARRAY_EXAMPLES_NODE_LOCAL_GPU_H
#define MTSARRAY_EXAMPLES_NODE_LOCAL_GPU_H

#include <stddef.h>
#include <stdint.h>

#include <mpi.h>
#include <mtsarray.h>

/* This process's rank among the ranks of its node in `comm`; their number in
 * `*node_ranks` (when not NULL). Collective over `comm`. */
static inline int node_local_rank(MPI_Comm comm, int* node_ranks) {
    MPI_Comm node = MPI_COMM_NULL;
    int rank = 0, local_rank = 0, count = 1;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, &local_rank);
    MPI_Comm_size(node, &count);
    MPI_Comm_free(&node);
    if (node_ranks != NULL) {
        *node_ranks = count;
    }
    return local_rank;
}

/* The device of `type` for the rank `local_rank` of its node: GPU
 * local_rank % (the GPUs of `type`), the GPUs counted in `*gpus` (when not
 * NULL). The CPU for kDLCPU; device 0 of a type without devices, so that the
 * first call on it fails with mtsarray_backend_unavailable_reason(type). */
static inline DLDevice node_local_gpu(DLDeviceType type, int local_rank, int32_t* gpus) {
    int32_t count = 0;
    if (type != kDLCPU && mtsarray_device_count(type, &count) != MTS_SUCCESS) {
        count = 0;
    }
    if (gpus != NULL) {
        *gpus = count;
    }
    DLDevice device = {type, 0};
    if (type != kDLCPU && count > 0) {
        device.device_id = local_rank % count;
    }
    return device;
}

#endif /* MTSARRAY_EXAMPLES_NODE_LOCAL_GPU_H */
