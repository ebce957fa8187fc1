import Foundation

/// Whole-pixel dimensions.
public struct Size: Hashable, Sendable, Codable, CustomStringConvertible {
    public var width: Int
    public var height: Int
    public init(width: Int, height: Int) {
        self.width = width
        self.height = height
    }
    public var pixels: Int { width * height }
    public var description: String { "\(width)x\(height)" }
}

/// A rectangle with fractional edges, in pixel units.
public struct Rect: Hashable, Sendable, CustomStringConvertible {
    public var x, y, width, height: Double
    public init(x: Double, y: Double, width: Double, height: Double) {
        self.x = x
        self.y = y
        self.width = width
        self.height = height
    }
    public func scaled(x sx: Double, y sy: Double) -> Rect {
        Rect(x: x * sx, y: y * sy, width: width * sx, height: height * sy)
    }
    public var description: String { "(\(x), \(y), \(width)x\(height))" }
    /// The overlap of two rectangles, nil when they do not overlap.
    public func intersection(_ o: Rect) -> Rect? {
        let x0 = max(x, o.x), y0 = max(y, o.y)
        let x1 = min(x + width, o.x + o.width), y1 = min(y + height, o.y + o.height)
        return x1 > x0 && y1 > y0 ? Rect(x: x0, y: y0, width: x1 - x0, height: y1 - y0) : nil
    }
}
