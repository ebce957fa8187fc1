/// This build of Tessera.
public enum TesseraVersion {
    public static let string = "0.2.0"
}
