import CSimdJSON
import Synchronization

/// A reusable JSON parser over simdjson (DOM parser, run-time selected SIMD kernel).
///
/// One parser per thread: it is not `Sendable`, and its buffers are reused from one `parse` to the next.
///
/// **Lifetime rule.** A ``JSONDocument``, and every ``JSONRef``, ``JSONKey`` and string pointer obtained from it,
/// is valid only until the next `parse` call on the same parser (successful or not), and only while the
/// parser exists. A document keeps its parser alive; refs and keys do not, so hold the parser (or the
/// document) while using refs. Copy out what you need (`String`s, numbers, or `JSONRef.write(to:)` into a
/// ``JSONWriter``) before parsing the next body. Using a stale ref is a programming error and stops the
/// program with a clear message (check `isValid` if in doubt); it never reads another document's data.
///
/// **Padding.** simdjson reads up to 64 bytes past the end of its input. The parser copies every input into a
/// padded buffer it owns (one buffer, grown as needed and reused), so callers pass any memory, unpadded.
///
/// **Limits.** Objects and arrays may nest at most `maxDepth` levels (`[]` is one level, `[[]]` two).
/// Integers must fit in 64 bits (`Int64`, or `UInt64` for positive values); larger integers, and numbers
/// such as `1e400`, are rejected as out of range. Input must be UTF-8 (simdjson validates it).
/// Memory kept between parses grows with the largest body seen (several times its size) and is freed
/// with the parser.
public final class JSONParser {
    /// The deepest nesting a parser can be configured for. The flattening step recurses once per level,
    /// so the bound keeps stack use small on any thread.
    public static let maxSupportedDepth = 1024

    /// The simdjson kernel chosen at run time for this CPU (e.g. `icelake`, `haswell`, `fallback`).
    public static var implementationName: String { String(cString: csj_implementation_name()) }

    public let maxDepth: Int
    /// The size of the largest input this parser has parsed: what its buffers are sized for.
    public private(set) var largestInput = 0

    @usableFromInline let handle: OpaquePointer
    /// This parser's generation counter, bumped on every parse and at deinit. Documents and refs remember
    /// the value they were made with; a mismatch means they are stale. The cell is never freed (it is
    /// recycled for later parsers and keeps counting up), so a stale ref can always check it safely, even
    /// after the parser is gone.
    @usableFromInline let generation: UnsafeMutablePointer<UInt64>

    /// - Parameter maxDepth: the deepest nesting of objects and arrays accepted, 1...1024.
    public init(maxDepth: Int = 64) {
        precondition(
            (1...JSONParser.maxSupportedDepth).contains(maxDepth),
            "JSONParser: maxDepth must be in 1...\(JSONParser.maxSupportedDepth), got \(maxDepth)")
        guard let handle = csj_parser_new(UInt32(maxDepth)) else {
            fatalError("JSONParser: out of memory allocating the simdjson parser")
        }
        self.handle = handle
        self.maxDepth = maxDepth
        self.generation = GenerationCells.acquire()
    }

    deinit {
        generation.pointee &+= 1 // every document and ref of this parser is now stale
        GenerationCells.release(generation)
        csj_parser_free(handle)
    }

    /// Parses one JSON document. Invalidates the previous document of this parser.
    public func parse(_ bytes: UnsafeRawBufferPointer) throws(JSONError) -> JSONDocument {
        try parse(bytes, padded: false)
    }

    /// `padded`: `padding` readable bytes follow `bytes` (parsed where they lie, no padded copy).
    private func parse(_ bytes: UnsafeRawBufferPointer, padded: Bool) throws(JSONError) -> JSONDocument {
        generation.pointee &+= 1
        largestInput = max(largestInput, bytes.count)
        var nodes: UnsafePointer<csj_node>? = nil
        var count = 0
        let rc =
            padded
            ? csj_parse_padded(handle, bytes.baseAddress, bytes.count, &nodes, &count)
            : csj_parse(handle, bytes.baseAddress, bytes.count, &nodes, &count)
        guard rc == Int32(CSJ_OK), let nodes, count > 0 else {
            throw JSONError(
                simdjsonCode: rc == Int32(CSJ_OK) ? Int32(CSJ_ERR_EMPTY) : rc,
                maxDepth: maxDepth, input: bytes)
        }
        return JSONDocument(parser: self, nodes: nodes, nodeCount: count, generation: generation.pointee)
    }

