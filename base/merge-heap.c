/* merge-heap.c: see base/merge-heap.h. */
#include "base/merge-heap.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define AT(h, i) ((h)->v + (i) * (h)->size)

void fl_merge_heap_init(struct fl_merge_heap *h, size_t size,
                        bool (*before)(const void *a, const void *b))
{
    *h = (struct fl_merge_heap){ .size = size, .before = before };
}

void fl_merge_heap_free(struct fl_merge_heap *h)
{
    free(h->v);
    h->v = NULL;
    h->n = h->cap = 0;
}

void fl_merge_heap_clear(struct fl_merge_heap *h)
{
    h->n = 0;
}

int fl_merge_heap_push(struct fl_merge_heap *h, const void *elem)
{
    /* one element more than the heap holds: pop's scratch copy of the last */
    if (h->n + 1 >= h->cap) {
        size_t cap = h->cap ? h->cap * 2 : 64;
        unsigned char *v = realloc(h->v, cap * h->size);
        if (!v)
            return -ENOMEM;
        h->v = v;
        h->cap = cap;
    }
    size_t i = h->n++;
    while (i > 0 && h->before(elem, AT(h, (i - 1) / 2))) {
        memcpy(AT(h, i), AT(h, (i - 1) / 2), h->size);
        i = (i - 1) / 2;
    }
    memcpy(AT(h, i), elem, h->size);
    return 0;
}

void fl_merge_heap_pop(struct fl_merge_heap *h, void *out)
{
    memcpy(out, AT(h, 0), h->size);
    size_t n = --h->n, i = 0;
    unsigned char *last = AT(h, h->cap - 1);
    memcpy(last, AT(h, n), h->size);
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n)
            break;
        if (c + 1 < n && h->before(AT(h, c + 1), AT(h, c)))
            c++;
        if (!h->before(AT(h, c), last))
            break;
        memcpy(AT(h, i), AT(h, c), h->size);
        i = c;
    }
    if (n)
        memcpy(AT(h, i), last, h->size);
}
