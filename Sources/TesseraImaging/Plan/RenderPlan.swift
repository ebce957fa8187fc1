import TesseraModel

/// Everything decided for one output before a pixel is decoded (pure, from the
/// header and the recipe): sizes, crop, orientation, the DCT scale it needs. A recipe
/// that trims or crops by attention is planned twice: provisionally (no trim, centred
/// window), then with the `SourceAnalysis` of the decoded image.
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
    /// The region depends on the pixels (trim, attention) and this plan has not seen them.
    var needsAnalysis: Bool

    init(recipe: Recipe, storedSize: Size, exifOrientation: Orientation, policy: DecodeScalePolicy,
         analysis: SourceAnalysis? = nil) throws {
        var pre = recipe.output.autoOrient ? exifOrientation : .up
        var post = Orientation.up
        var resize: Resize?
        for op in recipe.operations {
            let step: Orientation
            switch op {
            case .resize(let r): resize = r; continue
            case .rotate(let d): step = .rotation(degrees: d)
            case .flip(let axis): step = axis == .horizontal ? .mirrorHorizontal : .mirrorVertical
            default: continue
            }
            if resize == nil { pre = pre.then(step) } else { post = post.then(step) }
        }
        preResize = pre
        orientation = pre.then(post)
        filter = resize?.filter ?? .lanczos3
        needsAnalysis = analysis == nil && recipe.operations.contains(where: \.needsAnalysis)
        let display = pre.apply(to: storedSize)
        displaySize = display
        let full = Rect(x: 0, y: 0, width: Double(display.width), height: Double(display.height))
        // Trim and crop narrow the region (displayed coordinates, whole pixels) before the resize.
        let saliency = analysis.flatMap { SaliencyView(analysis: $0, orientation: pre, displaySize: display) }
        var region = full
        for op in recipe.operations {
            switch op {
            case .trim(let t):
                if let analysis {
                    let box = pre.inverse.storedRect(analysis.trimBox(t), displaySize: storedSize)
                    region = region.intersection(box) ?? region
                }
            case .crop(let c):
                region = try OutputPlan.crop(c, region: region, display: display, saliency: saliency)
            default:
                continue
            }
        }
        let regionSize = Size(width: Int(region.width.rounded()), height: Int(region.height.rounded()))
        let (size, crop) = OutputPlan.target(source: regionSize, resize: resize) { w, h, g, focus in
            let r = OutputPlan.place(width: w, height: h, in: region, display: display, gravity: g, focus: focus, saliency: saliency)
            return Rect(x: r.x - region.x, y: r.y - region.y, width: w, height: h)
        }
        let inDisplay = Rect(x: crop.x + region.x, y: crop.y + region.y, width: crop.width, height: crop.height)
        storedRegion = pre.storedRect(inDisplay, displaySize: display)
        storedOutputSize = pre.apply(to: size)  // transpose is its own inverse
        outputSize = post.apply(to: size)
        resamples = !(size == display && inDisplay == full)
        minimumScaleEighths = resamples
            ? OutputPlan.scale(region: storedRegion, output: storedOutputSize, policy: policy)
            : 8
    }

    /// The region a crop operation leaves of `region` (whole pixels).
    static func crop(_ c: Crop, region: Rect, display: Size, saliency: SaliencyView?) throws -> Rect {
        if let aspect = c.aspect {
            var w = region.width, h = (region.width / aspect).rounded()
            if h > region.height { h = region.height; w = min(region.width, (region.height * aspect).rounded()) }
            return place(width: max(1, w), height: max(1, h), in: region, display: display, gravity: c.gravity, focus: c.focus,
                         saliency: saliency)
        }
        let k = c.units == .fractions ? (region.width, region.height) : (1.0, 1.0)
        let x = ((c.x ?? 0) * k.0).rounded(), y = ((c.y ?? 0) * k.1).rounded()
        let want = Rect(x: region.x + x, y: region.y + y, width: (c.width! * k.0).rounded(), height: (c.height! * k.1).rounded())
        guard let r = want.intersection(region), r.width >= 1, r.height >= 1 else {
            throw ImagingError(.invalidRecipe, "crop \(Int(x)),\(Int(y)) \(Int(want.width))x\(Int(want.height)) lies outside the "
                               + "\(Int(region.width))x\(Int(region.height)) image")
        }
        return r
    }

    /// A window of `width`×`height` inside `region`: centred on the focus point (fractions of
    /// the displayed image), where the saliency is highest (attention), or by gravity.
    static func place(width: Double, height: Double, in region: Rect, display: Size, gravity: Gravity, focus: FocusPoint?,
                      saliency: SaliencyView?) -> Rect {
        let freeX = region.width - width, freeY = region.height - height
        var x: Double, y: Double
        if let p = focus {
            x = min(max(0, p.x * Double(display.width) - region.x - width / 2), freeX)
            y = min(max(0, p.y * Double(display.height) - region.y - height / 2), freeY)
        } else if gravity == .attention, let saliency {
            (x, y) = saliency.bestWindow(width: width, height: height, in: region)
        } else {
            let g = gravity.position
            (x, y) = (freeX * g.x, freeY * g.y)
        }
        return Rect(x: region.x + x, y: region.y + y, width: width, height: height)
    }

    /// Output size and source crop (coordinates of the source) for a resize. The bounding
    /// dimension is exactly the box; the other is rounded, never 0. A fill's window is
    /// placed by `place(width, height, gravity, focus)` (offsets from the source's origin).
    static func target(source: Size, resize: Resize?,
                       place: (Double, Double, Gravity, FocusPoint?) -> Rect) -> (Size, Rect) {
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
            let window = place(Double(out.width) / f, Double(out.height) / f, resize.gravity, resize.focus)
            return (out, window)
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
