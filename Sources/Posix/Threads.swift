import Glibc

/// A closure boxed for pthread_create's one pointer, with its creator's crash slot.
private final class ThreadBody {
    let run: () -> Void
    let slot: UnsafeMutableRawPointer?
    init(_ run: @escaping () -> Void) {
        self.run = run
        slot = CrashAttribution.currentSlot
    }
}

/// Starts a POSIX thread running `body` (the gateway's long-lived threads: drainers, the
/// status writer, the connection guard); returns it for `pthread_join`, or the error number.
/// The thread carries its creator's crash slot (`CrashAttribution`).
public func startThread(_ body: @escaping () -> Void) -> Result<pthread_t, IOError> {
    let box = Unmanaged.passRetained(ThreadBody(body))
    var t = pthread_t()
    let rc = pthread_create(
        &t, nil,
        { raw in
            let body = Unmanaged<ThreadBody>.fromOpaque(raw!).takeRetainedValue()
            CrashAttribution.setSlot(body.slot)
            body.run()
            return nil
        }, box.toOpaque())
    if rc != 0 {
        box.release()
        return .failure(IOError("pthread_create", "thread", code: rc))
    }
    return .success(t)
}

/// A job on a helper thread of its own, joined once for its result (fork and join: between the
/// two only the helper touches what the job uses). Run on the caller's thread when no thread
/// can be had. For the sinks' requests in flight and the drainer's read-ahead.
public final class Forked<Result> {
    private var thread: pthread_t?
    private var result: Result?

    public init(_ body: @escaping () -> Result) {
        switch startThread({ self.result = body() }) {
        case .success(let t): thread = t
        case .failure: result = body()
        }
    }

    /// Waits for the job, once, and gives what it returned.
    public func join() -> Result {
        if let t = thread {
            pthread_join(t, nil)
            thread = nil
        }
        return result!
    }
}
