import TesseraModel

/// TIFF and BigTIFF through libtiff: strip by strip or a row of tiles at a time (a crop reads
/// only its tiles), a pyramidal file's reduced level when it covers every output; the
/// page asked for; the Orientation tag plays EXIF's part.
final class TIFFLoader: SourceLoader {
    private let decoder: TIFFDecoder
    private(set) var header: SourceHeader
    private(set) var metadata: SourceMetadata

    static let formats: Set<ImageFormat> = [.tiff]

    static func sniff(_ bytes: UnsafeRawBufferPointer) -> ImageFormat? {
        // TIFF (version 42) and BigTIFF (43), either byte order.
        guard bytes.count >= 4 else { return nil }
        let little = bytes[0] == 0x49 && bytes[1] == 0x49 && (bytes[2] == 42 || bytes[2] == 43) && bytes[3] == 0
        let big = bytes[0] == 0x4D && bytes[1] == 0x4D && bytes[2] == 0 && (bytes[3] == 42 || bytes[3] == 43)
        return little || big ? .tiff : nil
    }

    init(bytes: UnsafeRawBufferPointer, format: ImageFormat, options: RenderOptions) throws {
        decoder = try TIFFDecoder(bytes: bytes, limits: options.limits, page: options.page,
                                  releaseReads: options.inputIsFileMap, strict: options.strict)
        // The Orientation tag plays EXIF's part; the ICC profile is tag 34675.
        metadata = SourceMetadata(exif: nil, iccProfile: decoder.iccProfile, xmp: nil, density: decoder.density)
        header = SourceHeader(format: .tiff, storedSize: decoder.fullSize, orientation: decoder.orientation,
                              colorModel: decoder.photometric, bitDepth: decoder.bitsPerSample, hasAlpha: decoder.hasAlpha)
        header.pages = decoder.pageCount
        header.pagesAtLeast = decoder.pageCountIsLowerBound
        header.alternatives.levels = decoder.levels
    }

    /// One band of strips or tiles (a single strip: the whole image).
    func decodeBytes(scaleEighths: Int) -> Int { decoder.bandMemory }

    func use(_ choice: SourceChoice) -> Bool {
        guard case .level(let n) = choice else { return false }
        return decoder.useLevel(n)
    }

    func start(scaleEighths: Int, maxBatchRows: Int) throws -> DecodeStart {
        DecodeStart(size: decoder.size, channels: decoder.channels, scaleEighths: 8)
    }

    func read(into buffer: UnsafeMutablePointer<UInt8>, stride: Int, maxRows: Int) throws -> Int {
        try decoder.read(into: buffer, stride: stride, maxRows: maxRows)
    }

    /// Strips and tiles are read where they are: skipped rows cost nothing.
    var skipsRows: Bool { true }
    func skip(rows: Int) throws -> Int { decoder.skip(rows: rows) }
    func limitColumns(_ columns: ClosedRange<Int>) { decoder.neededColumns = columns }

    var decodePath: DecodePath { decoder.level != nil ? .tiffLevel : .tiff }
    var decodeLevel: Int? { decoder.level }

    var orientationFrom: String? { header.orientation != .up ? "TIFF tag" : nil }

    var coding: String? { decoder.description }

    var structure: [String] {
        var s = [decoder.pagesDescription + (decoder.pageCount > 1 ? ": " + decoder.pageSizes.prefix(16).map { "\($0)" }.joined(separator: ", ") : "")]
        if !decoder.levels.isEmpty { s.append("levels " + decoder.levels.map { "\($0)" }.joined(separator: ", ")) }
        if decoder.iccProfile != nil { s.append("ICC profile") }
        return s
    }

    /// A band reads its own strips or tiles (one band of them in memory).
    func tileInfo(bytes: UnsafeRawBufferPointer, limits: Limits) throws -> TileSourceInfo {
        let size = header.storedSize
        let channels = decoder.channels == 4 ? 4 : decoder.channels == 1 ? 1 : 3
        return TileSourceInfo(format: .tiff, width: size.width, height: size.height, progressive: false,
                              restartSeekable: true, wholeImageBytes: decoder.bandMemory, channels: channels)
    }
}
