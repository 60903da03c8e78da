/* Every export of pitlane-malloc and its error cases, as a C program sees them.
 *
 * Built by tests/c_programs.rs twice: linked against libpitlane_malloc (so that the symbols
 * resolve to it at link time), and plain (run with LD_PRELOAD). Either way it first checks
 * that pitlane-malloc really is the malloc in use (its marker symbol), so that a run on
 * glibc's malloc cannot pass by accident. Prints "ok <n> checks" and exits 0, or names the
 * first failed check and exits 1. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

#include "../../include/pitlane_malloc.h"

#include "check.h"

/* Reached through dlsym: glibc no longer declares cfree, and pvalloc/valloc may be
 * deprecated in its headers. */
typedef void (*free_fn)(void *);

static void malloc_and_free(void) {
    /* malloc(0): a unique, non-null pointer that free accepts. */
    void *a = malloc(0), *b = malloc(0);
    CHECK(a != NULL && b != NULL && a != b);
    free(a);
    free(b);
    free(NULL);

    /* Every size up to a few pages, written and checked. */
    for (size_t size = 1; size <= 20000; size += size < 256 ? 1 : 97) {
        unsigned char *p = malloc(size);
        CHECK(p != NULL);
        CHECK(aligned(p, size % 16 == 0 ? 16 : 8));
        CHECK(malloc_usable_size(p) >= size);
        fill(p, size, (unsigned)size);
        CHECK(filled(p, size, (unsigned)size));
        free(p);
    }
    /* Large blocks, mapped directly. */
    for (size_t size = 1 << 20; size <= (64u << 20); size *= 4) {
        unsigned char *p = malloc(size);
        CHECK(p != NULL);
        p[0] = 1;
        p[size - 1] = 2;
        CHECK(malloc_usable_size(p) >= size);
        free(p);
    }
    CHECK(malloc_usable_size(NULL) == 0);

    /* Failures: NULL and ENOMEM, never a crash. */
    errno = 0;
    CHECK(malloc(SIZE_MAX) == NULL && errno == ENOMEM);
    errno = 0;
    CHECK(malloc((size_t)PTRDIFF_MAX + 1) == NULL && errno == ENOMEM);
    errno = 0;
    CHECK(malloc((size_t)PTRDIFF_MAX - 4096) == NULL && errno == ENOMEM);

    /* free keeps errno. */
    void *p = malloc(100);
    errno = 1234;
    free(p);
    CHECK(errno == 1234);
    p = malloc(1 << 22);
    errno = 4321;
    free(p);
    CHECK(errno == 4321);
}

static void calloc_cases(void) {
    for (size_t n = 1; n < 5000; n = n * 3 + 1) {
        unsigned char *p = calloc(n, 7);
        CHECK(p != NULL);
        for (size_t i = 0; i < n * 7; i++) CHECK(p[i] == 0);
        /* Dirty it, so that a recycled block must be zeroed again. */
        memset(p, 0xAB, n * 7);
        free(p);
    }
    unsigned char *big = calloc(1, 8 << 20);
    CHECK(big != NULL && big[0] == 0 && big[(8 << 20) - 1] == 0);
    free(big);
    void *z = calloc(0, 0);
    CHECK(z != NULL);
    free(z);
    /* Overflow of n * size: NULL and ENOMEM. */
    errno = 0;
    CHECK(calloc(SIZE_MAX / 2, 3) == NULL && errno == ENOMEM);
    errno = 0;
    CHECK(calloc((size_t)1 << 33, (size_t)1 << 33) == NULL && errno == ENOMEM);
}

