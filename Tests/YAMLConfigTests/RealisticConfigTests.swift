import Testing
import YAMLConfig

@Suite("The sample healthgate config")
struct RealisticConfigTests {
    @Test("decodes into nested structs, enums, arrays and dictionaries")
    func decodesSampleConfig() throws {
        let config = try decode(HealthgateConfig.self, sampleConfig, environment: sampleEnvironment)

        #expect(config.listen == "0.0.0.0:8080")
        #expect(config.dataDir == "./healthgate-data")
        #expect(config.logLevel == nil)

        let phone = try #require(config.receivers["my-iphone"])
        #expect(
            phone
                == Receiver(
                    kind: .syncky, path: "/syncky/my-iphone",
                    auth: Auth(type: .bearer, token: "tok-123"),
                    hmac: HMACSettings(secret: "s3cret", header: nil),
                    maxBody: ByteSize(bytes: 1_000_000)))

        #expect(
            config.routes == [
                Route(
                    name: "live", from: ["my-iphone"],
                    transforms: [Transform(filter: Filter(types: ["steps", "heart_rate", "body_*"]), rename: nil)],
                    to: ["archive"])
            ])

        #expect(
            config.sinks == [
                "archive": Sink(
                    kind: .file, path: "archive/{device}/{date}.ndjson", url: nil, bucket: nil,
                    batch: Batch(maxItems: 500, maxWait: ConfigDuration(nanoseconds: 1_000_000_000)))
            ])
    }

    @Test("a missing secret is reported at its line and column, naming the variable")
    func missingSecret() {
        let found = decodingProblems(HealthgateConfig.self, sampleConfig, environment: ["PHONE_TOKEN": "t"])
        #expect(
            found == [
                "test.yaml:8:20: receivers.my-iphone.hmac.secret: environment variable PHONE_HMAC is not set; set it, or give a default with ${PHONE_HMAC:-value}"
            ])
    }

    @Test("an error does not hide unknown keys in parts decoded before it")
    func errorKeepsEarlierUnknownKeys() {
        let yaml =
            sampleConfig
            .replacing("max_body: 1MB", with: "max_body: 1MB\n    colour: blue", maxReplacements: 1)
            .replacing("kind: file", with: "kind: fiel", maxReplacements: 1)
        #expect(
            decodingProblems(HealthgateConfig.self, yaml, environment: sampleEnvironment) == [
                "test.yaml:10:5: receivers.my-iphone: unknown key \"colour\"; valid keys are: kind, path, auth, hmac, max_body",
                "test.yaml:18:20: sinks.archive.kind: invalid value \"fiel\" — did you mean \"file\"?"
            ])
    }
}
