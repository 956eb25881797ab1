import Glibc

/// A closure boxed for pthread_create's one pointer.
private final class ThreadBody {
    let run: () -> Void
    init(_ run: @escaping () -> Void) { self.run = run }
}

/// Starts a POSIX thread running `body` (the gateway's long-lived threads: drainers, the
/// status writer, the connection guard); returns it for `pthread_join`, or the error number.
public func startThread(_ body: @escaping () -> Void) -> Result<pthread_t, IOError> {
    let box = Unmanaged.passRetained(ThreadBody(body))
    var t = pthread_t()
    let rc = pthread_create(&t, nil, { raw in
        Unmanaged<ThreadBody>.fromOpaque(raw!).takeRetainedValue().run()
        return nil
    }, box.toOpaque())
    if rc != 0 {
        box.release()
        return .failure(IOError("pthread_create", "thread", code: rc))
    }
    return .success(t)
}