static void realloc_cases(void) {
    /* realloc(NULL, n) is malloc. */
    unsigned char *p = realloc(NULL, 10);
    CHECK(p != NULL);
    fill(p, 10, 5);
    /* Growing and shrinking keep the contents, in place or not. */
    size_t size = 10;
    for (size_t next = 11; next < (4u << 20); next = next * 2 + 3) {
        p = realloc(p, next);
        CHECK(p != NULL);
        CHECK(filled(p, size, 5));
        fill(p, next, 5);
        size = next;
    }
    for (size_t next = size / 3; next > 0; next /= 3) {
        p = realloc(p, next);
        CHECK(p != NULL);
        CHECK(filled(p, next, 5));
        size = next;
    }
    /* A failed realloc leaves the block untouched and sets ENOMEM. */
    errno = 0;
    CHECK(realloc(p, SIZE_MAX) == NULL && errno == ENOMEM);
    CHECK(filled(p, size, 5));
    free(p);
    /* realloc(p, 0) frees p and returns NULL, as glibc's does. */
    p = malloc(50);
    CHECK(realloc(p, 0) == NULL);

    /* reallocarray: overflow-checked. */
    int *a = reallocarray(NULL, 100, sizeof(int));
    CHECK(a != NULL);
    for (int i = 0; i < 100; i++) a[i] = i;
    a = reallocarray(a, 1000, sizeof(int));
    CHECK(a != NULL);
    for (int i = 0; i < 100; i++) CHECK(a[i] == i);
    errno = 0;
    CHECK(reallocarray(a, SIZE_MAX / 2, 4) == NULL && errno == ENOMEM);
    CHECK(a[99] == 99);
    free(a);
}

static void aligned_cases(void) {
    long page = sysconf(_SC_PAGESIZE);
    for (size_t align = 1; align <= ((size_t)4 << 20); align *= 2) {
        for (size_t size = 1; size <= 3 * align && size < (16u << 20); size = size * 5 + 1) {
            void *p = aligned_alloc(align, size);
            CHECK(p != NULL && aligned(p, align));
            memset(p, 1, size);
            CHECK(malloc_usable_size(p) >= size);
            free(p);

            p = memalign(align, size);
            CHECK(p != NULL && aligned(p, align));
            free(p);

            if (align >= sizeof(void *)) {
                void *q = (void *)0x1;
                CHECK(posix_memalign(&q, align, size) == 0);
                CHECK(q != NULL && aligned(q, align));
                memset(q, 2, size);
                free(q);
            }
        }
    }
    /* aligned_alloc with a bad alignment: NULL and EINVAL. */
    errno = 0;
    CHECK(aligned_alloc(3, 16) == NULL && errno == EINVAL);
    errno = 0;
    CHECK(aligned_alloc(64, SIZE_MAX) == NULL && errno == ENOMEM);

    /* memalign, as glibc's: any alignment, rounded up to a power of two (0: malloc's). */
    {
        static const size_t odd[] = {0, 3, 24, 48, 100, 4095, 4097, 3 << 20};
        for (size_t i = 0; i < sizeof odd / sizeof odd[0]; i++) {
            size_t want = 1;
            while (want < odd[i]) want <<= 1;
            void *m = memalign(odd[i], 100);
            CHECK(m != NULL && aligned(m, want));
            memset(m, 0x5a, 100);
            free(m);
        }
        errno = 0;
        CHECK(memalign(SIZE_MAX / 2 + 2, 16) == NULL && errno == EINVAL);
    }

    /* posix_memalign: EINVAL for a bad alignment, ENOMEM when too big; *p untouched. */
    /* errno is left alone too, also when the failure comes from the OS refusing a mapping
     * (the last two). */
    void *q = (void *)0x1234;
    errno = 777;
    CHECK(posix_memalign(&q, 3, 16) == EINVAL && q == (void *)0x1234);
    CHECK(posix_memalign(&q, sizeof(void *) / 2, 16) == EINVAL && q == (void *)0x1234);
    CHECK(posix_memalign(&q, 0, 16) == EINVAL && q == (void *)0x1234);
    CHECK(posix_memalign(&q, 24, 16) == EINVAL && q == (void *)0x1234);
    CHECK(posix_memalign(&q, 64, SIZE_MAX) == ENOMEM && q == (void *)0x1234);
    CHECK(errno == 777);
    CHECK(posix_memalign(&q, (size_t)1 << 62, 16) == ENOMEM && q == (void *)0x1234);
    CHECK(errno == 777);
    CHECK(posix_memalign(&q, 64, (size_t)PTRDIFF_MAX - (1 << 20)) == ENOMEM && q == (void *)0x1234);
    CHECK(errno == 777);
    /* posix_memalign(&p, align, 0): a pointer free accepts. */
    CHECK(posix_memalign(&q, 64, 0) == 0);
    free(q);

    /* valloc and pvalloc: page-aligned; pvalloc rounds the size up to a page. */
    void *(*valloc_fn)(size_t) = (void *(*)(size_t))dlsym(RTLD_DEFAULT, "valloc");
    void *(*pvalloc_fn)(size_t) = (void *(*)(size_t))dlsym(RTLD_DEFAULT, "pvalloc");
    CHECK(valloc_fn != NULL && pvalloc_fn != NULL);
    void *v = valloc_fn(10);
    CHECK(v != NULL && aligned(v, (size_t)page));
    free(v);
    v = pvalloc_fn(10);
    CHECK(v != NULL && aligned(v, (size_t)page));
    CHECK(malloc_usable_size(v) >= (size_t)page);
    memset(v, 3, (size_t)page);
    free(v);
    errno = 0;
    CHECK(pvalloc_fn(SIZE_MAX - 10) == NULL && errno == ENOMEM);
}

