import Glibc

/// Which part of the process a fatal signal came from: a thread may carry a slot (a pointer to
/// a `UInt32` in memory that outlives the process, e.g. a shared mapping of a file), and when
/// the process dies of a fault or an abort on that thread, the handler stores the signal's
/// number there before the previous handler (the Swift runtime's backtracer, or the default)
/// runs. Threads started with `startThread` (and so `Forked`) carry their creator's slot: a
/// sink's helper threads are the sink's. A drainer uses it to learn, after a crash, that its
/// sink was the one working (`CrashNote`).
public enum CrashAttribution {
    /// The signals a crash ends in: Swift traps (SIGILL, SIGTRAP), `fatalError` and failed
    /// allocations (SIGABRT), bad memory (SIGSEGV, SIGBUS), arithmetic (SIGFPE).
    static let signals: [Int32] = [SIGSEGV, SIGBUS, SIGILL, SIGTRAP, SIGFPE, SIGABRT]

    /// The pthread key of each thread's slot (made at first use, before any handler runs).
    private static let key: pthread_key_t = {
        var k = pthread_key_t()
        pthread_key_create(&k, nil)
        return k
    }()
    /// The handlers that were there before ours, by signal number: made once, never freed (the
    /// handler reads them); set before any of ours is installed.
    nonisolated(unsafe) private static var previous: UnsafeMutablePointer<sigaction>?
    private static let installed = Locked(false)

    /// Installs the handler once per process (later calls do nothing).
    public static func install() {
        installed.withLock { done in
            guard !done else { return }
            done = true
            _ = key
            let saved = UnsafeMutablePointer<sigaction>.allocate(capacity: 65)
            saved.initialize(repeating: sigaction(), count: 65)
            previous = saved
            for sig in signals {
                var action = sigaction()
                action.__sigaction_handler.sa_sigaction = { sig, info, context in
                    CrashAttribution.handle(sig, info, context)
                }
                action.sa_flags = SA_SIGINFO | SA_ONSTACK
                sigemptyset(&action.sa_mask)
                sigaction(sig, &action, saved + Int(sig))
            }
        }
    }

    /// The calling thread's slot (nil: none).
    public static var currentSlot: UnsafeMutableRawPointer? { pthread_getspecific(key) }

    /// Gives the calling thread a slot (nil takes it away). The handler must be installed for
    /// a crash to be noted in it (`serve` installs it at start).
    public static func setSlot(_ slot: UnsafeMutableRawPointer?) {
        pthread_setspecific(key, slot)
    }

    /// Runs on the crashing thread: only a load of the key and a store into the slot, then the
    /// handler that was there before, as if ours had not been (async-signal-safe: no allocation,
    /// no lock).
    private static func handle(_ sig: Int32, _ info: UnsafeMutablePointer<siginfo_t>?, _ context: UnsafeMutableRawPointer?) {
        if let slot = pthread_getspecific(key) {
            slot.storeBytes(of: UInt32(bitPattern: sig), as: UInt32.self)
        }
        guard let previous else { return }
        let before = previous + Int(sig)
        // Back to the handler before ours; a fault the kernel raised happens again as the
        // instruction is retried, and one sent (abort's raise) is sent again, pending until
        // this handler returns (its signal is blocked while it runs).
        sigaction(sig, before, nil)
        let sent = (info?.pointee.si_code ?? 0) <= 0
        if sent || sig == SIGTRAP || sig == SIGABRT { raise(sig) }
    }
}
