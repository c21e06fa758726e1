/* test-host-memory: what base/host-memory.c reads of memory cgroups, on fake
 * /proc and /sys/fs/cgroup trees built under a temporary root: cgroup v2
 * (memory.max and memory.high, an ancestor tighter than the leaf, "max"), v1
 * as docker shows it (the host's path in /proc/self/cgroup, the container's
 * own cgroup at the mount's root), v1's "no limit", no cgroup file at all;
 * inactive file pages not counted as used. Each expected figure is worked out
 * here from the numbers the test writes. Then this machine: never more than
 * MemAvailable. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/host-memory.h"
#include "tests/check.h"

#define MIB (UINT64_C(1) << 20)

static char root[] = "/tmp/test-host-memory.XXXXXX";

/* Writes text to root/rel, making the folders on the way. */
static void put(const char *rel, const char *fmt, ...)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", root, rel);
    for (char *s = strchr(path + strlen(root) + 1, '/'); s; s = strchr(s + 1, '/')) {
        *s = '\0';
        if (mkdir(path, 0755) && errno != EEXIST)
            CHECK(0, "mkdir %s: %s", path, strerror(errno));
        *s = '/';
    }
    FILE *f = fopen(path, "w");
    CHECK(f != NULL, "cannot write %s", path);
    if (!f)
        return;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(f, fmt, ap);
    va_end(ap);
    fclose(f);
}

static void fresh_root(void)
{
    char cmd[600];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'/proc '%s'/sys", root, root);
    CHECK(system(cmd) == 0, "cannot clear %s", root);
    put("proc/meminfo", "MemTotal: 25165824 kB\nMemFree: 1000 kB\nMemAvailable: %d kB\n",
        20 * 1024 * 1024); /* 20 GiB */
}

static void test_no_cgroup(void)
{
    fresh_root();
    struct fl_mem_headroom h;
    fl_mem_headroom_read(root, &h);
    CHECK(h.host == 20ull << 30, "MemAvailable read: %llu", (unsigned long long)h.host);
    CHECK(h.cgroup == UINT64_MAX && h.cgroup_dir[0] == '\0', "no cgroup file: no limit");
    CHECK(fl_mem_headroom_bytes(&h) == 20ull << 30, "headroom = MemAvailable without a cgroup");
}

static void test_v2(void)
{
    fresh_root();
    put("proc/self/cgroup", "0::/system.slice/llm.service\n");
    put("sys/fs/cgroup/cgroup.controllers", "cpu memory pids\n");
    /* the slice: 1 GiB limit, 700 MiB used of which 100 MiB inactive file */
    put("sys/fs/cgroup/system.slice/memory.max", "%llu\n", 1024 * MIB);
    put("sys/fs/cgroup/system.slice/memory.high", "max\n");
    put("sys/fs/cgroup/system.slice/memory.current", "%llu\n", 700 * MIB);
    put("sys/fs/cgroup/system.slice/memory.stat", "anon 600\nactive_file 5\ninactive_file %llu\n",
        100 * MIB);
    /* the service: no max, high 2 GiB: the slice leaves less (1024 - 600 = 424) */
    put("sys/fs/cgroup/system.slice/llm.service/memory.max", "max\n");
    put("sys/fs/cgroup/system.slice/llm.service/memory.high", "%llu\n", 2048 * MIB);
    put("sys/fs/cgroup/system.slice/llm.service/memory.current", "%llu\n", 300 * MIB);
    put("sys/fs/cgroup/system.slice/llm.service/memory.stat", "inactive_file 0\n");
    struct fl_mem_headroom h;
    fl_mem_headroom_read(root, &h);
    CHECK(h.cgroup == 424 * MIB, "v2: the slice leaves 424 MiB, got %llu",
          (unsigned long long)(h.cgroup / MIB));
    CHECK(h.cgroup_limit == 1024 * MIB, "v2: the slice's limit");
    CHECK(strstr(h.cgroup_dir, "/system.slice") && !strstr(h.cgroup_dir, "llm"),
          "v2: the slice is the tight one: %s", h.cgroup_dir);
    CHECK(fl_mem_headroom_bytes(&h) == 424 * MIB, "v2: headroom is the cgroup's");

    /* memory.high below max is the limit: 256 MiB - 300 MiB used -> nothing left */
    put("sys/fs/cgroup/system.slice/llm.service/memory.high", "%llu\n", 256 * MIB);
    fl_mem_headroom_read(root, &h);
    CHECK(h.cgroup == 0 && h.cgroup_limit == 256 * MIB, "v2: memory.high over usage leaves 0");
    CHECK(fl_mem_headroom_bytes(&h) == 0, "v2: headroom 0");
}

