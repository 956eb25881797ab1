#include <algorithm>
#include <vector>
#include <string_view>
#include <cstring>
// C++ shim over simdjson's DOM parser, exporting the plain C API of CSimdJSON.h.
//
// simdjson parses into its tape; this file then flattens the tape into a csj_node
// array (document order, see the header) in one pass, with a stack of the open
// containers as deep as the parser's max depth (the Swift side keeps it at most 1,024).

#include "CSimdJSON.h"

#include <simdjson.h>

#include <cstdlib>
#include <cstring>
#include <new>
#include <string_view>

using simdjson::dom::element;

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

    // The containers open during a flatten: each one's node and its children so far.
    struct open_container { size_t node; uint32_t children; };
    std::vector<open_container> open;
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

// Flattens the document simdjson just parsed into csj_nodes, in one pass over its tape (the
// layout simdjson's document::dump_raw_tape reads: one 64-bit word an element, its type in the
// top byte and a payload below; a string's payload is its offset in string_buf, where a 32-bit
// length precedes the bytes; a number takes the word after it as well; the first word, the
// root's, points past the root's closing word, the last). Every element word is one node, in the same order, so nodes are made
// as the words come; a container's count and `next` are set at its closing word. (The DOM's
// element API walked the same tape recursively, at several times the instructions a node.)
int flatten(csj_parser *p) noexcept {
    const uint64_t *tape = p->dom.doc.tape.get();
    const uint8_t *strings = p->dom.doc.string_buf.get();
    const uint64_t mask = simdjson::internal::JSON_VALUE_MASK;
    const size_t end = size_t(tape[0] & mask) - 1;   // the root's closing word
    // At most one node a word: room made once.
    while (p->node_capacity < end) {
        if (!grow_nodes(p)) return simdjson::MEMALLOC;
    }
    csj_node *nodes = p->nodes;
    csj_parser::open_container *open = p->open.data();
    size_t n = 0;
    uint32_t depth = 0;   // containers open
    for (size_t i = 1; i < end; i++) {
        const uint64_t word = tape[i];
        const uint8_t type = uint8_t(word >> 56);
        if (type == '}' || type == ']') {
            depth--;
            csj_node &c = nodes[open[depth].node];
            c.count = c.kind == CSJ_OBJECT ? open[depth].children / 2 : open[depth].children;
            c.next = static_cast<uint32_t>(n);
            continue;
        }
        if (depth > 0) open[depth - 1].children++;
        csj_node &node = nodes[n];
        node.reserved[0] = node.reserved[1] = node.reserved[2] = 0;
        node.reserved2 = 0;
        node.count = 0;
        node.next = static_cast<uint32_t>(n + 1);
        node.v.u = 0;
        switch (type) {
        case '"': {
            const uint8_t *at = strings + (word & mask);
            uint32_t length;
            std::memcpy(&length, at, sizeof(length));
            node.kind = CSJ_STRING;
            node.count = length;
            node.v.str = reinterpret_cast<const char *>(at + sizeof(length));
            break;
        }
        case 'l': node.kind = CSJ_INT; node.v.u = tape[++i]; break;
        case 'u': node.kind = CSJ_UINT; node.v.u = tape[++i]; break;
        case 'd': node.kind = CSJ_DOUBLE; std::memcpy(&node.v.d, &tape[++i], sizeof(double)); break;
        case 't': node.kind = CSJ_BOOL; node.v.u = 1; break;
        case 'f': node.kind = CSJ_BOOL; break;
        case 'n': node.kind = CSJ_NULL; break;
        case '{':
        case '[':
            // simdjson is configured one level looser than our limit (its own count skips an
            // empty innermost container), so the exact limit is enforced here.
            if (depth >= p->max_depth) return simdjson::DEPTH_ERROR;
            node.kind = type == '{' ? CSJ_OBJECT : CSJ_ARRAY;
            open[depth].node = n;
            open[depth].children = 0;
            depth++;
            break;
        default:
            return simdjson::TAPE_ERROR;
        }
        n++;
    }
    if (depth != 0) return simdjson::TAPE_ERROR;
    p->node_count = n;
    return simdjson::SUCCESS;
}

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
    p->open.resize(size_t(max_depth) + 1);
    // simdjson does not count an empty innermost container as a level, so it is given
    // one extra level; `flatten` enforces the exact limit.
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

namespace {

// Parses len bytes at input, which has SIMDJSON_PADDING readable bytes after it, and flattens.
int parse_in_place(csj_parser *p, const uint8_t *input, size_t len, const csj_node **nodes, size_t *count) noexcept {
    element root;
    simdjson::error_code err = p->dom.parse(input, len, false).get(root);
    if (err) return err;

    int flattened = flatten(p);
    if (flattened != simdjson::SUCCESS) {
        p->node_count = 0;
        return flattened;
    }
    *nodes = p->nodes;
    *count = p->node_count;
    return simdjson::SUCCESS;
}

} // namespace

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
    return parse_in_place(p, p->input, len, nodes, count);
}

int csj_parse_padded(csj_parser *p, const void *buf, size_t len, const csj_node **nodes, size_t *count) {
    *nodes = nullptr;
    *count = 0;
    p->node_count = 0;
    if (len == 0) return simdjson::EMPTY;
    if (len > p->dom.max_capacity()) return simdjson::CAPACITY;
    return parse_in_place(p, static_cast<const uint8_t *>(buf), len, nodes, count);
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
            // A key is compared with the ones before only when one of them has its length and
            // first and last bytes (a bit of 64 for each such sign): rarely, for distinct keys.
            size_t keys[16];
            uint64_t signs = 0;
            size_t k = i + 1;
            for (uint32_t m = 0; m < n.count; m++) {
                const csj_node &key = nodes[k];
                const unsigned char *b = reinterpret_cast<const unsigned char *>(key.v.str);
                uint64_t sign = key.count == 0 ? 1 : uint64_t(1) << ((key.count * 7 + b[0] * 3 + b[key.count - 1]) & 63);
                if (signs & sign) {
                    for (uint32_t j = 0; j < m; j++) {
                        const csj_node &other = nodes[keys[j]];
                        if (other.count == key.count && memcmp(other.v.str, key.v.str, key.count) == 0) return (int64_t)k;
                    }
                }
                signs |= sign;
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
