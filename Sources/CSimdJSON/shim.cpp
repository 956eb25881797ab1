#include <algorithm>
#include <vector>
#include <string_view>
#include <cstring>
// C++ shim over simdjson's DOM parser, exporting the plain C API of CSimdJSON.h.
//
// simdjson parses into its internal tape; this file then flattens the DOM into a
// csj_node array (document order, see the header) using simdjson's public DOM API.
// The walk recurses once per nesting level; the depth is bounded by the parser's
// max depth, which the Swift side keeps small (at most 1,024).

#include "CSimdJSON.h"

#include <simdjson.h>

#include <cstdlib>
#include <cstring>
#include <new>
#include <string_view>

using simdjson::dom::element;
using simdjson::dom::element_type;

// The C header repeats simdjson's error codes; keep them in sync.
static_assert(CSJ_ERR_CAPACITY == simdjson::CAPACITY, "error code");
static_assert(CSJ_ERR_MEMALLOC == simdjson::MEMALLOC, "error code");
static_assert(CSJ_ERR_TAPE == simdjson::TAPE_ERROR, "error code");
static_assert(CSJ_ERR_DEPTH == simdjson::DEPTH_ERROR, "error code");
static_assert(CSJ_ERR_STRING == simdjson::STRING_ERROR, "error code");
static_assert(CSJ_ERR_T_ATOM == simdjson::T_ATOM_ERROR, "error code");
static_assert(CSJ_ERR_F_ATOM == simdjson::F_ATOM_ERROR, "error code");
static_assert(CSJ_ERR_N_ATOM == simdjson::N_ATOM_ERROR, "error code");
static_assert(CSJ_ERR_NUMBER == simdjson::NUMBER_ERROR, "error code");
static_assert(CSJ_ERR_UTF8 == simdjson::UTF8_ERROR, "error code");
static_assert(CSJ_ERR_EMPTY == simdjson::EMPTY, "error code");
static_assert(CSJ_ERR_UNESCAPED_CHARS == simdjson::UNESCAPED_CHARS, "error code");
static_assert(CSJ_ERR_UNCLOSED_STRING == simdjson::UNCLOSED_STRING, "error code");
static_assert(CSJ_ERR_NUMBER_OUT_OF_RANGE == simdjson::NUMBER_OUT_OF_RANGE, "error code");
static_assert(CSJ_ERR_INCOMPLETE_ARRAY_OR_OBJECT == simdjson::INCOMPLETE_ARRAY_OR_OBJECT, "error code");
static_assert(CSJ_ERR_TRAILING_CONTENT == simdjson::TRAILING_CONTENT, "error code");
static_assert(sizeof(csj_node) == 24, "csj_node is meant to stay 24 bytes");

struct csj_parser {
    simdjson::dom::parser dom;
    uint32_t max_depth = 64;   // our limit: containers nested deeper than this are rejected

    uint8_t *input = nullptr;  // padded copy of the input (len + SIMDJSON_PADDING bytes)
    size_t input_capacity = 0; // usable bytes, excluding the padding

    csj_node *nodes = nullptr;
    size_t node_capacity = 0;
    size_t node_count = 0;
};

namespace {

// Grows the node array; returns false when out of memory.
bool grow_nodes(csj_parser *p) noexcept {
    size_t capacity = p->node_capacity ? p->node_capacity * 2 : 1024;
    void *mem = std::realloc(p->nodes, capacity * sizeof(csj_node));
    if (!mem) return false;
    p->nodes = static_cast<csj_node *>(mem);
    p->node_capacity = capacity;
    return true;
}

struct Flattener {
    csj_parser *p;
    int error = simdjson::SUCCESS;

    // Appends a node and returns its index, or SIZE_MAX when out of memory.
    inline size_t push(uint8_t kind) noexcept {
        if (simdjson_unlikely(p->node_count == p->node_capacity) && !grow_nodes(p)) {
            error = simdjson::MEMALLOC;
            return SIZE_MAX;
        }
        size_t index = p->node_count++;
        csj_node &n = p->nodes[index];
        n.kind = kind;
        n.reserved[0] = n.reserved[1] = n.reserved[2] = 0;
        n.next = static_cast<uint32_t>(index + 1);
        n.count = 0;
        n.reserved2 = 0;
        n.v.u = 0;
        return index;
    }

    inline bool push_string(std::string_view s) noexcept {
        size_t index = push(CSJ_STRING);
        if (index == SIZE_MAX) return false;
        p->nodes[index].count = static_cast<uint32_t>(s.size());
        p->nodes[index].v.str = s.data();
        return true;
    }

