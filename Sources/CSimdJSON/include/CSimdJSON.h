/*
 * CSimdJSON: a plain C API over simdjson's DOM parser (C++ shim in shim.cpp).
 *
 * A parse flattens the whole document into an array of fixed-size csj_node
 * records in document order, so Swift can walk it without calling back into C.
 *
 * Layout of the node array:
 *   - node 0 is the root value.
 *   - a container (object/array) node is followed by its children; `next` is the
 *     index just past its whole subtree, so a subtree is skipped with `i = next`.
 *   - object members are stored as a key node (kind CSJ_STRING) followed by the
 *     value node; `count` of an object is its number of members.
 *   - scalars and keys are leaves: next == index + 1.
 *
 * Padding: the caller may pass any readable memory; the shim copies the input
 * into a padded buffer owned by the parser (one growable buffer, reused), so
 * the caller never has to add SIMDJSON_PADDING bytes itself.
 *
 * Lifetime: the node array and every string pointer in it belong to the parser
 * and stay valid until the next csj_parse or csj_parser_free on that parser.
 * A parser must be used by one thread at a time.
 */
#ifndef CSIMDJSON_H
#define CSIMDJSON_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Node kinds (csj_node.kind). */
enum {
    CSJ_OBJECT = 0,
    CSJ_ARRAY = 1,
    CSJ_STRING = 2, /* also used for object keys */
    CSJ_INT = 3,    /* v.i: fits in int64 */
    CSJ_UINT = 4,   /* v.u: only for integers > INT64_MAX */
    CSJ_DOUBLE = 5, /* v.d */
    CSJ_BOOL = 6,   /* v.u: 0 or 1 */
    CSJ_NULL = 7
};

typedef struct csj_node {
    uint8_t kind;
    uint8_t reserved[3];
    uint32_t next;  /* index just past this node's subtree */
    uint32_t count; /* object: members; array: elements; string: length in bytes */
    uint32_t reserved2;
    union {
        const char *str; /* string bytes, unescaped UTF-8, NUL-terminated, not owned */
        int64_t i;
        uint64_t u;
        double d;
    } v;
} csj_node;

/* Error codes are simdjson's error_code values; CSJ_OK (0) is success. */
enum {
    CSJ_OK = 0,
    CSJ_ERR_CAPACITY = 1,
    CSJ_ERR_MEMALLOC = 2,
    CSJ_ERR_TAPE = 3,
    CSJ_ERR_DEPTH = 4,
    CSJ_ERR_STRING = 5,
    CSJ_ERR_T_ATOM = 6,
    CSJ_ERR_F_ATOM = 7,
    CSJ_ERR_N_ATOM = 8,
    CSJ_ERR_NUMBER = 9,
    CSJ_ERR_UTF8 = 10,
    CSJ_ERR_EMPTY = 12,
    CSJ_ERR_UNESCAPED_CHARS = 13,
    CSJ_ERR_UNCLOSED_STRING = 14,
    CSJ_ERR_NUMBER_OUT_OF_RANGE = 17,
    CSJ_ERR_INCOMPLETE_ARRAY_OR_OBJECT = 27,
    CSJ_ERR_TRAILING_CONTENT = 30
};

typedef struct csj_parser csj_parser;

/* Bytes of padding simdjson reads past the end of the input (handled inside the shim by
 * csj_parse; csj_parse_padded is given them by its caller). */
size_t csj_padding(void);

/* Name of the simdjson kernel selected at run time (e.g. "icelake", "haswell", "fallback"). */
const char *csj_implementation_name(void);

/* simdjson's own English message for an error code. Never NULL, static storage. */
const char *csj_error_message(int code);

/* A new parser accepting documents nested at most max_depth levels deep
 * (a scalar root is depth 0, `[]` is depth 1). Returns NULL when out of memory. */
csj_parser *csj_parser_new(uint32_t max_depth);
void csj_parser_free(csj_parser *parser);

/* Parses len bytes at buf (buf may be NULL when len == 0). On success returns CSJ_OK
 * and sets *nodes and *count (count >= 1). On failure returns a simdjson error code;
 * *nodes and *count are then set to NULL and 0. Either way the previous result of
 * this parser is invalidated. */
int csj_parse(csj_parser *parser, const void *buf, size_t len,
              const csj_node **nodes, size_t *count);

/* csj_parse where the caller guarantees csj_padding() readable bytes after buf + len (any
 * content: simdjson reads them, they do not change the result): parsed where it lies, with
 * no padded copy. */
int csj_parse_padded(csj_parser *parser, const void *buf, size_t len,
                     const csj_node **nodes, size_t *count);

/* The index of the first object key that repeats an earlier key of the same object, or -1
 * when no object has two equal keys. One pass over the nodes of a parsed document. */
int64_t csj_find_duplicate_key(const csj_node *nodes, size_t count);

#ifdef __cplusplus
}
#endif

#endif /* CSIMDJSON_H */
