/* What the C test programs share: a CHECK macro that counts checks and names the failed one,
 * and helpers for alignment and for filling a block with a pattern and checking it. */
#ifndef PITLANE_MALLOC_TEST_CHECK_H
#define PITLANE_MALLOC_TEST_CHECK_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static int checks;

#define CHECK(cond)                                                                  \
    do {                                                                             \
        checks++;                                                                    \
        if (!(cond)) {                                                               \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
            exit(1);                                                                 \
        }                                                                            \
    } while (0)

static int aligned(const void *p, size_t align) { return ((uintptr_t)p & (align - 1)) == 0; }

static void fill(unsigned char *p, size_t n, unsigned seed) {
    for (size_t i = 0; i < n; i++) p[i] = (unsigned char)(seed + i * 31);
}

static int filled(const unsigned char *p, size_t n, unsigned seed) {
    for (size_t i = 0; i < n; i++)
        if (p[i] != (unsigned char)(seed + i * 31)) return 0;
    return 1;
}

#endif
