import Glibc
import HealthgateCore
import Synchronization

/// Writes one line per event to standard error, one write(2) per line: logfmt by default
/// (`time=… level=info component=ingest msg="…"`), JSON with `log: {format: json}` (one object
/// a line: `time`, `level`, `component`, `msg`). The level and format can be set once the
/// config is read (`configure`). A message is one line whatever it quotes: this is the one place
/// log text is escaped, so a line break or a quote a sender put in a name cannot forge a line or
/// a field.
public final class StderrLogSink: LogSink {
    public enum Format: Int, Sendable, CaseIterable {
        case logfmt, json

        public var name: String { self == .logfmt ? "logfmt" : "json" }
        public init?(name: String) {
            guard let f = Format.allCases.first(where: { $0.name == name }) else { return nil }
            self = f
        }
    }

    private let minimumLevel: Atomic<Int>
    private let format: Atomic<Int>

    public init(minimum: LogLevel = .info, format: Format = .logfmt) {
        minimumLevel = Atomic(minimum.rawValue)
        self.format = Atomic(format.rawValue)
    }

    public var minimum: LogLevel { LogLevel(rawValue: minimumLevel.load(ordering: .relaxed)) ?? .info }

    /// What the config asks for, from now on.
    public func configure(minimum: LogLevel, format: Format) {
        minimumLevel.store(minimum.rawValue, ordering: .relaxed)
        self.format.store(format.rawValue, ordering: .relaxed)
    }

    public func log(_ level: LogLevel, _ component: String, _ message: String) {
        guard level >= minimum else { return }
        let line = StderrLogSink.line(
            level, component, message, time: SystemClock().now(),
            format: Format(rawValue: format.load(ordering: .relaxed)) ?? .logfmt)
        line.withUnsafeBytes { _ = Glibc.write(2, $0.baseAddress, $0.count) }
    }

    public static func line(_ level: LogLevel, _ component: String, _ message: String, time: Timestamp, format: Format) -> [UInt8] {
        var line: [UInt8] = []
        line.reserveCapacity(64 + message.utf8.count)
        // Milliseconds, always three digits: lines line up and sort as text.
        var stamp = Timestamp(seconds: time.seconds).rfc3339()
        let ms = Int(time.nanoseconds / 1_000_000)
        stamp.removeLast()
        stamp += "." + String(ms / 100) + String(ms / 10 % 10) + String(ms % 10) + "Z"
        switch format {
        case .logfmt:
            line += "time=".utf8; line += stamp.utf8
            line += " level=".utf8; line += level.description.utf8
            line += " component=".utf8; appendLogfmtValue(component, to: &line)
            line += " msg=".utf8; appendQuoted(message, to: &line)
        case .json:
            line += "{\"time\":\"".utf8; line += stamp.utf8
            line += "\",\"level\":\"".utf8; line += level.description.utf8
            line += "\",\"component\":".utf8; appendQuoted(component, to: &line)
            line += ",\"msg\":".utf8; appendQuoted(message, to: &line)
            line.append(0x7D)
        }
        line.append(0x0A)
        return line
    }

    /// A logfmt value: bare when it is a plain word, else quoted.
    static func appendLogfmtValue(_ text: String, to line: inout [UInt8]) {
        if !text.isEmpty && text.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F && $0 != 0x22 && $0 != 0x3D && $0 != 0x5C }) {
            line += text.utf8
        } else {
            appendQuoted(text, to: &line)
        }
    }

    /// `"text"` with `"` and `\` escaped and every control character written as an escape —
    /// valid as a logfmt value and as a JSON string alike.
    public static func appendQuoted(_ text: String, to line: inout [UInt8]) {
        line.append(0x22)
        appendEscaped(text, to: &line, quotes: true)
        line.append(0x22)
    }

    /// The one place log text is escaped.
    public static func appendEscaped(_ text: String, to line: inout [UInt8], quotes: Bool = false) {
        let hex = Array("0123456789abcdef".utf8)
        for b in text.utf8 {
            switch b {
            case 0x0A: line.append(contentsOf: [0x5C, 0x6E])
            case 0x0D: line.append(contentsOf: [0x5C, 0x72])
            case 0x09: line.append(contentsOf: [0x5C, 0x74])
            case 0x22 where quotes: line.append(contentsOf: [0x5C, 0x22])
            case 0x5C where quotes: line.append(contentsOf: [0x5C, 0x5C])
            case 0..<0x20, 0x7F: line.append(contentsOf: [0x5C, 0x75, 0x30, 0x30, hex[Int(b >> 4)], hex[Int(b & 0xF)]])
            default: line.append(b)
            }
        }
    }
}
