/* A WebSocket client over libwebsockets, driven by its caller's thread: one context and one
   connection each, text messages in and out, every wait bounded by a deadline. libwebsockets
   sleeps in lws_service until an event comes (its timeout argument is ignored since 3.2): a
   timer 100 ms ahead wakes it, so a wait can end at its deadline. */
#include <libwebsockets.h>
#include <stdlib.h>
#include <string.h>

typedef struct hg_ws {
    struct lws_context *ctx;
    struct lws *wsi;
    int state; /* 0 connecting, 1 open, 2 closed or failed */
    char error[256];
    /* Complete messages, each as a 4-byte length and its bytes; then the one being received. */
    unsigned char *rx;
    size_t rx_len, rx_cap, max_message;
    size_t rx_head, rx_partial; /* where the message being received starts, and its bytes so far */
    int rx_open, rx_too_big;
    unsigned char *tx; /* LWS_PRE bytes of headroom, then the message */
    size_t tx_len;
    int tx_pending;
    lws_sorted_usec_list_t wake;
} hg_ws;

static int hg_ws_callback(struct lws *wsi, enum lws_callback_reasons reason, void *user, void *in, size_t len) {
    hg_ws *c = (hg_ws *)lws_get_opaque_user_data(wsi);
    if (!c) return lws_callback_http_dummy(wsi, reason, user, in, len);
    switch (reason) {
    case LWS_CALLBACK_CLIENT_CONNECTION_ERROR:
        c->state = 2;
        snprintf(c->error, sizeof c->error, "%s", in ? (const char *)in : "cannot connect");
        c->wsi = NULL;
        break;
    case LWS_CALLBACK_CLIENT_ESTABLISHED: c->state = 1; break;
    case LWS_CALLBACK_CLIENT_RECEIVE: {
        /* A message past max_message closes the connection. */
        if (c->rx_partial + len > c->max_message) { c->rx_too_big = 1; return -1; }
        size_t need = c->rx_len + (c->rx_open ? 0 : 4) + len;
        if (need > c->rx_cap) {
            size_t cap = need * 2;
            unsigned char *grown = realloc(c->rx, cap);
            if (!grown) return -1;
            c->rx = grown;
            c->rx_cap = cap;
        }
        if (!c->rx_open) {
            c->rx_open = 1;
            c->rx_head = c->rx_len;
            c->rx_len += 4;
        }
        if (len) memcpy(c->rx + c->rx_len, in, len);
        c->rx_len += len;
        c->rx_partial += len;
        if (lws_is_final_fragment(wsi) && !lws_remaining_packet_payload(wsi)) {
            uint32_t n = (uint32_t)c->rx_partial;
            memcpy(c->rx + c->rx_head, &n, 4);
            c->rx_open = 0;
            c->rx_partial = 0;
        }
        break;
    }
    case LWS_CALLBACK_CLIENT_WRITEABLE:
        if (c->tx_pending) {
            if (lws_write(wsi, c->tx + LWS_PRE, c->tx_len, LWS_WRITE_TEXT) < (int)c->tx_len) return -1;
            c->tx_pending = 0;
        }
        break;
    case LWS_CALLBACK_CLIENT_CLOSED:
    case LWS_CALLBACK_WSI_DESTROY:
        if (c->state != 2) snprintf(c->error, sizeof c->error, "%s", c->rx_too_big ? "a message was too big" : "the connection closed");
        c->state = 2;
        c->wsi = NULL;
        break;
    default: break;
    }
    return 0;
}

static const struct lws_protocols hg_ws_protocols[] = {
    {"healthgate", hg_ws_callback, 0, 0, 0, NULL, 0}, {NULL, NULL, 0, 0, 0, NULL, 0}
};

static void hg_ws_woken(lws_sorted_usec_list_t *s) { (void)s; }

/* Services the connection until `done` or the deadline (lws_now_usecs) or it closes. */
static inline void hg_ws_serve(hg_ws *c, lws_usec_t until, int (*done)(hg_ws *)) {
    while (!done(c) && c->state != 2 && lws_now_usecs() < until) {
        c->wake.cb = hg_ws_woken;
        c->wake.us = lws_now_usecs() + 100000;
        lws_sul2_schedule(c->ctx, 0, LWSSULLI_MISS_IF_SUSPENDED, &c->wake);
        lws_service(c->ctx, 0);
    }
}

