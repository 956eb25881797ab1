import HealthgateCore
import Testing

/// The last-eight caches (the registry's on ingest, the transforms', the point index's): an answer is worked out once while it is among the last
/// eight asked, again once it has been pushed out, and never mixed up with another's.
@Suite struct RecentAnswersTests {
    @Test func keepsTheLastEightAnswers() {
        var cache = RecentAnswers<String, Int>()
        var made: [String] = []
        func ask(_ key: String) -> Int {
            cache.value(key) {
                made.append(key); return key.utf8.count
            }
        }
        for key in ["a", "bb", "ccc", "a", "bb"] { #expect(ask(key) == key.utf8.count) }
        #expect(made == ["a", "bb", "ccc"])
        made = []
        let keys = (0..<9).map { String(repeating: "x", count: $0 + 4) }
        for key in keys { _ = ask(key) } // nine new keys: "a", "bb", "ccc" pushed out, and the first of these
        #expect(ask(keys[8]) == 12 && ask("a") == 1)
        #expect(made == keys + ["a"])
        cache.removeAll()
        made = []
        #expect(ask("a") == 1 && made == ["a"])
    }

    /// A key is found by its own `isSame`: two keys equal by it share an answer, keys it tells
    /// apart (here by a field it alone looks at) never do.
    @Test func findsKeysByTheirOwnComparison() {
        struct Pair: RecentKey {
            var name: String
            var note: Int // not part of the key
            func isSame(as other: Pair) -> Bool { name == other.name }
        }
        var cache = RecentAnswers<Pair, String>()
        #expect(cache.answer(for: Pair(name: "hr", note: 1)) == nil)
        cache.keep(Pair(name: "hr", note: 1), "heart rate")
        cache.keep(Pair(name: "st", note: 2), "steps")
        #expect(cache.answer(for: Pair(name: "hr", note: 9)) == "heart rate")
        #expect(cache.answer(for: Pair(name: "st", note: 1)) == "steps")
        #expect(cache.answer(for: Pair(name: "h", note: 1)) == nil)
    }
}
