#ifndef HG_CRABBITMQ_SHIM_H
#define HG_CRABBITMQ_SHIM_H
#include <amqp.h>
#include <amqp_framing.h>
#include <amqp_ssl_socket.h>
#include <amqp_tcp_socket.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>

/* rabbitmq-c 0.11's login is variadic and its tables are unions, which Swift cannot build or
   call: small typed wrappers, each doing one protocol step. */

/* PLAIN login that tells the broker we understand consumer cancels and connection.blocked
   (without them the broker sends neither). */
static inline amqp_rpc_reply_t hg_amqp_login(amqp_connection_state_t c, const char *vhost, int heartbeat,
                                             const char *user, const char *password) {
    amqp_table_entry_t caps[2];
    caps[0].key = amqp_cstring_bytes("consumer_cancel_notify");
    caps[0].value.kind = AMQP_FIELD_KIND_BOOLEAN;
    caps[0].value.value.boolean = 1;
    caps[1].key = amqp_cstring_bytes("connection.blocked");
    caps[1].value.kind = AMQP_FIELD_KIND_BOOLEAN;
    caps[1].value.value.boolean = 1;
    amqp_table_entry_t props[2];
    props[0].key = amqp_cstring_bytes("capabilities");
    props[0].value.kind = AMQP_FIELD_KIND_TABLE;
    props[0].value.value.table.num_entries = 2;
    props[0].value.value.table.entries = caps;
    props[1].key = amqp_cstring_bytes("product");
    props[1].value.kind = AMQP_FIELD_KIND_UTF8;
    props[1].value.value.bytes = amqp_cstring_bytes("healthgate");
    amqp_table_t table = {2, props};
    return amqp_login_with_properties(c, vhost, 0, 131072, heartbeat, &table, AMQP_SASL_METHOD_PLAIN, user, password);
}

/* A durable queue: quorum (replicated) or classic; optionally with one active consumer at a time,
   a delivery limit (0: none) and a dead-letter exchange (NULL: none; "" is the default exchange)
   with its routing key (NULL: the message's own; then at-least-once dead-lettering, which needs
   reject-publish). 0 on success, else see amqp_get_rpc_reply. */
static inline int hg_amqp_declare_queue(amqp_connection_state_t c, amqp_channel_t ch, const char *name, int quorum,
                                        int single_active, int delivery_limit, const char *dead_letter_exchange,
                                        const char *dead_letter_key) {
    amqp_table_entry_t args[7];
    int n = 0;
    if (quorum) {
        args[n].key = amqp_cstring_bytes("x-queue-type");
        args[n].value.kind = AMQP_FIELD_KIND_UTF8;
        args[n].value.value.bytes = amqp_cstring_bytes("quorum");
        n++;
    }
    if (single_active) {
        args[n].key = amqp_cstring_bytes("x-single-active-consumer");
        args[n].value.kind = AMQP_FIELD_KIND_BOOLEAN;
        args[n].value.value.boolean = 1;
        n++;
    }
    if (delivery_limit > 0) {
        args[n].key = amqp_cstring_bytes("x-delivery-limit");
        args[n].value.kind = AMQP_FIELD_KIND_I64;
        args[n].value.value.i64 = delivery_limit;
        n++;
    }
    if (dead_letter_exchange) {
        args[n].key = amqp_cstring_bytes("x-dead-letter-exchange");
        args[n].value.kind = AMQP_FIELD_KIND_UTF8;
        args[n].value.value.bytes = amqp_cstring_bytes(dead_letter_exchange);
        n++;
        if (dead_letter_key) {
            args[n].key = amqp_cstring_bytes("x-dead-letter-routing-key");
            args[n].value.kind = AMQP_FIELD_KIND_UTF8;
            args[n].value.value.bytes = amqp_cstring_bytes(dead_letter_key);
            n++;
        }
        if (quorum) {
            args[n].key = amqp_cstring_bytes("x-dead-letter-strategy");
            args[n].value.kind = AMQP_FIELD_KIND_UTF8;
            args[n].value.value.bytes = amqp_cstring_bytes("at-least-once");
            n++;
            args[n].key = amqp_cstring_bytes("x-overflow");
            args[n].value.kind = AMQP_FIELD_KIND_UTF8;
            args[n].value.value.bytes = amqp_cstring_bytes("reject-publish");
            n++;
        }
    }
    amqp_table_t table = {n, n ? args : NULL};
    amqp_queue_declare_ok_t *ok = amqp_queue_declare(c, ch, amqp_cstring_bytes(name), 0, 1, 0, 0, table);
    return ok ? 0 : -1;
}

