#ifndef HG_CLINUX_SHIM_H
#define HG_CLINUX_SHIM_H
/* Linux calls the Swift Glibc module does not carry. Header only: nothing to link. */
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <string.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <malloc.h>

/* At most n malloc arenas: glibc's default (8 per core) lets every HTTP and sink thread keep
   a heap of its own, and a big request's memory then stays spread over them. */
static inline void hg_limit_malloc_arenas(int n) { mallopt(M_ARENA_MAX, n); }

/* Keeps up to `trim` bytes freed at the heap's top for the next allocations instead of giving
   them back on every free, and takes blocks below `mmap` bytes from the heap: a drain's batch
   of records is freed whole and allocated again a moment later, and glibc's default hands its
   pages back and faults them in anew each time. Memory goes back to the system where the
   callers of hg_give_back_memory say (idle, after big requests). */
static inline void hg_keep_freed_memory(int trim, int mmap) {
    mallopt(M_TRIM_THRESHOLD, trim);
    mallopt(M_MMAP_THRESHOLD, mmap);
}

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
/* The user id of the process at the other end of a Unix socket, or -1. (struct ucred needs
   _GNU_SOURCE, which would make these headers differ from the Glibc module's: same layout here.) */
static inline long hg_peer_uid(int fd) {
    struct { int pid; unsigned uid; unsigned gid; } c;
    socklen_t n = sizeof c;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &c, &n) != 0) return -1;
    return (long)c.uid;
}

/* A Unix stream socket bound (listen = 1) or connected (listen = 0) to `path`; -1 with errno
   set, ENAMETOOLONG for a path longer than sockaddr_un holds. */
static inline int hg_unix_socket(const char *path, int listen_) {
    struct sockaddr_un a;
    memset(&a, 0, sizeof a);
    a.sun_family = AF_UNIX;
    if (strlen(path) >= sizeof a.sun_path) { errno = ENAMETOOLONG; return -1; }
    strcpy(a.sun_path, path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    int rc = listen_ ? bind(fd, (struct sockaddr *)&a, sizeof a) : connect(fd, (struct sockaddr *)&a, sizeof a);
    if (rc == 0 && listen_) rc = listen(fd, 8);
    if (rc != 0) { int e = errno; close(fd); errno = e; return -1; }
    return fd;
}

/* accept(2) of a connection, close-on-exec. */
static inline int hg_accept(int fd) {
    int c = accept(fd, NULL, NULL);
    if (c >= 0) fcntl(c, F_SETFD, FD_CLOEXEC);
    return c;
}

#endif
