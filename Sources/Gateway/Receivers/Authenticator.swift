import HealthgateCrypto
import HealthgateCore

/// How a receiver checks who is sending: none, Bearer, Basic or a custom header.
/// Every secret comparison is constant-time; no secret is ever logged or echoed.
public struct Authenticator: Sendable {
    public enum Kind: String, Sendable, Decodable, CaseIterable {
        case none, bearer, basic, header
        /// Only the TLS client certificate (`subjects`, `sha256`) says who is sending.
        case client_cert
    }

    public let kind: Kind
    let token: [UInt8]
    let user: [UInt8]
    /// The header name for `header` auth, lower-cased.
    let headerName: String
    /// The client certificates taken (with `tls.client_ca`), by subject or SHA-256 (lower-case
    /// hex); both empty: no certificate is asked of this receiver.
    let subjects: [String]
    let fingerprints: [String]

    public init(
        kind: Kind, token: String = "", user: String = "", header: String = "",
        subjects: [String] = [], sha256: [String] = []
    ) {
        self.kind = kind
        self.subjects = subjects
        self.fingerprints = sha256.map(Authenticator.fingerprint)
        self.token = Array(token.utf8)
        self.user = Array(user.utf8)
        self.headerName = header.lowercased()
    }

    /// The token of `Authorization: Bearer <token>` (scheme in any case), or nil.
    static func bearer(_ request: HTTPRequest) -> [UInt8]? {
        guard let v = request.header("authorization"), v.count > 7, v.prefix(7).lowercased() == "bearer " else { return nil }
        return Array(v.utf8.dropFirst(7))
    }

    /// The user and password of `Authorization: Basic <base64>`, or nil.
    static func basic(_ request: HTTPRequest) -> (user: [UInt8], password: [UInt8])? {
        guard let v = request.header("authorization"), v.count > 6, v.prefix(6).lowercased() == "basic ",
            let decoded = Crypto.base64Decode(String(v.dropFirst(6)).trimmingSpaces),
            let colon = decoded.firstIndex(of: 0x3A)
        else { return nil }
        return (Array(decoded[..<colon]), Array(decoded[(colon + 1)...]))
    }

    /// A fingerprint as OpenSSL prints it (`AB:CD:…`) or any other way: lower-case hex alone.
    static func fingerprint(_ s: String) -> String {
        String(s.lowercased().filter { $0 != ":" && $0 != " " })
    }

    /// nil when the request is allowed; otherwise the 401 (or 403, a certificate not taken here) to send.
    public func check(_ request: HTTPRequest) -> HTTPResponse? {
        if !subjects.isEmpty || !fingerprints.isEmpty {
            guard let cert = request.clientCertificate else {
                return problem(403, "Forbidden", "This receiver takes only requests with a TLS client certificate.")
            }
            guard subjects.contains(cert.subject) || fingerprints.contains(cert.sha256) else {
                return problem(
                    403, "Forbidden",
                    "The client certificate (subject \(cert.subject), SHA-256 \(cert.sha256)) "
                        + "is not one this receiver takes: list its subject or fingerprint under the receiver's auth.")
            }
        }
        switch kind {
        case .none, .client_cert:
            return nil
        case .bearer:
            guard let given = Authenticator.bearer(request) else {
                return refuse("An Authorization: Bearer header is required.", challenge: "Bearer")
            }
            return Crypto.constantTimeEqual(given, token)
                ? nil
                : refuse("The Bearer token is not the one configured for this receiver.", challenge: "Bearer")
        case .basic:
            guard let given = Authenticator.basic(request) else {
                return refuse("An Authorization: Basic header is required.", challenge: "Basic realm=\"healthgate\"")
            }
            let userOK = Crypto.constantTimeEqual(given.user, user)
            let passOK = Crypto.constantTimeEqual(given.password, token)
            return userOK && passOK
                ? nil
                : refuse(
                    "The user or password is not the one configured for this receiver.",
                    challenge: "Basic realm=\"healthgate\"")
        case .header:
            guard request.headers.filter({ $0.name == headerName.lowercased() }).count <= 1 else {
                return refuse("The \(headerName) header is sent more than once; send it once.", challenge: nil)
            }
            guard let v = request.header(headerName) else {
                return refuse("The \(headerName) header is required.", challenge: nil)
            }
            return Crypto.constantTimeEqual(Array(v.utf8), token)
                ? nil
                : refuse("The \(headerName) header's value is not the one configured for this receiver.", challenge: nil)
        }
    }

    private func refuse(_ detail: String, challenge: String?) -> HTTPResponse {
        problem(
            401, "Unauthorized", detail,
            headers: challenge.map { [HTTPHeader("WWW-Authenticate", $0)] } ?? [])
    }
}
