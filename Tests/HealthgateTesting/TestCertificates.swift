import Foundation

/// Certificates for the TLS tests, made by openssl in `dir`: `ca` (its key too), a server
/// certificate for localhost/127.0.0.1 signed by it (`server`; `rsa-server` is a self-signed RSA
/// one, for static-RSA suites), client certificates `alice` (`O=Example, CN=alice`) and `carol`
/// signed by it, `mallory` signed by another CA, and `expired` (signed by the CA, valid only in
/// January 2020). Each as `<name>.pem` and `<name>.key`.
enum TestCertificates {
    static let script = #"""
        set -e
        cd "$1"
        ec() { openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$1.key" -out "$1.csr" -subj "$2" 2>/dev/null; }
        openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout ca.key -out ca.pem -days 30 -subj "/CN=Test CA" 2>/dev/null
        openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout other-ca.key -out other-ca.pem -days 30 -subj "/CN=Other CA" 2>/dev/null
        openssl req -x509 -newkey rsa:2048 -nodes -keyout rsa-server.key -out rsa-server.pem -days 2 -subj "/CN=localhost" \
          -addext "subjectAltName=DNS:localhost,IP:127.0.0.1" 2>/dev/null
        printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n' > server.ext
        printf 'extendedKeyUsage=clientAuth\nkeyUsage=digitalSignature\n' > client.ext
        ec server "/CN=localhost"
        openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 -extfile server.ext -out server.pem 2>/dev/null
        ec alice "/O=Example/CN=alice"
        openssl x509 -req -in alice.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 -extfile client.ext -out alice.pem 2>/dev/null
        ec carol "/CN=carol"
        openssl x509 -req -in carol.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 -extfile client.ext -out carol.pem 2>/dev/null
        ec mallory "/O=Example/CN=alice"
        openssl x509 -req -in mallory.csr -CA other-ca.pem -CAkey other-ca.key -CAcreateserial -days 2 -extfile client.ext -out mallory.pem 2>/dev/null
        ec expired "/O=Example/CN=alice"
        mkdir -p cadb && : > cadb/index.txt && openssl rand -hex 8 > cadb/serial
        printf '[ca]\ndefault_ca=c\n[c]\ndatabase=cadb/index.txt\nnew_certs_dir=cadb\nserial=cadb/serial\ndefault_md=sha256\npolicy=p\nx509_extensions=e\nunique_subject=no\n[p]\ncommonName=supplied\n[e]\nextendedKeyUsage=clientAuth\nkeyUsage=digitalSignature\n' > ca.cnf
        openssl ca -batch -config ca.cnf -cert ca.pem -keyfile ca.key -in expired.csr -out expired.pem \
          -startdate 20200101000000Z -enddate 20200201000000Z -notext 2>/dev/null
        """#

    static func make(in dir: String) throws {
        let (rc, out) = try Command.run("/bin/sh", ["-c", script, "sh", dir], timeout: 60)
        guard rc == 0 else { throw ServeError(description: "openssl could not make the test certificates: \(out)") }
    }

    /// The SHA-256 fingerprint of `<dir>/<name>.pem` as OpenSSL prints it (`AB:CD:…`).
    static func fingerprint(_ name: String, in dir: String) throws -> String {
        let (rc, out) = try Command.run("/usr/bin/openssl", ["x509", "-noout", "-fingerprint", "-sha256", "-in", "\(dir)/\(name).pem"])
        guard rc == 0, let eq = out.firstIndex(of: "=") else { throw ServeError(description: "no fingerprint: \(out)") }
        return String(out[out.index(after: eq)...]).trimmingCharacters(in: .whitespacesAndNewlines)
    }
}
