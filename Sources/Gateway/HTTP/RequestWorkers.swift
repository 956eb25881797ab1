import CLinux
import Glibc
import Posix

/// The threads that answer requests, taking whole requests in the order they came in, from
/// every connection alike.
///
/// libmicrohttpd keeps each connection on the pool thread that accepted it, and accepts several
/// in a row on one, so connections opened together crowd a few threads and their requests wait
/// on each other while other threads idle. libmicrohttpd's threads only read bodies and write
/// answers: a whole request is suspended there, answered here, and resumed.
final class RequestWorkers: @unchecked Sendable {
    private let monitor = Monitor()
    /// Requests taken from connections, each answered by a worker; `head` is the next one. The
    /// ones taken are dropped once they are most of the array (under steady load the queue may
    /// never run empty: it would otherwise grow by every request ever answered).
    private var queue: [() -> Void] = []
    private var head = 0
    private var stopping = false
    private var threads: [pthread_t] = []

    /// Starts `count` threads (at least one).
    init(count: Int) {
        for _ in 0..<max(1, count) {
            if case .success(let t) = startThread({ [self] in work() }) { threads.append(t) }
        }
    }

    /// Whether any thread runs (none could be started: the caller answers on its own thread).
    var isRunning: Bool { !threads.isEmpty }

    /// Queues a request's answering; false when stopped (the caller answers it itself).
    func submit(_ run: @escaping () -> Void) -> Bool {
        monitor.withLock {
            guard !stopping else { return false }
            queue.append(run)
            monitor.signal()
            return true
        }
    }

    private func work() {
        // Intake runs a little below the sink drainers, so delivery keeps pace with it when
        // the CPU is short instead of falling ever further behind.
        hg_nice_this_thread_once(2)
        while true {
            monitor.lock()
            while head == queue.count && !stopping { monitor.wait() }
            if head == queue.count {
                monitor.unlock()
                return
            }
            let run = queue[head]
            head += 1
            if head == queue.count {
                queue.removeAll(keepingCapacity: true)
                head = 0
            } else if head >= 64 && head * 2 >= queue.count {
                queue.removeFirst(head)
                head = 0
            }
            monitor.unlock()
            run()
        }
    }

    /// Requests the queue holds, answered ones not yet dropped included (for tests).
    var held: Int { monitor.withLock { queue.count } }

    /// Answers every request queued, then ends the threads. Before libmicrohttpd stops: it must
    /// have no connection suspended then.
    func stop() {
        monitor.withLock {
            stopping = true
            monitor.broadcast()
        }
        for t in threads { pthread_join(t, nil) }
        threads = []
    }
}
