/* pitlane-malloc: pitlane-alloc as the C malloc.
 *
 * Linking the static library (libpitlane_malloc.a) into a program replaces the C library's
 * malloc, free, calloc, realloc, reallocarray, aligned_alloc, posix_memalign, memalign,
 * valloc, pvalloc, malloc_usable_size and cfree, and the C++ operators new and delete, for the
 * whole program: call them as usual, through <stdlib.h> and <malloc.h>. This header adds what
 * is pitlane's own.
 *
 *     cc program.c libpitlane_malloc.a -lpthread -ldl -lm -o program
 *
 * The shared library (libpitlane_malloc.so) does the same for any program, without
 * rebuilding it:
 *
 *     LD_PRELOAD=/path/to/libpitlane_malloc.so program
 *
 * Contracts where the C standard leaves a choice (docs/malloc.md has them all): malloc(0)
 * returns a unique pointer; failures return NULL and set errno to ENOMEM; free never changes
 * errno; realloc(p, 0) frees p and returns NULL, as glibc's does; a block of n bytes is
 * aligned to 16 when n is a multiple of 16 or above 56, to 8 otherwise. */
#ifndef PITLANE_MALLOC_H
#define PITLANE_MALLOC_H

#ifdef __cplusplus
extern "C" {
#endif

/* "pitlane-malloc <version>": a static string. A program can look this symbol up with
 * dlsym(RTLD_DEFAULT, "pitlane_malloc_version") to tell whether pitlane-malloc is the malloc
 * it runs on. */
const char *pitlane_malloc_version(void);

#ifdef __cplusplus
}
#endif

#endif /* PITLANE_MALLOC_H */
