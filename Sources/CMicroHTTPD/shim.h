#ifndef HG_CMHD_SHIM_H
#define HG_CMHD_SHIM_H
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <stdarg.h>
#include <stdio.h>
#include <microhttpd.h>

/* libmicrohttpd's own messages, formatted here (Swift cannot take a va_list callback) and
   handed to `sink` as one line. */
typedef void (*hg_mhd_log_sink)(const char *message);

static void hg_mhd_log_trampoline(void *cls, const char *fmt, va_list ap) {
    char buf[512];
    vsnprintf(buf, sizeof buf, fmt, ap);
    if (cls) ((hg_mhd_log_sink)cls)(buf);
}

/* MHD_start_daemon is variadic and so not imported into Swift: this typed wrapper builds the options.
   bind_host: an IPv4 or IPv6 literal ("0.0.0.0", "127.0.0.1", "::"); port 0 picks a free port.
   key_pem/cert_pem: both NULL for plain HTTP. Returns NULL when the daemon cannot start
   (errno tells why, e.g. EADDRINUSE). */
static inline struct MHD_Daemon *hg_mhd_start(const char *bind_host, uint16_t port,
        MHD_AccessHandlerCallback handler, void *handler_cls,
        MHD_RequestCompletedCallback completed, void *completed_cls,
        unsigned pool_size, unsigned conn_limit, unsigned timeout_s, size_t conn_memory_limit,
        const char *key_pem, const char *cert_pem, hg_mhd_log_sink log_sink,
        MHD_NotifyConnectionCallback notify, void *notify_cls, int listen_fd) {
    struct sockaddr_in a4;
    struct sockaddr *sa = NULL;
    /* ITC: so that MHD_quiesce_daemon can stop the listening at shutdown while requests finish.
       Suspend and resume: a whole request is answered on a worker thread (RequestWorkers). */
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_ERROR_LOG | MHD_USE_ITC | MHD_ALLOW_SUSPEND_RESUME;
    memset(&a4, 0, sizeof a4);
    struct sockaddr_in6 v6;
    memset(&v6, 0, sizeof v6);
    if (inet_pton(AF_INET, bind_host, &a4.sin_addr) == 1) {
        a4.sin_family = AF_INET; a4.sin_port = htons(port); sa = (struct sockaddr *)&a4;
    } else if (inet_pton(AF_INET6, bind_host, &v6.sin6_addr) == 1) {
        v6.sin6_family = AF_INET6; v6.sin6_port = htons(port); sa = (struct sockaddr *)&v6;
        flags |= MHD_USE_IPv6;
    } else {
        return NULL;
    }
    if (key_pem && cert_pem) flags |= MHD_USE_TLS;
    struct MHD_OptionItem ops[14];
    int n = 0;
    if (log_sink) ops[n++] = (struct MHD_OptionItem){ MHD_OPTION_EXTERNAL_LOGGER, (intptr_t)&hg_mhd_log_trampoline, (void *)log_sink };
    /* A socket handed over by a daemon that was quiesced (a TLS reload): its backlog goes on. */
    if (listen_fd >= 0) ops[n++] = (struct MHD_OptionItem){ MHD_OPTION_LISTEN_SOCKET, listen_fd, NULL };
    else ops[n++] = (struct MHD_OptionItem){ MHD_OPTION_SOCK_ADDR, 0, sa };
    ops[n++] = (struct MHD_OptionItem){ MHD_OPTION_NOTIFY_COMPLETED, (intptr_t)completed, completed_cls };
    ops[n++] = (struct MHD_OptionItem){ MHD_OPTION_THREAD_POOL_SIZE, pool_size, NULL };
    ops[n++] = (struct MHD_OptionItem){ MHD_OPTION_CONNECTION_LIMIT, conn_limit, NULL };
    ops[n++] = (struct MHD_OptionItem){ MHD_OPTION_CONNECTION_TIMEOUT, timeout_s, NULL };
    ops[n++] = (struct MHD_OptionItem){ MHD_OPTION_CONNECTION_MEMORY_LIMIT, (intptr_t)conn_memory_limit, NULL };
    if (notify) ops[n++] = (struct MHD_OptionItem){ MHD_OPTION_NOTIFY_CONNECTION, (intptr_t)notify, notify_cls };
    if (key_pem && cert_pem) {
        ops[n++] = (struct MHD_OptionItem){ MHD_OPTION_HTTPS_MEM_KEY, 0, (void *)key_pem };
        ops[n++] = (struct MHD_OptionItem){ MHD_OPTION_HTTPS_MEM_CERT, 0, (void *)cert_pem };
    }
    ops[n++] = (struct MHD_OptionItem){ MHD_OPTION_END, 0, NULL };
    return MHD_start_daemon(flags, port, NULL, NULL, handler, handler_cls, MHD_OPTION_ARRAY, ops, MHD_OPTION_END);
}

/* Connections open on the calling libmicrohttpd thread, after adding `delta` (its notify
   callback runs on the thread that owns the connection, as do its requests). */
static inline int hg_thread_connections(int delta) {
    static __thread int open_here = 0;
    open_here += delta;
    return open_here;
}

/* The port the daemon listens on (after port 0). */
static inline uint16_t hg_mhd_port(struct MHD_Daemon *d) {
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
    return info ? info->port : 0;
}

/* The size of the request line and headers (through the blank line), or 0 before they are in. */
static inline size_t hg_mhd_header_size(struct MHD_Connection *c) {
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(c, MHD_CONNECTION_INFO_REQUEST_HEADER_SIZE);
    return info ? info->header_size : 0;
}

/* What the connection-notify callback stored for the connection, or NULL. */
static inline void *hg_mhd_socket_context(struct MHD_Connection *c) {
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return info ? info->socket_context : NULL;
}

/* The connection's socket, or -1. */
static inline int hg_mhd_connection_fd(struct MHD_Connection *c) {
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    return info ? info->connect_fd : -1;
}

/* Whether the connection came over TLS, and the client's address as text. */
static inline int hg_mhd_client_address(struct MHD_Connection *c, char *buf, size_t len) {
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    if (!info || !info->client_addr) return 0;
    const struct sockaddr *sa = info->client_addr;
    if (sa->sa_family == AF_INET)
        return inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, buf, (socklen_t)len) != NULL;
    if (sa->sa_family == AF_INET6)
        return inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, buf, (socklen_t)len) != NULL;
    return 0;
}
#endif
