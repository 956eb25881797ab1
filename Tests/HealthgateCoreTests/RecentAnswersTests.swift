import HealthgateCore
import Testing

/// The receivers' registry caches: an answer is worked out once while it is among the last
/// eight asked, again once it has been pushed out, and never mixed up with another's.
@Suite struct RecentAnswersTests {
    @Test func keepsTheLastEightAnswers() {
        var cache = RecentAnswers<Int>()
        var made: [String] = []
        func ask(_ key: String) -> Int { cache.value(key) { made.append(key); return key.utf8.count } }
        for key in ["a", "bb", "ccc", "a", "bb"] { #expect(ask(key) == key.utf8.count) }
        #expect(made == ["a", "bb", "ccc"])
        made = []
        let keys = (0..<9).map { String(repeating: "x", count: $0 + 4) }
        for key in keys { _ = ask(key) }   // nine new keys: "a", "bb", "ccc" pushed out, and the first of these
        #expect(ask(keys[8]) == 12 && ask("a") == 1)
        #expect(made == keys + ["a"])
    }
}
