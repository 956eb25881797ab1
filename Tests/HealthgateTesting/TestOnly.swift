import CanonicalJSON
import HealthgateCore
import Transforms

// Helpers only the tests need, kept out of the modules they extend.

extension CanonicalCodec {
    /// One record as its NDJSON line, without the line feed.
    public static func encodeLine(_ r: CanonicalRecord) -> [UInt8] {
        var out = [UInt8]()
        encode(r, into: &out)
        out.removeLast()
        return out
    }
}

extension TransformRegistry {
    public static var names: [String] { builders.map(\.name) }

    public static func builder(named name: String) -> Builder? {
        builders.first { $0.name == name }?.build
    }
}