static int hg_ws_is_open(hg_ws *c) { return c->state != 0; }
static int hg_ws_is_sent(hg_ws *c) { return !c->tx_pending; }
static int hg_ws_has_message(hg_ws *c) { return c->rx_len > (c->rx_open ? 4 + c->rx_partial : 0); }

/* Connects (TLS when `tls`, checking the server's certificate against the system's CAs) and
   waits for the handshake. NULL with `error` filled when it cannot. */
static inline hg_ws *hg_ws_open(const char *host, int port, const char *path, int tls, double timeout, size_t max_message,
                                char *error, size_t error_size) {
    lws_set_log_level(0, NULL);
    hg_ws *c = calloc(1, sizeof *c);
    if (!c) { snprintf(error, error_size, "out of memory"); return NULL; }
    c->max_message = max_message;
    struct lws_context_creation_info info;
    memset(&info, 0, sizeof info);
    info.port = CONTEXT_PORT_NO_LISTEN;
    info.protocols = hg_ws_protocols;
    info.options = LWS_SERVER_OPTION_DO_SSL_GLOBAL_INIT;
    c->ctx = lws_create_context(&info);
    if (!c->ctx) { snprintf(error, error_size, "cannot make a WebSocket context"); free(c); return NULL; }
    struct lws_client_connect_info ci;
    memset(&ci, 0, sizeof ci);
    ci.context = c->ctx;
    ci.address = host;
    ci.port = port;
    ci.path = path;
    ci.host = host;
    ci.origin = host;
    ci.local_protocol_name = "healthgate";
    ci.ssl_connection = tls ? LCCSCF_USE_SSL : 0;
    ci.opaque_user_data = c;
    ci.pwsi = &c->wsi;
    if (!lws_client_connect_via_info(&ci) && c->state != 2) {
        c->state = 2;
        snprintf(c->error, sizeof c->error, "cannot connect");
    }
    hg_ws_serve(c, lws_now_usecs() + (lws_usec_t)(timeout * 1e6), hg_ws_is_open);
    if (c->state != 1) {
        snprintf(error, error_size, "%s", c->state == 2 ? c->error : "no answer in time");
        lws_context_destroy(c->ctx);
        free(c->rx);
        free(c);
        return NULL;
    }
    return c;
}

/* Sends one text message: 0 once written, -1 when closed or past the deadline. */
static inline int hg_ws_send(hg_ws *c, const void *bytes, size_t length, double timeout) {
    if (c->state != 1) return -1;
    free(c->tx);
    c->tx = malloc(LWS_PRE + length);
    if (!c->tx) return -1;
    memcpy(c->tx + LWS_PRE, bytes, length);
    c->tx_len = length;
    c->tx_pending = 1;
    lws_callback_on_writable(c->wsi);
    hg_ws_serve(c, lws_now_usecs() + (lws_usec_t)(timeout * 1e6), hg_ws_is_sent);
    return c->tx_pending ? -1 : 0;
}

/* Waits for the next message: 1 (its bytes at *bytes, *length; valid until the next call),
   0 past the deadline, -1 closed. */
static inline int hg_ws_receive(hg_ws *c, double timeout, const unsigned char **bytes, size_t *length) {
    hg_ws_serve(c, lws_now_usecs() + (lws_usec_t)(timeout * 1e6), hg_ws_has_message);
    if (!hg_ws_has_message(c)) return c->state == 2 ? -1 : 0;
    uint32_t n;
    memcpy(&n, c->rx, 4);
    *bytes = c->rx + 4;
    *length = n;
    return 1;
}

/* Forgets the message `hg_ws_receive` gave. */
static inline void hg_ws_consumed(hg_ws *c) {
    uint32_t n;
    memcpy(&n, c->rx, 4);
    memmove(c->rx, c->rx + 4 + n, c->rx_len - 4 - n);
    c->rx_len -= 4 + n;
    if (c->rx_open) c->rx_head -= 4 + n;
}

static inline const char *hg_ws_error(hg_ws *c) { return c->error; }

static inline void hg_ws_close(hg_ws *c) {
    if (!c) return;
    lws_context_destroy(c->ctx);
    free(c->rx);
    free(c->tx);
    free(c);
}
