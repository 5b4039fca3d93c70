import Testing
@testable import RelayCore

/// Substring search and splitting without the standard library's string-processing module.
@Suite struct TextSearchTests {
    @Test func findsPlainWords() {
        #expect("approval-request".includes("approval"))
        #expect("deploy-approval".includes("approval"))
        #expect(!"approva".includes("approval"))
        #expect("anything".includes(""))
        #expect(!"".includes("a"))
        #expect("héllo wörld".includes("wörld"))
        #expect("upgrade unauthorized (401)".dropFirst(8).includes("unauthorized"))
    }

    @Test func splitsKeepingEmptyPieces() {
        #expect("a,,b".pieces(separatedBy: ",") == ["a", "", "b"])
        #expect("line1\\nline2".pieces(separatedBy: "\\n") == ["line1", "line2"])
        #expect("abc".pieces(separatedBy: "x") == ["abc"])
        #expect("xx".pieces(separatedBy: "x") == ["", "", ""])
        #expect("".pieces(separatedBy: ",") == [""])
    }
}
