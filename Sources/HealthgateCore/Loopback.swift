/// Whether a host names this machine's loopback: `localhost`, an address in `127.0.0.0/8`,
/// `::1` (in brackets or not), an IPv4 loopback address mapped into IPv6 (`::ffff:127.0.0.1`).
/// For a client's address (the status page answers loopback only) and a sink's server (the
/// InfluxDB sink does not gzip for one on this machine) alike.
public enum Loopback {
    public static func isLoopback(host given: some StringProtocol) -> Bool {
        var host = Substring(given.lowercased())
        if host.hasPrefix("[") && host.hasSuffix("]") { host = host.dropFirst().dropLast() }
        if host == "localhost" || host == "localhost." || host == "::1" || host == "0:0:0:0:0:0:0:1" { return true }
        if host.hasPrefix("::ffff:") { host = host.dropFirst(7) }
        let octets = host.split(separator: ".", omittingEmptySubsequences: false)
        return octets.count == 4 && octets[0] == "127" && octets.allSatisfy { UInt8($0) != nil }
    }
}
