/* check-tensors.h: llama.cpp's --check-tensors. Every tensor's bytes are
 * read from the model's files (each part of a split model) and checked as
 * ggml checks them (gguf/tensor-types.h, fl_blocks_check) before the model
 * loads, so a file with a NaN or an infinity in its weights or scales is one
 * line naming the tensor, not a run of wrong tokens. The reads bypass the
 * pager (a check of a model larger than RAM does not evict its cache) and
 * leave no pages behind in the page cache. */
#ifndef FL_CHECK_TENSORS_H
#define FL_CHECK_TENSORS_H

#include <stdint.h>

#include "base/error.h"

struct gguf_file;

/* 0, or -EINVAL with "PATH: tensor 'NAME' has invalid data: WHAT at
 * block/value N" in err, or -errno from reading; *bytes (may be NULL) the
 * bytes checked. */
int eng_check_tensors(const struct gguf_file *g, uint64_t *bytes, struct fl_err *err);

#endif