/* How many messages wait in an existing queue, untaken (a passive declare: a queue that does not
   exist closes the channel). 0 on success. */
static inline int hg_amqp_queue_depth(amqp_connection_state_t c, amqp_channel_t ch, const char *name, uint32_t *messages) {
    amqp_queue_declare_ok_t *ok = amqp_queue_declare(c, ch, amqp_cstring_bytes(name), 1, 0, 0, 0, amqp_empty_table);
    if (ok) *messages = ok->message_count;
    return ok ? 0 : -1;
}

static inline int hg_amqp_declare_exchange(amqp_connection_state_t c, amqp_channel_t ch, const char *name, const char *type) {
    return amqp_exchange_declare(c, ch, amqp_cstring_bytes(name), amqp_cstring_bytes(type), 0, 1, 0, 0, amqp_empty_table) ? 0 : -1;
}

static inline int hg_amqp_bind(amqp_connection_state_t c, amqp_channel_t ch, const char *queue, const char *exchange,
                               const char *key) {
    return amqp_queue_bind(c, ch, amqp_cstring_bytes(queue), amqp_cstring_bytes(exchange), amqp_cstring_bytes(key),
                           amqp_empty_table) ? 0 : -1;
}

static inline int hg_amqp_confirm_select(amqp_connection_state_t c, amqp_channel_t ch) {
    return amqp_confirm_select(c, ch) ? 0 : -1;
}

static inline int hg_amqp_qos(amqp_connection_state_t c, amqp_channel_t ch, uint16_t prefetch) {
    return amqp_basic_qos(c, ch, 0, prefetch, 0) ? 0 : -1;
}

static inline int hg_amqp_consume(amqp_connection_state_t c, amqp_channel_t ch, const char *queue, const char *tag) {
    return amqp_basic_consume(c, ch, amqp_cstring_bytes(queue), amqp_cstring_bytes(tag), 0, 0, 0, amqp_empty_table) ? 0 : -1;
}

static inline int hg_amqp_cancel(amqp_connection_state_t c, amqp_channel_t ch, const char *tag) {
    return amqp_basic_cancel(c, ch, amqp_cstring_bytes(tag)) ? 0 : -1;
}

/* A persistent message with its id (what a return is matched by) and when it was published
   (Unix seconds). 0 or an amqp_status_enum. */
static inline int hg_amqp_publish(amqp_connection_state_t c, amqp_channel_t ch, const char *exchange, const char *key,
                                  const void *body, size_t length, const char *message_id, uint64_t timestamp) {
    amqp_basic_properties_t p;
    memset(&p, 0, sizeof p);
    p._flags = AMQP_BASIC_DELIVERY_MODE_FLAG | AMQP_BASIC_MESSAGE_ID_FLAG | AMQP_BASIC_CONTENT_TYPE_FLAG
        | AMQP_BASIC_TIMESTAMP_FLAG;
    p.delivery_mode = AMQP_DELIVERY_PERSISTENT;
    p.message_id = amqp_cstring_bytes(message_id);
    p.timestamp = timestamp;
    p.content_type = amqp_cstring_bytes("application/x-ndjson");
    amqp_bytes_t b = {length, (void *)body};
    return amqp_basic_publish(c, ch, amqp_cstring_bytes(exchange), amqp_cstring_bytes(key), 1, 0, &p, b);
}

/* What the broker sent, one method frame at a time. */
enum hg_amqp_event_kind {
    HG_AMQP_NOTHING = 0, /* the wait timed out */
    HG_AMQP_ACK, HG_AMQP_NACK, HG_AMQP_RETURN, HG_AMQP_DELIVER, HG_AMQP_CHANNEL_CLOSE, HG_AMQP_CONNECTION_CLOSE,
    HG_AMQP_BLOCKED, HG_AMQP_UNBLOCKED, HG_AMQP_CANCEL, HG_AMQP_OTHER
};
typedef struct {
    int kind;
    amqp_channel_t channel;
    uint64_t tag; /* ack, nack, deliver */
    int flag;     /* ack/nack: multiple; deliver: redelivered */
    uint16_t code;
    amqp_bytes_t text; /* close: reply text; deliver: routing key; valid until the next call */
    amqp_bytes_t consumer; /* deliver: the consumer's tag (which of the channel's consumers) */
} hg_amqp_event;

/* Waits up to `timeout` for the next method frame. 0 (event filled, HG_AMQP_NOTHING on a
   timeout) or an amqp_status_enum (the connection is gone). */
