import HealthgateCore
import Testing

@Suite struct PercentEncodingTests {
    @Test func encodesEverythingOutsideUnreserved() {
        #expect(PercentEncoding.encode("Vector header") == "Vector%20header")
        #expect(
            PercentEncoding.encode("https://receiver.example/hook/header")
                == "https%3A%2F%2Freceiver.example%2Fhook%2Fheader")
        #expect(PercentEncoding.encode("a-b.c_d~e") == "a-b.c_d~e")
        #expect(PercentEncoding.encode("ü") == "%C3%BC")
    }

    @Test func decodesBack() {
        #expect(PercentEncoding.decode("Vector%20header+x") == "Vector header x")
        #expect(PercentEncoding.decode("%zz") == "%zz")
    }
}
