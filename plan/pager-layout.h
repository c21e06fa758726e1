/* pager-layout.h: a GGUF file as the pager's table of extents
 * (pager/pager.h): the one place that turns the file's tensors and their
 * tiers into the bytes the pager pages. Every tensor is one extent; a routed
 * expert stack on the disk tier is one extent per expert slice (the pager's
 * unit of residency is an expert of a layer: its slices of every stack). */
#ifndef FL_PAGER_LAYOUT_H
#define FL_PAGER_LAYOUT_H

#include <stdint.h>

#include "base/error.h"
#include "pager/pager.h"

struct gguf_file;

/* tier(ctx, tensor_index) says where each tensor lives (NULL: routed expert
 * stacks on disk, everything else in RAM). Names point into g, which must
 * outlive the pager. Errors: the expert layout's (-EINVAL: a file that
 * contradicts itself, gguf/moe-layout.h), -ENOMEM. */
int placement_pager_layout(const struct gguf_file *g,
                           enum pager_tier (*tier)(void *ctx, int64_t tensor_index), void *ctx,
                           struct pager_layout *out, struct fl_err *err);
void placement_pager_layout_free(struct pager_layout *l);

#endif
