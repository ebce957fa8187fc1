import TesseraModel
/// One of the eight EXIF orientations: the transform that makes stored pixels
/// display upright. Modelled as an element of the dihedral group D4 (optional
/// transpose, then optional flips) so orientations compose: EXIF orientation,
/// then a recipe's rotations and flips, become one transform applied once, to
/// the small output rather than the large source.
public struct Orientation: Hashable, Sendable, CustomStringConvertible {
    /// Swap x and y first.
    public var transpose: Bool
    /// Then mirror left-right.
    public var flipX: Bool
    /// Then mirror top-bottom.
    public var flipY: Bool

    public init(transpose: Bool, flipX: Bool, flipY: Bool) {
        self.transpose = transpose
        self.flipX = flipX
        self.flipY = flipY
    }

    public static let up = Orientation(transpose: false, flipX: false, flipY: false)

    /// The EXIF Orientation tag value (1...8); other values mean 1, as viewers treat them.
    public init(exif value: Int) {
        switch value {
        case 2: self.init(transpose: false, flipX: true, flipY: false)
        case 3: self.init(transpose: false, flipX: true, flipY: true)
        case 4: self.init(transpose: false, flipX: false, flipY: true)
        case 5: self.init(transpose: true, flipX: false, flipY: false)
        case 6: self.init(transpose: true, flipX: true, flipY: false)
        case 7: self.init(transpose: true, flipX: true, flipY: true)
        case 8: self.init(transpose: true, flipX: false, flipY: true)
        default: self = .up
        }
    }

    /// The EXIF tag value of this transform.
    public var exifValue: Int {
        switch (transpose, flipX, flipY) {
        case (false, false, false): return 1
        case (false, true, false): return 2
        case (false, true, true): return 3
        case (false, false, true): return 4
        case (true, false, false): return 5
        case (true, true, false): return 6
        case (true, true, true): return 7
        case (true, false, true): return 8
        }
    }

    /// Clockwise rotation by a multiple of 90 degrees.
    public static func rotation(degrees: Int) -> Orientation {
        switch ((degrees % 360) + 360) % 360 {
        case 90: return Orientation(exif: 6)
        case 180: return Orientation(exif: 3)
        case 270: return Orientation(exif: 8)
        default: return .up
        }
    }

    public static let mirrorHorizontal = Orientation(exif: 2)
    public static let mirrorVertical = Orientation(exif: 4)

    /// The transform that undoes this one.
    public var inverse: Orientation {
        transpose ? Orientation(transpose: true, flipX: flipY, flipY: flipX) : self
    }

    /// This transform followed by `next`.
    public func then(_ next: Orientation) -> Orientation {
        if next.transpose {
            return Orientation(transpose: !transpose, flipX: flipY != next.flipX, flipY: flipX != next.flipY)
        }
        return Orientation(transpose: transpose, flipX: flipX != next.flipX, flipY: flipY != next.flipY)
    }

    /// Size after the transform.
    public func apply(to size: Size) -> Size {
        transpose ? Size(width: size.height, height: size.width) : size
    }

    /// Maps a rectangle in displayed coordinates (of a displayed image of `displaySize`)
    /// back to stored coordinates.
    public func storedRect(_ r: Rect, displaySize: Size) -> Rect {
        var x = r.x, y = r.y
        if flipX { x = Double(displaySize.width) - r.x - r.width }
        if flipY { y = Double(displaySize.height) - r.y - r.height }
        if transpose { return Rect(x: y, y: x, width: r.height, height: r.width) }
        return Rect(x: x, y: y, width: r.width, height: r.height)
    }

    public var description: String { "orientation \(exifValue)" }

    /// The transformed copy of `image` (the same object when this is `.up`).
    public func apply(to image: PixelBuffer) throws -> PixelBuffer {
        if self == .up { return image }
        let size = apply(to: Size(width: image.width, height: image.height))
        let out = try PixelBuffer.make(width: size.width, height: size.height, layout: image.layout)
        let c = image.channels
        // Destination step (in bytes) when the source x advances by one, and the
        // destination of source pixel (0, y).
        let dw = out.width, dh = out.height
        for y in 0..<image.height {
            let src = image.row(y)
            var dx0: Int, dy0: Int, stepX: Int, stepY: Int  // dest coords of source (0,y) and per-x step
            if transpose {
                dx0 = y; dy0 = 0; stepX = 0; stepY = 1
            } else {
                dx0 = 0; dy0 = y; stepX = 1; stepY = 0
            }
            if flipX { dx0 = dw - 1 - dx0; stepX = -stepX }
            if flipY { dy0 = dh - 1 - dy0; stepY = -stepY }
            var d = out.base + dy0 * out.stride + dx0 * c
            let step = stepY * out.stride + stepX * c
            var s = src
            switch c {
            case 1:
                for _ in 0..<image.width { d[0] = s[0]; s += 1; d += step }
            case 3:
                for _ in 0..<image.width { d[0] = s[0]; d[1] = s[1]; d[2] = s[2]; s += 3; d += step }
            default:
                for _ in 0..<image.width { d[0] = s[0]; d[1] = s[1]; d[2] = s[2]; d[3] = s[3]; s += 4; d += step }
            }
        }
        return out
    }
}