static void cfree_case(void) {
    free_fn cfree_fn = (free_fn)dlsym(RTLD_DEFAULT, "cfree");
    CHECK(cfree_fn != NULL);
    void *p = malloc(33);
    cfree_fn(p);
    cfree_fn(NULL);
}

/* C23's sized frees (glibc 2.36 declares neither). */
typedef void (*free_sized_fn)(void *, size_t);
typedef void (*free_aligned_sized_fn)(void *, size_t, size_t);
static void sized_free_case(void) {
    free_sized_fn sized = (free_sized_fn)dlsym(RTLD_DEFAULT, "free_sized");
    free_aligned_sized_fn aligned = (free_aligned_sized_fn)dlsym(RTLD_DEFAULT, "free_aligned_sized");
    CHECK(sized != NULL && aligned != NULL);
    for (size_t n = 1; n <= (1u << 20); n *= 4) {
        char *p = malloc(n);
        CHECK(p != NULL);
        memset(p, 1, n);
        sized(p, n);
        char *q = aligned_alloc(256, n);
        CHECK(q != NULL && ((uintptr_t)q & 255) == 0);
        memset(q, 2, n);
        aligned(q, 256, n);
    }
    sized(NULL, 0);
    aligned(NULL, 64, 0);
}

/* Blocks allocated by one thread and freed by another, in both directions. */
#define HANDED 20000
static void *handed[HANDED];

static void *allocate_all(void *arg) {
    (void)arg;
    for (int i = 0; i < HANDED; i++) {
        handed[i] = malloc((size_t)(i % 700) + 1);
        fill(handed[i], (size_t)(i % 700) + 1, (unsigned)i);
    }
    return NULL;
}

static void *free_all(void *arg) {
    (void)arg;
    for (int i = 0; i < HANDED; i++) {
        if (!filled(handed[i], (size_t)(i % 700) + 1, (unsigned)i)) return (void *)1;
        free(handed[i]);
    }
    return NULL;
}

static void threads_case(void) {
    for (int round = 0; round < 4; round++) {
        pthread_t t;
        void *result;
        CHECK(pthread_create(&t, NULL, allocate_all, NULL) == 0);
        CHECK(pthread_join(t, NULL) == 0);
        /* The allocating thread has exited: its blocks are freed here, or by another one. */
        if (round % 2 == 0) {
            CHECK(free_all(NULL) == NULL);
        } else {
            CHECK(pthread_create(&t, NULL, free_all, NULL) == 0);
            CHECK(pthread_join(t, &result) == 0 && result == NULL);
        }
    }
}

static void fork_case(void) {
    void *kept = malloc(1000);
    fill(kept, 1000, 9);
    pthread_t t;
    CHECK(pthread_create(&t, NULL, allocate_all, NULL) == 0);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        /* The child: its inherited block is intact and the allocator works. */
        int ok = filled(kept, 1000, 9);
        for (int i = 0; i < 10000 && ok; i++) {
            void *p = malloc((size_t)(i % 5000) + 1);
            ok = p != NULL;
            free(p);
        }
        free(kept);
        _exit(ok ? 0 : 1);
    }
    int status = 0;
    CHECK(waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CHECK(pthread_join(t, NULL) == 0);
    CHECK(free_all(NULL) == NULL);
    free(kept);
}

