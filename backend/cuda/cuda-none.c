/* cuda-none.c: the backend's discovery calls in a build without CUDA
 * (FAULTLINE_CUDA off or nvcc not found): no device, and opening one says
 * why, so callers need no #ifdef to find out. */
#include <errno.h>

#include "backend/cuda/cuda-backend.h"

int fl_cuda_available(void) { return 0; }

int fl_cuda_device_info(int dev, struct fl_cuda_info *out, struct fl_err *err)
{
    (void)out;
    return fl_err_set(err, -ENODEV, "cuda: no device %d: faultline was built without CUDA", dev);
}

int fl_cuda_open(int dev, struct fl_cuda **out, struct fl_err *err)
{
    (void)out;
    return fl_err_set(err, -ENODEV, "cuda: no device %d: faultline was built without CUDA", dev);
}

void fl_cuda_close(struct fl_cuda *cu) { (void)cu; }
