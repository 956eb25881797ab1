import Glibc
import HealthgateCore

/// Writes `time level component: message` lines to standard error, one write(2) per line.
/// A message is one line whatever it quotes: control characters are written as escapes.
public struct StderrLogSink: LogSink {
    public let minimum: LogLevel

    public init(minimum: LogLevel = .info) { self.minimum = minimum }

    public func log(_ level: LogLevel, _ component: String, _ message: String) {
        guard level >= minimum else { return }
        var line = Array(SystemClock().now().rfc3339().utf8)
        line.append(0x20)
        line.append(contentsOf: level.description.utf8)
        line.append(0x20)
        line.append(contentsOf: component.utf8)
        line.append(contentsOf: ": ".utf8)
        StderrLogSink.appendEscaped(message, to: &line)
        line.append(0x0A)
        line.withUnsafeBytes { _ = Glibc.write(2, $0.baseAddress, $0.count) }
    }

    /// The one place log text is escaped: a line break, a carriage return or any other control
    /// character a sender put in a name cannot start a forged log line.
    public static func appendEscaped(_ text: String, to line: inout [UInt8]) {
        let hex = Array("0123456789abcdef".utf8)
        for b in text.utf8 {
            switch b {
            case 0x0A: line.append(contentsOf: [0x5C, 0x6E])
            case 0x0D: line.append(contentsOf: [0x5C, 0x72])
            case 0x09: line.append(contentsOf: [0x5C, 0x74])
            case 0..<0x20, 0x7F: line.append(contentsOf: [0x5C, 0x78, hex[Int(b >> 4)], hex[Int(b & 0xF)]])
            default: line.append(b)
            }
        }
    }
}
