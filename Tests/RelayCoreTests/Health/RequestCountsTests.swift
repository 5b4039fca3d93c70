import Testing
@testable import RelayCore

/// `prefect_push_http_requests_total`: each answer under its route's fixed name, or `unrouted`; bounded labels.
@Suite struct RequestCountsTests {
    @Test func answersAreCountedByRouteNameAndCode() {
        var counts = RequestCounts()
        counts.record(.registerDevice, status: 200)
        counts.record(.registerDevice, status: 200)
        counts.record(.unregisterDevice(id: "phone-1"), status: 404)
        counts.record(.unregisterDevice(id: "phone-2"), status: 404)
        counts.record(nil, status: 413)
        #expect(counts.counts == [.init(route: "register", code: 200): 2, .init(route: "unregister", code: 404): 2,
                                  .init(route: "unrouted", code: 413): 1])
    }

    /// The device id never becomes a label: two devices are one series.
    @Test func theRenderedFamilyHasOnlyRouteAndCode() {
        var metrics = Metrics()
        metrics.httpRequests.record(.putActivity(deviceID: "secret-device", runID: "run"), status: 204)
        metrics.apnsConfigured = false
        metrics.devicesRegistered = 3
        metrics.devicesUnregistered = 1
        metrics.devicesDroppedByAPNs = 2
        let text = metrics.render(devices: 0, waiting: 0, residentBytes: nil)
        #expect(text.contains("prefect_push_http_requests_total{route=\"activity\",code=\"204\"} 1\n"))
        #expect(text.contains("prefect_push_http_requests_total{route=\"health\",code=\"200\"} 0\n"))
        #expect(!text.contains("secret-device"))
        #expect(text.contains("prefect_push_apns_configured 0\n"))
        #expect(text.contains("prefect_push_devices_registered_total 3\n"))
        #expect(text.contains("prefect_push_devices_removed_total{reason=\"unregistered\"} 1\n"))
        #expect(text.contains("prefect_push_devices_removed_total{reason=\"apns\"} 2\n"))
    }
}
