/* GPU discovery for the CUDA backend. On machines without a driver cudaGetDeviceCount fails with
 * cudaErrorInsufficientDriver (not cudaErrorNoDevice) and cuBLAS cannot start: every such failure
 * is reported as "no GPU" with the reason, never as a crash. */
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <stdio.h>

extern "C" int ig_cuda_probe_devices(char *why, size_t why_len, char *name, size_t name_len,
                                     size_t *mem) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        snprintf(why, why_len, "cudaGetDeviceCount: %s", cudaGetErrorString(e));
        cudaGetLastError(); /* clear the sticky error */
        return 0;
    }
    if (n == 0) {
        snprintf(why, why_len, "no CUDA device");
        return 0;
    }
    cudaDeviceProp prop;
    e = cudaGetDeviceProperties(&prop, 0);
    if (e != cudaSuccess) {
        snprintf(why, why_len, "cudaGetDeviceProperties: %s", cudaGetErrorString(e));
        return 0;
    }
    cublasHandle_t h;
    if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) {
        snprintf(why, why_len, "cublasCreate failed on %s", prop.name);
        return 0;
    }
    cublasDestroy(h);
    snprintf(name, name_len, "%s", prop.name);
    *mem = prop.totalGlobalMem;
    return n;
}