    // depth: number of containers enclosing `e`.
    bool emit(element e, uint32_t depth) noexcept {
        switch (e.type()) {
        case element_type::OBJECT: {
            // simdjson is configured one level looser than our limit (its own count skips
            // an empty innermost container), so the exact limit is enforced here.
            if (depth >= p->max_depth) { error = simdjson::DEPTH_ERROR; return false; }
            size_t index = push(CSJ_OBJECT);
            if (index == SIZE_MAX) return false;
            uint32_t count = 0;
            for (simdjson::dom::key_value_pair field : e.get_object().value_unsafe()) {
                if (!push_string(field.key) || !emit(field.value, depth + 1)) return false;
                count++;
            }
            p->nodes[index].count = count;
            p->nodes[index].next = static_cast<uint32_t>(p->node_count);
            return true;
        }
        case element_type::ARRAY: {
            if (depth >= p->max_depth) { error = simdjson::DEPTH_ERROR; return false; }
            size_t index = push(CSJ_ARRAY);
            if (index == SIZE_MAX) return false;
            uint32_t count = 0;
            for (element child : e.get_array().value_unsafe()) {
                if (!emit(child, depth + 1)) return false;
                count++;
            }
            p->nodes[index].count = count;
            p->nodes[index].next = static_cast<uint32_t>(p->node_count);
            return true;
        }
        case element_type::STRING:
            return push_string(e.get_string().value_unsafe());
        case element_type::INT64: {
            size_t index = push(CSJ_INT);
            if (index == SIZE_MAX) return false;
            p->nodes[index].v.i = e.get_int64().value_unsafe();
            return true;
        }
        case element_type::UINT64: {
            size_t index = push(CSJ_UINT);
            if (index == SIZE_MAX) return false;
            p->nodes[index].v.u = e.get_uint64().value_unsafe();
            return true;
        }
        case element_type::DOUBLE: {
            size_t index = push(CSJ_DOUBLE);
            if (index == SIZE_MAX) return false;
            p->nodes[index].v.d = e.get_double().value_unsafe();
            return true;
        }
        case element_type::BOOL: {
            size_t index = push(CSJ_BOOL);
            if (index == SIZE_MAX) return false;
            p->nodes[index].v.u = e.get_bool().value_unsafe() ? 1 : 0;
            return true;
        }
        case element_type::NULL_VALUE:
            return push(CSJ_NULL) != SIZE_MAX;
        }
        error = simdjson::UNEXPECTED_ERROR;
        return false;
    }
};

} // namespace

extern "C" {

size_t csj_padding(void) { return simdjson::SIMDJSON_PADDING; }

const char *csj_implementation_name(void) {
    // std::string in static storage: the name of the run-time selected kernel.
    static const std::string name = simdjson::get_active_implementation()->name();
    return name.c_str();
}

const char *csj_error_message(int code) {
    if (code < 0 || code >= simdjson::NUM_ERROR_CODES) return "unknown error";
    return simdjson::error_message(static_cast<simdjson::error_code>(code));
}

csj_parser *csj_parser_new(uint32_t max_depth) {
    if (max_depth < 1) max_depth = 1;
    csj_parser *p = new (std::nothrow) csj_parser();
    if (!p) return nullptr;
    p->max_depth = max_depth;
    // simdjson does not count an empty innermost container as a level, so it is given
    // one extra level; Flattener::emit enforces the exact limit.
    if (p->dom.allocate(4096, size_t(max_depth) + 1) != simdjson::SUCCESS) {
        delete p;
        return nullptr;
    }
    return p;
}

void csj_parser_free(csj_parser *p) {
    if (!p) return;
    std::free(p->input);
    std::free(p->nodes);
    delete p;
}

int csj_parse(csj_parser *p, const void *buf, size_t len, const csj_node **nodes, size_t *count) {
    *nodes = nullptr;
    *count = 0;
    p->node_count = 0;
    if (len == 0) return simdjson::EMPTY;
    if (len > p->dom.max_capacity()) return simdjson::CAPACITY;

    // simdjson reads up to SIMDJSON_PADDING bytes past the end: parse a padded copy.
    if (p->input_capacity < len) {
        size_t capacity = p->input_capacity ? p->input_capacity : 4096;
        while (capacity < len) capacity *= 2;
        std::free(p->input);
        p->input = static_cast<uint8_t *>(std::malloc(capacity + simdjson::SIMDJSON_PADDING));
        if (!p->input) {
            p->input_capacity = 0;
            return simdjson::MEMALLOC;
        }
        p->input_capacity = capacity;
    }
    std::memcpy(p->input, buf, len);
    std::memset(p->input + len, 0, simdjson::SIMDJSON_PADDING);

    element root;
    simdjson::error_code err = p->dom.parse(p->input, len, false).get(root);
    if (err) return err;

    Flattener f{p};
    if (!f.emit(root, 0)) {
        p->node_count = 0;
        return f.error;
    }
    *nodes = p->nodes;
    *count = p->node_count;
    return simdjson::SUCCESS;
}

} // extern "C"

/* Objects with few members (nearly all of them) are compared pairwise; large ones are sorted
   (views into the parser's string buffer) and neighbours compared: O(k log k) whatever the keys,
   where a hash set's fixed, public seed would let crafted keys make it quadratic. */
extern "C" int64_t csj_find_duplicate_key(const csj_node *nodes, size_t count) {
    std::vector<std::pair<std::string_view, size_t>> keys_of_big;
    for (size_t i = 0; i < count; i++) {
        const csj_node &n = nodes[i];
        if (n.kind != CSJ_OBJECT || n.count < 2) continue;
        if (n.count <= 16) {
            size_t keys[16];
            size_t k = i + 1;
            for (uint32_t m = 0; m < n.count; m++) {
                const csj_node &key = nodes[k];
                for (uint32_t j = 0; j < m; j++) {
                    const csj_node &other = nodes[keys[j]];
                    if (other.count == key.count && memcmp(other.v.str, key.v.str, key.count) == 0) return (int64_t)k;
                }
                keys[m] = k;
                k = nodes[k + 1].next;
            }
        } else {
            keys_of_big.clear();
            size_t k = i + 1;
            for (uint32_t m = 0; m < n.count; m++) {
                keys_of_big.emplace_back(std::string_view(nodes[k].v.str, nodes[k].count), k);
                k = nodes[k + 1].next;
            }
            /* Ties by position, so the later of two equal keys is the one reported. */
            std::sort(keys_of_big.begin(), keys_of_big.end());
            for (size_t j = 1; j < keys_of_big.size(); j++)
                if (keys_of_big[j].first == keys_of_big[j - 1].first) return (int64_t)keys_of_big[j].second;
        }
    }
    return -1;
}
