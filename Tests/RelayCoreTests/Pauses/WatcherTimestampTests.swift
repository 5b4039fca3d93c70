import Testing
@testable import RelayCore

@Suite struct WatcherTimestampTests {
    @Test func readsPrefectsTwoSpellingsAlike() throws {
        let z = try #require(Timestamp.parse("2026-11-29T22:05:57.142583Z"))
        let offset = try #require(Timestamp.parse("2026-11-29T22:05:57.142583+00:00"))
        #expect(z == offset)
        #expect(abs(z - 1_795_989_957.142583) < 1e-6)
    }

    @Test func wholeSecondsWithoutAFraction() {
        #expect(Timestamp.parse("2026-01-01T00:00:00Z") == 1_767_225_600)
        #expect(Timestamp.parse("1970-01-01T00:00:00Z") == 0)
        #expect(Timestamp.parse("2000-02-29T12:00:00+00:00") == 951_825_600)
    }

    @Test func appliesOffsets() throws {
        let east = try #require(Timestamp.parse("2026-11-29T23:05:57.5+01:00"))
        #expect(abs(east - 1_795_989_957.5) < 1e-6)
        #expect(Timestamp.parse("2026-11-29T16:35:57.5-05:30") == east)
        #expect(Timestamp.parse("2026-11-29T23:05:57.5+0100") == east)
        #expect(Timestamp.parse("2026-11-29t22:05:57.5z") == Timestamp.parse("2026-11-29T22:05:57.5Z"))
        #expect(Timestamp.parse("1969-12-31T23:59:59Z") == -1)
    }

    @Test func refusesWhatIsNotATimestamp() {
        for bad in ["", "garbage", "2026-11-29", "2026-11-29T22:05:57", "2026-02-30T00:00:00Z",
                    "2026-13-01T00:00:00Z", "2026-11-29T24:00:00Z", "2026-11-29T22:05:57.Z",
                    "2026-11-29T22:05:57Zjunk", "2026-11-29T22:05:57+0", "26-11-29T22:05:57Z"] {
            #expect(Timestamp.parse(bad) == nil, "\(bad)")
        }
    }
}
