/* Sizes as users type them: the parser's answers are checked against
 * arithmetic written out here, and malformed input must be refused; the
 * host's available memory must be read and be no more than it has. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/sysinfo.h>

#include "base/host-memory.h"
#include "base/units.h"

static int failures;

static void expect_size(const char *text, uint64_t want)
{
    uint64_t got = 0;
    int rc = fl_parse_size(text, &got);
    if (rc != 0 || got != want) {
        printf("FAIL parse \"%s\": rc %d got %llu want %llu\n", text, rc,
               (unsigned long long)got, (unsigned long long)want);
        failures++;
    }
}

static void expect_reject(const char *text)
{
    uint64_t got = 0;
    if (fl_parse_size(text, &got) == 0) {
        printf("FAIL \"%s\" accepted as %llu\n", text, (unsigned long long)got);
        failures++;
    }
}

int main(void)
{
    expect_size("0", 0);
    expect_size("123456", 123456);
    expect_size("4K", 4096);
    expect_size("512M", 512ull * 1024 * 1024);
    expect_size("48G", 48ull * 1024 * 1024 * 1024);
    expect_size("48GiB", 48ull * 1024 * 1024 * 1024);
    expect_size("1.5g", 3ull * 512 * 1024 * 1024);
    expect_size("2T", 2ull << 40);
    expect_size("64MB", 64ull << 20);
    expect_size("100b", 100);
    expect_reject("");
    expect_reject("G");
    expect_reject("-1G");
    expect_reject("12Q");
    expect_reject("12GX");
    expect_reject("99999999999999999999T");
    expect_reject("auto");

    char buf[32];
    const char *s = fl_format_size(3ull << 29, buf, sizeof(buf));
    if (strcmp(s, "1.50 GiB")) {
        printf("FAIL format 1.5 GiB -> \"%s\"\n", s);
        failures++;
    }
    s = fl_format_size(1000, buf, sizeof(buf));
    if (strcmp(s, "1000 B")) {
        printf("FAIL format 1000 -> \"%s\"\n", s);
        failures++;
    }
    /* MemAvailable: known on Linux, and never more than the machine has */
    struct sysinfo si;
    uint64_t avail = fl_mem_available();
    if (sysinfo(&si) != 0 || avail == 0 || avail > (uint64_t)si.totalram * si.mem_unit) {
        printf("FAIL MemAvailable %llu bytes, total %llu\n", (unsigned long long)avail,
               (unsigned long long)si.totalram * si.mem_unit);
        failures++;
    }
    printf("%s\n", failures ? "units: FAILED" : "units: all checks passed");
    return failures ? 1 : 0;
}
