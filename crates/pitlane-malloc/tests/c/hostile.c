/* Hostile uses of the C interface, run preloaded by tests/c_programs.rs, one scenario
 * per process (the first argument names it), each under a deadline. Prints "ok <n> checks
 * (pitlane-malloc ...)" and exits 0, or names the failed check and exits 1.
 *
 * - first-malloc-under-limit: the process's very first malloc (the allocator's
 *   initialisation) made under an address-space limit (RLIMIT_AS) with no room for a
 *   segment: NULL and ENOMEM, never an abort; once the limit is lifted, everything works.
 * - freed-memory-serves-again: under an address-space limit, large blocks filling it are
 *   freed, and then a block as large as most of them together, and small blocks needing a
 *   new segment, are asked for: served (as glibc serves them), not refused because the
 *   allocator keeps the freed mappings cached for reuse.
 * - fork-while-allocating: fork (and posix_spawn, system) while four threads allocate,
 *   reallocate and free blocks of every kind; each child must malloc, free, realloc,
 *   memalign and start a thread that allocates (a lock left held by the fork hangs it).
 * - thread-churn: thousands of threads, one after another, each freeing the blocks the
 *   previous one allocated (so blocks are freed by a thread created after their allocator
 *   exited), freeing some from a pthread key destructor, and exiting while another thread
 *   frees its blocks; the address space the process uses must stop growing.
 * - invalid-arguments: valloc/pvalloc edge sizes and malloc_usable_size of every kind of
 *   block, as glibc answers them.
 * - atfork-handlers-allocate: the program registers pthread_atfork handlers before its
 *   first malloc (so before the allocator's own initialisation), and each handler, the
 *   prepare one included, allocates and frees small and large blocks: glibc takes its
 *   malloc's locks after every prepare handler and releases them before every parent and
 *   child handler, so these run with a working malloc; a fork must not deadlock. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"

extern char **environ;

/* Reached through dlsym: glibc may not declare them. */
typedef void *(*alloc_fn)(size_t);

/* A field of /proc/self/status in kB, read without allocating. */
static unsigned long status_kib(const char *field) {
    char buf[8192];
    int fd = open("/proc/self/status", O_RDONLY);
    if (fd < 0) return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    buf[n > 0 ? n : 0] = 0;
    char *at = strstr(buf, field);
    return at ? strtoul(at + strlen(field), NULL, 10) : 0;
}

static void limit_address_space(unsigned long headroom_kib) {
    struct rlimit limit = {(status_kib("VmSize:") + headroom_kib) * 1024, RLIM_INFINITY};
    CHECK(setrlimit(RLIMIT_AS, &limit) == 0);
}

static void lift_limit(void) {
    struct rlimit limit = {RLIM_INFINITY, RLIM_INFINITY};
    CHECK(setrlimit(RLIMIT_AS, &limit) == 0);
}

static const char *version(void) {
    const char *(*f)(void) = (const char *(*)(void))dlsym(RTLD_DEFAULT, "pitlane_malloc_version");
    return f ? f() : NULL;
}

/* ---- first-malloc-under-limit ------------------------------------------------------- */

static void *allocate_some(void *arg) {
    (void)arg;
    for (int i = 0; i < 2000; i++) {
        unsigned char *p = malloc((size_t)(i * 97) % 20000 + 1);
        if (p == NULL) return (void *)1;
        p[0] = 1;
        free(p);
    }
    return NULL;
}

static void first_malloc_under_limit(void) {
    /* Nothing before this has called malloc (no stdio yet): this is the initialisation. A
     * megabyte of headroom: glibc's heap serves it, a segment (4 MiB) does not fit. */
    limit_address_space(1024);
    errno = 0;
    void *p = malloc(16);
    int e = errno;
    /* Either served, or refused cleanly: the process is still here to tell. */
    CHECK(p != NULL || e == ENOMEM);
    free(p);
    lift_limit();
    /* The allocator works once memory is there again, on this thread and others. */
    for (int i = 0; i < 1000; i++) {
        unsigned char *q = malloc((size_t)(i * 131) % 300000 + 1);
        CHECK(q != NULL);
        q[0] = 2;
        free(q);
    }
    pthread_t threads[4];
    for (int i = 0; i < 4; i++) CHECK(pthread_create(&threads[i], NULL, allocate_some, NULL) == 0);
    for (int i = 0; i < 4; i++) {
        void *result = (void *)2;
        CHECK(pthread_join(threads[i], &result) == 0 && result == NULL);
    }
}

