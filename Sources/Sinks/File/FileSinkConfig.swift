import SinkKit
import YAMLConfig

/// `kind: file` — NDJSON canonical records into files named by a template.
///
/// ```yaml
/// archive: {kind: file, path: "archive/{device}/{date}.ndjson", rotate_bytes: 256MiB}
/// ```
/// `path` placeholders: `{device}`, `{receiver}`, `{date}` (the record's start date in UTC,
/// `YYYY-MM-DD`; the delivery date for records without a start, such as deletions),
/// `{type}`, `{kind}`. A relative path is under the data dir. Values are made safe for a file
/// name (`/` and a leading `.` become `_`).
public struct FileSinkConfig: Decodable, Sendable {
    public var kind: String
    public var path: String
    /// A file that reaches this size is renamed to `<name>.<n>.ndjson` and a new one started.
    public var rotate_bytes: ByteSize?
    public var batch: BatchConfig?
    public var retry: RetryConfig?
    public var queue: QueueConfig?

    public static let defaultRotateBytes: Int64 = 256 << 20
}
