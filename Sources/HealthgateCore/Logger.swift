import Synchronization

/// Where components say what happened. Components are given a logger; they never build one.
/// Messages never contain a token, a secret or a health value.
public protocol LogSink: Sendable {
    func log(_ level: LogLevel, _ component: String, _ message: String)
}

public enum LogLevel: Int, Sendable, Comparable, CustomStringConvertible {
    case debug, info, warning, error

    public static func < (a: LogLevel, b: LogLevel) -> Bool { a.rawValue < b.rawValue }

    public var description: String {
        switch self {
        case .debug: return "debug"
        case .info: return "info"
        case .warning: return "warning"
        case .error: return "error"
        }
    }
}

public struct Logger: Sendable {
    public let component: String
    let sink: any LogSink

    public init(component: String, sink: any LogSink) {
        self.component = component
        self.sink = sink
    }

    public func child(_ component: String) -> Logger { Logger(component: component, sink: sink) }

    public func debug(_ m: @autoclosure () -> String) { sink.log(.debug, component, m()) }
    public func info(_ m: @autoclosure () -> String) { sink.log(.info, component, m()) }
    public func warning(_ m: @autoclosure () -> String) { sink.log(.warning, component, m()) }
    public func error(_ m: @autoclosure () -> String) { sink.log(.error, component, m()) }
}

/// Keeps every line in memory, for tests.
public final class MemoryLogSink: LogSink {
    public struct Line: Sendable, Equatable {
        public var level: LogLevel
        public var component: String
        public var message: String
    }

    private let lines = Mutex<[Line]>([])

    public init() {}

    public func log(_ level: LogLevel, _ component: String, _ message: String) {
        lines.withLock { $0.append(Line(level: level, component: component, message: message)) }
    }

    public var all: [Line] { lines.withLock { $0 } }
}
