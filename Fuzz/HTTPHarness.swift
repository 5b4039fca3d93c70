// HTTP request framing, routing and validation: any bytes, fed in any chunking, never crash; every refusal is a
// 4xx/5xx the relay chose with a JSON body; a routed request's ids are printable; a body never exceeds 64 KiB.

let httpRouter = Router(basePath: "/push")

func fuzzHTTP(_ data: [UInt8]) {
    guard let first = data.first else { return }
    let payload = Array(data.dropFirst())
    var framer = HTTPFramer(router: httpRouter)
    let chunk = Int(first % 16) + 1
    var offset = 0
    var frames = 0
    outer: while offset < payload.count {
        let end = min(payload.count, offset + (first & 0x80 != 0 ? chunk : payload.count))
        framer.append(payload[offset..<end])
        offset = end
        while let frame = framer.next() {
            frames += 1
            fuzzCheck(frames <= payload.count + 1, "more frames than bytes")
            switch frame {
            case .proceed:
                continue
            case .reject(let response, let close, _):
                fuzzCheck((400...505).contains(response.status), "status \(response.status)")
                let parsed = try? JSONParser.parse(Array((response.body ?? "").utf8))
                fuzzCheck(parsed?["error"]?.string != nil, "refusal body is not the relay's JSON")
                let rendered = HTTPResponseWriter.render(response, head: false, close: close)
                fuzzCheck(rendered.starts(with: Array("HTTP/1.1 \(response.status) ".utf8)), "status line")
                if close { break outer }
            case .request(let request):
                fuzzCheck(request.body.count <= Validation.maxBody, "body over the limit")
                checkRoute(request.route)
                if let authorization = request.authorization { _ = CredentialShape.problem(authorization) }
                if case .registerDevice = request.route, let json = try? JSONParser.parse(request.body) {
                    if case .success(let registration) = Validation.registration(json) {
                        fuzzCheck(Validation.identifier(registration.id) != nil, "registered id not printable")
                        fuzzCheck(Validation.token(registration.token) == registration.token, "token not normal")
                    }
                }
            }
        }
    }
    // The router alone, on the raw bytes as a path.
    let path = "/push/" + text(payload)
    if case .success(let route) = httpRouter.route(method: "DELETE", rawPath: path) { checkRoute(route) }
}

func checkRoute(_ route: Route) {
    switch route {
    case .unregisterDevice(let id), .testPush(let id):
        fuzzCheck(Validation.identifier(id) != nil, "routed id not printable")
    case .putActivity(let id, let run):
        fuzzCheck(Validation.identifier(id) != nil && Validation.identifier(run) != nil, "routed id not printable")
    default:
        break
    }
}
