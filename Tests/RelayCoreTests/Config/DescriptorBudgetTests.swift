import Testing
@testable import RelayCore

/// API clients get what the relay's own connections leave of the descriptor limit, up to 1,024.
@Suite struct DescriptorBudgetTests {
    @Test func apiClientsGetWhatTheReserveLeaves() {
        #expect(DescriptorBudget(limit: 4096).apiConnections == 1024)
        #expect(DescriptorBudget(limit: 1024).apiConnections == 1024 - DescriptorBudget.reserve)
        #expect(DescriptorBudget(limit: 128).apiConnections == 128 - DescriptorBudget.reserve)
        #expect(DescriptorBudget(limit: 64).apiConnections == 4)
        #expect(!DescriptorBudget(limit: 4096).isTight)
        #expect(DescriptorBudget(limit: 128).isTight)
    }

    @Test func theSoftLimitIsRaisedToTheHardOneWithinBounds() {
        #expect(DescriptorBudget.wantedSoftLimit(soft: 1024, hard: 4096) == 4096)
        #expect(DescriptorBudget.wantedSoftLimit(soft: 1024, hard: Int.max) == 65_536)
        #expect(DescriptorBudget.wantedSoftLimit(soft: 128, hard: 128) == 128)
        #expect(DescriptorBudget.wantedSoftLimit(soft: 100_000, hard: 200_000) == 100_000)
    }
}
