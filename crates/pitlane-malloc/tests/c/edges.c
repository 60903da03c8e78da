/* The C interface at its edges, run preloaded by tests/c_programs.rs
 * (`the_c_interface_holds_at_its_edges_when_preloaded`). Prints "ok <n> checks
 * (pitlane-malloc ...)" and exits 0, or names the failed check and exits 1.
 *
 * Cases: every size-class boundary +-1 and the large thresholds, at every alignment 1 B to
 * 8 MiB through memalign/aligned_alloc/posix_memalign; realloc of such blocks (big
 * alignments included) keeping all of malloc_usable_size's bytes; realloc/reallocarray/calloc
 * with NULL, 0 and overflowing sizes and their errno; posix_memalign alignments that are
 * powers of two below sizeof(void *) or multiples of it that are not powers of two; free
 * keeping errno across frees that trigger sweeps; blocks freed and realloc'd by one thread
 * while the thread that allocated them exits; zero-sized blocks 16-aligned. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"

static const size_t classes[] = {8,    16,   24,   32,   40,   48,   56,    64,    80,    96,
                                 112,  128,  160,  192,  224,  256,  320,   384,   448,   512,
                                 640,  768,  896,  1024, 1280, 1536, 1792,  2048,  2560,  3072,
                                 3584, 4096, 5120, 6144, 7168, 8192, 10240, 12288, 14336, 16384};

static size_t sizes[256];
static int nsizes;

static void make_sizes(void) {
    size_t extra[] = {0, 1, 2, 65536, 65536 + 4096 - 64, (1 << 20) - 64, 1 << 20, (4 << 20)};
    for (unsigned i = 0; i < sizeof classes / sizeof *classes; i++) {
        sizes[nsizes++] = classes[i] - 1;
        sizes[nsizes++] = classes[i];
        sizes[nsizes++] = classes[i] + 1;
    }
    for (unsigned i = 0; i < sizeof extra / sizeof *extra; i++) {
        if (extra[i] > 0) sizes[nsizes++] = extra[i] - 1;
        sizes[nsizes++] = extra[i];
        sizes[nsizes++] = extra[i] + 1;
    }
}

static void malloc_boundaries(void) {
    for (int i = 0; i < nsizes; i++) {
        size_t n = sizes[i];
        unsigned char *p = malloc(n);
        CHECK(p != NULL);
        CHECK(aligned(p, (n % 16 == 0 || n > 56) ? 16 : 8));
        size_t usable = malloc_usable_size(p);
        CHECK(usable >= n);
        fill(p, usable, 1);
        free(p);
        unsigned char *z = calloc(1, n);
        CHECK(z != NULL);
        for (size_t k = 0; k < n; k++) CHECK(z[k] == 0);
        fill(z, n, 2);
        free(z);
        z = calloc(n, 1);
        CHECK(z != NULL);
        for (size_t k = 0; k < n; k++) CHECK(z[k] == 0);
        free(z);
    }
}

static void aligned_boundaries_and_realloc(void) {
    for (int lg = 0; lg <= 23; lg++) {
        size_t align = (size_t)1 << lg;
        for (int i = 0; i < nsizes; i += (lg >= 20 ? 7 : 1)) {
            size_t n = sizes[i];
            unsigned char *p = memalign(align, n);
            CHECK(p != NULL && aligned(p, align));
            size_t usable = malloc_usable_size(p);
            CHECK(usable >= n);
            free(p);
            p = aligned_alloc(align, n);
            CHECK(p != NULL && aligned(p, align));
            free(p);
            void *q = (void *)0x1;
            if (align >= sizeof(void *)) {
                CHECK(posix_memalign(&q, align, n) == 0 && q != NULL && aligned(q, align));
                free(q);
            }
            /* realloc of an aligned block: everything malloc_usable_size allowed is kept. */
            p = memalign(align, n);
            usable = malloc_usable_size(p);
            fill(p, usable, 3);
            size_t to = sizes[(i * 7 + lg) % nsizes];
            unsigned char *r = realloc(p, to);
            if (to == 0) {
                CHECK(r == NULL); /* realloc(p, 0) frees p */
                continue;
            }
            CHECK(r != NULL);
            CHECK(malloc_usable_size(r) >= to);
            CHECK(filled(r, usable < to ? usable : to, 3));
            free(r);
        }
    }
}