static inline int hg_amqp_next_event(amqp_connection_state_t c, const struct timeval *timeout, hg_amqp_event *e) {
    amqp_frame_t f;
    memset(e, 0, sizeof *e);
    int rc = amqp_simple_wait_frame_noblock(c, &f, timeout);
    if (rc == AMQP_STATUS_TIMEOUT) return 0;
    if (rc != AMQP_STATUS_OK) return rc;
    e->channel = f.channel;
    if (f.frame_type != AMQP_FRAME_METHOD) { e->kind = HG_AMQP_OTHER; return 0; }
    switch (f.payload.method.id) {
    case AMQP_BASIC_ACK_METHOD:
    case AMQP_BASIC_NACK_METHOD: {
        /* basic.nack is basic.ack's two fields and `requeue`. */
        amqp_basic_ack_t *m = f.payload.method.decoded;
        e->kind = f.payload.method.id == AMQP_BASIC_ACK_METHOD ? HG_AMQP_ACK : HG_AMQP_NACK;
        e->tag = m->delivery_tag; e->flag = m->multiple;
        break;
    }
    case AMQP_BASIC_RETURN_METHOD: {
        amqp_basic_return_t *m = f.payload.method.decoded;
        e->kind = HG_AMQP_RETURN; e->code = m->reply_code; e->text = m->reply_text;
        break;
    }
    case AMQP_BASIC_DELIVER_METHOD: {
        amqp_basic_deliver_t *m = f.payload.method.decoded;
        e->kind = HG_AMQP_DELIVER; e->tag = m->delivery_tag; e->flag = m->redelivered; e->text = m->routing_key;
        e->consumer = m->consumer_tag;
        break;
    }
    case AMQP_CHANNEL_CLOSE_METHOD: {
        amqp_channel_close_t *m = f.payload.method.decoded;
        e->kind = HG_AMQP_CHANNEL_CLOSE; e->code = m->reply_code; e->text = m->reply_text;
        amqp_channel_close_ok_t ok;
        amqp_send_method(c, f.channel, AMQP_CHANNEL_CLOSE_OK_METHOD, &ok);
        break;
    }
    case AMQP_CONNECTION_CLOSE_METHOD: {
        amqp_connection_close_t *m = f.payload.method.decoded;
        e->kind = HG_AMQP_CONNECTION_CLOSE; e->code = m->reply_code; e->text = m->reply_text;
        amqp_connection_close_ok_t ok;
        amqp_send_method(c, 0, AMQP_CONNECTION_CLOSE_OK_METHOD, &ok);
        break;
    }
    case AMQP_CONNECTION_BLOCKED_METHOD: e->kind = HG_AMQP_BLOCKED; break;
    case AMQP_CONNECTION_UNBLOCKED_METHOD: e->kind = HG_AMQP_UNBLOCKED; break;
    case AMQP_BASIC_CANCEL_METHOD: e->kind = HG_AMQP_CANCEL; break;
    default: e->kind = HG_AMQP_OTHER; break;
    }
    return 0;
}

/* The text of an RPC reply that failed (library or server), into buf. */
static inline void hg_amqp_reply_text(amqp_rpc_reply_t r, char *buf, size_t size) {
    switch (r.reply_type) {
    case AMQP_RESPONSE_NORMAL: snprintf(buf, size, "ok"); break;
    case AMQP_RESPONSE_NONE: snprintf(buf, size, "no answer (the connection ended)"); break;
    case AMQP_RESPONSE_LIBRARY_EXCEPTION: snprintf(buf, size, "%s", amqp_error_string2(r.library_error)); break;
    case AMQP_RESPONSE_SERVER_EXCEPTION:
        if (r.reply.id == AMQP_CONNECTION_CLOSE_METHOD || r.reply.id == AMQP_CHANNEL_CLOSE_METHOD) {
            /* Both close methods start with reply_code, reply_text. */
            amqp_channel_close_t *m = r.reply.decoded;
            snprintf(buf, size, "%s %u: %.*s", r.reply.id == AMQP_CONNECTION_CLOSE_METHOD ? "connection closed" : "channel closed",
                     m->reply_code, (int)m->reply_text.len, (const char *)m->reply_text.bytes);
        } else {
            snprintf(buf, size, "the broker answered with method %08x", r.reply.id);
        }
        break;
    }
}

/* Whether the last RPC's reply on this connection was a server's channel close (the channel is gone, the connection not). */
static inline int hg_amqp_reply_closed_channel(amqp_rpc_reply_t r) {
    return r.reply_type == AMQP_RESPONSE_SERVER_EXCEPTION && r.reply.id == AMQP_CHANNEL_CLOSE_METHOD;
}
#endif
