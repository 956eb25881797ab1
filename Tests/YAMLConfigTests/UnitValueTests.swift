import Testing
import YAMLConfig

@Suite("Durations and byte sizes")
struct UnitValueTests {
    @Test(
        "durations with units",
        arguments: [
            ("250ms", Int64(250_000_000)),
            ("5s", 5_000_000_000),
            ("1.5s", 1_500_000_000),
            ("2m", 120_000_000_000),
            ("1h", 3_600_000_000_000),
            ("1d", 86_400_000_000_000),
            ("1h30m", 5_400_000_000_000),
            ("1m0.5s", 60_500_000_000),
            ("100us", 100_000),
            ("10µs", 10_000),
            ("7ns", 7),
            (".5s", 500_000_000)
        ])
    func durations(text: String, nanoseconds: Int64) throws {
        let duration = try ConfigDuration(parsing: text)
        #expect(duration.nanoseconds == nanoseconds)
        // The description parses back to the same value.
        #expect(try ConfigDuration(parsing: duration.description) == duration)
    }

    @Test("duration descriptions and seconds")
    func durationDescriptions() throws {
        #expect(try ConfigDuration(parsing: "90s").description == "1m30s")
        #expect(try ConfigDuration(parsing: "1500ms").description == "1.5s")
        #expect(try ConfigDuration(parsing: "250ms").description == "250ms")
        #expect(try ConfigDuration(parsing: "25h").description == "1d1h")
        #expect(ConfigDuration(nanoseconds: 0).description == "0s")
        #expect(try ConfigDuration(parsing: "1.5s").seconds == 1.5)
        #expect(try ConfigDuration(parsing: "2m").duration == .seconds(120))
    }

    @Test(
        "bad durations are refused with a hint",
        arguments: [
            ("5", "\"5\" has no unit; add a unit: 5s, 250ms, 2m"),
            ("1h30", "30 in \"1h30\" has no unit; add a unit: 5s, 250ms, 2m"),
            ("-5s", "a duration cannot be negative, found \"-5s\""),
            ("5 s", "invalid duration \"5 s\"; write a number and a unit: 250ms, 5s, 1.5s, 2m, 1h, 1d or combinations such as 1h30m"),
            ("5y", "invalid duration \"5y\"; write a number and a unit: 250ms, 5s, 1.5s, 2m, 1h, 1d or combinations such as 1h30m"),
            ("99999999999d", "duration \"99999999999d\" is too long")
        ])
    func badDurations(text: String, message: String) {
        #expect(throws: ConfigValueError(message)) { try ConfigDuration(parsing: text) }
    }

    @Test(
        "byte sizes with decimal and binary units",
        arguments: [
            ("512", Int64(512)),
            ("100KB", 100_000),
            ("100kB", 100_000),
            ("100K", 100_000),
            ("100KiB", 102_400),
            ("1MB", 1_000_000),
            ("1MiB", 1_048_576),
            ("2GB", 2_000_000_000),
            ("2GiB", 2_147_483_648),
            ("1.5KiB", 1_536),
            ("10 MB", 10_000_000),
            ("0", 0)
        ])
    func byteSizes(text: String, bytes: Int64) throws {
        let size = try ByteSize(parsing: text)
        #expect(size.bytes == bytes)
        #expect(try ByteSize(parsing: size.description) == size)
    }

    @Test(
        "bad byte sizes are refused with the accepted forms",
        arguments: [
            ("-1KB", "a size cannot be negative, found \"-1KB\""),
            (
                "lots",
                "invalid size \"lots\"; write a number of bytes with an optional unit: 512, 100KB (or kB, K: ×1000), 100KiB (×1024), 10MB, 10MiB, 1GB, 1GiB"
            ),
            (
                "10XB",
                "invalid size \"10XB\"; write a number of bytes with an optional unit: 512, 100KB (or kB, K: ×1000), 100KiB (×1024), 10MB, 10MiB, 1GB, 1GiB"
            ),
            ("1.0001KB", "size \"1.0001KB\" is not a whole number of bytes"),
            ("99999999999GB", "size \"99999999999GB\" is too large")
        ])
    func badByteSizes(text: String, message: String) {
        #expect(throws: ConfigValueError(message)) { try ByteSize(parsing: text) }
    }

    @Test("decoding failures are located at the value")
    func decodingLocations() {
        struct Limits: Decodable { var timeout: ConfigDuration; var body: ByteSize }
        #expect(
            decodingProblems(Limits.self, "timeout: 30\nbody: 1MB\n") == [
                "test.yaml:1:10: timeout: \"30\" has no unit; add a unit: 5s, 250ms, 2m"
            ])
        #expect(
            decodingProblems(Limits.self, "timeout: 1s\nbody: {a: 1}\n") == [
                "test.yaml:2:7: body: expected a size such as 512, 100KB or 10MiB, found a mapping"
            ])
    }
}
