/// A start-up failure: which setting, what went wrong, what to do. main prints it and exits 2.
struct StartupError: Error, CustomStringConvertible {
    let variable: String
    let problem: String
    init(_ variable: String, _ problem: String) {
        self.variable = variable
        self.problem = problem
    }
    var description: String { "\(variable): \(problem)" }
}
