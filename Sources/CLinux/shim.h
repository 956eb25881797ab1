#ifndef HG_CLINUX_SHIM_H
#define HG_CLINUX_SHIM_H
/* Linux calls the Swift Glibc module does not carry. Header only: nothing to link. */
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Lowers the calling thread's CPU priority by `n` nice steps, once per thread (unprivileged). */
static inline void hg_nice_this_thread_once(int n) {
    static __thread int done = 0;
    if (!done) {
        done = 1;
        setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), n);
    }
}
#endif
