import Glibc
import HealthgateCore

/// Writes `time level component: message` lines to standard error, one write(2) per line.
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
        line.append(contentsOf: message.utf8)
        line.append(0x0A)
        line.withUnsafeBytes { _ = Glibc.write(2, $0.baseAddress, $0.count) }
    }
}
