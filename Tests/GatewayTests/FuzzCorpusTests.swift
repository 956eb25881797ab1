import Foundation
import FuzzTargets
import HealthgateCore
import Testing
import CanonicalJSON

/// The fuzz targets' committed corpora (Tests/Fuzz/corpus, seeds from the tests' own bodies and
/// what fuzzing added) and every finding's reproducer (Tests/Fuzz/findings) run through their
/// targets in every `make test`: a finding fixed stays fixed. And the oracles do catch what they
/// are there for.
@Suite struct FuzzCorpusTests {
    static let root =
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().path + "/Tests/Fuzz"

    static func inputs(_ sub: String, _ target: String) -> [String] {
        let dir = root + "/" + sub + "/" + target
        return ((try? FileManager.default.contentsOfDirectory(atPath: dir)) ?? []).filter { !$0.hasPrefix(".") }.sorted()
            .map { dir + "/" + $0 }
    }

    @Test(arguments: FuzzTargets.all.map(\.name))
    func everyCommittedInputAndFindingRunsClean(target name: String) throws {
        let target = try #require(FuzzTargets.named(name))
        let corpus = Self.inputs("corpus", name)
        #expect(corpus.count >= 2, "the \(name) corpus has \(corpus.count) inputs")
        for file in corpus + Self.inputs("findings", name) {
            let bytes = try #require(FileManager.default.contents(atPath: file), "\(file)")
            target(Array(bytes)) // a finding stops the run with its reason
        }
    }

    @Test func theOraclesCatchWhatTheyAreFor() {
        let ok = HTTPResponse(status: 200, headers: [], body: [])
        #expect(FuzzTargets.problem(nil, .answer(ok), of: "t") == nil)
        #expect(FuzzTargets.problem(nil, .answer(HTTPResponse(status: 503, headers: [], body: [])), of: "t")?.contains("503") == true)
        #expect(FuzzTargets.problem(HTTPResponse(status: 500, headers: [], body: []), .answer(ok), of: "t") != nil)
        #expect(FuzzTargets.problem(nil, .unreadable(status: 400, reason: "x"), of: "t") == nil)
        #expect(FuzzTargets.problem(nil, .unreadable(status: 500, reason: "x"), of: "t") != nil)
        let batch = ReceivedBatch()
        #expect(FuzzTargets.problem(nil, .accept(batch, reply: ok), of: "t") == nil)
        #expect(FuzzTargets.problem(nil, .accept(batch, reply: HTTPResponse(status: 400, headers: [], body: [])), of: "t") == nil)
        #expect(FuzzTargets.problem(nil, .accept(batch, reply: HTTPResponse(status: 503, headers: [], body: [])), of: "t") != nil)
        #expect(FuzzTargets.problem(link: "syncky://webhook?v=1&name=a%20b") == nil)
        #expect(FuzzTargets.problem(link: "syncky://webhook?v=1&name=a b") != nil)
        #expect(FuzzTargets.problem(link: "syncky://webhook?v=1&name=é") != nil)
    }
}
