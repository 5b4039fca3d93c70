import Testing
@testable import RelayCore

/// The table-free classes give the standard library's answers: for every code point up to U+2FFF, and CR-LF.
@Suite struct ASCIIClassesTests {
    static let characters: [Character] = (0...0x2FFF).compactMap { Unicode.Scalar($0).map(Character.init) } + ["\r\n"]

    @Test func lettersAndDigitsAreTheASCIIOnesOfTheTables() {
        for character in ASCIIClassesTests.characters {
            #expect(character.isASCIILetter == (character.isASCII && character.isLetter), "\(character.unicodeScalars.first!.value)")
            #expect(character.isASCIIDigit == (character.isASCII && character.isNumber), "\(character.unicodeScalars.first!.value)")
        }
    }

    @Test func whitespaceIsTheTablesAnswer() {
        for character in ASCIIClassesTests.characters {
            #expect(character.isWhitespaceASCIIFirst == character.isWhitespace, "\(character.unicodeScalars.first!.value)")
        }
        #expect(" \u{00A0}PORT\t\r\n".trimmingWhitespace() == "PORT")
    }
}
