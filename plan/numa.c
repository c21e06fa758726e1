#include "plan/numa.h"

#include <dirent.h>
#include <errno.h>
#include <numa.h>
#include <numaif.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct fl_numa {
    enum fl_numa_mode mode;
    int n_nodes;
    int home; /* node for isolate / gpu-local */
};

static const char *mode_names[] = { "off", "distribute", "isolate", "gpu-local" };

const char *fl_numa_mode_name(enum fl_numa_mode mode)
{
    return (unsigned)mode < 4 ? mode_names[mode] : "?";
}

int fl_numa_parse(const char *text, enum fl_numa_mode *out)
{
    for (int m = 0; m < 4; m++)
        if (!strcmp(text, mode_names[m])) {
            *out = (enum fl_numa_mode)m;
            return 0;
        }
    return -EINVAL;
}

static int read_int_file(const char *path, int *out)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -errno;
    int ok = fscanf(f, "%i", out) == 1;
    fclose(f);
    return ok ? 0 : -EINVAL;
}

int fl_numa_gpu_node(void)
{
    DIR *d = opendir("/sys/bus/pci/devices");
    if (!d)
        return -1;
    int node = -1;
    struct dirent *e;
    while (node < 0 && (e = readdir(d))) {
        char path[512];
        int vendor = 0, klass = 0, n = -1;
        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/vendor", e->d_name);
        if (read_int_file(path, &vendor) || vendor != 0x10de)
            continue;
        snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/class", e->d_name);
        if (read_int_file(path, &klass) || (klass >> 16) != 0x03) /* display controller */
            continue;
        snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/numa_node", e->d_name);
        if (!read_int_file(path, &n) && n >= 0)
            node = n;
    }
    closedir(d);
    return node;
}

int fl_numa_init(enum fl_numa_mode mode, bool verbose, FILE *log, struct fl_numa **out,
                 struct fl_err *err)
{
    struct fl_numa *n = calloc(1, sizeof(*n));
    if (!n)
        return fl_err_set(err, -ENOMEM, "numa: out of memory");
    n->mode = mode;
    n->n_nodes = numa_available() < 0 ? 1 : numa_num_configured_nodes();
    if (n->n_nodes < 1)
        n->n_nodes = 1;
    int cpu = sched_getcpu();
    n->home = cpu >= 0 && n->n_nodes > 1 ? numa_node_of_cpu(cpu) : 0;
    if (mode == FL_NUMA_GPU_LOCAL && n->n_nodes > 1) {
        int gpu = fl_numa_gpu_node();
        if (gpu < 0) {
            free(n);
            return fl_err_set(err, -ENODEV, "numa gpu-local: no GPU with a NUMA node in sysfs");
        }
        n->home = gpu;
    }
    if (n->n_nodes == 1 && verbose && log)
        fprintf(log, "numa: one node, nothing to place\n");
    *out = n;
    return 0;
}

void fl_numa_free(struct fl_numa *n)
{
    free(n);
}

int fl_numa_n_nodes(const struct fl_numa *n)
{
    return n->n_nodes;
}

bool fl_numa_active(const struct fl_numa *n)
{
    return n && n->mode != FL_NUMA_OFF && n->n_nodes > 1;
}

int fl_numa_node_for_thread(enum fl_numa_mode mode, int n_nodes, int home, int ith, int nth)
{
    if (mode == FL_NUMA_OFF || n_nodes <= 1 || nth <= 0)
        return -1;
    if (mode == FL_NUMA_DISTRIBUTE) /* contiguous blocks of threads per node */
        return (int)((long)ith * n_nodes / nth);
    return home;
}

int fl_numa_thread_node(const struct fl_numa *n, int ith, int nth)
{
    if (!fl_numa_active(n))
        return -1;
    return fl_numa_node_for_thread(n->mode, n->n_nodes, n->home, ith, nth);
}

int fl_numa_bind_thread(const struct fl_numa *n, int ith, int nth)
{
    int node = fl_numa_thread_node(n, ith, nth);
    if (node < 0)
        return 0;
    struct bitmask *cpus = numa_allocate_cpumask();
    if (!cpus)
        return -ENOMEM;
    int rc = numa_node_to_cpus(node, cpus);
    if (!rc)
        rc = numa_sched_setaffinity(0, cpus);
    numa_free_cpumask(cpus);
    return rc ? -errno : 0;
}

int fl_numa_bind_range(void *addr, size_t len, int node)
{
    unsigned long mask[16] = { 0 };
    if (node < 0 || node >= (int)(sizeof(mask) * 8))
        return -EINVAL;
    mask[node / (8 * sizeof(long))] |= 1ul << (node % (8 * sizeof(long)));
    if (mbind(addr, len, MPOL_BIND, mask, sizeof(mask) * 8, MPOL_MF_MOVE))
        return -errno;
    return 0;
}

int fl_numa_place(const struct fl_numa *n, void *addr, size_t len)
{
    if (!fl_numa_active(n))
        return 0;
    if (n->mode != FL_NUMA_DISTRIBUTE)
        return fl_numa_bind_range(addr, len, n->home);
    unsigned long mask[16] = { 0 };
    for (int i = 0; i < n->n_nodes && i < (int)(sizeof(mask) * 8); i++)
        mask[i / (8 * sizeof(long))] |= 1ul << (i % (8 * sizeof(long)));
    if (mbind(addr, len, MPOL_INTERLEAVE, mask, sizeof(mask) * 8, MPOL_MF_MOVE))
        return -errno;
    return 0;
}