    /// The bytes simdjson reads past the end of its input.
    public static let padding = csj_padding()

    /// Parses one JSON document where it lies when the array has `padding` bytes of spare
    /// capacity after its elements (read, never written; they do not change the result), else
    /// from a padded copy, as `parse(_:)`. Invalidates the previous document of this parser.
    public func parse(paddedIfRoom bytes: [UInt8]) throws(JSONError) -> JSONDocument {
        let padded = bytes.capacity - bytes.count >= JSONParser.padding
        let result: Result<JSONDocument, JSONError> = bytes.withUnsafeBytes { raw in
            do throws(JSONError) { return .success(try parse(raw, padded: padded)) } catch { return .failure(error) }
        }
        return try result.get()
    }

    /// Parses one JSON document. Invalidates the previous document of this parser.
    public func parse(_ bytes: [UInt8]) throws(JSONError) -> JSONDocument {
        let result: Result<JSONDocument, JSONError> = bytes.withUnsafeBytes { raw in
            do throws(JSONError) { return .success(try parse(raw)) } catch { return .failure(error) }
        }
        return try result.get()
    }

    /// Parses the UTF-8 text of a string (convenient in tests and tools).
    public func parse(_ text: String) throws(JSONError) -> JSONDocument {
        var text = text
        let result: Result<JSONDocument, JSONError> = text.withUTF8 { utf8 in
            do throws(JSONError) { return .success(try parse(UnsafeRawBufferPointer(utf8))) } catch {
                return .failure(error)
            }
        }
        return try result.get()
    }
}

@available(*, unavailable, message: "a JSONParser must stay on one thread; create one per thread")
extension JSONParser: Sendable {}

/// The result of `JSONParser.parse(_:)`: a flattened document owned by the parser.
///
/// Valid until the next `parse` on the same parser (see ``JSONParser``). A document keeps its parser alive;
/// refs do not, so keep the parser or the document around while you use refs.
public struct JSONDocument {
    /// Keeps the parser (and so the nodes) alive as long as the document value exists.
    @usableFromInline let parser: JSONParser
    @usableFromInline let base: JSONRef.Base
    /// Number of flattened nodes (every value, plus one per object key).
    public let nodeCount: Int

    @usableFromInline
    init(parser: JSONParser, nodes: UnsafePointer<csj_node>, nodeCount: Int, generation: UInt64) {
        self.parser = parser
        self.base = JSONRef.Base(nodes: nodes, cell: parser.generation, generation: generation)
        self.nodeCount = nodeCount
    }

    /// The top-level value.
    @inlinable public var root: JSONRef { JSONRef(base: base, index: 0) }

    /// False once the parser has parsed another document; a stale document must not be read.
    @inlinable public var isValid: Bool { base.isValid }

    /// The first key that appears twice in one object, or nil. JSON leaves such documents to
    /// the reader, and readers disagree (first wins here, last there): a gateway refuses them.
    public var duplicateKey: String? {
        base.check()
        let i = csj_find_duplicate_key(base.nodes, nodeCount)
        return i < 0 ? nil : JSONRef(base: base, index: Int(i)).string
    }
}

@available(*, unavailable, message: "documents belong to their parser's thread")
extension JSONDocument: Sendable {}

/// Generation cells of parsers: allocated once, recycled, never freed (8 bytes per parser alive at once).
enum GenerationCells {
    private static let free = Mutex<[UInt]>([])

    static func acquire() -> UnsafeMutablePointer<UInt64> {
        if let bits = free.withLock({ $0.popLast() }), let cell = UnsafeMutablePointer<UInt64>(bitPattern: bits) {
            return cell
        }
        let cell = UnsafeMutablePointer<UInt64>.allocate(capacity: 1)
        cell.initialize(to: 0)
        return cell
    }

    static func release(_ cell: UnsafeMutablePointer<UInt64>) {
        free.withLock { $0.append(UInt(bitPattern: cell)) }
    }
}
