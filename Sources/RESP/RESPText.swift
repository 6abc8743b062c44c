/// Text renderings of raw bytes shared by servers and clients.
public enum RESPText {
    /// `bytes` in double quotes with C escapes, as Redis's `sdscatrepr` (MONITOR) and `redis-cli` write them:
    /// `\\`, `\"`, `\n`, `\r`, `\t`, `\a`, `\b`, printable ASCII as is, and `\xHH` for any other byte.
    public static func quoted<Bytes: Sequence<UInt8>>(_ bytes: Bytes) -> String {
        var out = "\""
        for byte in bytes {
            switch byte {
            case UInt8(ascii: "\\"): out += "\\\\"
            case UInt8(ascii: "\""): out += "\\\""
            case 0x0A: out += "\\n"
            case 0x0D: out += "\\r"
            case 0x09: out += "\\t"
            case 0x07: out += "\\a"
            case 0x08: out += "\\b"
            case 0x20...0x7E: out.unicodeScalars.append(Unicode.Scalar(byte))
            default:
                out += "\\x"
                out.unicodeScalars.append(hexDigits[Int(byte >> 4)])
                out.unicodeScalars.append(hexDigits[Int(byte & 15)])
            }
        }
        return out + "\""
    }

    private static let hexDigits: [Unicode.Scalar] = Array("0123456789abcdef".unicodeScalars)
}
