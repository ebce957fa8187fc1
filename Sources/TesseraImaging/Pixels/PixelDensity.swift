/// A file's declared pixel density in dots per inch, horizontal and vertical. Only values a
/// writer can carry are kept: both finite and positive, at most 65,535 (JFIF's limit).
public struct PixelDensity: Equatable, Sendable {
    public var x: Double
    public var y: Double

    public init?(x: Double, y: Double) {
        guard x.isFinite, y.isFinite, x >= 1, y >= 1, x <= 65535, y <= 65535 else { return nil }
        self.x = x
        self.y = y
    }

    /// The same density after an orientation that swaps the axes (5–8) or not.
    func oriented(_ o: Orientation) -> PixelDensity {
        o.transpose ? PixelDensity(x: y, y: x)! : self
    }
}
