/// How the JPEG DCT scale is chosen for an output.
///
/// The decoded region should be at least `minimumResidual` times the output, so
/// the resampler has room to anti-alias (the DCT scaling alone is a box filter).
/// Scales with SIMD IDCTs in libjpeg-turbo (1/8, 2/8, 4/8) are tried first, then
/// 5/8...7/8; when none leaves that residual, the smallest scale that still covers
/// the output is used, so a downscale never decodes full size when a scaled
/// decode covers it. See docs/decisions/001-dct-scale.md for the measurements.
public struct DecodeScalePolicy: Sendable, Equatable, Codable {
    public var preferredEighths: [Int] = [1, 2, 3, 4]
    public var fallbackEighths: [Int] = [5, 6, 7]
    public var minimumResidual: Double = 1.35

    public init(preferredEighths: [Int] = [1, 2, 3, 4], fallbackEighths: [Int] = [5, 6, 7],
                minimumResidual: Double = 1.35) {
        self.preferredEighths = preferredEighths
        self.fallbackEighths = fallbackEighths
        self.minimumResidual = minimumResidual
    }

    public static let `default` = DecodeScalePolicy()
}

/// Everything decided for one output before a pixel is decoded (pure, from the
/// header and the recipe): sizes, crop, orientation, the DCT scale it needs.
struct OutputPlan: Equatable {
    /// The transform from stored pixels to the final output.
    var orientation: Orientation
    /// The transform before the resize (EXIF orientation and earlier rotations/flips).
    var preResize: Orientation
    /// Displayed size of the source before the resize.
    var displaySize: Size
    /// The region of the full-resolution stored image that becomes the output.
    var storedRegion: Rect
    /// Output size in stored orientation (what the resampler produces).
    var storedOutputSize: Size
    /// Final output size.
    var outputSize: Size
    /// Whether pixels are resampled at all.
    var resamples: Bool
    /// The smallest DCT scale (eighths) whose decode still covers the output.
    var minimumScaleEighths: Int
    var filter: ResampleFilter

    init(recipe: Recipe, storedSize: Size, exifOrientation: Orientation, policy: DecodeScalePolicy) {
        var pre = recipe.output.autoOrient ? exifOrientation : .up
        var post = Orientation.up
        var resize: Resize?
        for op in recipe.operations {
            let step: Orientation
            switch op {
            case .resize(let r): resize = r; continue
            case .rotate(let d): step = .rotation(degrees: d)
            case .flip(let axis): step = axis == .horizontal ? .mirrorHorizontal : .mirrorVertical
            case .flatten, .sharpen, .blur, .adjust, .pad: continue
            }
            if resize == nil { pre = pre.then(step) } else { post = post.then(step) }
        }
        preResize = pre
        orientation = pre.then(post)
        filter = resize?.filter ?? .lanczos3
        let display = pre.apply(to: storedSize)
        displaySize = display
        let (size, crop) = OutputPlan.target(source: display, resize: resize)
        storedRegion = pre.storedRect(crop, displaySize: display)
        storedOutputSize = pre.apply(to: size)  // transpose is its own inverse
        outputSize = post.apply(to: size)
        resamples = !(size == display && crop == Rect(x: 0, y: 0, width: Double(display.width), height: Double(display.height)))
        minimumScaleEighths = resamples
            ? OutputPlan.scale(region: storedRegion, output: storedOutputSize, policy: policy)
            : 8
    }

    /// Output size and source crop (displayed coordinates) for a resize.
    /// The bounding dimension is exactly the box; the other is rounded, never 0.
    static func target(source: Size, resize: Resize?) -> (Size, Rect) {
        let full = Rect(x: 0, y: 0, width: Double(source.width), height: Double(source.height))
        guard let resize else { return (source, full) }
        let box = resize.pixelBox
        let sw = Double(source.width), sh = Double(source.height)
        switch resize.mode {
        case .fit:
            let fx = box.width.map { Double($0) / sw } ?? .infinity
            let fy = box.height.map { Double($0) / sh } ?? .infinity
            var f = min(fx, fy)
            if !resize.upscale && f >= 1 { return (source, full) }
            f = resize.upscale ? f : min(f, 1)
            let w: Int, h: Int
            if fx <= fy {
                w = box.width!
                h = max(1, Int((sh * f).rounded()))
            } else {
                h = box.height!
                w = max(1, Int((sw * f).rounded()))
            }
            return (Size(width: w, height: h), full)
        case .fill:
            let bw = Double(box.width!), bh = Double(box.height!)
            var f = max(bw / sw, bh / sh)
            var out = Size(width: box.width!, height: box.height!)
            if f > 1 && !resize.upscale {
                // Crop to the box's aspect ratio without enlarging.
                f = 1
                let k = min(sw / bw, sh / bh)
                out = Size(width: max(1, min(source.width, Int((bw * k).rounded()))),
                           height: max(1, min(source.height, Int((bh * k).rounded()))))
            }
            let cw = Double(out.width) / f, ch = Double(out.height) / f
            // Where the crop sits: a focus point centred (kept inside), else the gravity.
            let x: Double, y: Double
            if let p = resize.focus {
                x = min(max(0, p.x * sw - cw / 2), sw - cw)
                y = min(max(0, p.y * sh - ch / 2), sh - ch)
            } else {
                let g = resize.gravity.position
                x = (sw - cw) * g.x
                y = (sh - ch) * g.y
            }
            return (out, Rect(x: x, y: y, width: cw, height: ch))
        }
    }

    /// The DCT scale (eighths) for an output of `output` pixels from `region` (full-size pixels).
    static func scale(region: Rect, output: Size, policy: DecodeScalePolicy) -> Int {
        func residual(_ m: Int) -> Double {
            let k = Double(m) / 8
            return min(region.width * k / Double(output.width), region.height * k / Double(output.height))
        }
        let candidates = policy.preferredEighths + policy.fallbackEighths
        if let m = candidates.first(where: { $0 < 8 && residual($0) >= max(1, policy.minimumResidual) - 1e-9 }) {
            return m
        }
        return candidates.filter { $0 < 8 }.sorted().first { residual($0) >= 1 - 1e-9 } ?? 8
    }
}
