@testable import Gateway
import HealthgateCore
import HealthgateCrypto
@testable import HealthgateTesting
@testable import Pipeline
import SinkKit
import Testing

/// The guide's section 6 rules, on its own worked examples.
@Suite struct SynckySignatureTests {
    let now = Timestamp(seconds: 1_791_961_500)

    func verify(
        _ body: String = Vectors.checkBody, timestamp: String? = Vectors.checkTimestamp,
        signature: String? = Vectors.checkSignature, now: Timestamp? = nil,
        cache: ReplayCache = ReplayCache()
    ) -> SynckySignature.Failure? {
        let s = SynckySignature(secret: Vectors.secret, replays: cache)
        return Array(body.utf8).withUnsafeBytes {
            s.verify(timestamp: timestamp, signature: signature, body: $0, now: now ?? self.now)
        }
    }

    @Test func acceptsTheCheckConnectionVector() {
        #expect(verify() == nil)
    }

    @Test func acceptsTheResultsVector() {
        #expect(
            verify(
                Vectors.resultsBody, timestamp: Vectors.resultsTimestamp, signature: Vectors.resultsSignature,
                now: Timestamp(seconds: 1_791_961_953)) == nil)
    }

    @Test func refusesABodyChangedByOneByte() {
        var bytes = Array(Vectors.checkBody.utf8)
        for i in [0, 17, bytes.count / 2, bytes.count - 1] {
            var b = bytes
            b[i] ^= 0x01
            let body = String(decoding: b, as: UTF8.self)
            #expect(verify(body) == .mismatch, "byte \(i)")
        }
        bytes.append(0x20)
        #expect(verify(String(decoding: bytes, as: UTF8.self)) == .mismatch)
    }

    @Test func refusesUppercaseHexV0AndAMissingPrefix() {
        let hex = String(Vectors.checkSignature.dropFirst(3))
        #expect(verify(signature: "v1=" + hex.uppercased()) == .mismatch)
        #expect(verify(signature: "v0=" + hex) == .mismatch)
        #expect(verify(signature: hex) == .mismatch)
        #expect(verify(signature: Vectors.checkSignature + "0") == .mismatch)
        #expect(verify(signature: nil) == .missing)
        #expect(verify(timestamp: nil) == .missing)
    }

    @Test func refusesAChangedTimestamp() {
        #expect(verify(timestamp: "1791961501") == .mismatch)
        #expect(verify(timestamp: "17919615OO") == .badTimestamp)
        #expect(verify(timestamp: "-1791961500") == .badTimestamp)
        #expect(verify(timestamp: "1234567890123456") == .badTimestamp)
    }

    @Test func acceptsWithinThreeHundredSecondsEachWayOnly() {
        #expect(verify(now: Timestamp(seconds: 1_791_961_800)) == nil)
        #expect(verify(now: Timestamp(seconds: 1_791_961_200)) == nil)
        #expect(verify(now: Timestamp(seconds: 1_791_961_801)) == .expired)
        #expect(verify(now: Timestamp(seconds: 1_791_961_199)) == .expired)
    }

    @Test func refusesAReplayedSignature() {
        let cache = ReplayCache()
        #expect(verify(cache: cache) == nil)
        #expect(verify(cache: cache) == .replayed)
        // Another receiver's cache has not seen it.
        #expect(verify(cache: ReplayCache()) == nil)
    }

    /// Past ~100,000 signatures the cache used to scan itself on every insert (signed intake
    /// 40 % slower; 10,000 inserts at that size took tens of seconds). Now the 10,000 inserts after
    /// 190,000 cost within a small factor of the first 10,000 (cache and load effects aside).
    @Test func theReplayCacheStaysCheapAtAnySize() {
        let cache = ReplayCache()
        let clock = ContinuousClock()
        func batch(_ from: Int) -> Duration {
            clock.measure { for i in from..<(from + 10_000) { _ = cache.insert("v1=sig\(i)", time: 1000, now: 1000) } }
        }
        let first = batch(0)
        for from in stride(from: 10_000, to: 190_000, by: 10_000) { _ = batch(from) }
        let late = batch(190_000)
        #expect(cache.count == 200_000)
        #expect(late < first * 20 + .milliseconds(500), "first 10k: \(first), after 190k: \(late)")
        // Entries leave once their window has passed, and only then.
        #expect(cache.insert("v1=sig5", time: 1000, now: 1300) == false)
        #expect(cache.insert("v1=new", time: 1301, now: 1301) == true)
        #expect(cache.count == 1)
        #expect(cache.insert("v1=sig5", time: 1301, now: 1301) == true)
    }

    @Test func theReplayCacheFileSurvivesARestartAndStaysSmall() throws {
        let path = ServeProcess.makeTempDir("replay") + "/cache"
        let a = ReplayCache(path: path)
        for i in 0..<30_000 { _ = a.insert("v1=s\(i)", time: Int64(1000 + i / 100), now: Int64(1000 + i / 100)) }
        let b = ReplayCache(path: path)
        #expect(b.insert("v1=s29999", time: 1299, now: 1299) == false, "remembered after a restart")
        #expect(b.insert("v1=s0", time: 1350, now: 1350) == true, "expired: 350 s old")
        let lines = try String(contentsOfFile: path, encoding: .utf8).split(separator: "\n").count
        #expect(lines < 30_000 + 10_000, "\(lines)")
    }

    @Test func signsRepliesExactlyAsSectionTen() {
        let s = SynckySignature(secret: Vectors.secret)
        #expect(
            s.signReply(delivery: Vectors.commandsDelivery, t: 1_791_961_923, body: Array(Vectors.commandsBody.utf8))
                == Vectors.commandsSignature)
        #expect(
            s.signReply(delivery: Vectors.deleteDelivery, t: 1_791_965_523, body: Array(Vectors.deleteBody.utf8))
                == Vectors.deleteSignature)
    }
}

