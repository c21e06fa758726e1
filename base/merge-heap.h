/* merge-heap.h: the priority queue of candidate merges both BPE flavours
 * run (SPM by score, byte-level BPE by rank): a binary heap over elements
 * of a fixed size, ordered by the tokenizer's own `before`. */
#ifndef FL_MERGE_HEAP_H
#define FL_MERGE_HEAP_H

#include <stdbool.h>
#include <stddef.h>

struct fl_merge_heap {
    unsigned char *v;
    size_t n, cap, size; /* elements held, room, bytes per element */
    bool (*before)(const void *a, const void *b); /* a comes out first */
};

/* An empty heap of `size`-byte elements (no allocation until the first push). */
void fl_merge_heap_init(struct fl_merge_heap *h, size_t size,
                        bool (*before)(const void *a, const void *b));
void fl_merge_heap_free(struct fl_merge_heap *h);
void fl_merge_heap_clear(struct fl_merge_heap *h);
/* 0, or -ENOMEM (the heap is unchanged). */
int fl_merge_heap_push(struct fl_merge_heap *h, const void *elem);
/* Copies the first element to out and removes it; the heap must not be empty. */
void fl_merge_heap_pop(struct fl_merge_heap *h, void *out);

#endif
