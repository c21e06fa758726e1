/* gguf-impl.h: the GGUF reader's insides, shared by gguf.c (one file),
 * gguf-split.c (the parts of a split model joined into one table) and
 * gguf-override.c (--override-kv on the metadata). Not for use outside
 * gguf/. */
#ifndef FL_GGUF_IMPL_H
#define FL_GGUF_IMPL_H

#include "gguf/gguf.h"

struct arena_block;

struct gguf_kv {
    const char *key;
    struct gguf_value val;
    uint64_t offset; /* where the record starts */
    bool overridden; /* by --override-kv (gguf-override.c): a later one is ignored */
};

/* Open-addressing name -> index table; slots hold index + 1, 0 is empty. */
struct name_index {
    uint32_t *slot;
    uint64_t mask;
};

struct gguf_file {
    char *name;
    uint32_t version;
    uint64_t file_size, alignment, data_offset, header_size;
    int64_t n_kv, n_tensors;
    struct gguf_kv *kv;
    struct gguf_tensor *tensors;
    struct name_index kv_index, tensor_index;
    struct arena_block *arena;
    /* the files the tensors are in: this one (one), or a split model's
     * (gguf-split.c: parts allocated, the other parts' files kept in shards
     * for their tensors' names) */
    struct gguf_part one, *parts;
    int n_parts;
    struct gguf_file **shards;
};

/* n bytes that live as long as f (16-byte aligned), or NULL. */
void *gguf_arena(struct gguf_file *f, size_t n);

/* Adds key (copied) with value v (its strings and arrays must outlive f:
 * gguf_arena). 0 or -ENOMEM. The key must not be in f yet. */
int gguf_add_kv(struct gguf_file *f, const char *key, const struct gguf_value *v);

/* One --override-kv list applied (gguf_open_overridden); the keys are
 * checked by the caller. 0, or -EINVAL (-ENOMEM) with err. */
int gguf_override(struct gguf_file *f, const char *spec, struct fl_err *err);


/* Rebuilds f's tensor name index over f->tensors[0, n_tensors): 0,
 * -ENOMEM, or -EEXIST with *dup the name that two tensors share. */
int gguf_index_tensors(struct gguf_file *f, const char **dup);

#endif