@Suite struct AuthenticatorTests {
    func request(_ headers: [(String, String)]) -> HTTPRequest {
        HTTPRequest(method: "POST", path: "/x", headers: headers.map { (name: $0.0, value: $0.1) })
    }

    @Test func bearer() {
        let a = Authenticator(kind: .bearer, token: "secret-token")
        #expect(a.check(request([("Authorization", "Bearer secret-token")])) == nil)
        #expect(a.check(request([("authorization", "bearer secret-token")])) == nil)
        #expect(a.check(request([("Authorization", "Bearer secret-tokex")]))?.status == 401)
        #expect(a.check(request([("Authorization", "Bearer secret-token ")]))?.status == 401)
        #expect(a.check(request([]))?.header("WWW-Authenticate") == "Bearer")
        #expect(a.check(request([("Authorization", "Token secret-token")]))?.status == 401)
    }

    @Test func basic() {
        let a = Authenticator(kind: .basic, token: "pa:ss", user: "me")
        // base64("me:pa:ss") — the password may contain a colon, the user may not.
        #expect(a.check(request([("Authorization", "Basic bWU6cGE6c3M=")])) == nil)
        #expect(a.check(request([("Authorization", "Basic bWU6cGFzcw==")]))?.status == 401)
        #expect(a.check(request([("Authorization", "Basic !!!")]))?.status == 401)
    }

    @Test func customHeader() {
        let a = Authenticator(kind: .header, token: "k3y", header: "X-Api-Key")
        #expect(a.check(request([("x-api-key", "k3y")])) == nil)
        #expect(a.check(request([("X-Api-Key", "k3")]))?.status == 401)
        #expect(a.check(request([("Authorization", "Bearer k3y")]))?.status == 401)
    }

    @Test func none() {
        #expect(Authenticator(kind: .none).check(request([])) == nil)
    }

    @Test func problemsNeverEchoTheToken() {
        let a = Authenticator(kind: .bearer, token: "secret-token")
        let r = a.check(request([("Authorization", "Bearer wrong-guess")]))!
        #expect(!r.bodyText.contains("secret-token"))
        #expect(!r.bodyText.contains("wrong-guess"))
        #expect(r.header("Content-Type") == "application/problem+json")
    }
}
