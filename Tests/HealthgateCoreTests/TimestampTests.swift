import HealthgateCore
import Testing

@Suite struct TimestampTests {
    /// Times read in turn with the last date remembered (`RecentDay`) read as each does alone:
    /// the same date with other times, offsets and forms, a date that does not exist after one
    /// that does, and text that only starts like a date.
    @Test func timesReadWithTheLastDateRememberedReadAsAlone() {
        let texts = [
            "2026-10-14T07:01:00Z", "2026-10-14T23:59:59.5+02:00", "2026-10-14 00:00:00z", "2026-10-14T07:01",
            "2026-10-14", "2026-10-14T24:00:00Z", "2026-10-15T00:00:00-05:30", "2026-10-15T00:00:60Z",
            "2026-02-28T12:00:00Z", "2026-02-29T12:00:00Z", "2024-02-29T12:00:00Z", "2024-02-29T12:00:00.000Z",
            "2024-02-29T12:00:00.120Z", "2024-02-29T12:00:00.000000001Z", "2024-02-29T12:00:00.1234567891Z",
            "2024-02-29t12:00:00Z", "2024-02-29T12:00:00", "2024-02-2", "2024-13-01T00:00:00Z", "2024-02-29T12:00:00Z"
        ]
        var recent = Timestamp.RecentDay()
        for text in texts {
            var copy = text
            let (alone, remembered) = copy.withUTF8 { b in
                let raw = UnsafeRawBufferPointer(b)
                return (Timestamp.parseRFC3339(raw), Timestamp.parseRFC3339(raw, recent: &recent))
            }
            #expect(alone?.0 == remembered?.0 && alone?.offsetSeconds == remembered?.offsetSeconds, "\(text)")
        }
    }

    @Test func parsesUTCAndFormatsBack() throws {
        let (t, offset) = try #require(Timestamp.parseRFC3339("2026-10-14T07:01:00Z"))
        #expect(t.seconds == 1_791_961_260)
        #expect(offset == nil)
        #expect(t.rfc3339() == "2026-10-14T07:01:00Z")
        #expect(t.utcDate() == "2026-10-14")
    }

    @Test func convertsOffsetsToUTCAndKeepsTheOffset() throws {
        let (t, offset) = try #require(Timestamp.parseRFC3339("2026-10-14T09:01:00+02:00"))
        #expect(t.rfc3339() == "2026-10-14T07:01:00Z")
        #expect(offset == 7200)
        #expect(Timestamp.formatOffset(offset!) == "+02:00")
        let (t2, o2) = try #require(Timestamp.parseRFC3339("2026-10-13T20:31:00-05:30"))
        #expect(t2.rfc3339() == "2026-10-14T02:01:00Z")
        #expect(o2 == -19800)
        #expect(Timestamp.formatOffset(-19800) == "-05:30")
        #expect(Timestamp.formatOffset(0) == "+00:00")
        #expect(Timestamp.formatOffset(20700) == "+05:45")
        // No offset is out of range for the formatter (abs(Int.min) would trap).
        #expect(Timestamp.formatOffset(Int.min).count == 6)
    }

    @Test func keepsFractionsToTheNanosecond() throws {
        let (t, _) = try #require(Timestamp.parseRFC3339("2026-10-14T07:01:00.123456789Z"))
        #expect(t.nanoseconds == 123_456_789)
        #expect(t.rfc3339() == "2026-10-14T07:01:00.123456789Z")
        let (t2, _) = try #require(Timestamp.parseRFC3339("2026-10-14T07:01:00.5Z"))
        #expect(t2.rfc3339() == "2026-10-14T07:01:00.5Z")
        #expect(t2.unixNanoseconds == 1_791_961_260_500_000_000)
    }

    @Test(arguments: [
        "", "2026-10-14", "2026-10-14T07:01:00", "2026-13-01T00:00:00Z", "2026-02-30T00:00:00Z",
        "2026-10-14T24:00:00Z", "2026-10-14T07:01:00+2:00", "2026-10-14T07:01:00Zjunk", "not a time",
        "2026-10-14T07:01:00.Z", "２０２６-10-14T07:01:00Z"
    ])
    func refusesWhatIsNotATime(_ s: String) {
        #expect(Timestamp.parseRFC3339(s) == nil)
    }

    @Test func agreesWithCalendarArithmeticAcrossCenturies() throws {
        // Leap days and year boundaries, checked against known Unix times.
        let cases: [(String, Int64)] = [
            ("1970-01-01T00:00:00Z", 0), ("2000-02-29T12:00:00Z", 951_825_600),
            ("1969-12-31T23:59:59Z", -1), ("2100-03-01T00:00:00Z", 4_107_542_400),
            ("2024-12-31T23:59:59Z", 1_735_689_599)
        ]
        for (s, secs) in cases {
            let (t, _) = try #require(Timestamp.parseRFC3339(s))
            #expect(t.seconds == secs, "\(s)")
            #expect(t.rfc3339() == s)
        }
    }
}

@Suite struct GlobTests {
    @Test func matchesStarsAndQuestionMarks() {
        #expect(Glob("body_*").matches("body_mass"))
        #expect(!Glob("body_*").matches("heart_rate"))
        #expect(Glob("*").matches(""))
        #expect(Glob("steps").matches("steps"))
        #expect(!Glob("steps").matches("steps2"))
        #expect(Glob("h?art_*").matches("heart_rate"))
        #expect(Glob("*_rate*").matches("heart_rate_variability_sdnn"))
        #expect(!Glob("a*b").matches("acd"))
    }
}