static void test_v1_docker(void)
{
    fresh_root();
    /* the host's path in /proc/self/cgroup; the container sees its own cgroup
     * at the mount's root; v2's unified folder lacks memory files */
    put("proc/self/cgroup", "12:pids:/docker/abc\n4:cpu,memory:/docker/abc\n0::/docker/abc\n");
    put("sys/fs/cgroup/unified/cgroup.controllers", "\n");
    put("sys/fs/cgroup/memory/memory.limit_in_bytes", "%llu\n", 512 * MIB);
    put("sys/fs/cgroup/memory/memory.usage_in_bytes", "%llu\n", 200 * MIB);
    put("sys/fs/cgroup/memory/memory.stat",
        "cache 1\ninactive_file 7\ntotal_inactive_file %llu\n", 50 * MIB);
    struct fl_mem_headroom h;
    fl_mem_headroom_read(root, &h);
    CHECK(h.cgroup == 362 * MIB, "v1: 512 - (200 - 50) = 362 MiB, got %llu",
          (unsigned long long)(h.cgroup / MIB));
    CHECK(h.cgroup_limit == 512 * MIB, "v1: the limit");

    /* v1's "no limit" is a huge number: no limit */
    put("sys/fs/cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n");
    fl_mem_headroom_read(root, &h);
    CHECK(h.cgroup == UINT64_MAX && h.cgroup_limit == 0, "v1: PAGE_COUNTER_MAX is no limit");
    CHECK(fl_mem_headroom_bytes(&h) == 20ull << 30, "v1 unlimited: MemAvailable");

    /* a limit above MemAvailable: MemAvailable is the smaller */
    put("sys/fs/cgroup/memory/memory.limit_in_bytes", "%llu\n", 64ull << 30);
    fl_mem_headroom_read(root, &h);
    CHECK(h.cgroup == (64ull << 30) - 150 * MIB, "v1: a 64 GiB limit");
    CHECK(fl_mem_headroom_bytes(&h) == 20ull << 30, "the smaller of the two");
}

/* v1 on a host (no container): the process's own nested cgroup and its parent */
static void test_v1_nested(void)
{
    fresh_root();
    put("proc/self/cgroup", "4:memory:/bench/run-1\n");
    put("sys/fs/cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n");
    put("sys/fs/cgroup/memory/memory.usage_in_bytes", "%llu\n", 5000 * MIB);
    put("sys/fs/cgroup/memory/bench/memory.limit_in_bytes", "%llu\n", 2048 * MIB);
    put("sys/fs/cgroup/memory/bench/memory.usage_in_bytes", "%llu\n", 1024 * MIB);
    put("sys/fs/cgroup/memory/bench/run-1/memory.limit_in_bytes", "%llu\n", 1037 * MIB);
    put("sys/fs/cgroup/memory/bench/run-1/memory.usage_in_bytes", "%llu\n", 20 * MIB);
    put("sys/fs/cgroup/memory/bench/run-1/memory.stat", "inactive_file %llu\n", 4 * MIB);
    struct fl_mem_headroom h;
    fl_mem_headroom_read(root, &h);
    CHECK(h.cgroup == 1021 * MIB && h.cgroup_limit == 1037 * MIB,
          "v1 nested: the leaf's 1037 - 16 = 1021 MiB (parent leaves 1024), got %llu",
          (unsigned long long)(h.cgroup / MIB));
    CHECK(strstr(h.cgroup_dir, "bench/run-1") != NULL, "the leaf named: %s", h.cgroup_dir);
}

static void test_this_machine(void)
{
    struct fl_mem_headroom h;
    fl_mem_headroom_read("", &h);
    uint64_t avail = fl_mem_available();
    CHECK(avail > 0, "this machine: some memory available");
    CHECK(h.host == 0 || avail <= h.host + 64 * MIB, "never (much) more than MemAvailable");
    printf("this machine: MemAvailable %llu MiB, cgroup %s%s\n",
           (unsigned long long)(h.host / MIB), h.cgroup == UINT64_MAX ? "no limit" : "limited at ",
           h.cgroup_dir);
}

int main(void)
{
    if (!mkdtemp(root)) {
        printf("FAIL mkdtemp: %s\n", strerror(errno));
        return 1;
    }
    test_no_cgroup();
    test_v2();
    test_v1_docker();
    test_v1_nested();
    test_this_machine();
    char cmd[600];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
    if (system(cmd) != 0)
        printf("note: could not remove %s\n", root);
    return check_summary("test-host-memory");
}
