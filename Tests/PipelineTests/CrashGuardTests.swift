import Foundation
import Glibc
import HealthgateCore
@testable import Pipeline
import Posix
import Testing

/// The crash-loop guard's counting: deaths on the sink at one cursor, three starts in a row,
/// pause it; a death elsewhere starts the count again; a start its predecessor did not die on
/// forgets it; `resume` is what clears a pause.
@Suite struct CrashGuardTests {
    let logger = Logger(component: "test", sink: StderrLogSink(minimum: .error))
    let now = Timestamp(seconds: 1_800_000_000)

    func fresh() throws -> (CrashNote, CrashGuard) {
        var template = Array("\(NSTemporaryDirectory())/cg-XXXXXX".utf8CString)
        let dir = template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)) }
        return (CrashNote.of(sink: "s", directory: dir), CrashGuard(sink: "s", sinkDirectory: dir))
    }

    /// What the signal handler does on a sink's thread, and on its read-ahead's.
    func die(_ note: CrashNote, ahead: Bool = false, at from: Cursor, workedTo: Cursor, readTo: Cursor = Cursor(seq: 1, skip: 0)) {
        note.work(from: from, to: workedTo)
        note.readAhead(to: readTo)
        (ahead ? note.aheadSlot : note.slot)?.storeBytes(of: UInt32(SIGABRT), as: UInt32.self)
    }

    @Test func threeDeathsAtOnePlacePauseTheSink() throws {
        let (note, g) = try fresh()
        let at = Cursor(seq: 7, skip: 3)
        for start in 1...2 {
            die(note, at: at, workedTo: Cursor(seq: 9, skip: 0))
            #expect(g.check(note: note, cursor: at, now: now, logger: logger) == nil, "start \(start)")
        }
        die(note, at: at, workedTo: Cursor(seq: 9, skip: 0))
        let pause = try #require(g.check(note: note, cursor: at, now: now, logger: logger))
        #expect(pause.from == at && pause.to == Cursor(seq: 9, skip: 0) && pause.crashes == 3 && pause.signal == SIGABRT)
        // Still paused at the next start, whatever it finds; the signal was read once.
        #expect(note.signals.drainer == 0)
        #expect(g.check(note: note, cursor: at, now: now, logger: logger) == pause)
        #expect(g.resumeAsked() == nil)
        try g.requestResume(skip: true)
        #expect(g.resumeAsked() == true)
        g.clear()
        #expect(g.paused() == nil && g.resumeAsked() == false)
    }

    @Test func aDeathElsewhereOrACleanStartCountsAgainFromOne() throws {
        let (note, g) = try fresh()
        let a = Cursor(seq: 7, skip: 0), b = Cursor(seq: 8, skip: 0)
        die(note, at: a, workedTo: b)
        #expect(g.check(note: note, cursor: a, now: now, logger: logger) == nil)
        die(note, at: a, workedTo: b)
        #expect(g.check(note: note, cursor: a, now: now, logger: logger) == nil)
        // The sink moved on before the third death: one at the new place.
        die(note, at: b, workedTo: b)
        #expect(g.check(note: note, cursor: b, now: now, logger: logger) == nil)
        // A start that did not die on this sink forgets the count.
        #expect(g.check(note: note, cursor: b, now: now, logger: logger) == nil)
        for _ in 1...2 {
            die(note, at: b, workedTo: b)
            #expect(g.check(note: note, cursor: b, now: now, logger: logger) == nil)
        }
        die(note, at: b, workedTo: b)
        #expect(g.check(note: note, cursor: b, now: now, logger: logger)?.crashes == 3)
    }

    /// A death on the read-ahead's thread takes in what it had read, not the drainer's batch.
    @Test func aDeathOnTheReadAheadCoversWhatItRead() throws {
        let (note, g) = try fresh()
        let at = Cursor(seq: 2, skip: 0)
        var pause: CrashGuard.Pause?
        for _ in 1...3 {
            die(note, ahead: true, at: at, workedTo: Cursor(seq: 3, skip: 0), readTo: Cursor(seq: 40, skip: 0))
            pause = g.check(note: note, cursor: at, now: now, logger: logger)
        }
        #expect(pause?.to == Cursor(seq: 40, skip: 0))
    }
}
