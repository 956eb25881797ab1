#ifndef HG_CLINUX_SHIM_H
#define HG_CLINUX_SHIM_H
/* Linux calls the Swift Glibc module does not carry. Header only: nothing to link. */
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <malloc.h>

/* At most n malloc arenas: glibc's default (8 per core) lets every HTTP and sink thread keep
   a heap of its own, and a big request's memory then stays spread over them. */
static inline void hg_limit_malloc_arenas(int n) { mallopt(M_ARENA_MAX, n); }

/* Raises the soft limit on open files toward `wanted` (never past the hard limit). */
static inline void hg_raise_open_files(unsigned long wanted) {
    struct rlimit r;
    if (getrlimit(RLIMIT_NOFILE, &r) != 0 || r.rlim_cur >= wanted) return;
    r.rlim_cur = wanted < r.rlim_max ? wanted : r.rlim_max;
    setrlimit(RLIMIT_NOFILE, &r);
}

/* Gives freed heap memory back to the system (glibc keeps it otherwise). */
static inline void hg_give_back_memory(void) { malloc_trim(0); }

/* Lowers the calling thread's CPU priority by `n` nice steps, once per thread (unprivileged). */
static inline void hg_nice_this_thread_once(int n) {
    static __thread int done = 0;
    if (!done) {
        done = 1;
        setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), n);
    }
}
#endif