/* What glibc itself allocates and frees: thread-specific data whose destructor frees at
 * thread exit, dlerror's message buffer, and posix_spawn (its child shares the parent's
 * memory until exec). */
static pthread_key_t key;
static int destructor_runs;

static void free_at_exit(void *value) {
    CHECK(filled(value, 300, 7));
    free(value);
    __atomic_fetch_add(&destructor_runs, 1, __ATOMIC_RELAXED);
}

static void *set_specific(void *arg) {
    (void)arg;
    unsigned char *value = malloc(300);
    fill(value, 300, 7);
    pthread_setspecific(key, value);
    return NULL;
}

static void glibc_internals_case(void) {
    CHECK(pthread_key_create(&key, free_at_exit) == 0);
    for (int i = 0; i < 8; i++) {
        pthread_t t;
        CHECK(pthread_create(&t, NULL, set_specific, NULL) == 0);
        CHECK(pthread_join(t, NULL) == 0);
    }
    CHECK(destructor_runs == 8);
    CHECK(dlsym(RTLD_DEFAULT, "no_such_symbol_in_this_process") == NULL);
    CHECK(dlerror() != NULL);
    pid_t pid;
    char *argv[] = {"true", NULL};
    CHECK(posix_spawnp(&pid, "true", NULL, NULL, argv, environ) == 0);
    int status = 0;
    CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

/* A block freed twice after the first free emptied its page, which went back to the pool:
 * on a thread that then takes the page again and carves the block's address anew, the
 * second free must not come back (published at the thread's exit) as a free block of the
 * page, for the page's next holder to hand out while it is live. */
#define LATE_SIZE 14000 /* the 14,336-byte class: four blocks per 64 KiB page */
static unsigned char *late_live[64];

static void *double_free_after_release(void *arg) {
    (void)arg;
    unsigned char *first[8];
    for (int i = 0; i < 8; i++) first[i] = malloc(LATE_SIZE);
    /* The first four fill one page, which is not the current page of the class: emptied, it
     * goes back to the pool. */
    for (int i = 0; i < 4; i++) free(first[i]);
    free(first[0]); /* the double free */
    for (int i = 0; i < 64; i++) {
        late_live[i] = malloc(LATE_SIZE);
        memset(late_live[i], i + 1, LATE_SIZE);
    }
    for (int i = 4; i < 8; i++) free(first[i]);
    return NULL;
}

static int late_double_free_case(void) {
    pthread_t t;
    CHECK(pthread_create(&t, NULL, double_free_after_release, NULL) == 0);
    CHECK(pthread_join(t, NULL) == 0);
    /* A new thread takes the exited thread's heap over; its blocks must not be live ones. */
    unsigned char *fresh[64];
    for (int i = 0; i < 64; i++) {
        fresh[i] = malloc(LATE_SIZE);
        memset(fresh[i], 0xEE, LATE_SIZE);
    }
    for (int i = 0; i < 64; i++)
        for (size_t k = 0; k < LATE_SIZE; k += 1000)
            if (late_live[i][k] != (unsigned char)(i + 1)) {
                fprintf(stderr, "late double free: live block %d overwritten\n", i);
                return 1;
            }
    for (int i = 0; i < 64; i++) {
        free(late_live[i]);
        free(fresh[i]);
    }
    return 0;
}

/* A block freed twice in a row by a thread other than its owner's: the second free must
 * not link the block to itself in the freeing thread's batch of remote frees (a cycle
 * that the owner would hand out again and again, or walk forever). SIGALRM ends a hang. */
static unsigned char *remote_victim;

static void *free_twice_remotely(void *arg) {
    (void)arg;
    free(remote_victim);
    free(remote_victim);
    return NULL; /* the thread's exit publishes its batch */
}

static int remote_double_free_case(void) {
    alarm(20);
    /* The 7,168-byte class, which nothing else here uses: the victim is alone in its page. */
    remote_victim = malloc(7000);
    pthread_t t;
    CHECK(pthread_create(&t, NULL, free_twice_remotely, NULL) == 0);
    CHECK(pthread_join(t, NULL) == 0);
    /* The owner's next blocks of the class take the victim back once, then new ones. */
    enum { N = 40 };
    unsigned char *mine[N];
    for (int i = 0; i < N; i++) {
        mine[i] = malloc(7000);
        memset(mine[i], i + 1, 7000);
    }
    for (int i = 0; i < N; i++)
        for (int j = i + 1; j < N; j++)
            if (mine[i] == mine[j]) {
                fprintf(stderr, "remote double free: a block handed out twice\n");
                return 1;
            }
    for (int i = 0; i < N; i++) free(mine[i]);
    alarm(0);
    return 0;
}

/* `api foreign`: frees pointers this allocator never handed out (undefined behaviour in C,
 * which the library must survive): it reports on stderr and the program goes on. */
static int foreign_case(void) {
    /* 64-byte aligned, not page-aligned: the header check reads the zeros before it. */
    static char not_from_malloc[8192] __attribute__((aligned(4096)));
    /* The report names this pointer (the test compares). */
    printf("foreign %p\n", (void *)(not_from_malloc + 128));
    fflush(stdout);
    free(not_from_malloc + 128);
    char on_stack[100];
    free(on_stack + 8);
    /* realloc of a foreign pointer: null and ENOMEM, the block left as it was (reported). */
    not_from_malloc[512] = 42;
    errno = 0;
    CHECK(realloc(not_from_malloc + 512, 4000) == NULL && errno == ENOMEM);
    CHECK(not_from_malloc[512] == 42);
    void *fine = malloc(10);
    free(fine);
    /* A large block freed twice: its mapping is kept for reuse, so its header is still
     * readable at the second free, which must be refused (it is not a live block any more),
     * never put the mapping in the cache twice: two later blocks would share it. */
    void *twice = malloc(100000);
    free(twice);
    free(twice);
    unsigned char *x = malloc(100000), *y = malloc(100000);
    CHECK(x != NULL && y != NULL && x != y);
    memset(x, 1, 100000);
    memset(y, 2, 100000);
    CHECK(x[99999] == 1);
    free(x);
    free(y);
    /* A small block freed twice in a row (still at the head of its page's free list): the
     * second free is refused; before, the block was linked to itself, and every later
     * malloc of its size class on this thread returned it. */
    unsigned char *small_twice = malloc(24);
    free(small_twice);
    free(small_twice);
    unsigned char *s1 = malloc(24), *s2 = malloc(24), *s3 = malloc(24);
    CHECK(s1 != NULL && s2 != NULL && s3 != NULL && s1 != s2 && s2 != s3 && s1 != s3);
    free(s1);
    free(s2);
    free(s3);
    /* The same with a page-aligned large block (its header lies in the OS page before it). */
    void *twice_aligned = aligned_alloc(4096, 100000);
    free(twice_aligned);
    free(twice_aligned);
    x = aligned_alloc(4096, 100000);
    y = aligned_alloc(4096, 100000);
    CHECK(x != NULL && y != NULL && x != y);
    free(x);
    free(y);
    CHECK(late_double_free_case() == 0);
    CHECK(remote_double_free_case() == 0);
    printf("survived\n");
    return 0;
}

int main(int argc, char **argv) {
    /* The marker: the allocator in use is pitlane-malloc. */
    const char *(*version)(void) = (const char *(*)(void))dlsym(RTLD_DEFAULT, "pitlane_malloc_version");
    if (version == NULL) {
        /* Declared by pitlane_malloc.h; reached through dlsym so that the program also runs
         * (and refuses, with exit code 2) without the library. */
        fprintf(stderr, "pitlane-malloc is not the malloc in use\n");
        return 2;
    }
    if (argc > 1 && strcmp(argv[1], "foreign") == 0) return foreign_case();
    malloc_and_free();
    calloc_cases();
    realloc_cases();
    aligned_cases();
    cfree_case();
    sized_free_case();
    threads_case();
    fork_case();
    glibc_internals_case();
    printf("ok %d checks (%s)\n", checks, version());
    return 0;
}