/* ---- freed-memory-serves-again ------------------------------------------------------ */

static void freed_memory_serves_again(void) {
    free(malloc(10));
    enum { MAX = 4096 };
    static unsigned char *blocks[MAX];
    const size_t size = 300 * 1024;
    limit_address_space(48 * 1024);
    int n = 0;
    while (n < MAX && (blocks[n] = malloc(size)) != NULL) {
        memset(blocks[n], n, size);
        n++;
    }
    CHECK(n > 32 && n < MAX); /* the limit was reached */
    for (int i = 0; i < n; i++) {
        CHECK(blocks[i][size - 1] == (unsigned char)i);
        free(blocks[i]);
    }
    /* Everything is free again: a block of half what was there fits, as under glibc, also
     * aligned to a megabyte (a mapping of its own, never one from the cache). */
    unsigned char *big = memalign(1 << 20, (size_t)n * size / 2);
    CHECK(big != NULL && aligned(big, 1 << 20));
    memset(big, 6, (size_t)n * size / 2);
    free(big);
    big = malloc((size_t)n * size / 2);
    CHECK(big != NULL);
    memset(big, 7, (size_t)n * size / 2);
    free(big);
    for (int i = 0; i < n; i++) blocks[i] = malloc(size);
    for (int i = 0; i < n; i++) free(blocks[i]);
    /* And small blocks of every class, which need pages from a new segment. */
    static unsigned char *small[MAX / 4];
    for (int i = 0; i < MAX / 4; i++) {
        small[i] = malloc((size_t)(i % 40 + 1) * 400);
        CHECK(small[i] != NULL);
    }
    for (int i = 0; i < MAX / 4; i++) free(small[i]);
    lift_limit();
}

/* ---- fork-while-allocating ---------------------------------------------------------- */

static volatile int stop;

static void *churn(void *arg) {
    unsigned seed = (unsigned)(uintptr_t)arg;
    enum { SLOTS = 64 };
    unsigned char *slots[SLOTS] = {0};
    size_t sizes[SLOTS] = {0};
    while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
        seed = seed * 1103515245u + 12345u;
        unsigned i = (seed >> 8) % SLOTS;
        size_t n = (seed >> 3) % 7 == 0 ? 20000 + (seed >> 12) % 600000 : 1 + (seed >> 12) % 3000;
        if (slots[i] == NULL) {
            slots[i] = (seed & 1) ? malloc(n) : memalign((size_t)16 << ((seed >> 20) % 9), n);
            if (slots[i] == NULL) return (void *)1;
            sizes[i] = n;
            fill(slots[i], n, i);
        } else if ((seed >> 4) % 3 == 0) {
            if (!filled(slots[i], sizes[i], i)) return (void *)2;
            unsigned char *r = realloc(slots[i], n);
            if (r == NULL) return (void *)3;
            if (!filled(r, sizes[i] < n ? sizes[i] : n, i)) return (void *)4;
            slots[i] = r;
            sizes[i] = n;
            fill(r, n, i);
        } else {
            if (!filled(slots[i], sizes[i], i)) return (void *)5;
            free(slots[i]);
            slots[i] = NULL;
        }
    }
    for (unsigned i = 0; i < SLOTS; i++) free(slots[i]);
    return NULL;
}

static void *child_thread(void *arg) {
    (void)arg;
    for (int i = 0; i < 5000; i++) {
        void *p = malloc((size_t)(i * 37) % 70000 + 1);
        if (p == NULL) return (void *)1;
        free(p);
    }
    return NULL;
}

static int child_works(void) {
    alarm(20); /* a deadlocked child dies instead of hanging its parent's waitpid */
    for (int i = 0; i < 20000; i++) {
        size_t n = (size_t)(i * 53) % (i % 10 == 0 ? 500000 : 5000) + 1;
        unsigned char *p = i % 3 ? malloc(n) : memalign(64, n);
        if (p == NULL) return 1;
        p[n - 1] = 1;
        unsigned char *r = realloc(p, n * 2);
        if (r == NULL) return 2;
        free(r);
    }
    pthread_t t;
    void *result = (void *)1;
    if (pthread_create(&t, NULL, child_thread, NULL) != 0) return 3;
    if (pthread_join(t, &result) != 0 || result != NULL) return 4;
    return 0;
}

