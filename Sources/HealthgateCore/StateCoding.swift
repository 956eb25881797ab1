/// The one encoding of the state transforms and sinks commit with a cursor: a sequence of
/// fields, each `<byte count>:<bytes>`, so any text (a device id, a uuid) goes in as it is.
public struct StateWriter {
    public private(set) var bytes: [UInt8] = []

    public init() {}

    public mutating func put(_ s: String) {
        bytes += Array("\(s.utf8.count):".utf8)
        bytes += Array(s.utf8)
    }

    /// Raw bytes as one field (a packed table: fixed-width numbers, little-endian).
    public mutating func put(bytes b: [UInt8]) {
        bytes += Array("\(b.count):".utf8)
        bytes += b
    }

    public mutating func put(_ n: Int64) { put(String(n)) }
    public mutating func put(_ n: Int) { put(String(n)) }
    public mutating func put(_ d: Double) { put(String(d)) }
}

/// Reads what `StateWriter` wrote; a field cut short or not a number throws.
public struct StateReader {
    let bytes: [UInt8]
    public private(set) var at = 0

    public init(_ bytes: [UInt8]) { self.bytes = bytes }

    public var atEnd: Bool { at >= bytes.count }

    public mutating func take() throws(TransformStateError) -> String {
        guard let colon = bytes[at...].firstIndex(of: 0x3A), let n = Int(String(decoding: bytes[at..<colon], as: UTF8.self)),
            n >= 0, colon + 1 + n <= bytes.count
        else { throw TransformStateError("the state is cut at byte \(at)") }
        at = colon + 1 + n
        return String(decoding: bytes[(colon + 1)..<at], as: UTF8.self)
    }

    /// A field as raw bytes (what `put(bytes:)` wrote).
    public mutating func takeBytes() throws(TransformStateError) -> ArraySlice<UInt8> {
        guard let colon = bytes[at...].firstIndex(of: 0x3A), let n = Int(String(decoding: bytes[at..<colon], as: UTF8.self)),
            n >= 0, colon + 1 + n <= bytes.count
        else { throw TransformStateError("the state is cut at byte \(at)") }
        at = colon + 1 + n
        return bytes[(colon + 1)..<at]
    }

    public mutating func int() throws(TransformStateError) -> Int64 {
        let s = try take()
        guard let v = Int64(s) else { throw TransformStateError("not a number: \(s)") }
        return v
    }

    public mutating func double() throws(TransformStateError) -> Double {
        let s = try take()
        guard let v = Double(s) else { throw TransformStateError("not a number: \(s)") }
        return v
    }
}

/// State that cannot be read back (a transform's or a sink's).
public struct TransformStateError: Error, CustomStringConvertible, Sendable {
    public var description: String
    public init(_ d: String) { description = d }
}

/// Whose state a sink saves or gives back: every device's (one machine), or the devices of one
/// fleet partition (a worker saves each partition it holds apart, under that partition's epoch).
public struct DeviceScope: Sendable {
    private let test: @Sendable (String) -> Bool

    public static let all = DeviceScope { _ in true }

    public init(_ contains: @escaping @Sendable (String) -> Bool) { test = contains }

    public func contains(_ device: String) -> Bool { test(device) }
}
