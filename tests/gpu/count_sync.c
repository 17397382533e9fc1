// An LD_PRELOAD shim that counts the CUDA runtime calls a step must never make:
// those that wait for the device, copy synchronously or allocate. Each forwards
// to the real runtime (libcudart.so, so the program must be linked with
// -cudart shared). sync_steps reads the counts through seqpool_sync_counts().
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stddef.h>

typedef int cuda_status;  // cudaError_t

enum {
  stream_synchronize,
  device_synchronize,
  event_synchronize,
  event_query,
  memcpy_sync,
  malloc_device,
  free_device,
  malloc_async,
  free_async,
  malloc_host,
  host_alloc,
  free_host,
  counted_calls
};

static const char* const names[counted_calls] = {
    "cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize", "cudaEventQuery",
    "cudaMemcpy",            "cudaMalloc",            "cudaFree",             "cudaMallocAsync",
    "cudaFreeAsync",         "cudaMallocHost",        "cudaHostAlloc",        "cudaFreeHost"};
static long counts[counted_calls];

const long* seqpool_sync_counts(void) { return counts; }
const char* const* seqpool_sync_names(void) { return names; }
int seqpool_sync_count_calls(void) { return counted_calls; }

static void* next_of(const char* name) { return dlsym(RTLD_NEXT, name); }

#define COUNTED(index, name, params, args)                              \
  cuda_status name params {                                             \
    static cuda_status(*next) params = NULL;                            \
    if (next == NULL) next = (cuda_status(*) params)next_of(#name);     \
    __atomic_add_fetch(&counts[index], 1, __ATOMIC_RELAXED);            \
    return next args;                                                   \
  }

COUNTED(stream_synchronize, cudaStreamSynchronize, (void* stream), (stream))
COUNTED(device_synchronize, cudaDeviceSynchronize, (void), ())
COUNTED(event_synchronize, cudaEventSynchronize, (void* event), (event))
COUNTED(event_query, cudaEventQuery, (void* event), (event))
COUNTED(memcpy_sync, cudaMemcpy, (void* to, const void* from, size_t bytes, int kind), (to, from, bytes, kind))
COUNTED(malloc_device, cudaMalloc, (void** memory, size_t bytes), (memory, bytes))
COUNTED(free_device, cudaFree, (void* memory), (memory))
COUNTED(malloc_async, cudaMallocAsync, (void** memory, size_t bytes, void* stream), (memory, bytes, stream))
COUNTED(free_async, cudaFreeAsync, (void* memory, void* stream), (memory, stream))
COUNTED(malloc_host, cudaMallocHost, (void** memory, size_t bytes), (memory, bytes))
COUNTED(host_alloc, cudaHostAlloc, (void** memory, size_t bytes, unsigned flags), (memory, bytes, flags))
COUNTED(free_host, cudaFreeHost, (void* memory), (memory))
