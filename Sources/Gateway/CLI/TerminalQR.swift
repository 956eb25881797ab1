import CQREncode

/// A QR code for a terminal, from libqrencode: two module rows per text line with UTF-8 half
/// blocks, black on a forced white background (ANSI colours), so a phone camera reads it from
/// a dark or a light terminal; a quiet zone of two modules around it.
enum TerminalQR {
    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    /// The modules, row by row (true = dark), with the quiet zone.
    static func modules(_ text: String, quietZone: Int = 2) throws -> [[Bool]] {
        guard let code = QRcode_encodeString(text, 0, QR_ECLEVEL_M, QR_MODE_8, 1) else {
            throw Failure(description: "libqrencode could not encode the link (\(text.utf8.count) bytes)")
        }
        defer { QRcode_free(code) }
        let width = Int(code.pointee.width)
        let size = width + 2 * quietZone
        var grid = [[Bool]](repeating: [Bool](repeating: false, count: size), count: size)
        for y in 0..<width {
            for x in 0..<width where code.pointee.data[y * width + x] & 1 == 1 {
                grid[y + quietZone][x + quietZone] = true
            }
        }
        return grid
    }

    static func render(_ text: String) throws -> String {
        let grid = try modules(text)
        var out = ""
        var y = 0
        while y < grid.count {
            out += "\u{1B}[30;47m"
            for x in 0..<grid[y].count {
                let top = grid[y][x]
                let bottom = y + 1 < grid.count ? grid[y + 1][x] : false
                out += top && bottom ? "█" : top ? "▀" : bottom ? "▄" : " "
            }
            out += "\u{1B}[0m\n"
            y += 2
        }
        return out
    }
}
