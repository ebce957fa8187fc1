import TesseraImaging

/// One input rendered to a small box with tight limits: format detection, JPEG segments and
/// EXIF, the progressive DC decoder, PNG chunks, the WebP and HEIF glue, orientation,
/// resampling and encoding. Any typed error is fine; a crash, a hang or a runaway
/// allocation is a finding.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzRender(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    var options = RenderOptions()
    options.limits.maxPixels = 4_000_000
    options.limits.maxInputBytes = 4 << 20
    options.limits.maxMemoryBytes = 256 << 20
    let recipe = Recipe(name: "fuzz", operations: [.resize(Resize(width: 64, height: 64, mode: .fill, gravity: .attention))],
                        output: OutputSettings(format: .jpeg, quality: 0.7))
    _ = try? Renderer.render(bytes: UnsafeRawBufferPointer(start: data, count: size), recipes: [recipe], options: options)
    return 0
}

@_silgen_name("LLVMFuzzerRunDriver")
func LLVMFuzzerRunDriver(_ argc: UnsafeMutablePointer<CInt>, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>,
                         _ callback: @convention(c) (UnsafePointer<UInt8>, Int) -> CInt) -> CInt

/// SwiftPM names an executable's entry `<Target>_main`: hand over to libFuzzer's driver.
@_cdecl("FuzzRender_main")
public func fuzzMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    var argc = argc
    var argv = argv
    return LLVMFuzzerRunDriver(&argc, &argv) { data, size in fuzzRender(data, size) }
}
