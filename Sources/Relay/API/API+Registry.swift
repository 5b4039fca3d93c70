import RelayCore

/// The registry's routes: devices, their Live Activity tokens and a test push, answered from the `Ledger`.
extension API {
    func register(_ registration: DeviceRegistration) async -> APIResponse {
        do {
            // MAX_DEVICES: a refresh of a known device always passes; a new one only below the cap.
            guard let device = try await ledger.register(registration, maxDevices: maxDevices, now: Int64(SystemClock.unixNow()))
            else {
                return APIError(status: 409, message: "the relay already holds \(maxDevices) devices (MAX_DEVICES); "
                                + "unregister one, or raise MAX_DEVICES").response
            }
            Log.info("device.registered", ["device": registration.id, "token": Log.short(registration.token),
                                           "environment": registration.environment.rawValue,
                                           "start_token": registration.startToken == nil ? "no" : "yes"])
            return APIResponse(status: 200, json: device.json)
        } catch {
            return storageFailure(error)
        }
    }

    func unregister(id: String) async -> APIResponse {
        do {
            guard try await ledger.unregister(id: id) else { return APIError.notFound("no device with id \(id)").response }
            Log.info("device.unregistered", ["device": id])
            return .noContent
        } catch {
            return storageFailure(error)
        }
    }

    func setActivity(deviceID: String, runID: String, token: String) async -> APIResponse {
        do {
            guard try await ledger.setActivity(deviceID: deviceID, runID: runID, token: token) else {
                return APIError.notFound("no device with id \(deviceID); register it first with POST /devices").response
            }
            Log.info("activity.registered", ["device": deviceID, "run": runID, "token": Log.short(token)])
            return .noContent
        } catch {
            return storageFailure(error)
        }
    }

    /// `POST /devices/{id}/test`: one plain alert to the device, answered with APNs' verdict.
    func testPush(deviceID: String) async -> APIResponse {
        let device: Device
        do {
            guard let found = try await ledger.device(id: deviceID) else {
                return APIError.notFound("no device with id \(deviceID)").response
            }
            device = found
        } catch {
            return storageFailure(error)
        }
        guard let delivery = await outbox.deliverNow(planner.testPush(to: device), to: device) else {
            return APIError.unavailable("APNs is not configured: set APNS_KEY (or APNS_KEY_PATH), APNS_KEY_ID and APNS_TEAM_ID")
                .response
        }
        var body: [String: JSONValue] = ["sent": .bool(delivery.outcome.isDelivered),
                                         "environment": .string(delivery.environment.rawValue),
                                         "outcome": .string(delivery.outcome.label)]
        if delivery.outcome.status > 0 { body["status"] = .int(Int64(delivery.outcome.status)) }
        if case .rejected(let rejection) = delivery.outcome {
            if let reason = rejection.reason { body["reason"] = .string(reason.rawValue) }
            if let id = rejection.apnsID { body["apns_id"] = .string(id) }
        }
        if case .delivered(let id) = delivery.outcome, let id { body["apns_id"] = .string(id) }
        switch delivery.effect {
        case .dropDevice: body["dropped"] = true
        case .updateEnvironment(let env): body["environment_corrected"] = .string(env.rawValue)
        default: break
        }
        return APIResponse(status: 200, json: .object(body))
    }

    /// The `Ledger` logged and counted the failure; the caller is told whether trying again may help.
    private func storageFailure(_ error: any Error) -> APIResponse {
        if let sqlite = error as? SQLiteError, ["busy", "full"].contains(sqlite.kind) {
            // Passing: another process holds the lock, or the disk is full for now. Nothing was written.
            return APIError.unavailable("the registry is \(sqlite.kind == "busy" ? "locked by another process" : "on a full disk")"
                                        + "; nothing was changed, try again in a few seconds").response
        }
        return APIError(status: 500, message: "the registry could not be read or written; see the relay's log").response
    }
}