static void fork_while_allocating(void) {
    enum { THREADS = 4 };
    pthread_t threads[THREADS];
    for (int i = 0; i < THREADS; i++)
        CHECK(pthread_create(&threads[i], NULL, churn, (void *)(uintptr_t)(i + 1)) == 0);
    for (int round = 0; round < 40; round++) {
        pid_t pid = fork();
        CHECK(pid >= 0);
        if (pid == 0) _exit(child_works());
        int status = 0;
        CHECK(waitpid(pid, &status, 0) == pid);
        if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0))
            fprintf(stderr, "round %d: child status %#x\n", round, status);
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        if (round % 10 == 0) {
            char *argv[] = {"true", NULL};
            CHECK(posix_spawnp(&pid, "true", NULL, NULL, argv, environ) == 0);
            CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
            CHECK(system("exit 0") == 0);
        }
    }
    __atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
    for (int i = 0; i < THREADS; i++) {
        void *result = (void *)9;
        CHECK(pthread_join(threads[i], &result) == 0);
        CHECK(result == NULL);
    }
}

/* ---- thread-churn ------------------------------------------------------------------- */

enum { HANDED = 64 };
static unsigned char *handed[HANDED];
static pthread_key_t late_key;

static size_t handed_size(int i) { return i % 8 == 7 ? 40000 + (size_t)i * 1000 : (size_t)i * 61 + 1; }

/* Frees, at thread exit, a block the exiting thread allocated. */
static void free_late(void *block) {
    CHECK(filled(block, 500, 3));
    free(block);
}

static void *generation(void *arg) {
    unsigned gen = (unsigned)(uintptr_t)arg;
    /* The previous generation's blocks: it has exited. */
    for (int i = 0; i < HANDED; i++) {
        if (handed[i] != NULL) {
            if (!filled(handed[i], handed_size(i), gen - 1 + i)) return (void *)1;
            free(handed[i]);
        }
        handed[i] = malloc(handed_size(i));
        if (handed[i] == NULL) return (void *)2;
        fill(handed[i], handed_size(i), gen + i);
    }
    unsigned char *late = malloc(500);
    if (late == NULL) return (void *)3;
    fill(late, 500, 3);
    pthread_setspecific(late_key, late);
    /* Blocks of its own, left to the next thread to free while this one exits. */
    return NULL;
}

static void thread_churn(void) {
    CHECK(pthread_key_create(&late_key, free_late) == 0);
    unsigned gen = 1;
    unsigned long warm = 0;
    for (int wave = 0; wave < 6; wave++) {
        for (int i = 0; i < 500; i++, gen++) {
            pthread_t t;
            void *result = (void *)9;
            CHECK(pthread_create(&t, NULL, generation, (void *)(uintptr_t)gen) == 0);
            CHECK(pthread_join(t, &result) == 0 && result == NULL);
        }
        unsigned long now = status_kib("VmSize:");
        if (wave == 1) warm = now;
        /* After the first thousand threads, what the process maps stays put (a heap or a
         * page kept per exited thread would add at least 64 KiB a thread: 30 MiB here). */
        if (wave > 1 && now > warm + 8 * 1024)
            fprintf(stderr, "wave %d: VmSize %lu kB, %lu kB after the warm-up\n", wave, now, warm);
        if (wave > 1) CHECK(now <= warm + 8 * 1024);
    }
    for (int i = 0; i < HANDED; i++) free(handed[i]);
}

/* ---- invalid-arguments -------------------------------------------------------------- */

