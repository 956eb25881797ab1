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
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>

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
   key_pem/cert_pem: both NULL for plain HTTP. trust_pem: the CAs client certificates must chain
   to (NULL: none asked for). priorities: GnuTLS's priority string (NULL: its default). Returns NULL when the daemon cannot start
   (errno tells why, e.g. EADDRINUSE). */
static inline struct MHD_Daemon *hg_mhd_start(const char *bind_host, uint16_t port,
        MHD_AccessHandlerCallback handler, void *handler_cls,
        MHD_RequestCompletedCallback completed, void *completed_cls,
        unsigned pool_size, unsigned conn_limit, unsigned timeout_s, size_t conn_memory_limit,
        const char *key_pem, const char *cert_pem, const char *trust_pem, const char *priorities,
        hg_mhd_log_sink log_sink,
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
    struct MHD_OptionItem ops[16];
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
        if (trust_pem) ops[n++] = (struct MHD_OptionItem){ MHD_OPTION_HTTPS_MEM_TRUST, 0, (void *)trust_pem };
        if (priorities) ops[n++] = (struct MHD_OptionItem){ MHD_OPTION_HTTPS_PRIORITIES, 0, (void *)priorities };
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

/* The handshake's own check of a client certificate: it chains to the trusted CAs, is within its
   dates, and may be used for TLS client auth. */
static int hg_tls_verify_client(gnutls_session_t s) {
    gnutls_typed_vdata_st purpose[1] = {{GNUTLS_DT_KEY_PURPOSE_OID, (unsigned char *)GNUTLS_KP_TLS_WWW_CLIENT, 0}};
    unsigned status = 0;
    if (gnutls_certificate_verify_peers(s, purpose, 1, &status) < 0 || status != 0)
        return GNUTLS_E_CERTIFICATE_VERIFICATION_ERROR;
    return 0;
}

/* Called when a connection starts, before its handshake: the handshake fails unless the client
   presents a certificate that passes hg_tls_verify_client (MHD itself only asks for one).
   Returns 0, or -1 when the connection has no TLS session. */
static inline int hg_tls_require_client_cert(struct MHD_Connection *c) {
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(c, MHD_CONNECTION_INFO_GNUTLS_SESSION);
    if (!info || !info->tls_session) return -1;
    gnutls_session_t s = (gnutls_session_t)info->tls_session;
    gnutls_certificate_server_set_request(s, GNUTLS_CERT_REQUIRE);
    gnutls_session_set_verify_function(s, hg_tls_verify_client);
    return 0;
}

/* The client's certificate, verified again here: its subject (RFC 4514, as GnuTLS writes it) in
   `dn` (cut at dn_cap - 1) and the SHA-256 of its DER in `sha256`. 0, or -1 when there is no
   certificate or it does not verify. Runs on the thread that owns the connection. */
static inline int hg_tls_peer(struct MHD_Connection *c, char *dn, size_t dn_cap, unsigned char sha256[32]) {
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(c, MHD_CONNECTION_INFO_GNUTLS_SESSION);
    if (!info || !info->tls_session || dn_cap == 0) return -1;
    gnutls_session_t s = (gnutls_session_t)info->tls_session;
    unsigned status = 0;
    if (gnutls_certificate_verify_peers2(s, &status) < 0 || status != 0) return -1;
    unsigned n = 0;
    const gnutls_datum_t *peers = gnutls_certificate_get_peers(s, &n);
    if (!peers || n == 0) return -1;
    size_t len = 32;
    if (gnutls_fingerprint(GNUTLS_DIG_SHA256, &peers[0], sha256, &len) < 0 || len != 32) return -1;
    gnutls_x509_crt_t crt;
    if (gnutls_x509_crt_init(&crt) < 0) return -1;
    gnutls_datum_t d = {NULL, 0};
    int rc = -1;
    if (gnutls_x509_crt_import(crt, &peers[0], GNUTLS_X509_FMT_DER) >= 0 && gnutls_x509_crt_get_dn3(crt, &d, 0) >= 0) {
        size_t k = d.size < dn_cap - 1 ? d.size : dn_cap - 1;
        memcpy(dn, d.data, k);
        dn[k] = 0;
        rc = 0;
        gnutls_free(d.data);
    }
    gnutls_x509_crt_deinit(crt);
    return rc;
}

/* Where a GnuTLS priority string goes wrong: -1 when it is valid, else the offset of the first
   part GnuTLS does not take. */
static inline long hg_tls_priorities_error(const char *priorities) {
    gnutls_priority_t p;
    const char *err = NULL;
    if (gnutls_priority_init(&p, priorities, &err) == GNUTLS_E_SUCCESS) {
        gnutls_priority_deinit(p);
        return -1;
    }
    return err ? (long)(err - priorities) : 0;
}

/* How many certificates a PEM text holds (the CAs a client certificate may chain to). */
static inline int hg_tls_count_certificates(const char *pem, size_t len) {
    gnutls_x509_crt_t *list = NULL;
    unsigned n = 0;
    gnutls_datum_t d = {(unsigned char *)pem, (unsigned)len};
    if (gnutls_x509_crt_list_import2(&list, &n, &d, GNUTLS_X509_FMT_PEM, 0) < 0) return 0;
    for (unsigned i = 0; i < n; i++) gnutls_x509_crt_deinit(list[i]);
    gnutls_free(list);
    return (int)n;
}
#endif
