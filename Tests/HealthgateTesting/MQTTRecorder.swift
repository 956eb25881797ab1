import Foundation
import Glibc
import Posix
import SinkMQTT

/// A subscriber that keeps every message it gets on `topic` (wildcards allowed), on a thread of
/// its own: what a consumer of healthgate's topics would see. (In process, unlike mosquitto_sub:
/// a child process left for Foundation to reap after its Process object is gone has crashed
/// libdispatch.)
public final class MQTTRecorder: @unchecked Sendable {
    private let lock = NSLock()
    private var messages: [(topic: String, payload: [UInt8])] = []
    private var stopping = false
    private var thread: pthread_t?

    public init(port: UInt16, topic: String) throws {
        var o = MQTTClient.Options(host: "127.0.0.1", port: Int(port), clientID: "recorder-\(UUID().uuidString.prefix(8))")
        o.timeoutSeconds = 5
        let ready = NSCondition()
        var failure: String?
        var subscribed = false
        let started = startThread { [self] in
            do {
                let c = try MQTTClient(options: o)
                c.onMessage = { [self] t, p in
                    lock.lock()
                    messages.append((t, p))
                    lock.unlock()
                }
                try c.connect()
                try c.subscribe(topic, qos: 1)
                for _ in 0..<5 { c.service(milliseconds: 20) }
                ready.lock(); subscribed = true; ready.signal(); ready.unlock()
                while !isStopping { c.service(milliseconds: 50) }
                c.disconnect()
            } catch {
                ready.lock(); failure = "\(error)"; ready.signal(); ready.unlock()
            }
        }
        if case .success(let t) = started { thread = t }
        ready.lock()
        while !subscribed && failure == nil { ready.wait() }
        ready.unlock()
        if let failure { throw ServeError(description: "the recorder cannot subscribe: \(failure)") }
    }

    deinit { stop() }

    private var isStopping: Bool { lock.lock(); defer { lock.unlock() }; return stopping }

    public func stop() {
        lock.lock()
        stopping = true
        lock.unlock()
        if let t = thread {
            pthread_join(t, nil)
            thread = nil
        }
    }

    /// The payloads so far, as text, in order.
    public var payloads: [String] {
        lock.lock()
        defer { lock.unlock() }
        return messages.map { String(decoding: $0.payload, as: UTF8.self) }
    }

    /// Every message so far, topic and payload as text, in order.
    public var received: [(topic: String, payload: String)] {
        lock.lock()
        defer { lock.unlock() }
        return messages.map { ($0.topic, String(decoding: $0.payload, as: UTF8.self)) }
    }
}