static void null_zero_and_overflow(void) {
    unsigned char *p = realloc(NULL, 0);
    CHECK(p != NULL);
    free(p);
    errno = 0;
    CHECK(realloc(NULL, SIZE_MAX) == NULL && errno == ENOMEM);
    errno = 0;
    CHECK(realloc(NULL, (size_t)PTRDIFF_MAX + 1) == NULL && errno == ENOMEM);
    errno = 0;
    CHECK(reallocarray(NULL, SIZE_MAX, 2) == NULL && errno == ENOMEM);
    errno = 0;
    CHECK(reallocarray(NULL, (size_t)1 << 32, (size_t)1 << 32) == NULL && errno == ENOMEM);
    p = reallocarray(NULL, 3, 5);
    CHECK(p != NULL && malloc_usable_size(p) >= 15);
    fill(p, 15, 4);
    p = reallocarray(p, 3000, 7);
    CHECK(p != NULL && filled(p, 15, 4));
    free(p);
    p = calloc(SIZE_MAX, 0);
    CHECK(p != NULL);
    free(p);
    p = calloc(0, SIZE_MAX);
    CHECK(p != NULL);
    free(p);
    errno = 0;
    CHECK(calloc((size_t)1 << 32, ((size_t)1 << 32) + 1) == NULL && errno == ENOMEM);
    errno = 0;
    CHECK(calloc(2, (size_t)PTRDIFF_MAX / 2 + 1) == NULL && errno == ENOMEM);
    errno = 0;
    CHECK(aligned_alloc(0, 16) == NULL && errno == EINVAL);
    p = aligned_alloc(1, 0);
    CHECK(p != NULL);
    free(p);
    p = aligned_alloc(2, 3);
    CHECK(p != NULL && aligned(p, 2));
    free(p);
    /* posix_memalign: a power of two below sizeof(void *), and multiples of it that are
     * not powers of two, are EINVAL, *out untouched, errno untouched. */
    size_t bad[] = {1, 2, 4, 12, 24, 40, 48, 3 * 4096, 5 * 65536};
    for (unsigned i = 0; i < sizeof bad / sizeof *bad; i++) {
        void *q = (void *)0x5678;
        errno = 4242;
        CHECK(posix_memalign(&q, bad[i], 16) == EINVAL && q == (void *)0x5678 && errno == 4242);
    }
    void *q = NULL;
    errno = 4242;
    CHECK(posix_memalign(&q, sizeof(void *), 0) == 0 && q != NULL && errno == 4242);
    free(q);
    /* The largest power-of-two alignment: no overflow, ENOMEM. */
    errno = 0;
    CHECK(memalign((size_t)1 << 63, 1) == NULL && errno == ENOMEM);
    errno = 0;
    CHECK(aligned_alloc((size_t)1 << 63, 1) == NULL && errno == ENOMEM);
}

static void free_keeps_errno(void) {
    /* Enough frees of small pages and large blocks that pages go back to the pool and the
     * cache evicts (unmaps): errno must stay as the program set it. */
    enum { N = 4000 };
    static void *blocks[N];
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < N; i++) blocks[i] = malloc(i % 10 == 0 ? 200000 + i * 100 : 16 + i % 3000);
        for (int i = 0; i < N; i++) {
            errno = 9999;
            free(blocks[i]);
            CHECK(errno == 9999);
        }
        usleep(60 * 1000); /* past half the purge delay: the next slow path sweeps */
    }
}

/* Blocks made by a thread that exits at once, freed and realloc'd by another meanwhile. */
enum { HANDED = 512 };
static unsigned char *handed[HANDED];
static size_t handed_size[HANDED];
static volatile int ready;

static void *producer(void *arg) {
    (void)arg;
    for (int i = 0; i < HANDED; i++) {
        size_t n = sizes[i % nsizes];
        if (n > 300000) n = 17;
        handed[i] = malloc(n);
        handed_size[i] = n;
        fill(handed[i], n, (unsigned)i);
    }
    __atomic_store_n(&ready, 1, __ATOMIC_RELEASE);
    return NULL; /* exits while the consumer works */
}

static void *consumer(void *arg) {
    (void)arg;
    while (!__atomic_load_n(&ready, __ATOMIC_ACQUIRE)) sched_yield();
    for (int i = 0; i < HANDED; i++) {
        size_t n = handed_size[i];
        if (!filled(handed[i], n, (unsigned)i)) return (void *)1;
        unsigned char *r = realloc(handed[i], n + 100);
        if (r == NULL || !filled(r, n, (unsigned)i)) return (void *)2;
        free(r);
    }
    return NULL;
}

static void exit_race(void) {
    for (int round = 0; round < 40; round++) {
        ready = 0;
        pthread_t a, b;
        void *result = (void *)3;
        CHECK(pthread_create(&b, NULL, consumer, NULL) == 0);
        CHECK(pthread_create(&a, NULL, producer, NULL) == 0);
        CHECK(pthread_join(a, NULL) == 0);
        CHECK(pthread_join(b, &result) == 0);
        CHECK(result == NULL);
    }
}

/* The crate promises (pitlane-malloc/src/lib.rs, "Contracts") that "a block of malloc(n) is
 * aligned to 16 bytes when n is a multiple of 16", 0 included, as glibc's malloc(0) is:
 * malloc(0), calloc(0, n) and realloc(NULL, 0) take raw::malloc's size-0 path, which once
 * served them from the 8-byte class, so that every other such block was only 8-aligned. */
static void zero_size_alignment(void) {
    for (int i = 0; i < 8; i++) {
        void *p = malloc(0);
        void *c = calloc(0, 1);
        void *r = realloc(NULL, 0);
        CHECK(p != NULL && c != NULL && r != NULL);
        CHECK(aligned(p, 16));
        CHECK(aligned(c, 16));
        CHECK(aligned(r, 16));
    }
}

int main(void) {
    const char *(*version)(void) = (const char *(*)(void))dlsym(RTLD_DEFAULT, "pitlane_malloc_version");
    if (version == NULL) {
        fprintf(stderr, "pitlane-malloc is not the malloc in use\n");
        return 2;
    }
    make_sizes();
    malloc_boundaries();
    aligned_boundaries_and_realloc();
    null_zero_and_overflow();
    free_keeps_errno();
    exit_race();
    zero_size_alignment();
    printf("ok %d checks (%s)\n", checks, version());
    return 0;
}