static void invalid_arguments(void) {
    long page = sysconf(_SC_PAGESIZE);
    alloc_fn valloc_fn = (alloc_fn)dlsym(RTLD_DEFAULT, "valloc");
    alloc_fn pvalloc_fn = (alloc_fn)dlsym(RTLD_DEFAULT, "pvalloc");
    CHECK(valloc_fn != NULL && pvalloc_fn != NULL);
    size_t huge[] = {SIZE_MAX, SIZE_MAX - (size_t)page, (size_t)PTRDIFF_MAX, (size_t)PTRDIFF_MAX - (size_t)page};
    for (unsigned i = 0; i < sizeof huge / sizeof *huge; i++) {
        errno = 0;
        CHECK(valloc_fn(huge[i]) == NULL && errno == ENOMEM);
        errno = 0;
        CHECK(pvalloc_fn(huge[i]) == NULL && errno == ENOMEM);
        errno = 0;
        CHECK(memalign(4096, huge[i]) == NULL && errno == ENOMEM);
    }
    /* valloc(0) and pvalloc(0): a page-aligned block; pvalloc's holds a whole page. */
    void *v = valloc_fn(0);
    CHECK(v != NULL && aligned(v, (size_t)page));
    free(v);
    v = pvalloc_fn(0);
    CHECK(v != NULL && aligned(v, (size_t)page) && malloc_usable_size(v) >= (size_t)page);
    memset(v, 1, (size_t)page);
    free(v);
    /* malloc_usable_size of every kind of block: at least what was asked, all writable. */
    for (size_t n = 1; n < (4u << 20); n = n * 3 + 5) {
        void *blocks[7];
        blocks[0] = malloc(n);
        blocks[1] = calloc(n, 1);
        blocks[2] = memalign(8192, n);
        blocks[3] = aligned_alloc(1 << 20, n);
        blocks[4] = valloc_fn(n);
        blocks[5] = pvalloc_fn(n);
        blocks[6] = realloc(malloc(1), n);
        for (int k = 0; k < 7; k++) {
            CHECK(blocks[k] != NULL);
            size_t usable = malloc_usable_size(blocks[k]);
            CHECK(usable >= n);
            if (k == 5) CHECK(usable % (size_t)page == 0);
            memset(blocks[k], 0x5a, usable);
            free(blocks[k]);
        }
    }
    CHECK(malloc_usable_size(NULL) == 0);
}

/* ---- atfork-handlers-allocate ------------------------------------------------------ */

static int handler_calls;

/* Small blocks of many classes and large blocks, freed again (so that the next round finds
 * them in the allocator's caches, behind its locks). */
static void allocate_in_handler(void) {
    static void *blocks[96];
    for (int i = 0; i < 96; i++) blocks[i] = malloc(i % 3 ? (size_t)i * 97 + 1 : ((size_t)i + 1) << 15);
    for (int i = 0; i < 96; i++) {
        if (blocks[i] == NULL) _exit(7);
        memset(blocks[i], 0x33, 1);
        free(blocks[i]);
    }
    __atomic_add_fetch(&handler_calls, 1, __ATOMIC_RELAXED);
}

static void *allocate_in_thread(void *arg) {
    allocate_in_handler();
    return arg;
}

static void atfork_handlers_allocate(void) {
    /* Before anything in this process calls malloc. */
    CHECK(pthread_atfork(allocate_in_handler, allocate_in_handler, allocate_in_handler) == 0);
    alarm(20); /* a deadlocked fork ends the process instead of hanging until the deadline */
    pthread_t t;
    CHECK(pthread_create(&t, NULL, allocate_in_thread, NULL) == 0);
    CHECK(pthread_join(t, NULL) == 0);
    for (int round = 0; round < 3; round++) {
        int before = handler_calls;
        pid_t pid = fork();
        CHECK(pid >= 0);
        if (pid == 0) {
            allocate_in_handler();
            _exit(child_works());
        }
        int status = 0;
        CHECK(waitpid(pid, &status, 0) == pid);
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        CHECK(handler_calls == before + 2); /* prepare and parent */
    }
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: hostile SCENARIO\n");
        return 2;
    }
    const char *scenario = argv[1];
    if (strcmp(scenario, "first-malloc-under-limit") == 0) {
        first_malloc_under_limit();
    } else if (strcmp(scenario, "atfork-handlers-allocate") == 0) {
        atfork_handlers_allocate();
    } else {
        if (version() == NULL) {
            fprintf(stderr, "pitlane-malloc is not the malloc in use\n");
            return 2;
        }
        if (strcmp(scenario, "freed-memory-serves-again") == 0) {
            freed_memory_serves_again();
        } else if (strcmp(scenario, "fork-while-allocating") == 0) {
            fork_while_allocating();
        } else if (strcmp(scenario, "thread-churn") == 0) {
            thread_churn();
        } else if (strcmp(scenario, "invalid-arguments") == 0) {
            invalid_arguments();
        } else {
            fprintf(stderr, "unknown scenario %s\n", scenario);
            return 2;
        }
    }
    const char *v = version();
    if (v == NULL) {
        fprintf(stderr, "pitlane-malloc is not the malloc in use\n");
        return 2;
    }
    printf("ok %d checks (%s)\n", checks, v);
    return 0;
}
