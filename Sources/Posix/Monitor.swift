import Glibc

/// A mutex with a condition variable, for threads that must wait for each other
/// (group commit, drainers waiting for new journal entries). Swift's `Mutex` has no wait.
public final class Monitor: @unchecked Sendable {
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let cond = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)

    public init() {
        pthread_mutex_init(mutex, nil)
        var attr = pthread_condattr_t()
        pthread_condattr_init(&attr)
        pthread_condattr_setclock(&attr, CLOCK_MONOTONIC)
        pthread_cond_init(cond, &attr)
        pthread_condattr_destroy(&attr)
    }

    deinit {
        pthread_cond_destroy(cond)
        pthread_mutex_destroy(mutex)
        cond.deallocate()
        mutex.deallocate()
    }

    public func lock() { pthread_mutex_lock(mutex) }
    public func unlock() { pthread_mutex_unlock(mutex) }

    @inline(__always)
    public func withLock<R>(_ body: () throws -> R) rethrows -> R {
        lock()
        defer { unlock() }
        return try body()
    }

    /// Waits for a broadcast; the lock must be held.
    public func wait() { pthread_cond_wait(cond, mutex) }

    /// Waits for a broadcast or until `seconds` pass; the lock must be held.
    public func wait(seconds: Double) {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        let whole = Int(seconds)
        var nsec = Int(ts.tv_nsec) + Int((seconds - Double(whole)) * 1e9)
        var sec = Int(ts.tv_sec) + whole
        if nsec >= 1_000_000_000 { sec += 1; nsec -= 1_000_000_000 }
        ts.tv_sec = sec
        ts.tv_nsec = nsec
        pthread_cond_timedwait(cond, mutex, &ts)
    }

    public func broadcast() { pthread_cond_broadcast(cond) }

    /// Wakes one waiter (for one piece of work: the others need not wake to find it gone).
    public func signal() { pthread_cond_signal(cond) }
}
