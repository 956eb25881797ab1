import Glibc

/// A value behind a pthread mutex: `withLock` gives the body the value to read and change.
/// In place of the standard library's `Mutex`, whose Linux futex ThreadSanitizer cannot see:
/// under it every access the lock orders is reported as a race, and `make test-tsan` would
/// find nothing true among them.
public final class Locked<Value>: @unchecked Sendable {
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private var value: Value

    public init(_ value: Value) {
        self.value = value
        pthread_mutex_init(mutex, nil)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    @inline(__always)
    public func withLock<R, E: Error>(_ body: (inout Value) throws(E) -> R) throws(E) -> R {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value)
    }
}
