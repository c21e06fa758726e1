/* numa.h: NUMA-aware placement of worker threads and host buffers.
 *
 * Modes follow llama.cpp's --numa, plus gpu-local:
 *   distribute  threads spread evenly over all nodes; buffers interleaved
 *   isolate     threads and buffers on the node the process started on
 *   gpu-local   threads and buffers on the node the GPU hangs off (sysfs)
 *   off         the kernel decides (default)
 * On a one-node machine every mode is "off": it says so once (verbose) and
 * does nothing else. */
#ifndef FL_NUMA_H
#define FL_NUMA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "base/error.h"

enum fl_numa_mode { FL_NUMA_OFF, FL_NUMA_DISTRIBUTE, FL_NUMA_ISOLATE, FL_NUMA_GPU_LOCAL };

int fl_numa_parse(const char *text, enum fl_numa_mode *out);
const char *fl_numa_mode_name(enum fl_numa_mode mode);

struct fl_numa;

/* Reads the topology (libnuma). log gets the one line of a one-node machine
 * when verbose, and nothing else. */
int fl_numa_init(enum fl_numa_mode mode, bool verbose, FILE *log, struct fl_numa **out,
                 struct fl_err *err);
void fl_numa_free(struct fl_numa *n);

int fl_numa_n_nodes(const struct fl_numa *n);
/* Whether placement does anything (mode != off and more than one node). */
bool fl_numa_active(const struct fl_numa *n);
/* The node worker thread ith of nth runs on, or -1 for "anywhere". */
int fl_numa_thread_node(const struct fl_numa *n, int ith, int nth);
/* Binds the calling thread to the CPUs of its node; 0 when inactive. */
int fl_numa_bind_thread(const struct fl_numa *n, int ith, int nth);
/* Places [addr, addr+len) (page-aligned) per the mode: interleave for
 * distribute, the home/GPU node otherwise. 0 when inactive. */
int fl_numa_place(const struct fl_numa *n, void *addr, size_t len);

/* Building blocks, exposed for tests. */
int fl_numa_node_for_thread(enum fl_numa_mode mode, int n_nodes, int home, int ith, int nth);
/* Binds [addr, len) to one node (MPOL_BIND, moving pages already there). */
int fl_numa_bind_range(void *addr, size_t len, int node);
/* The NUMA node of the first NVIDIA GPU per sysfs, or -1. */
int fl_numa_gpu_node(void);

#endif
