/* host-memory.c: MemAvailable and the memory cgroups' headroom (host-memory.h). */
#include "base/host-memory.h"

#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

/* v1 writes "no limit" as PAGE_COUNTER_MAX pages (9223372036854771712 with
 * 4 KiB pages); anything this large is no limit at all. */
#define NO_LIMIT (UINT64_C(1) << 60)

static uint64_t host_available(const char *root)
{
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/proc/meminfo", root);
    FILE *f = fopen(path, "r");
    char line[256];
    unsigned long long kb = 0;
    while (f && fgets(line, sizeof(line), f))
        if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1)
            break;
    if (f)
        fclose(f);
    return (uint64_t)kb * 1024;
}

/* A file holding one number, or "max" (v2: no limit). false when absent. */
static bool read_number(const char *dir, const char *name, uint64_t *out)
{
    char path[PATH_MAX], text[64];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    bool ok = fgets(text, sizeof(text), f) != NULL;
    fclose(f);
    unsigned long long v = 0;
    if (ok && !strncmp(text, "max", 3))
        *out = UINT64_MAX;
    else if (ok && sscanf(text, "%llu", &v) == 1)
        *out = v;
    else
        ok = false;
    return ok;
}

/* memory.stat's value for key (the first of the keys given that is there). */
static uint64_t stat_value(const char *dir, const char *key, const char *fallback)
{
    char path[PATH_MAX], line[256], name[64];
    snprintf(path, sizeof(path), "%s/memory.stat", dir);
    FILE *f = fopen(path, "r");
    unsigned long long v, found = 0, second = 0;
    bool have = false;
    while (f && fgets(line, sizeof(line), f)) {
        if (sscanf(line, "%63s %llu", name, &v) != 2)
            continue;
        if (!strcmp(name, key)) {
            found = v;
            have = true;
        } else if (fallback && !strcmp(name, fallback)) {
            second = v;
        }
    }
    if (f)
        fclose(f);
    return have ? found : second;
}

/* One cgroup directory's limit and headroom into h, when it is the tightest. */
static void consider(struct fl_mem_headroom *h, const char *dir, bool v2)
{
    uint64_t limit = UINT64_MAX, high = UINT64_MAX, usage = 0;
    if (!read_number(dir, v2 ? "memory.max" : "memory.limit_in_bytes", &limit))
        return;
    /* v2's memory.high throttles and reclaims hard past it: a limit too. */
    if (v2 && read_number(dir, "memory.high", &high) && high < limit)
        limit = high;
    if (limit >= NO_LIMIT ||
        !read_number(dir, v2 ? "memory.current" : "memory.usage_in_bytes", &usage))
        return;
    /* v1's total_ counts the cgroup's children too; v2's memory.stat always does. */
    uint64_t cache = v2 ? stat_value(dir, "inactive_file", NULL)
                        : stat_value(dir, "total_inactive_file", "inactive_file");
    uint64_t used = usage - (cache < usage ? cache : usage);
    uint64_t room = limit > used ? limit - used : 0;
    if (room < h->cgroup) {
        h->cgroup = room;
        h->cgroup_limit = limit;
        snprintf(h->cgroup_dir, sizeof(h->cgroup_dir), "%s", dir);
    }
}

static bool is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* The cgroup at mount + path and every ancestor up to the mount's root. A
 * container often sees its own cgroup at the mount's root while
 * /proc/self/cgroup names the host's path: directories that do not exist are
 * skipped, and the root is always considered. */
static void walk(struct fl_mem_headroom *h, const char *mount, const char *path, bool v2)
{
    char dir[PATH_MAX];
    size_t base = strlen(mount);
    if (snprintf(dir, sizeof(dir), "%s%s", mount, path) >= (int)sizeof(dir))
        snprintf(dir, sizeof(dir), "%s", mount);
    for (;;) {
        size_t n = strlen(dir);
        while (n > base && dir[n - 1] == '/')
            dir[--n] = '\0';
        if (is_dir(dir))
            consider(h, dir, v2);
        char *slash = n > base ? strrchr(dir + base, '/') : NULL;
        if (!slash)
            break;
        *slash = '\0';
    }
}

static bool lists_memory(const char *controllers)
{
    char list[256];
    snprintf(list, sizeof(list), "%s", controllers);
    for (char *save = NULL, *c = strtok_r(list, ",", &save); c; c = strtok_r(NULL, ",", &save))
        if (!strcmp(c, "memory"))
            return true;
    return false;
}

/* /proc/self/cgroup: "ID:CONTROLLERS:PATH" per hierarchy; v2's is "0::PATH". */
static void read_cgroups(struct fl_mem_headroom *h, const char *root)
{
    char path[PATH_MAX], line[PATH_MAX + 64], v1[PATH_MAX], v2[PATH_MAX], probe[PATH_MAX + 32];
    snprintf(path, sizeof(path), "%s/proc/self/cgroup", root);
    snprintf(v1, sizeof(v1), "%s/sys/fs/cgroup/memory", root);
    snprintf(v2, sizeof(v2), "%s/sys/fs/cgroup", root);
    snprintf(probe, sizeof(probe), "%s/cgroup.controllers", v2);
    struct stat st;
    if (stat(probe, &st) != 0) /* hybrid hierarchy: v2 beside the v1 controllers */
        snprintf(v2, sizeof(v2), "%s/sys/fs/cgroup/unified", root);
    FILE *f = fopen(path, "r");
    while (f && fgets(line, sizeof(line), f)) {
        line[strcspn(line, "\n")] = '\0';
        char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2)
            continue;
        *c1 = *c2 = '\0';
        const char *controllers = c1 + 1, *cg = c2 + 1;
        if (!strcmp(line, "0") && !*controllers)
            walk(h, v2, cg, true);
        else if (lists_memory(controllers))
            walk(h, v1, cg, false);
    }
    if (f)
        fclose(f);
}

void fl_mem_headroom_read(const char *root, struct fl_mem_headroom *out)
{
    memset(out, 0, sizeof(*out));
    out->cgroup = UINT64_MAX;
    out->host = host_available(root ? root : "");
    read_cgroups(out, root ? root : "");
}

uint64_t fl_mem_headroom_bytes(const struct fl_mem_headroom *h)
{
    if (h->cgroup == UINT64_MAX)
        return h->host;
    return h->host && h->host < h->cgroup ? h->host : h->cgroup;
}

uint64_t fl_mem_available(void)
{
    struct fl_mem_headroom h;
    fl_mem_headroom_read("", &h);
    return fl_mem_headroom_bytes(&h);
}
